/*
 * rollcache/feeder.h - the native feeder: TFRecord/tf.Example (or raw
 * fixed-size records) -> batches in pinned host memory -> GPU.
 *
 * A feeder reads the files of one epoch (a directory such as
 * MOUNTPOINT/current, a glob, or a list), decodes the features its schema
 * names straight into batch slots of a ring allocated once, copies them to a
 * CUDA device when one is asked for, and hands out batches in order:
 *
 *     struct rc_feeder_opts o;
 *     rc_feeder_opts_init(&o);
 *     o.path = "/mnt/train/current";
 *     o.schema = "x:float32[1000000,3],y:int64[1]";
 *     o.batch_size = 4;
 *     struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
 *     for (;;) {
 *             struct rc_batch *b;
 *             int rc = rc_feeder_next(f, &b);
 *             if (rc <= 0) break;                 // 0: end of epoch
 *             const struct rc_tensor *x = rc_batch_get(b, "x");
 *             ... x->data (host) / x->device_data (GPU) ...
 *             rc_batch_release(b);
 *     }
 *     rc_feeder_next_epoch(f);                     // reshuffled, cache advanced
 *     rc_feeder_close(f);
 *
 * Schema strings: see docs/feeder.md (`name:dtype[shape][=default]`, dtypes
 * float32, int64, uint8, bytes; `[]` is ragged).  Fixed-shape features come
 * out as one contiguous [rows, dims...] tensor; ragged ones (and bytes) as
 * values plus rows+1 int64 offsets (element indices into values).
 *
 * Ranks.  Rank r of world_size w reads its share of every epoch's records
 * (not whole files): the epoch's files in an order shuffled with seed +
 * epoch (the same on every rank) make one stream of T records, and rank r
 * takes records [r*n, (r+1)*n) of it, n = T / w with drop_last (the last
 * T mod w records are dropped, then a last short batch) or ceil(T / w)
 * without (the last rank's share wraps to the stream's first records: pad).
 * So ranks are disjoint (but for the padding), together complete, and every
 * rank gets the same number of batches (rc_feeder_batches).  Counting T
 * takes each file's xattr user.rollcache.records (a rollcache mount's
 * files carry it: no byte is read), else reads the TFRecord framing of the
 * file once (cached: files are immutable in a mount); world_size 1 counts
 * nothing until rc_feeder_batches asks.  world_size 0 takes
 * the environment (torchrun's variables): in a rollcache mount
 * LOCAL_RANK / LOCAL_WORLD_SIZE (one mount per node: the node's local ranks
 * split the node's records), elsewhere RANK / WORLD_SIZE; without them 0 of 1.
 *
 * Mounts.  Opened on MOUNT, MOUNT/current or MOUNT/epochs/N, the feeder
 * reads MOUNT/epochs/<base + e> for its epoch e (base: opts.mount_epoch, or
 * the mount's epoch at open), never `current`, and rc_feeder_next_epoch
 * asks the mount for that epoch with "next N" (idempotent: every rank may
 * ask, the mount advances once).  An empty first epoch is waited for: once
 * data is resident the feeder asks for the next epoch (opts.wait_ms).
 *
 * Threads: rc_feeder_next, rc_feeder_next_epoch and rc_feeder_close are
 * called by one consumer thread at a time; rc_batch_release may be called
 * from any thread, in any order.  All functions return 0 or -errno unless
 * said otherwise; messages name the file, the record index and the feature.
 */
#ifndef ROLLCACHE_FEEDER_H
#define ROLLCACHE_FEEDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RC_API __attribute__((visibility("default")))
#else
#define RC_API
#endif

/* Bumped when struct rc_feeder_opts or struct rc_tensor change layout. */
#define RC_FEEDER_ABI 2 /* 2: world_size 0 = from the environment, wait_ms, mount_epoch */

#define RC_TENSOR_MAX_DIMS 9 /* batch dimension + up to 8 feature dims */

enum rc_dtype {
	RC_DT_FLOAT32 = 0,
	RC_DT_INT64 = 1,
	RC_DT_UINT8 = 2,
	RC_DT_BYTES = 3, /* uint8 values + offsets */
};

enum rc_format {
	RC_FORMAT_TFRECORD = 0, /* tf.Example in TFRecord framing; GZIP auto-detected */
	RC_FORMAT_RAW = 1,	/* files are concatenated fixed-size records */
};

