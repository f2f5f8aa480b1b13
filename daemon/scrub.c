/*
 * scrub.c - the daemon's integrity thread.
 *
 * Owns three jobs that end the same way, by withdrawing a sealed file
 * whose bytes are no longer true, between boundaries:
 *   - the files the FUSE read path found corrupt during a first pass
 *     (cachefs/verify.c queues their ids and posts SCRUB_EV_CORRUPT);
 *   - the scrubber: one pass after another over the SEALED files, each
 *     TFRecord record checked against the catalog's (offset, length, crc)
 *     rows (cfs_vcheck_step), each raw object whole against its CRC, at most `scrub_rate` bytes/s
 * (0: no scrubbing; reported corrupt files are still dropped).  It is what finds a file corrupted
 * after the daemon served it once, whose reads the kernel then passes through without the daemon
 * seeing them;
 *   - the files of changed objects (cachefs/stale.h): after a listing
 *     marked an object STALE (cfs_catalog_stale_generation moved), and
 *     every STALE_POLL_MS, each SEALED file holding a record of a STALE
 *     object is replaced by a new shard holding its current objects'
 *     records, or withdrawn alone when it has none (replace_stale).
 * Does not serve reads, choose victims or speak SQL (catalog.c does).
 *
 * Dropping a corrupt file (drop_corrupt): reads reaching the bad record
 * already get EIO (verify.c V1); the catalog withdraws it
 * (cfs_catalog_shard_withdraw: SEALED -> EVICTING without counting it as
 * evicted, its samples forgotten, so no later snapshot lists it and the
 * sampling plan no longer counts its units resident); then
 * release_withdrawn(): exactly as a boundary's victim (daemon/boundary.c),
 * a file still held by a snapshot or a handle moves to the budget's
 * draining bytes and is deleted on its last release (cfs_epochs_evict,
 * DESIGN 3), and any other is deleted now.  Every drop is counted once in
 * errors.corrupt.  A withdrawal never runs inside a boundary
 * (d->boundary_mu, trylock): a boundary lists, evicts and publishes sealed
 * files in steps, and a file leaving SEALED between them would fail it; a
 * drop is put off and retried every PENDING_WAIT_MS instead, a stale file
 * waits up to STALE_LOCK_MS and is otherwise tried again at the next poll.
 *
 * Pacing: after a step that read B bytes the next step waits until B/rate
 * seconds after the previous deadline, so the long-run rate is at most
 * scrub_rate whatever the step sizes; a pass begins IDLE_WAIT_MS after the
 * previous one ended (a small cache is not re-read without pause).  The
 * scrubber reads through the page cache: it checks the bytes readers
 * would get.
 *
 * Threads: the scrub thread owns the pass state; the counters are relaxed
 * atomics read by the control thread.  Locks: none of its own beyond the
 * events object; d->boundary_mu only by trylock, around a withdrawal; the
 * catalog, the budget and the epoch set lock themselves (never called
 * with d->mu held).
 */
#include "daemon/scrub.h"

#include "cachefs/stale.h"
#include "cachefs/verify.h"
#include "common/clock.h"
#include "common/log.h"
#include "daemon/daemon_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCRUB_EV_CORRUPT (1u << 0) /* the verifier queued a corrupt file */
#define SCRUB_EV_STOP	 (1u << 1)

#define SCRUB_BUF	((size_t)1 << 20) /* the scrubber's read buffer */
#define STEP_MIN	((uint64_t)64 << 10)
#define STEP_MAX	((uint64_t)4 << 20)
#define IDLE_WAIT_MS	1000u /* nothing to scrub, or a pass ended: wait this long */
#define TAKE_BATCH	64
#define PENDING_MAX	64 /* drops waiting for a boundary to end */
#define PENDING_WAIT_MS 100u
#define STALE_CHECK_MS	1000u  /* how often a listing's new STALE objects are looked for */
#define STALE_POLL_MS	10000u /* ... and stale files looked for anyway (a late seal) */
#define STALE_LOCK_MS	2000u  /* wait for a boundary to end before a replacement commits */

