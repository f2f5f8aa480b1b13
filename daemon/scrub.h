/*
 * scrub.h - the daemon's integrity thread (daemon/scrub.c): drops the files
 * the read path found corrupt, re-verifies resident files against the
 * catalog's record CRCs at `scrub_rate` bytes/s, and withdraws the files
 * holding records of changed objects.  Private to daemon/.
 */
#ifndef RC_DAEMON_SCRUB_H
#define RC_DAEMON_SCRUB_H

#include <stddef.h>
#include <stdint.h>

struct dmn;
struct dmn_scrub;
struct cfs_verifier;

/* What .rollcache/stats shows of it (docs/reliability.md, "Integrity"). */
struct dmn_scrub_stats {
	uint64_t rate;		  /* scrub_rate, bytes/s; 0: the scrubber is off */
	uint64_t passes;	  /* whole passes over the resident files finished */
	uint64_t bytes;		  /* file bytes the scrubber read and checked */
	uint64_t files;		  /* files the scrubber checked to the end and found good */
	uint64_t last_pass_ms;	  /* duration of the last whole pass; 0: none yet */
	uint64_t corrupt;	  /* sealed files found corrupt and dropped (errors.corrupt) */
	uint64_t read_bytes;	  /* file bytes checked by the read path (first passes) */
	uint64_t read_files;	  /* files whose first pass checked every record */
	uint64_t rechecked_files; /* files checked again: changed on disk after a check */
	uint64_t stale_files;	  /* files withdrawn: they held records of a changed object */
	uint64_t stale_moved;	  /* records of current objects copied out of those files */
};

/*
 * Makes the thread's state and the mount's verifier (before the FUSE
 * mount, which borrows dmn__scrub_verifier()).  Returns 0 or -ENOMEM.
 */
int dmn__scrub_new(struct dmn_scrub **out, struct dmn *d, uint64_t rate);

/* The verifier the FUSE view checks first passes with. */
struct cfs_verifier *dmn__scrub_verifier(struct dmn_scrub *sc);

/* Starts the thread (signals blocked by the caller).  0 or -errno. */
int dmn__scrub_start(struct dmn_scrub *sc);

/* Stops and joins the thread (idempotent; a thread never started is fine). */
void dmn__scrub_stop(struct dmn_scrub *sc);

/* Frees it after dmn__scrub_stop() and after the FUSE view is gone.  NULL ignored. */
void dmn__scrub_free(struct dmn_scrub *sc);

/* Counters (any thread).  sc may be NULL: zeros. */
void dmn__scrub_stats(struct dmn_scrub *sc, struct dmn_scrub_stats *st);

#endif