enum rc_compression {
	RC_COMPRESSION_AUTO = 0, /* per file, by its first bytes (docs/feeder.md "Formats") */
	RC_COMPRESSION_NONE = 1,
	RC_COMPRESSION_GZIP = 2,
	RC_COMPRESSION_ZLIB = 3, /* TensorFlow's ZLIB: zlib-wrapped deflate */
};

/*
 * Options.  Always start from rc_feeder_opts_init(); zero/NULL fields mean
 * "default" as written next to them.  Strings are copied by rc_feeder_open.
 */
struct rc_feeder_opts {
	uint32_t abi;		  /* RC_FEEDER_ABI (set by rc_feeder_opts_init) */
	const char *path;	  /* a directory, a glob, or one file (or NULL and paths) */
	const char *const *paths; /* or a list of files, n_paths long */
	size_t n_paths;
	int32_t format;		  /* enum rc_format; default tfrecord */
	int32_t compression;	  /* enum rc_compression; default auto */
	const char *schema;	  /* required */
	uint64_t batch_size;	  /* required, >= 1 */
	bool shuffle;		  /* per-epoch file order + record shuffle window */
	bool drop_last;		  /* drop a last batch smaller than batch_size */
	bool verify_crc;	  /* check payload CRC32C (default true) */
	uint64_t seed;		  /* shuffle seed; epoch e uses seed + e */
	uint32_t rank;		  /* this consumer's part of each epoch's records ... */
	uint32_t world_size;	  /* ... of world_size (see "Ranks"); 0: from the environment */
	uint32_t threads;	  /* decoder threads; 0: 2 (1 on a machine with 2 CPUs) */
	uint32_t readers;	  /* reader threads; 0: 1 */
	uint32_t ring_slots;	  /* batches in flight; 0: 4 */
	uint32_t shuffle_window;  /* read chunks mixed by the shuffle; 0: 8 */
	uint32_t interleave;	  /* files read side by side; 0: 4 with shuffle, 1 without */
	uint64_t read_size;	  /* bytes per pread (one chunk); 0: 4 MiB */
	uint64_t ragged_hint;	  /* initial bytes per row for ragged values; 0: 256 */
	int32_t device;		  /* CUDA device ordinal, or -1: host memory only */
	int32_t pin;		  /* host slots pinned (cudaHostAlloc): -1 auto = when a CUDA device
				   * exists, also in host mode; 0 never; 1 always (error without CUDA) */
	void *consumer_stream;	  /* cudaStream_t the consumer uses (NULL: legacy default) */
	uint32_t busy_timeout_ms; /* next() waits this long for a held slot to come back; 0: 10 s */
	uint32_t wait_ms;	  /* on a mount: how long open waits for an empty epoch to get
				   * data; 0: 600 s */
	int64_t mount_epoch;	  /* on a mount: the mount's epoch that is this feeder's epoch 0;
				   * -1 (default): `current` at open, or N for MOUNT/epochs/N */
};

/*
 * One feature of a batch.  Fixed features: data holds rows * product(dims)
 * elements, shape = [rows, dims...], offsets NULL.  Ragged and bytes
 * features: ndim 1, shape[0] = total values, data the values; offsets has
 * rows + 1 entries (offsets[0] = 0) and row i is values[offsets[i] ..
 * offsets[i+1]).  Sequence features (`sequence x:int64[10]`, SequenceExample
 * feature_lists): ndim 1 + step dims, shape = [total steps, step dims...],
 * offsets count steps: row i's steps are values[offsets[i] .. offsets[i+1])
 * (tf.RaggedTensor.from_row_splits(values, offsets) is [rows, (steps), ...]).
 * device_* are the same on the GPU (NULL in host mode);
 * offsets live on both.  Valid until rc_batch_release.
 */
struct rc_tensor {
	const char *name;
	int32_t dtype; /* enum rc_dtype */
	int32_t ndim;
	int64_t shape[RC_TENSOR_MAX_DIMS];
	void *data;	   /* host (pinned when pinning) */
	void *device_data; /* device pointer or NULL */
	uint64_t nbytes;   /* bytes of data */
	int64_t *offsets;  /* ragged: rows + 1 host offsets; else NULL */
	int64_t *device_offsets;
	int32_t device; /* CUDA ordinal of device_data, -1 none */
	int32_t ragged; /* 1 for ragged / bytes */
};

