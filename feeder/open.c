/*
 * open.c - rc_feeder_open and rc_feeder_close: options, sizes, memory,
 * threads.
 *
 * Owns the checking and normalising of struct rc_feeder_opts, the sizes
 * derived from them (f->cfg), the first listing of files, the CUDA device
 * and copy stream, the allocation of the chunk pool, lanes, window and
 * ring, and starting and joining the threads.  Does not run the pipeline
 * (workers.c) nor hand out batches (consumer.c).
 *
 * Invariants: f->cfg is written only here, before the threads start; every
 * step of rc_feeder_open undoes itself through the one cleanup ladder, so a
 * failed open leaves nothing behind.
 *
 * Locking: none is needed before the threads start and after they are
 * joined; rc_feeder_close takes f->mu only to tell them to stop.
 */
#include "feeder/feeder_i.h"

#include "common/log.h"
#include "feeder/cuda_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define READAHEAD 2 /* chunks queued per lane */

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

void rc_feeder_opts_init(struct rc_feeder_opts *o)
{
	memset(o, 0, sizeof *o);
	o->abi = RC_FEEDER_ABI;
	o->verify_crc = true;
	o->world_size = 0; /* from the environment */
	o->device = -1;
	o->pin = -1;
	o->mount_epoch = -1;
}

/* ---- options ------------------------------------------------------------ */

/*
 * Checks what can be checked before anything is allocated.  Returns 0 or
 * -EINVAL with a message in err.
 */
static int opts_check(const struct rc_feeder_opts *o, char *err, size_t errlen)
{
	if (!o || o->abi != RC_FEEDER_ABI) {
		snprintf(err, errlen,
			 "rc_feeder_opts: call rc_feeder_opts_init() first (abi %u, want %u)",
			 o ? o->abi : 0, RC_FEEDER_ABI);
		return -EINVAL;
	}
	if (!o->schema || !*o->schema) {
		snprintf(err, errlen, "no schema given (e.g. \"x:float32[3],y:int64\")");
		return -EINVAL;
	}
	if (o->batch_size == 0) {
		snprintf(err, errlen, "batch_size must be at least 1");
		return -EINVAL;
	}
	if (!o->path && (!o->paths || !o->n_paths)) {
		snprintf(err, errlen,
			 "no input: give a directory, a glob, a file or a list of files");
		return -EINVAL;
	}
	if (o->world_size && o->rank >= o->world_size) {
		snprintf(err, errlen, "rank %u out of range for world_size %u", o->rank,
			 o->world_size);
		return -EINVAL;
	}
	if (o->format != RC_FORMAT_TFRECORD && o->format != RC_FORMAT_RAW) {
		snprintf(err, errlen, "format %d: expected tfrecord (0) or raw (1)", o->format);
		return -EINVAL;
	}
	if (o->compression < RC_COMPRESSION_AUTO || o->compression > RC_COMPRESSION_ZLIB) {
		snprintf(err, errlen,
			 "compression %d: expected auto (0), none (1), gzip (2) or zlib (3)",
			 o->compression);
		return -EINVAL;
	}
	return 0;
}

/*
 * Decoder threads when the options say 0: two, but no more than the CPUs
 * left beside the readers (at least one), so that readers, decoders and the
 * consumer do not outnumber the cores and pay for context switches.
 */
static size_t default_decoders(size_t nreaders)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu <= 0 || (size_t)ncpu >= nreaders + 2)
		return 2;
	return 1;
}

static char *dup_or_null(const char *s, bool *oom)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

/* Copies the options and the strings they point to into f->cfg.  0 or -ENOMEM. */
static int cfg_copy_opts(struct rc_feeder *f, const struct rc_feeder_opts *o)
{
	bool oom = false;

	f->cfg.o = *o;
	f->cfg.path = dup_or_null(o->path, &oom);
	f->cfg.schema_str = dup_or_null(o->schema, &oom);
	if (!o->path) {
		f->cfg.paths = calloc(o->n_paths, sizeof *f->cfg.paths);
		oom |= !f->cfg.paths;
		for (size_t i = 0; f->cfg.paths && i < o->n_paths; i++)
			f->cfg.paths[i] = dup_or_null(o->paths[i], &oom);
	}
	f->cfg.o.path = f->cfg.path;
	f->cfg.o.schema = f->cfg.schema_str;
	f->cfg.o.paths = (const char *const *)f->cfg.paths;
	return oom ? -ENOMEM : 0;
}

