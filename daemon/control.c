/*
 * control.c - the control thread: serves the FUSE view's request queue
 * (cachefs/requests.h) while the mount is up.
 *
 * A stats text is rendered here at once from a struct dmn_stats_view
 * gathered from the store, the view, the samplers and the last boundary
 * (formats: stats.c).  A control command ("next", "next wait", "next N",
 * "next N wait") becomes an advance request for the epoch thread, which
 * answers it when its boundary is done (epochs.c answer_done), so a long
 * `next wait` never holds up a stats read.  "next N" asks for epoch N
 * however many processes write it (DESIGN "Epochs"): see control().
 * "retire read" / "retire boundary" / "retire config" (the configured
 * one) set the retire mode from the next boundary on (the feeder's,
 * docs/mount.md).  Unknown commands get -EINVAL.
 *
 * Locking: d->mu for the advance sequence and the pending list; the request
 * queue's own mu inside cfs_requests_*.
 */
#include "daemon/daemon_i.h"

#include "common/clock.h"
#include "common/log.h"
#include "daemon/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes of the catalog's files in dir (the database and its WAL); 0 for one not there. */
static uint64_t catalog_bytes(const char *dir)
{
	static const char *const names[] = {"catalog.db", "catalog.db-wal"};
	uint64_t n = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[4096];
		struct stat st;
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path) &&
		    stat(path, &st) == 0)
			n += (uint64_t)st.st_size;
	}
	return n;
}

/* The budget's, the view's and the scrubber's figures into *v. */
static void view_store(struct dmn *d, struct dmn_stats_view *v)
{
	struct cfs_budget_stat bs;
	struct cfs_epochs_stat es;
	struct dmn_scrub_stats ss;
	cfs_budget_get(d->budget, &bs);
	v->limit = bs.limit;
	v->admit = bs.admit;
	v->admit_used = bs.admit_used;
	v->reserved = bs.reserved;
	v->sealed = bs.sealed;
	v->draining = bs.draining;
	v->peak = bs.peak;
	v->waiting_limit = bs.waiting_limit;
	v->waiting_admit = bs.waiting_admit;
	cfs_epochs_stat(&d->set, &es);
	v->epochs_listed = es.epochs_listed;
	v->open_handles = es.open_handles;
	v->draining_files = es.draining_files;
	v->retiring = es.retiring_bytes;
	/* what `current` lists now, retired files gone (cachefs/epoch.c keeps the count) */
	v->current_files = es.current_files;
	v->current_bytes = es.current_bytes;
	v->current_records = es.current_records;
	v->current_read_bytes = atomic_load(&d->set.cur_read_bytes);
	v->current_files_read_full = atomic_load(&d->set.cur_full_files);
	if (d->fs) {
		struct cfs_fs_pt_stats pt;
		cfs_fs_passthrough(d->fs, &pt);
		v->passthrough = pt.enabled;
		v->passthrough_opens = pt.opens;
		v->passthrough_refused = pt.refused;
	}
	dmn__scrub_stats(d->scrub, &ss);
	/* files dropped at start-up for their size or their check (reconcile.c) are corrupt too */
	const struct cfs_reconcile_report *rec = cfs_store_reconcile_report(d->store);
	v->errors_corrupt = ss.corrupt + rec->size_mismatches + rec->unsynced_bad;
	const char *why;
	v->verity = cfs_store_verity(d->store, &why) ? "on" : why;
	v->scrub_rate = ss.rate;
	/* a pass over a full cache reads `limit` bytes at `rate`, then pauses 1 s (scrub.c) */
	v->scrub_period_s = ss.rate ? (v->limit + ss.rate - 1) / ss.rate + 1 : 0;
	v->scrub_passes = ss.passes;
	v->scrub_bytes = ss.bytes;
	v->scrub_files = ss.files;
	v->scrub_last_pass_ms = ss.last_pass_ms;
	v->verified_bytes = ss.read_bytes;
	v->verified_files = ss.read_files;
	v->rechecked_files = ss.rechecked_files;
	v->stale_files = ss.stale_files;
	v->stale_moved = ss.stale_moved;
}