struct rc_feeder;
struct rc_batch;

/*
 * Fills *o with the defaults above (abi set, verify_crc true, device -1,
 * pin -1, world_size 0 = from the environment, mount_epoch -1).
 */
RC_API void rc_feeder_opts_init(struct rc_feeder_opts *o);

/*
 * Opens a feeder and starts reading epoch 0 in the background.  Returns the
 * feeder, or NULL with a one-line message in err (bad schema, no files,
 * unusable device...).  Nothing is left behind on failure.
 */
RC_API struct rc_feeder *rc_feeder_open(const struct rc_feeder_opts *o, char *err, size_t errlen);

/*
 * Waits for the next batch of the epoch.  Returns 1 and *out (give it back
 * with rc_batch_release), 0 at the end of the epoch, or -errno after a
 * failure (message: rc_feeder_error); a failure stops the epoch.
 * When every ring slot is held by the consumer, waits up to
 * opts.busy_timeout_ms for one to be released (by another thread), then
 * returns -EBUSY.
 */
RC_API int rc_feeder_next(struct rc_feeder *f, struct rc_batch **out);

/* Rows in the batch (batch_size, or fewer for a last batch). */
RC_API uint64_t rc_batch_rows(const struct rc_batch *b);
/* Epoch and index of the batch within it. */
RC_API uint64_t rc_batch_epoch(const struct rc_batch *b);
RC_API uint64_t rc_batch_index(const struct rc_batch *b);

/* The feature called name, or NULL. */
RC_API const struct rc_tensor *rc_batch_get(const struct rc_batch *b, const char *name);
/* Number of features and the i-th (schema order), for generic consumers. */
RC_API size_t rc_batch_count(const struct rc_batch *b);
RC_API const struct rc_tensor *rc_batch_at(const struct rc_batch *b, size_t i);

/*
 * Returns the batch's slot to the ring.  Any thread; NULL is fine.  With a
 * device, the slot is not overwritten before work already queued on the
 * consumer stream (opts.consumer_stream) completes.
 */
RC_API void rc_batch_release(struct rc_batch *b);

/*
 * Ends the current epoch (batches not yet handed out are dropped; batches
 * held stay valid until released) and starts the next, reshuffled with
 * seed + epoch.  When it reads a rollcache mount's epochs it first asks
 * the mount for the next one ("next N" to MOUNT/.rollcache/control, so
 * that all ranks together advance it once) and lists MOUNT/epochs/N; for
 * a glob or list inside a mount it writes "next".  Elsewhere the feeder already listed and started
 * producing the next epoch when the current one's last record was drawn, so this call only switches
 * to it (unless the current epoch is abandoned early). Returns 0 or -errno (message:
 * rc_feeder_error).
 */
RC_API int rc_feeder_next_epoch(struct rc_feeder *f);

/* The current epoch number (0 for the first). */
RC_API uint64_t rc_feeder_epoch(const struct rc_feeder *f);

/*
 * Batches this rank gets in the current epoch (the same on every rank of
 * the split; at most the rc_feeder_truncate limit).  Consumer thread.  With
 * world_size 1 the first call of an epoch counts its records (xattr or framing pass,
 * cached).  Returns 0 and *out, or -errno (message: rc_feeder_error).
 */
RC_API int rc_feeder_batches(struct rc_feeder *f, uint64_t *out);

/* Batches handed out in the current epoch so far (its next batch index). */
RC_API uint64_t rc_feeder_position(const struct rc_feeder *f);

/* The rank and world size in use (after the environment defaults). */
RC_API void rc_feeder_split(const struct rc_feeder *f, uint32_t *rank, uint32_t *world_size);

/*
 * The mount's epoch that the current epoch reads (base + epoch), or -1 when
 * the feeder does not read a rollcache mount's epochs.
 */
RC_API int64_t rc_feeder_mount_epoch(const struct rc_feeder *f);

/*
 * Asks the rollcache mount to reach epoch mount_epoch ("next N" on its
 * control file): the mount advances once however many processes ask, and
 * an epoch at or below the current one returns at once.  Blocks until the
 * mount is there.  The feeder itself does not move (rc_feeder_seek does).
 * Returns 0, -ENOTSUP when the feeder is not in a mount, or -errno.
 */
RC_API int rc_feeder_advance_to(struct rc_feeder *f, uint64_t mount_epoch);

