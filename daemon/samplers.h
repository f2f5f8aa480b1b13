/*
 * samplers.h - the daemon's samplers: one long-lived sampler/ run that
 * follows the sampling plan across epochs.
 *
 * Private to daemon/.  A boundary pauses the sampler (the shard it was
 * filling is sealed under the old epoch's budget; transfers and the
 * shuffle buffer are held, not dropped) and new_epoch resumes it in the
 * new epoch, whose files join the view at the next boundary (DESIGN
 * "Epochs").
 */
#ifndef RC_DAEMON_SAMPLERS_H
#define RC_DAEMON_SAMPLERS_H

#include "cachefs/store.h"
#include "common/config.h"
#include "daemon/stats.h"

#include <stddef.h>
#include <stdint.h>

struct dmn_samplers;

/*
 * Checks the source (a sampler is created and freed: bad URL, credentials)
 * and starts the sampler thread on `epoch`.  cfg and store are borrowed and
 * must outlive the samplers.  Returns 0 and *out, or -errno with a message.
 */
int dmn__samplers_start(struct dmn_samplers **out, const struct cmn_config *cfg,
			struct cfs_store *store, uint32_t epoch, char *err, size_t errlen);

/*
 * A boundary begins: returns once the sampler sealed the shard it was
 * filling and saved its plan (at most 30 s), so that what it admitted
 * under the old epoch's budget is counted there.  It admits nothing more
 * until new_epoch.
 */
void dmn__samplers_pause(struct dmn_samplers *w);

/* Epoch `epoch` began (new admit budget): the sampler goes on in it. */
void dmn__samplers_new_epoch(struct dmn_samplers *w, uint32_t epoch);

/* The first epoch of a new cache began without a pause: new shards go into it. */
void dmn__samplers_set_epoch(struct dmn_samplers *w, uint32_t epoch);

/* The sampler's counters (w may be NULL: nothing present). */
void dmn__samplers_stats(struct dmn_samplers *w, struct dmn_sampler_stats *o);

/* Stops and joins the thread, frees w.  NULL is ignored. */
void dmn__samplers_stop(struct dmn_samplers *w);

#endif