/* The defaults of struct rc_feeder_opts, and the pool sizes they imply. */
static void cfg_sizes(struct rc_feeder *f)
{
	const struct rc_feeder_opts *o = &f->cfg.o;

	f->cfg.B = o->batch_size;
	f->cfg.S = o->ring_slots ? o->ring_slots : 4;
	f->cfg.read_size = o->read_size ? o->read_size : ((size_t)4 << 20);
	if (f->cfg.read_size < 4096)
		f->cfg.read_size = 4096;
	f->cfg.W = o->shuffle ? (o->shuffle_window ? o->shuffle_window : 8) : 1;
	f->cfg.o.interleave = o->interleave ? o->interleave : (o->shuffle ? 4 : 1);
	f->cfg.ra = READAHEAD;
	/*
	 * Enough chunks that the lane the window waits for always gets one:
	 * the others can hold at most W (window) + (lanes - 1) * ra (queued)
	 * + B - 1 (drained chunks pinned by the batch being assembled); chunks
	 * pinned by batches being decoded come back without waiting.  Buffers
	 * are allocated on first use, so unused chunks cost a few bytes.
	 */
	f->cfg.nchunks = f->cfg.W + f->cfg.o.interleave * f->cfg.ra + f->cfg.B + 2;
	f->cfg.nreaders = o->readers ? o->readers : 1;
	f->cfg.ndecoders = o->threads ? o->threads : default_decoders(f->cfg.nreaders);
}

/*
 * Lays out a slot's block: each fixed feature's [B, dims...] tensor, or a
 * ragged feature's B + 1 offsets, 64-byte aligned.  0 or -ENOMEM.
 */
static int cfg_slot_layout(struct rc_feeder *f)
{
	const struct cmn_schema *sc = f->cfg.schema;

	f->cfg.fixed_off = calloc(sc->n, sizeof *f->cfg.fixed_off);
	if (!f->cfg.fixed_off)
		return -ENOMEM;
	for (size_t i = 0; i < sc->n; i++) {
		f->cfg.fixed_off[i] = f->cfg.block_len;
		if (sc->feature[i].ragged)
			f->cfg.block_len += align64((f->cfg.B + 1) * sizeof(int64_t));
		else
			f->cfg.block_len += align64(f->cfg.B * sc->feature[i].row_bytes);
	}
	return 0;
}

/*
 * Fills f->cfg from the (checked) options: strings, schema, sizes, slot
 * layout.  Returns 0 or -errno with a message; cfg_free undoes a partial
 * fill.
 */
static int cfg_init(struct rc_feeder *f, const struct rc_feeder_opts *o, char *err, size_t errlen)
{
	int rc = cfg_copy_opts(f, o);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = cmn_schema_parse(o->schema, &f->cfg.schema, err, errlen);
	if (rc)
		return rc;
	if (o->format == RC_FORMAT_RAW) {
		if (f->cfg.schema->n_ragged) {
			snprintf(err, errlen,
				 "raw format: every feature needs a fixed shape (no [] or bytes)");
			return -EINVAL;
		}
		f->cfg.raw_size = f->cfg.schema->fixed_row_bytes;
	}
	cfg_sizes(f);
	rc = cfg_slot_layout(f);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

static void cfg_free(struct rc_feeder *f)
{
	free(f->cfg.fixed_off);
	cmn_schema_free(f->cfg.schema);
	for (size_t i = 0; f->cfg.paths && i < f->cfg.o.n_paths; i++)
		free(f->cfg.paths[i]);
	free(f->cfg.paths);
	free(f->cfg.path);
	free(f->cfg.schema_str);
}

/* ---- ranks and files -------------------------------------------------------- */

/*
 * Reads the environment variable `name` as a rank or world size into *v.
 * Returns 1 when set, 0 when unset, -EINVAL with a message when malformed.
 */
static int env_u32(const char *name, uint32_t *v, char *err, size_t errlen)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return 0;
	size_t len = strlen(s);
	if (len > 9 || strspn(s, "0123456789") != len) {
		snprintf(err, errlen, "%s=%s: expected a rank or world size (a number)", name, s);
		return -EINVAL;
	}
	*v = (uint32_t)strtoul(s, NULL, 10);
	return 1;
}