struct dmn_scrub {
	struct dmn *d;
	uint64_t rate;
	struct cfs_verifier *verifier;
	struct cmn_events ev;
	pthread_t thread;
	bool running;
	_Atomic bool stop;

	/* the pass, scrub thread only */
	uint8_t *buf;
	int64_t *ids; /* SEALED files at the pass's start */
	size_t nids, next;
	bool pass_open; /* a pass over ids is under way */
	uint64_t pass_t0_ms;
	bool in_file;
	int64_t cur_id;
	uint64_t cur_bytes;
	enum cfs_kind cur_kind; /* a raw object is checked whole, in one step */
	int fd;
	struct cfs_sample *samples;
	size_t nsamples;
	struct cfs_vcheck vc;

	/* drops put off while a boundary ran (scrub thread only) */
	struct {
		int64_t id;
		char why[CFS_VERIFY_WHY_MAX];
	} pending[PENDING_MAX];
	size_t npending;

	/* the files of changed objects (scrub thread only) */
	uint64_t stale_gen;	/* cfs_catalog_stale_generation() at the last look */
	uint64_t stale_next_ms; /* the next look regardless */

	/* counters (struct dmn_scrub_stats), relaxed atomics */
	_Atomic uint64_t passes, bytes, files, last_pass_ms, corrupt, stale_files, stale_moved;
};

int dmn__scrub_new(struct dmn_scrub **out, struct dmn *d, uint64_t rate)
{
	struct dmn_scrub *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	cmn_events_init(&sc->ev);
	int rc = cfs_verifier_new(&sc->verifier, &sc->ev, SCRUB_EV_CORRUPT);
	if (rc) {
		cmn_events_destroy(&sc->ev);
		free(sc);
		return rc;
	}
	sc->d = d;
	sc->rate = rate;
	sc->fd = -1;
	*out = sc;
	return 0;
}

struct cfs_verifier *dmn__scrub_verifier(struct dmn_scrub *sc)
{
	return sc->verifier;
}

/* ---- dropping a corrupt file ------------------------------------------ */

struct mark_ctx {
	int64_t id;
	uint64_t off;
};

static void mark_fn(struct cfs_efile *f, void *ctx)
{
	const struct mark_ctx *m = ctx;
	if (f->id == m->id)
		cfs_verify_mark(f, m->off);
}

static void drop_now(struct dmn_scrub *sc, int64_t id, const char *why);

/*
 * File `id` is corrupt (the bad record at off; UINT64_MAX: the read path
 * has marked it already).  See the module comment.  While a boundary runs
 * (it lists, evicts and publishes files in steps) the catalog part waits:
 * the drop is put off (sc->pending) and retried.  Scrub thread only.
 */
static void drop_corrupt(struct dmn_scrub *sc, int64_t id, uint64_t off, const char *why)
{
	struct dmn *d = sc->d;
	if (off != UINT64_MAX) {
		struct mark_ctx m = {.id = id, .off = off};
		cfs_epochs_foreach_file(&d->set, mark_fn, &m); /* EIO from now on (V1) */
	}
	if (pthread_mutex_trylock(&d->boundary_mu) == 0) {
		drop_now(sc, id, why);
		pthread_mutex_unlock(&d->boundary_mu);
		return;
	}
	if (sc->npending == PENDING_MAX) {
		cmn_log(CMN_LOG_WARN,
			"file %" PRId64 " is corrupt (%s): reads of it get EIO; it is dropped when "
			"a scrub pass finds it again",
			id, why);
		return;
	}
	sc->pending[sc->npending].id = id;
	snprintf(sc->pending[sc->npending].why, sizeof(sc->pending[0].why), "%s", why);
	sc->npending++;
}

/* Retries the drops put off.  Scrub thread only. */
static void retry_pending(struct dmn_scrub *sc)
{
	if (!sc->npending || pthread_mutex_trylock(&sc->d->boundary_mu) != 0)
		return;
	for (size_t i = 0; i < sc->npending; i++)
		drop_now(sc, sc->pending[i].id, sc->pending[i].why);
	sc->npending = 0;
	pthread_mutex_unlock(&sc->d->boundary_mu);
}