int dmn__render(struct dmn *d, enum cfs_req_kind which, char **buf, size_t *len)
{
	struct dmn_stats_view v;
	struct cfs_epoch_row *rows = NULL;
	size_t nrows = 0;
	struct cmn_log_entry recent[CMN_LOG_RECENT];

	dmn_boundary_flush_reads(&d->bd); /* so that read figures agree with the catalog */
	memset(&v, 0, sizeof(v));
	v.pid = (int)getpid();
	v.source = d->o->source;
	v.cache_dir = cfs_store_dir(d->store);
	v.catalog_bytes = catalog_bytes(v.cache_dir);
	v.mountpoint = d->o->mountpoint;
	v.epoch = cfs_epochs_current_number(&d->set, &v.have_epoch);
	v.advance = d->cfg->advance == CMN_ADVANCE_AUTO ? "auto" : "manual";
	v.min_records = d->cfg->min_records;
	if (cfs_catalog_resident(d->cat, &v.resident) != 0)
		memset(&v.resident, 0, sizeof(v.resident));
	if (cfs_catalog_epochs_list(d->cat, &rows, &nrows) != 0)
		nrows = 0;
	v.epochs = rows;
	v.n_epochs = nrows;
	view_store(d, &v);
	dmn__samplers_stats(d->smp, &v.sampler);
	v.uptime_s = (double)(cmn_mono_ms() - d->t0_ms) / 1000.0;
	v.n_recent = cmn_log_recent(recent, CMN_LOG_RECENT);
	v.recent = recent;

	pthread_mutex_lock(&d->mu);
	v.retire = dmn__retire_read_next(d) ? "read" : "boundary";
	char desc[256];
	memcpy(desc, d->entry_desc, sizeof(desc));
	struct evc_plan plan = d->last_plan;
	bool have_plan = d->have_plan;
	const struct evc_entry *entry = d->entry;
	char wait_why[512];
	memcpy(wait_why, d->wait_why, sizeof(wait_why));
	v.errors_stats_flush = atomic_load(&d->bd.errors_flush);
	v.errors_boundary = d->err_boundary;
	v.sampler.ingest_bps = d->ingest_bps;
	v.sampler.fetch_bps = d->fetch_bps;
	pthread_mutex_unlock(&d->mu);
	v.schedule = desc;
	v.last_wait = wait_why;
	v.policy = entry ? cmn_policy_name(entry->policy) : "";
	v.min_uses = entry ? entry->min_uses : 0;
	v.entry_limit = entry ? entry->limit : 0;
	v.entry_admit = entry ? entry->admit : 0;
	v.last_victims = have_plan ? plan.n_victims : 0;
	v.last_evicted_bytes = have_plan ? plan.evict_bytes : 0;
	v.last_admit = have_plan ? plan.admit : 0;
	v.last_reason = have_plan ? evc_reason_name(plan.reason) : "";
	v.last_why = have_plan ? plan.why : "";

	int rc = which == CFS_REQ_STATS_JSON ? dmn_stats_json(&v, DMN_STATS_TEXT_MAX, buf, len)
					     : dmn_stats_metrics(&v, DMN_STATS_TEXT_MAX, buf, len);
	free(rows);
	return rc;
}

/*
 * Parses a control command: "next", "next wait", "next N", "next N wait".
 * Returns 0 with *has_epoch / *epoch / *wait set, or -EINVAL.
 */
static int parse_command(const char *cmd, bool *has_epoch, uint64_t *epoch, bool *wait)
{
	*has_epoch = false;
	*epoch = 0;
	*wait = false;
	if (strncmp(cmd, "next", 4) != 0 || (cmd[4] != '\0' && cmd[4] != ' '))
		return -EINVAL;
	const char *p = cmd + 4;
	while (*p == ' ')
		p++;
	if (*p >= '0' && *p <= '9') {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(p, &end, 10);
		if (errno || n > UINT32_MAX)
			return -EINVAL; /* epoch numbers are 32-bit (cfs_epochs) */
		*has_epoch = true;
		*epoch = n;
		p = end;
		while (*p == ' ')
			p++;
	}
	if (strcmp(p, "wait") == 0)
		*wait = true;
	else if (*p != '\0')
		return -EINVAL;
	return 0;
}

