/*
 * reconcile.h - start-up reconciliation of a cache directory (DESIGN
 * invariant 6), called by cfs_store_open() only.
 */
#ifndef RC_CACHEFS_RECONCILE_H
#define RC_CACHEFS_RECONCILE_H

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/layout.h"
#include "cachefs/store.h"

#include <stddef.h>

/*
 * Empties tmp/, joins the files of shards/ and objects/ against the
 * catalog's rows and repairs both, then adds the surviving bytes to the
 * budget.  Fills *rec; with kept != NULL, also *kept (malloc'd,
 * cfs_shard_info_free) and *nkept: the rows that survived, sorted by id,
 * as the catalog holds them now (every SEALED row, and with keep_retiring
 * the EVICTING rows kept).  The caller holds the directory lock.  Returns
 * 0 or -errno with a message in err (*kept untouched).
 */
int cfs__reconcile(const struct cfs_layout *lay, struct cfs_catalog *cat, struct cfs_budget *budget,
		   bool keep_retiring, bool same_boot, struct cfs_reconcile_report *rec,
		   struct cfs_shard_info **kept, size_t *nkept, char *err, size_t errlen);

#endif
