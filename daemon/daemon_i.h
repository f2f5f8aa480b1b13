/*
 * daemon_i.h - the daemon's state, shared by daemon.c (lifecycle),
 * epochs.c (the epoch thread), control.c (the control thread) and
 * detach.c.  Private to daemon/.
 */
#ifndef RC_DAEMON_DAEMON_I_H
#define RC_DAEMON_DAEMON_I_H

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/epoch.h"
#include "cachefs/fs.h"
#include "cachefs/store.h"
#include "common/events.h"
#include "daemon/boundary.h"
#include "daemon/daemon.h"
#include "daemon/samplers.h"
#include "daemon/scrub.h"
#include "eviction/evictor.h"
#include "eviction/schedule.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Bits of d->ev besides cachefs's CFS_EV_RETIRED and CFS_EV_ALL_READ. */
#define DMN_EV_ADVANCE (1u << 8) /* an advance was requested (d->adv_requested) */
#define DMN_EV_STOP    (1u << 9) /* d->stop was set */

/* "next N" queues at most this many advances at once (else -ERANGE). */
#define DMN_ADVANCE_AHEAD_MAX 1024u

/*
 * A control command waiting for its boundary.  `next` and `next wait` wait
 * for one sequence number; `next N` waits for epoch N (has_epoch): it is
 * attached to the sequence number that should reach N, and answer_done()
 * re-attaches it to a later one if an advance it counted on did not get
 * there (control.c, "next N").  Boundaries run one after another, so the
 * advance numbered adv_done + k ends in epoch current + k.
 */
struct dmn_pending {
	struct cfs_req *r;
	uint64_t seq;	/* answered once adv_done >= seq ... */
	uint64_t epoch; /* ... and, with has_epoch, once the current epoch >= epoch */
	bool has_epoch; /* `next N` */
};

struct dmn {
	const struct dmn_opts *o;
	const struct cmn_config *cfg;
	struct cfs_store *store;
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	int dirfd;
	struct evc_schedule sch;
	bool have_sch;
	struct cfs_epochs set;
	bool have_set;
	struct cmn_events ev; /* wakes the epoch thread: CFS_EV_*, DMN_EV_* */
	struct dmn_boundary bd;
	struct cfs_fs *fs;
	struct dmn_samplers *smp; /* NULL: none */
	struct dmn_scrub *scrub;  /* integrity thread and verifier (scrub.c) */
	uint64_t t0_ms;		  /* start, monotonic */
	pthread_t epoch_thread, control_thread;
	bool have_epoch_thread, have_control_thread;

	pthread_mutex_t boundary_mu; /* held for a whole boundary (run_boundary_as); scrub.c
					withdraws a file (corrupt or stale) only outside one
					(trylock) */
	pthread_mutex_t mu;
	bool stop;		       /* protected by mu */
	bool epoch_gone;	       /* protected by mu: the epoch thread ended */
	int retire_want;	       /* protected by mu: -1, or the retire mode (1 read, 0
					  boundary) a control command asked for from the
					  next boundary on */
	bool retire_read;	       /* protected by mu: the mode in force (stats) */
	uint64_t adv_requested;	       /* protected by mu: boundaries asked for (sequence) */
	uint64_t adv_done;	       /* protected by mu: boundaries finished */
	uint64_t adv_wait_upto;	       /* protected by mu: requests up to this one want "wait" */
	int adv_rc;		       /* protected by mu: result of the last boundary */
	struct dmn_pending *pending;   /* protected by mu: control commands in flight */
	size_t npending, cap_pending;  /* protected by mu */
	struct evc_plan last_plan;     /* protected by mu */
	bool have_plan;		       /* protected by mu */
	char entry_desc[256];	       /* protected by mu */
	const struct evc_entry *entry; /* protected by mu: entry in force */
	uint64_t admit_cut;	       /* epoch thread: the entry's admit when the boundary cut it
					  to what the plan would fetch, else 0 */
	uint64_t err_boundary;	       /* protected by mu */
	char wait_why[512];	       /* protected by mu: why the last `next wait` went ahead */
	double ingest_bps, fetch_bps;  /* protected by mu */
	uint64_t rate_bytes, rate_fetched; /* protected by mu */
	uint64_t rate_t_ms;		   /* protected by mu */
};

/* epochs.c: runs one boundary into current + 1 (or into `first` at start-up). */
int dmn__boundary(struct dmn *d, bool wait, bool startup, uint32_t first, char *err, size_t errlen);

/* epochs.c: the epoch thread's body. */
void *dmn__epoch_main(void *arg);

/* epochs.c: whether the daemon is shutting down (stop, or the FUSE loop ended). */
bool dmn__exiting(struct dmn *d);

/* control.c: the control thread's body. */
void *dmn__control_main(void *arg);

/* control.c: answers every control command still waiting with -ECANCELED. */
void dmn__cancel_pending(struct dmn *d);

/*
 * control.c: renders a stats text (CFS_REQ_STATS_JSON or CFS_REQ_METRICS)
 * into a malloc'd buffer.  0 or -errno.
 */
int dmn__render(struct dmn *d, enum cfs_req_kind which, char **buf, size_t *len);

/*
 * detach.c: forks.  In the parent: waits for the child's report and
 * returns 0 (mount up) or the child's -errno (-EIO when it died without
 * one) with its message in err; *is_child false.
 * In the child: returns 0 with *is_child true and *report_fd set (the
 * write end of the report pipe).  -errno with a message if fork fails.
 */
int dmn__fork(bool *is_child, int *report_fd, char *err, size_t errlen);

/*
 * detach.c: child side, the mount is up: reports "ok", detaches (setsid
 * done).  The log then goes to log_file (appended, one timestamped line
 * each) when it is not NULL and can be opened, else to syslog.
 */
void dmn__report_ready(int *report_fd, const char *log_file);

/* detach.c: child side, start-up failed: reports rc (-errno) and the message. */
void dmn__report_error(int *report_fd, int rc, const char *msg);

/*
 * The retire mode the next boundary applies: a `retire` command's if one
 * is pending, else the one in force.  d->mu held.
 */
static inline bool dmn__retire_read_next(const struct dmn *d)
{
	return d->retire_want >= 0 ? d->retire_want > 0 : d->retire_read;
}

#endif