/*
 * Queues an advance for the epoch thread; r is answered when it is done.
 *
 * "next N" is idempotent: every rank of a job may write it and the mount
 * advances to N once.  Boundaries run one after another on the epoch
 * thread, so advance number adv_done + k ends in epoch current + k: when N
 * is at most current + the advances already queued, the request attaches to
 * the queued advance that reaches N (0 at once when N <= current); else it
 * queues the missing ones.  The current epoch is read under d->mu, but the
 * epoch thread publishes a boundary before it counts it in adv_done, so
 * the estimate can be one short; answer_done() (epochs.c) then attaches
 * the request to the advance that really reaches N.
 */
static void control(struct dmn *d, struct cfs_req *r)
{
	struct cfs_requests *q = cfs_fs_requests(d->fs);
	bool has_epoch, wait, have;
	uint64_t want;
	if (!strcmp(r->cmd, "retire read") || !strcmp(r->cmd, "retire boundary") ||
	    !strcmp(r->cmd, "retire config")) {
		pthread_mutex_lock(&d->mu);
		/* the epoch thread applies it at the next boundary */
		d->retire_want = r->cmd[7] == 'c'   ? d->cfg->retire == CMN_RETIRE_READ
				 : r->cmd[7] == 'r' ? 1
						    : 0;
		pthread_mutex_unlock(&d->mu);
		cfs_requests_done(q, r, 0, NULL, 0);
		return;
	}
	if (parse_command(r->cmd, &has_epoch, &want, &wait) != 0) {
		cfs_requests_done(q, r, -EINVAL, NULL, 0);
		return;
	}
	pthread_mutex_lock(&d->mu);
	if (d->stop || d->epoch_gone) { /* no boundary would answer it */
		pthread_mutex_unlock(&d->mu);
		cfs_requests_done(q, r, -ECANCELED, NULL, 0);
		return;
	}
	uint64_t cur = cfs_epochs_current_number(&d->set, &have);
	if (has_epoch && have && want <= cur) {
		pthread_mutex_unlock(&d->mu);
		cfs_requests_done(q, r, 0, NULL, 0); /* already there: a no-op */
		return;
	}
	if (has_epoch && want - cur > DMN_ADVANCE_AHEAD_MAX) {
		pthread_mutex_unlock(&d->mu);
		cmn_log(CMN_LOG_WARN,
			"control: 'next %" PRIu64 "' refused: epoch %" PRIu64
			" is current, at most %u advances are queued at once",
			want, cur, DMN_ADVANCE_AHEAD_MAX);
		cfs_requests_done(q, r, -ERANGE, NULL, 0);
		return;
	}
	if (d->npending == d->cap_pending) {
		size_t cap = d->cap_pending ? d->cap_pending * 2 : 8;
		struct dmn_pending *p = realloc(d->pending, cap * sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&d->mu);
			cfs_requests_done(q, r, -ENOMEM, NULL, 0);
			return;
		}
		d->pending = p;
		d->cap_pending = cap;
	}
	uint64_t seq = has_epoch ? d->adv_done + (want - cur) : d->adv_requested + 1;
	if (seq > d->adv_requested)
		d->adv_requested = seq;
	if (wait && seq > d->adv_wait_upto)
		d->adv_wait_upto = seq;
	d->pending[d->npending++] =
	    (struct dmn_pending){.r = r, .seq = seq, .epoch = want, .has_epoch = has_epoch};
	pthread_mutex_unlock(&d->mu);
	cmn_events_post(&d->ev, DMN_EV_ADVANCE);
}

void dmn__cancel_pending(struct dmn *d)
{
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->npending; i++)
		cfs_requests_done(cfs_fs_requests(d->fs), d->pending[i].r, -ECANCELED, NULL, 0);
	d->npending = 0;
	pthread_mutex_unlock(&d->mu);
}

void *dmn__control_main(void *arg)
{
	struct dmn *d = arg;
	struct cfs_requests *q = cfs_fs_requests(d->fs);
	for (;;) {
		struct cfs_req *r;
		int rc = cfs_requests_take(q, 1000, &r);
		if (rc == -ECANCELED)
			break; /* the queue closed: shutdown */
		if (rc != 0)
			continue;
		if (r->kind == CFS_REQ_CONTROL) {
			control(d, r);
		} else {
			char *buf = NULL;
			size_t len = 0;
			rc = dmn__render(d, r->kind, &buf, &len);
			cfs_requests_done(q, r, rc, buf, len);
		}
	}
	return NULL;
}