/*
 * Fills in rank and world_size when the caller left world_size 0: in a
 * rollcache mount LOCAL_RANK / LOCAL_WORLD_SIZE (one mount per node: the
 * node's processes split the node's records), else RANK / WORLD_SIZE (a
 * directory every rank sees whole); either pair falls back to the other,
 * then to 0 of 1.  0 or -EINVAL with a message.
 */
static int split_from_env(struct rc_feeder *f, char *err, size_t errlen)
{
	static const char *const pairs[2][2] = {{"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
						{"RANK", "WORLD_SIZE"}};
	struct rc_feeder_opts *o = &f->cfg.o;
	if (o->world_size)
		return 0;
	o->rank = 0;
	o->world_size = 1;
	for (int k = 0; k < 2; k++) {
		const char *const *p = pairs[f->cfg.control[0] ? k : 1 - k];
		uint32_t r = 0, w = 0;
		int hr = env_u32(p[0], &r, err, errlen);
		int hw = hr < 0 ? hr : env_u32(p[1], &w, err, errlen);
		if (hr < 0 || hw < 0)
			return -EINVAL;
		if (hw == 0 || w == 0)
			continue;
		if (r >= w) {
			snprintf(err, errlen, "%s=%u out of range for %s=%u", p[0], r, p[1], w);
			return -EINVAL;
		}
		o->rank = r;
		o->world_size = w;
		return 0;
	}
	return 0;
}

/*
 * Finds the rollcache mount (mount.c), settles the rank split, waits for
 * an empty first epoch of a mount to get data, then lists epoch 0 and
 * plans this rank's part of it.  Without a mount the producer may run
 * ahead into the next epoch.  0 or -errno with a message.
 */
static int files_first(struct rc_feeder *f, char *err, size_t errlen)
{
	fdr__mount_find(f);
	f->cfg.prefetch = f->cfg.control[0] == '\0';
	int rc = split_from_env(f, err, errlen);
	if (!rc && f->cfg.mount_epochs)
		fdr__mount_retire_read(f);
	if (!rc && f->cfg.mount_epochs)
		rc = fdr__mount_wait_data(f, err, errlen);
	if (!rc)
		rc = fdr__epoch_list(f, 0, &f->ep.lst, err, errlen);
	return rc;
}

static void files_free(struct rc_feeder *f)
{
	fdr__listing_free(&f->ep.lst);
	fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
}

/* ---- the device ---------------------------------------------------------- */

/*
 * Chooses host or device mode and pinning (opts.device, opts.pin), makes
 * the device current and creates the copy stream.  0 or -errno with a
 * message; device_close undoes it.
 */
static int device_open(struct rc_feeder *f, char *err, size_t errlen)
{
	int n = 0;
	char why[256];
	int rc = 0;

	f->cfg.device = -1;
	f->cfg.pinned = false;
	if (f->cfg.o.device < 0 && f->cfg.o.pin == 0)
		return 0;
	rc = fdr__cuda_devices(&n, why, sizeof why);
	if (rc && f->cfg.o.device < 0 && f->cfg.o.pin < 0) {
		/* host mode, pin auto: no usable CUDA device, plain memory */
		cmn_log(CMN_LOG_DEBUG, "feeder: host slots not pinned: %s", why);
		return 0;
	}
	if (rc) {
		snprintf(err, errlen, "%s%d: %s",
			 f->cfg.o.device >= 0 ? "device cuda:" : "pinned memory, device ",
			 f->cfg.o.device, why);
		return rc;
	}
	int dev = f->cfg.o.device >= 0 ? f->cfg.o.device : 0;
	if (dev >= n) {
		snprintf(err, errlen, "device cuda:%d: only %d CUDA device(s)", dev, n);
		return -ENODEV;
	}
	rc = fdr__cuda_set_device(dev, NULL);
	if (rc) {
		snprintf(err, errlen, "device cuda:%d: %s", dev, fdr__cuda_last_error());
		return rc;
	}
	f->cfg.pinned = f->cfg.o.pin != 0;
	if (f->cfg.o.device >= 0) {
		f->cfg.device = dev;
		rc = fdr__cuda_stream_create(&f->cfg.stream);
		if (rc) {
			snprintf(err, errlen, "device cuda:%d: stream: %s", dev,
				 fdr__cuda_last_error());
			return rc;
		}
	}
	return 0;
}

static void device_close(struct rc_feeder *f)
{
	if (f->cfg.stream)
		fdr__cuda_stream_destroy(f->cfg.stream);
}

/* ---- pools: chunks, lanes, window, ring ----------------------------------- */

/*
 * Gives the chunks normally in flight (window, lane queues, two per batch
 * being assembled or decoded) their buffers and record tables now, so that
 * steady state allocates nothing (see reader.c).  0 or -ENOMEM.
 */
static int chunks_warm(struct rc_feeder *f, char *err, size_t errlen)
{
	size_t warm = f->cfg.W + f->cfg.o.interleave * f->cfg.ra + 2 * (f->cfg.ndecoders + 1) + 1;
	for (size_t i = 0; i < warm && i < f->cfg.nchunks; i++) {
		struct fdr_chunk *c = &f->prod.chunks[i];
		if (fdr__chunk_reserve(f, c, FDR_CHUNK_CAP(f), 0)) {
			snprintf(err, errlen, "out of memory for %zu read chunks of %zu bytes",
				 warm, FDR_CHUNK_CAP(f));
			return -ENOMEM;
		}
		c->rec_cap = FDR_CHUNK_RECS(f);
		c->recs = malloc(c->rec_cap * sizeof *c->recs);
		if (!c->recs) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * Allocates the chunk pool, the lanes, the window and the ring (in pinned
 * memory when f->cfg.pinned).  0 or -errno with a message; pools_free
 * undoes a partial allocation.
 */
static int pools_alloc(struct rc_feeder *f, char *err, size_t errlen)
{
	size_t n = f->cfg.schema->n;
	int rc;

	f->prod.chunks = calloc(f->cfg.nchunks, sizeof *f->prod.chunks);
	f->prod.lanes = calloc(f->cfg.o.interleave, sizeof *f->prod.lanes);
	f->prod.win = calloc(f->cfg.W, sizeof *f->prod.win);
	f->ring.slots = calloc(f->cfg.S, sizeof *f->ring.slots);
	f->ring.rag_hwm = calloc(n, sizeof *f->ring.rag_hwm);
	if (!f->prod.chunks || !f->prod.lanes || !f->prod.win || !f->ring.slots ||
	    !f->ring.rag_hwm) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->cfg.o.interleave; i++)
		f->prod.lanes[i].fd = -1;
	rc = chunks_warm(f, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < f->cfg.S; i++) {
		rc = fdr__slot_init(f, &f->ring.slots[i]);
		if (rc) {
			snprintf(err, errlen, "allocating %zu ring slots of %zu bytes%s: %s",
				 f->cfg.S, f->cfg.block_len, f->cfg.pinned ? " (pinned)" : "",
				 f->cfg.device >= 0 || f->cfg.pinned ? fdr__cuda_last_error()
								     : strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static void pools_free(struct rc_feeder *f)
{
	if (f->prod.lanes) {
		fdr__lanes_close(f);
		free(f->prod.lanes);
	}
	if (f->ring.slots) {
		if (f->cfg.device >= 0 && f->cfg.stream)
			(void)fdr__cuda_stream_sync(f->cfg.stream);
		for (size_t i = 0; i < f->cfg.S; i++)
			fdr__slot_free(f, &f->ring.slots[i]);
		free(f->ring.slots);
	}
	if (f->prod.chunks) {
		for (size_t i = 0; i < f->cfg.nchunks; i++) {
			free(f->prod.chunks[i].buf);
			free(f->prod.chunks[i].recs);
		}
		free(f->prod.chunks);
	}
	free(f->prod.win);
	free(f->ring.rag_hwm);
}

/* ---- threads ------------------------------------------------------------ */

/* Starts the readers, then the decoders.  0 or -errno with a message. */
static int threads_start(struct rc_feeder *f, char *err, size_t errlen)
{
	size_t n = f->cfg.nreaders + f->cfg.ndecoders;

	f->wk.threads = calloc(n, sizeof *f->wk.threads);
	if (!f->wk.threads) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int rc =
		    pthread_create(&f->wk.threads[i], NULL,
				   i < f->cfg.nreaders ? fdr__reader_main : fdr__decoder_main, f);
		if (rc) {
			snprintf(err, errlen, "starting feeder threads: %s", strerror(rc));
			return -rc;
		}
		f->wk.nthreads++;
	}
	return 0;
}

/* Tells the threads started so far to stop and joins them. */
static void threads_stop(struct rc_feeder *f)
{
	if (!f->wk.threads)
		return;
	pthread_mutex_lock(&f->mu);
	f->wk.stop = true;
	fdr__wake(f, FDR_WAKE_ALL);
	pthread_mutex_unlock(&f->mu);
	for (size_t i = 0; i < f->wk.nthreads; i++)
		pthread_join(f->wk.threads[i], NULL);
	free(f->wk.threads);
	f->wk.threads = NULL;
}

/* ---- the feeder ------------------------------------------------------------ */

/*
 * A zeroed feeder with its mutexes and conditions.  The consumer's
 * condition runs on CLOCK_MONOTONIC, the clock of its busy deadline
 * (consumer.c).  NULL when out of memory.
 */
static struct rc_feeder *feeder_new(void)
{
	struct rc_feeder *f = calloc(1, sizeof *f);
	pthread_condattr_t ca;

	if (!f)
		return NULL;
	pthread_mutex_init(&f->mu, NULL);
	pthread_mutex_init(&f->copy_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv_cons, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&f->cv_rd, NULL);
	pthread_cond_init(&f->cv_dec, NULL);
	pthread_mutex_init(&f->counts.mu, NULL);
	f->cfg.device = -1;
	f->ep.lst.dirfd = -1;
	return f;
}

static void feeder_delete(struct rc_feeder *f)
{
	fdr__counts_free(f);
	pthread_mutex_destroy(&f->counts.mu);
	pthread_mutex_destroy(&f->mu);
	pthread_mutex_destroy(&f->copy_mu);
	pthread_cond_destroy(&f->cv_cons);
	pthread_cond_destroy(&f->cv_rd);
	pthread_cond_destroy(&f->cv_dec);
	free(f);
}

/*
 * The steps in order; each one's undo (below the ladder's label) accepts
 * the partial state its step leaves on failure.  Epoch 0 starts once the
 * pools exist; allocations are counted from there (steady state).
 */
struct rc_feeder *rc_feeder_open(const struct rc_feeder_opts *o, char *err, size_t errlen)
{
	struct rc_feeder *f;

	if (opts_check(o, err, errlen))
		return NULL;
	f = feeder_new();
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (cfg_init(f, o, err, errlen))
		goto fail_cfg;
	if (files_first(f, err, errlen))
		goto fail_files;
	if (device_open(f, err, errlen))
		goto fail_device;
	if (pools_alloc(f, err, errlen))
		goto fail_pools;
	fdr__epoch_reset(f);
	f->st.allocs = 0;
	if (threads_start(f, err, errlen))
		goto fail_threads;
	return f;

fail_threads:
	threads_stop(f);
fail_pools:
	pools_free(f);
fail_device:
	device_close(f);
fail_files:
	files_free(f);
fail_cfg:
	cfg_free(f);
	feeder_delete(f);
	return NULL;
}

void rc_feeder_close(struct rc_feeder *f)
{
	if (!f)
		return;
	threads_stop(f);
	fdr__mount_retire_restore(f);
	pools_free(f);
	device_close(f);
	files_free(f);
	cfg_free(f);
	feeder_delete(f);
}
