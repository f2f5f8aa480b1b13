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
 * Opens the source (bad URL, credentials) and, for a plan with no object
 * yet (a new cache), lists it on the caller's thread (smp_sampler_list),
 * so that a source that cannot be listed fails the mount before it is
 * reported up; a warm plan is listed by the sampler thread once it runs.
 * No thread is started yet.  cfg and
 * store are borrowed and must outlive the samplers.  Returns 0 and *out,
 * or -errno with a one-line message naming the source and the cause:
 * -EINVAL/-ENOTSUP when the source cannot be opened as configured (a URL
 * that cannot be one, a credentials file others may read: usage errors),
 * else the listing's -errno (never those two).
 */
int dmn__samplers_open(struct dmn_samplers **out, const struct cmn_config *cfg,
		       struct cfs_store *store, uint32_t epoch, char *err, size_t errlen);

/* Starts the sampler thread.  Returns 0, or -errno with a message (w unchanged). */
int dmn__samplers_start(struct dmn_samplers *w, char *err, size_t errlen);

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

/*
 * Bytes the sampler's plan would still fetch (smp_sampler_wanted_bytes):
 * UINT64_MAX when w is NULL or the plan is not loaded yet.
 */
uint64_t dmn__samplers_wanted(struct dmn_samplers *w);
/* ... counted afresh (smp_sampler_wanted_fresh), waiting at most timeout_ms. */
uint64_t dmn__samplers_wanted_fresh(struct dmn_samplers *w, uint64_t timeout_ms);

/* Stops and joins the thread (if started), frees w.  NULL is ignored. */
void dmn__samplers_stop(struct dmn_samplers *w);

#endif