/*
 * Starts epoch `epoch` at batch index `batch` (resume: the batches before
 * it are assembled from the same records as without the seek and dropped
 * undecoded, so batch `batch` onward are what a run without interruption
 * got).  mount_epoch >= 0 rebases the feeder so that `epoch` reads that
 * mount epoch (a saved state); -1 keeps the base.  In a mount it first asks
 * for the mount epoch (rc_feeder_advance_to).  The current epoch is
 * abandoned; held batches stay valid until released.  Consumer thread.
 * Returns 0 or -errno (message: rc_feeder_error).
 */
RC_API int rc_feeder_seek(struct rc_feeder *f, uint64_t epoch, uint64_t batch, int64_t mount_epoch);

/*
 * Resumes epoch `epoch` from a state saved at another world size: every
 * rank of a split of from_world_size had from_batch batches of the epoch
 * (synchronous data-parallel training).  The feeder replays those ranks'
 * batches (their records are read and drawn again, not decoded) to learn
 * which records they consumed; the epoch's other records, in the epoch's
 * stream order, are split among this world size as an epoch is (see
 * "Ranks": disjoint but for the padding, together complete, the same
 * number of batches on every rank), and batch `batch` of this rank's part
 * comes next (0 after a fresh resume; a state saved in such an epoch
 * resumes with its own batch at the same world size).  rc_feeder_batches
 * counts this rank's part.  The next epoch is split as usual.
 * mount_epoch as in rc_feeder_seek.  Consumer thread.  Returns 0, -EBUSY
 * when every ring slot is held (the replay needs one), or -errno (message:
 * rc_feeder_error).
 */
RC_API int rc_feeder_seek_resplit(struct rc_feeder *f, uint64_t epoch, uint64_t batch,
				  int64_t mount_epoch, uint32_t from_world_size,
				  uint64_t from_batch);

/*
 * Ends the current epoch after `batches` batches (no effect when it has
 * fewer).  For ranks whose epochs differ in size - one mount per node, each
 * node with its own records: after an all-reduce MIN of rc_feeder_batches
 * over all ranks, every rank calls this with the minimum.  Reset by the
 * next epoch.  Consumer thread.
 */
RC_API void rc_feeder_truncate(struct rc_feeder *f, uint64_t batches);

/* The last failure's message, "" if none.  Valid until the next call. */
RC_API const char *rc_feeder_error(const struct rc_feeder *f);

/* Counters since open. */
struct rc_feeder_stats {
	uint64_t records;      /* records decoded into batches */
	uint64_t batches;      /* batches handed out */
	uint64_t bytes_read;   /* file bytes read (compressed size for gzip) */
	uint64_t record_bytes; /* payload bytes decoded */
	uint64_t wait_ns;      /* consumer time blocked in rc_feeder_next */
	uint64_t h2d_bytes;    /* bytes copied to the device */
	uint64_t h2d_ns;       /* copy time measured by events (device mode) */
	uint64_t allocations;  /* slot/chunk (re)allocations after open */
	uint32_t files;	       /* files of the epoch being produced, this rank */
	int32_t device;	       /* device in use, -1 host */
	int32_t pinned;	       /* 1 if host slots are pinned */
	uint32_t ring_slots;   /* slots of the ring (opts.ring_slots or its default) */
};
RC_API void rc_feeder_stats(const struct rc_feeder *f, struct rc_feeder_stats *out);

/*
 * The plain pinned cudaMemcpy peak of this machine, for comparison with a
 * feeder's h2d_bytes / h2d_ns: copies `len` bytes host-to-device from
 * pinned memory once to warm up, then `iters` times, and returns GB/s
 * (1e9 bytes/s) in *gbps.  Independent of any feeder; any thread (it makes
 * `device` current for the call and restores the previous one on success).
 * Returns 0, or -ENODEV (no CUDA, no device; built without CUDA) or -EIO
 * with a message in err; *gbps is unchanged on failure.
 */
RC_API int rc_feeder_h2d_peak(int device, size_t len, int iters, double *gbps, char *err,
			      size_t errlen);

/*
 * Stops the threads and frees everything.  Batches still held must have
 * been released before (their memory goes with the feeder).  NULL is fine.
 */
RC_API void rc_feeder_close(struct rc_feeder *f);

#ifdef __cplusplus
}
#endif

#endif