/*
 * File `id` was just withdrawn (catalog EVICTING): its bytes drain, and as
 * a boundary's victim it is deleted on its last release when a snapshot or
 * a handle holds it (DESIGN 3), else now, by the store's reaper
 * (cfs_store_reap: the `evict` crash point, the GONE commit).
 */
static void release_withdrawn(struct dmn *d, enum cfs_kind kind, int64_t id, uint64_t bytes,
			      const char *path)
{
	cfs_budget_sealed_to_draining(d->budget, bytes);
	if (cfs_epochs_held(&d->set, id)) {
		cfs_epochs_evict(&d->set, &id, 1);
		return;
	}
	struct cfs_evict_item it = {.id = id, .kind = kind, .bytes = bytes};
	int rc = cfs_store_reap(d->store, &it, 1);
	if (rc)
		cmn_log(CMN_LOG_WARN,
			"%s: not deleted yet (%s): start-up reconciliation finishes it", path,
			strerror(-rc));
}

/* The drop itself, outside any boundary (d->boundary_mu held). */
static void drop_now(struct dmn_scrub *sc, int64_t id, const char *why)
{
	struct dmn *d = sc->d;
	struct cfs_shard_info si;
	char path[64];

	int rc = cfs_catalog_shard_get(d->cat, id, &si);
	if (rc) {
		cmn_log(CMN_LOG_ERROR, "file %" PRId64 " is corrupt but its row cannot be read: %s",
			id, strerror(-rc));
		return;
	}
	free(si.name);
	if (si.state != CFS_SHARD_SEALED)
		return; /* already leaving (a victim, or dropped before) */
	cfs_store_file_path(d->store, si.kind, id, false, path, sizeof(path));
	rc = cfs_catalog_shard_withdraw(d->cat, id, CFS_WITHDRAW_CORRUPT);
	if (rc == -ENOENT)
		return;
	if (rc) {
		cmn_log(CMN_LOG_ERROR,
			"%s is corrupt; it cannot be dropped now (%s): reads of it get EIO, the "
			"next scrub pass tries again",
			path, strerror(-rc));
		return;
	}
	atomic_fetch_add_explicit(&sc->corrupt, 1, memory_order_relaxed);
	release_withdrawn(d, si.kind, id, si.bytes, path);
	cmn_log(CMN_LOG_ERROR,
		"%s is corrupt (%s): dropped from the cache; its records may be fetched again",
		path, why);
}

/* ---- the files of changed objects (cachefs/stale.h) ----------------------- */

/* Takes d->boundary_mu, waiting up to STALE_LOCK_MS for a boundary to end. */
static bool lock_between_boundaries(struct dmn_scrub *sc)
{
	for (uint32_t waited = 0;; waited += 20) {
		if (pthread_mutex_trylock(&sc->d->boundary_mu) == 0)
			return true;
		if (waited >= STALE_LOCK_MS || atomic_load(&sc->stop))
			return false;
		usleep(20 * 1000);
	}
}

/*
 * Replaces stale file `id`: its current records copied into a new shard
 * whose commit withdraws it, or withdrawn alone.  0, or -errno (logged at
 * debug level when it is worth another try later).  Scrub thread only.
 */
static int replace_stale(struct dmn_scrub *sc, int64_t id)
{
	struct dmn *d = sc->d;
	struct cfs_shard_info si;
	struct cfs_shard_writer *w = NULL;
	uint64_t moved = 0;
	int64_t new_id = 0;
	char err[256], path[64];

	int rc = cfs_catalog_shard_get(d->cat, id, &si);
	if (rc)
		return rc;
	free(si.name);
	if (si.state != CFS_SHARD_SEALED)
		return 0;
	cfs_store_file_path(d->store, si.kind, id, false, path, sizeof(path));
	uint32_t epoch = cfs_epochs_current_number(&d->set, NULL);
	rc = cfs_stale_copy(d->store, id, epoch, &w, &moved, err, sizeof(err));
	if (rc == -EBADMSG) { /* reads of it get EIO from now on, as of any corrupt file */
		drop_corrupt(sc, id, 0, err);
		return 0;
	}
	if (rc) {
		cmn_log(CMN_LOG_DEBUG, "%s holds records of a changed object: %s (tried again)",
			path, err);
		return rc;
	}
	if (!lock_between_boundaries(sc)) {
		cfs_shard_writer_abort(w);
		return -EBUSY;
	}
	bool copied = w != NULL;
	if (copied)
		rc = cfs_shard_writer_seal(w, &new_id, err, sizeof(err));
	else
		rc = cfs_catalog_shard_withdraw(d->cat, id, CFS_WITHDRAW_STALE);
	if (rc == 0)
		release_withdrawn(d, si.kind, id, si.bytes, path);
	pthread_mutex_unlock(&d->boundary_mu);
	if (rc) {
		if (rc != -ENOENT) /* -ENOENT: it left meanwhile (a victim) */
			cmn_log(CMN_LOG_WARN,
				"%s holds records of a changed object: %s (tried again)", path,
				copied ? err : strerror(-rc));
		return rc == -ENOENT ? 0 : rc;
	}
	atomic_fetch_add_explicit(&sc->stale_files, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sc->stale_moved, moved, memory_order_relaxed);
	if (new_id)
		cmn_log(CMN_LOG_INFO,
			"%s holds records of a changed object: withdrawn at the next boundary; its "
			"%" PRIu64 " records of current objects are in file %" PRId64
			" from then on",
			path, moved, new_id);
	else
		cmn_log(CMN_LOG_INFO,
			"%s holds only records of changed objects: withdrawn at the next boundary",
			path);
	return 0;
}

/*
 * Looks for stale files when a listing marked an object STALE since the
 * last look, when the last look left one behind, or every STALE_POLL_MS.
 * Scrub thread only.
 */
static void stale_round(struct dmn_scrub *sc)
{
	struct cfs_catalog *cat = sc->d->cat;
	uint64_t gen = cfs_catalog_stale_generation(cat), now = cmn_mono_ms();
	if (gen == sc->stale_gen && now < sc->stale_next_ms)
		return;
	int64_t *ids = NULL;
	size_t n = 0;
	bool again = false;
	if (cfs_catalog_shards_with_stale_objects(cat, &ids, &n) != 0)
		again = true;
	for (size_t i = 0; i < n && !atomic_load(&sc->stop); i++)
		if (replace_stale(sc, ids[i]) != 0)
			again = true;
	free(ids);
	sc->stale_gen = again ? gen - 1 : gen; /* left one behind: look again soon */
	sc->stale_next_ms = cmn_mono_ms() + STALE_POLL_MS;
}

/* Drops every file the read path queued. */
static void drain_reports(struct dmn_scrub *sc)
{
	int64_t ids[TAKE_BATCH];
	size_t n;
	while ((n = cfs_verifier_take(sc->verifier, ids, TAKE_BATCH)) > 0)
		for (size_t i = 0; i < n; i++)
			drop_corrupt(sc, ids[i], UINT64_MAX, "a record failed its CRC on a read");
}

/* ---- the scrubber --------------------------------------------------------- */

static void file_close(struct dmn_scrub *sc)
{
	if (sc->fd >= 0)
		close(sc->fd);
	sc->fd = -1;
	free(sc->samples);
	sc->samples = NULL;
	sc->nsamples = 0;
	sc->in_file = false;
}

/* Starts a pass: the SEALED files now.  0 or -errno. */
static int pass_begin(struct dmn_scrub *sc)
{
	struct cfs_shard_info *arr = NULL;
	size_t n = 0;
	int rc = cfs_catalog_shards_list(sc->d->cat, 1u << CFS_SHARD_SEALED, &arr, &n);
	if (rc)
		return rc;
	free(sc->ids);
	sc->ids = n ? malloc(n * sizeof(*sc->ids)) : NULL;
	sc->nids = 0;
	sc->next = 0;
	if (n && !sc->ids) {
		cfs_shard_info_free(arr, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		sc->ids[sc->nids++] = arr[i].id;
	cfs_shard_info_free(arr, n);
	sc->pass_t0_ms = cmn_mono_ms();
	sc->pass_open = sc->nids > 0;
	return 0;
}

/* Opens the next file of the pass that is still SEALED.  true: one is open. */
static bool file_next(struct dmn_scrub *sc)
{
	struct dmn *d = sc->d;
	while (sc->next < sc->nids) {
		int64_t id = sc->ids[sc->next++];
		struct cfs_shard_info si;
		if (cfs_catalog_shard_get(d->cat, id, &si) != 0)
			continue;
		free(si.name);
		if (si.state != CFS_SHARD_SEALED)
			continue;
		if (cfs_catalog_samples_of(d->cat, id, &sc->samples, &sc->nsamples) != 0)
			continue;
		if (sc->nsamples == 0) { /* left meanwhile (samples go with the row) */
			file_close(sc);
			continue;
		}
		int fd = cfs_store_open_file(d->store, si.kind, id);
		if (fd < 0) {
			file_close(sc);
			continue; /* deleted meanwhile */
		}
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		sc->fd = fd;
		sc->cur_id = id;
		sc->cur_bytes = si.bytes;
		sc->cur_kind = si.kind;
		sc->in_file = true;
		cfs_vcheck_init(&sc->vc, fd, si.bytes, sc->samples, sc->nsamples);
		return true;
	}
	return false;
}

/*
 * One step of at most about `budget` bytes.  Returns the bytes read;
 * *idle set when there was nothing to scrub.
 */
static uint64_t scrub_step(struct dmn_scrub *sc, uint64_t budget, bool *idle)
{
	*idle = false;
	if (!sc->in_file && !file_next(sc)) {
		if (sc->pass_open) { /* a pass ended: the next one begins after a pause */
			sc->pass_open = false;
			atomic_fetch_add_explicit(&sc->passes, 1, memory_order_relaxed);
			atomic_store_explicit(&sc->last_pass_ms, cmn_mono_ms() - sc->pass_t0_ms,
					      memory_order_relaxed);
			*idle = true;
			return 0;
		}
		int rc = pass_begin(sc);
		if (rc)
			cmn_log(CMN_LOG_WARN, "scrub: cannot list the resident files: %s",
				strerror(-rc));
		if (rc || !file_next(sc)) {
			*idle = true;
			return 0;
		}
	}
	uint64_t before = sc->vc.bytes_read, got = 0;
	int rc;
	if (sc->cur_kind == CFS_KIND_RAW) /* its one sample row: the whole object's CRC */
		rc = cfs_verify_raw_fd(sc->fd, sc->cur_bytes, sc->samples[0].crc, sc->buf,
				       SCRUB_BUF, &got, sc->vc.why, sizeof(sc->vc.why));
	else
		rc = cfs_vcheck_step(&sc->vc, budget, sc->buf, SCRUB_BUF);
	if (sc->cur_kind != CFS_KIND_RAW)
		got = sc->vc.bytes_read - before;
	else
		sc->vc.bad_off = 0;
	atomic_fetch_add_explicit(&sc->bytes, got, memory_order_relaxed);
	if (rc == 1)
		return got;
	if (rc == 0) {
		atomic_fetch_add_explicit(&sc->files, 1, memory_order_relaxed);
	} else if (rc == -EBADMSG) {
		struct cfs_shard_info si;
		/* still SEALED? (a row that left meanwhile loses its samples) */
		if (cfs_catalog_shard_get(sc->d->cat, sc->cur_id, &si) == 0) {
			free(si.name);
			if (si.state == CFS_SHARD_SEALED)
				drop_corrupt(sc, sc->cur_id, sc->vc.bad_off, sc->vc.why);
		}
	} else {
		cmn_log(CMN_LOG_WARN, "scrub: file %" PRId64 ": %s (skipped this pass)", sc->cur_id,
			sc->vc.why);
	}
	file_close(sc);
	return got;
}

static void *scrub_main(void *arg)
{
	struct dmn_scrub *sc = arg;
	uint32_t wait_ms = 0;
	uint64_t next_ms = cmn_mono_ms();
	uint64_t step = sc->rate / 20; /* about 20 steps a second */
	if (step < STEP_MIN)
		step = STEP_MIN;
	if (step > STEP_MAX)
		step = STEP_MAX;

	for (;;) {
		uint32_t bits = cmn_events_wait(&sc->ev, wait_ms);
		if ((bits & SCRUB_EV_STOP) || atomic_load(&sc->stop))
			break;
		retry_pending(sc);
		drain_reports(sc);
		stale_round(sc);
		uint32_t most = sc->npending ? PENDING_WAIT_MS : STALE_CHECK_MS;
		if (sc->rate == 0 || !sc->buf) {
			wait_ms = most;
			continue;
		}
		uint64_t now = cmn_mono_ms();
		if (now < next_ms) {
			wait_ms = next_ms - now < most ? (uint32_t)(next_ms - now) : most;
			continue;
		}
		bool idle;
		uint64_t got = scrub_step(sc, step, &idle);
		if (idle) {
			next_ms = now + IDLE_WAIT_MS;
		} else {
			next_ms = (next_ms > now ? next_ms : now) + got * 1000 / sc->rate;
			/* a long stall (a huge record) does not earn a burst later */
			now = cmn_mono_ms();
			if (next_ms + 1000 < now)
				next_ms = now;
		}
		now = cmn_mono_ms();
		wait_ms = next_ms > now ? (uint32_t)(next_ms - now) : 0;
		if (wait_ms > most)
			wait_ms = most;
	}
	file_close(sc);
	return NULL;
}

int dmn__scrub_start(struct dmn_scrub *sc)
{
	if (sc->rate) {
		sc->buf = malloc(SCRUB_BUF);
		if (!sc->buf)
			return -ENOMEM;
	}
	int rc = pthread_create(&sc->thread, NULL, scrub_main, sc);
	if (rc)
		return -rc;
	sc->running = true;
	return 0;
}

void dmn__scrub_stop(struct dmn_scrub *sc)
{
	if (!sc || !sc->running)
		return;
	atomic_store(&sc->stop, true);
	cmn_events_post(&sc->ev, SCRUB_EV_STOP);
	pthread_join(sc->thread, NULL);
	sc->running = false;
}

void dmn__scrub_free(struct dmn_scrub *sc)
{
	if (!sc)
		return;
	file_close(sc);
	free(sc->ids);
	free(sc->buf);
	cfs_verifier_free(sc->verifier);
	cmn_events_destroy(&sc->ev);
	free(sc);
}

void dmn__scrub_stats(struct dmn_scrub *sc, struct dmn_scrub_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!sc)
		return;
	st->rate = sc->rate;
	st->passes = atomic_load_explicit(&sc->passes, memory_order_relaxed);
	st->bytes = atomic_load_explicit(&sc->bytes, memory_order_relaxed);
	st->files = atomic_load_explicit(&sc->files, memory_order_relaxed);
	st->last_pass_ms = atomic_load_explicit(&sc->last_pass_ms, memory_order_relaxed);
	st->corrupt = atomic_load_explicit(&sc->corrupt, memory_order_relaxed);
	st->stale_files = atomic_load_explicit(&sc->stale_files, memory_order_relaxed);
	st->stale_moved = atomic_load_explicit(&sc->stale_moved, memory_order_relaxed);
	struct cfs_verifier_stat vs;
	cfs_verifier_stat(sc->verifier, &vs);
	st->read_bytes = vs.bytes;
	st->read_files = vs.files;
	st->rechecked_files = vs.rechecks;
}
