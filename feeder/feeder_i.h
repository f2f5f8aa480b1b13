/*
 * feeder_i.h - internals shared by the feeder's files.
 *
 * The parts, in pipeline order:
 *
 *   reader threads --pread--> chunks --lane queues--> window --shuffle-->
 *   decoder threads --cmn_ex_decode--> slot (pinned) --cudaMemcpyAsync-->
 *   device --event--> rc_feeder_next --> consumer --> rc_batch_release
 *
 *   open.c      options, sizes, memory, threads: rc_feeder_open / _close
 *   workers.c   the reader and decoder loops, and who wakes whom
 *   reader.c    files -> chunks (pread, TFRecord framing, GZIP, raw)
 *   window.c    the chunk pool and the shuffle window (picking records)
 *   slot.c      one batch of the ring: memory, decoding, device copy
 *   consumer.c  rc_feeder_next, rc_batch_*, statistics
 *   epoch.c     rc_feeder_next_epoch, running ahead, per-epoch errors
 *   files.c     listing, shuffle, the mount's control file
 *   split.c     the record-level rank split: counting records, segments
 *   resplit.c   resuming an epoch at another world size
 *   mount.c     a rollcache mount: its epochs, asking for one, waiting for data
 *   cuda.c      the CUDA runtime behind dlopen (cuda_i.h)
 *
 * Locking, once for all files: one mutex f->mu guards every field marked
 * "protected by f->mu"; f->cfg is immutable after open; statistics and
 * f->ring.rag_hwm are atomics.  f->copy_mu is never held with f->mu, so
 * there is no lock order.  f->counts.mu (split.c's cache of record counts)
 * is a leaf, never held while taking another lock.  Conditions: workers.c.
 *
 * Terms.  A *chunk* is one large read of one file: a buffer plus the records
 * framed in it.  A *lane* reads a fixed subset of the epoch's files (file j
 * goes to lane j % lanes) into chunks, a few ahead.  The *window* holds up
 * to `shuffle_window` chunks taken from the lanes in round-robin order; the
 * shuffle picks records uniformly among the window's pending records.  A
 * *segment* is a run of consecutive records of one file that this rank
 * reads (split.c); lanes read segments, j going to lane j % lanes.  A
 * *slot* is one batch of the ring: fixed-size tensors allocated once
 * (pinned when there is a CUDA device), ragged values that grow rarely, and
 * the device copy.  Because chunks enter the window in a fixed order and
 * batches take records in a fixed order, the sequence of batches depends
 * only on the files, the seed and the options, not on thread timing.
 */
#ifndef RC_FEEDER_FEEDER_I_H
#define RC_FEEDER_FEEDER_I_H

#include "rollcache/feeder.h"

#include "common/schema.h"
#include "common/tfrecord.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cmn_tfr_reader;

/* A record inside a chunk's buffer. */
struct fdr_rec {
	uint64_t off;	/* payload offset in chunk->buf */
	uint64_t len;	/* payload bytes */
	uint64_t index; /* record index within its file (for messages) */
};

struct fdr_chunk {
	uint8_t *buf; /* allocated on first use, grows to the largest record */
	size_t cap;
	struct fdr_rec *recs; /* [nrec]; pending ones are the last `remaining` */
	size_t nrec, rec_cap;
	uint32_t file;		/* index into feeder->files */
	size_t remaining;	/* f->mu: records not yet taken by a batch */
	size_t refs;		/* f->mu: records taken, not yet decoded */
	struct fdr_chunk *next; /* f->mu: free list or lane queue */
};

/* Records a segment runs to when it takes the rest of its file. */
#define FDR_SEG_ALL UINT64_MAX
/* A record count not known (world_size 1 counts nothing until asked). */
#define FDR_UNKNOWN UINT64_MAX

/* A run of consecutive records of one file that this rank reads (split.c). */
struct fdr_seg {
	uint32_t file;	/* index into the epoch's files */
	uint64_t first; /* index of its first record within the file */
	uint64_t off;	/* byte offset of that record (plain TFRecord and raw; 0 for gzip) */
	uint64_t n;	/* records, or FDR_SEG_ALL: to the end of the file */
};

struct fdr_lane {
	uint32_t id;
	/* Reader state: touched only by the reader that set busy (or with all
	 * workers paused). */
	uint64_t k; /* next segment of this lane: segs[id + k * lanes] */
	bool open;
	int fd;
	uint32_t cur_file;
	uint64_t off;	    /* next read offset (plain and raw) */
	uint64_t rec_index; /* index of the next record in the file */
	uint64_t left;	    /* records left in the segment, or FDR_SEG_ALL */
	uint64_t fsize;
	bool gz;
	struct cmn_tfr_reader *tfr; /* gzip input */
	const uint8_t *held;	    /* gzip: a record read but not yet placed */
	size_t held_len;
	/* f->mu: */
	struct fdr_chunk *qh, *qt; /* chunks read, not yet in the window */
	size_t qn;
	bool busy, done;
	bool finished; /* f->mu: done and emptied; skipped by the round robin */
	int err_rc;    /* f->mu: the read that ended the lane failed */
	char err[1024];
};

struct fdr_pick {
	struct fdr_chunk *c;
	struct fdr_rec r;
};

struct fdr_ragged {
	uint8_t *h;		/* values, host */
	void *d;		/* values, device */
	size_t cap, dcap, used; /* bytes */
};

enum fdr_slot_state { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_HELD };

/* A slot is the batch the consumer holds: struct rc_batch is this. */
struct rc_batch {
	struct rc_feeder *f;
	int state;	/* f->mu */
	uint32_t gen;	/* f->mu: epoch generation it was filled for */
	uint64_t index; /* f->mu: batch index within the epoch */
	uint64_t epoch;
	uint64_t rows;
	struct fdr_pick *picks; /* [batch_size] */
	char **files;		/* the file list its records came from (messages) */
	uint8_t *host;		/* fixed features and offsets, one block */
	void *dev;
	struct fdr_ragged *rag;		       /* [schema->n], used for ragged features */
	struct rc_tensor *t;		       /* [schema->n] */
	void **fixed;			       /* [schema->n] scratch for the decoder */
	void *ev_done, *ev_start, *ev_release; /* CUDA events */
	bool released_once;		       /* ev_release was recorded at least once */
	uint64_t h2d_bytes;
};

/* Per generation parity: the failure with the lowest batch index of that epoch. */
struct fdr_err {
	int rc;
	uint64_t batch;
	char msg[1024];
};

/*
 * What rc_feeder_open fixed before the threads started (open.c).  Read by
 * every thread without a lock; never written after open.
 */
struct fdr_cfg {
	struct rc_feeder_opts o; /* normalised: defaults filled in, strings below */
	char *path;
	char **paths; /* [o.n_paths] when the caller gave a list */
	char *schema_str;
	struct cmn_schema *schema;
	size_t B;	   /* batch size */
	size_t W;	   /* window: chunks mixed by the shuffle (1 without) */
	size_t S;	   /* ring slots */
	size_t ra;	   /* chunks queued per lane */
	size_t nchunks;	   /* chunks in the pool */
	size_t read_size;  /* bytes per pread */
	size_t raw_size;   /* RC_FORMAT_RAW: bytes per record */
	size_t *fixed_off; /* [n] offsets of fixed tensors / ragged offsets in a slot block */
	size_t block_len;  /* bytes of one slot block */
	size_t nreaders, ndecoders;
	char control[4096]; /* MOUNT/.rollcache/control, "" if none */
	bool retire_asked;  /* "retire read" was sent: "retire config" at close */
	char mount[4096];   /* the mount's root, "" if none */
	bool mount_epochs;  /* reads MOUNT/epochs/<base + epoch> (mount.c) */
	bool prefetch;	    /* produce the next epoch early (not in a rollcache mount) */
	int device;	    /* CUDA ordinal, -1 host */
	bool pinned;	    /* chunks and slots in pinned host memory */
	void *stream;	    /* the copy stream (device mode) */
};

/* The worker threads and how the consumer stops or pauses them (workers.c, epoch.c). */
struct fdr_workers {
	pthread_t *threads; /* [nthreads]; open.c and rc_feeder_close only */
	size_t nthreads;
	bool stop;	       /* protected by f->mu */
	bool paused;	       /* protected by f->mu */
	unsigned active;       /* protected by f->mu: workers working outside the lock */
	unsigned wake_pending; /* protected by f->mu: FDR_WAKE_* owed once the assembly
				* lets go of f->mu (window.c) */
};

/* One epoch's input, as listed and planned (fdr__epoch_list). */
struct fdr_listing {
	char **files; /* the epoch's files, in its order */
	size_t nfiles;
	struct fdr_seg *segs; /* this rank's segments of them (split.c) */
	size_t nsegs;
	uint64_t records; /* this rank's records, or FDR_UNKNOWN */
	int dirfd;	  /* MOUNT/epochs/N held open while it is read (keeps it listed), or -1 */
	/* An epoch resumed at another world size (resplit.c), else NULL: */
	uint8_t *excl;	     /* bit per stream position: consumed before the resume */
	uint64_t *first_pos; /* [nfiles + 1] stream position of each file's first record */
};

/* Bit i of a bitmap of stream positions. */
static inline bool fdr__bit(const uint8_t *bits, uint64_t i)
{
	return (bits[i >> 3] >> (i & 7)) & 1;
}

/*
 * Epochs and their file lists (epoch.c), all protected by f->mu.  The
 * consumer is at generation `gen` (epoch `epoch`); the producer (readers,
 * window, assembly) at `pgen`, which is gen, or gen + 1 once it ran ahead
 * into the next epoch.
 */
struct fdr_epochs {
	struct fdr_listing lst; /* the producer's epoch (readers read it while active) */
	uint64_t limit;		/* the consumer's epoch ends after this many batches */
	int64_t base;		/* consumer thread only: the mount epoch of epoch 0 */
	char **files_old;	/* the previous list, kept while old_decoding > 0 */
	size_t nfiles_old;
	unsigned decoding, old_decoding; /* batches being decoded; of them, of an older pgen */
	uint64_t epoch, pepoch;
	uint32_t gen, pgen;
	bool advancing; /* a decoder lists the next epoch's files */
	bool cons_done; /* the consumer's epoch has cons_total batches ... */
	uint64_t cons_total;
	bool ahead_done; /* ... and the producer's epoch ahead, ahead_total */
	uint64_t ahead_total;
	struct fdr_err errs[2]; /* [gen & 1]: only gen and gen + 1 are ever live */
};

/*
 * The producer of generation pgen: chunk pool, lanes, window, shuffle state
 * (window.c; reset by epoch.c).  Pointers to the arrays are fixed at open;
 * everything else is protected by f->mu, except a lane's reader state (see
 * struct fdr_lane).
 */
struct fdr_producer {
	struct fdr_chunk *chunks;      /* [cfg.nchunks] */
	struct fdr_chunk *free_chunks; /* protected by f->mu */
	struct fdr_lane *lanes;	       /* [cfg.o.interleave] */
	size_t nlanes;		       /* protected by f->mu: lanes in use this epoch */
	size_t lanes_done;	       /* protected by f->mu */
	size_t rr;		       /* protected by f->mu: the lane whose turn it is */
	struct fdr_chunk **win;	       /* [cfg.W] */
	size_t nwin, win_pending;      /* protected by f->mu: chunks, records pending */
	uint64_t rng;		       /* protected by f->mu (the assembling decoder) */
	bool assembling;	       /* protected by f->mu: a decoder picks a batch */
	bool produced_all;	       /* protected by f->mu: pgen's batches are all assembled */
	uint64_t next_batch;	       /* protected by f->mu: the next batch index of pgen */
	uint64_t skip;		       /* protected by f->mu: batches below this index are
					* assembled and dropped undecoded (rc_feeder_seek) */
	uint8_t *replay;	       /* protected by f->mu: while another split's batches are
					* replayed (resplit.c), the stream positions of the
					* records picked below skip are marked here, and
					* production ends at skip; else NULL */
	const uint64_t *replay_pos;    /* [nfiles + 1] with replay: files' first positions */
};

/* The ring of slots and the consumer's side of it (slot.c, consumer.c). */
struct fdr_ring {
	struct rc_batch *slots; /* [cfg.S]; each slot's state is protected by f->mu */
	uint64_t next_out;	/* protected by f->mu: the consumer's next batch index */
	char err_out[1024];	/* the consumer thread's copy (rc_feeder_error) */
	size_t *rag_hwm;	/* [n] largest ragged capacity any slot needed (atomics) */
};

/* Counters since open: atomics (__atomic_*, relaxed). */
struct fdr_stats {
	uint64_t records, batches, bytes_read, record_bytes, wait_ns, h2d_bytes, h2d_ns;
	uint64_t allocs; /* every allocation after open */
};

/* Records per file, by identity (split.c); files are immutable in a mount. */
struct fdr_count {
	uint64_t dev, ino, size, mtime_ns, records;
};
struct fdr_counts {
	pthread_mutex_t mu; /* a leaf: guards the table */
	struct fdr_count *v;
	size_t n, cap;
};

struct rc_feeder {
	struct fdr_cfg cfg; /* immutable after open */
	struct fdr_counts counts;

	/* One mutex and one condition per kind of waiter (workers.c, Locking). */
	pthread_mutex_t mu;
	pthread_cond_t cv_rd;	 /* readers wait here */
	pthread_cond_t cv_dec;	 /* decoders wait here */
	pthread_cond_t cv_cons;	 /* the consumer waits here */
	pthread_mutex_t copy_mu; /* enqueueing a slot's device copies (never with mu) */

	struct fdr_workers wk;
	struct fdr_epochs ep;
	struct fdr_producer prod;
	struct fdr_ring ring;
	struct fdr_stats st;
};

/* Whom a state change may concern: readers, decoders, the consumer (workers.c). */
enum { FDR_WAKE_RD = 1, FDR_WAKE_DEC = 2, FDR_WAKE_CONS = 4, FDR_WAKE_ALL = 7 };

/* workers.c */
/* Broadcasts the conditions of the waiters in `who` (FDR_WAKE_*); f->mu held or not. */
void fdr__wake(struct rc_feeder *f, unsigned who);
/* Unlocks f->mu, then wakes `who` and what the assembly left in f->wk.wake_pending. */
void fdr__unlock_wake(struct rc_feeder *f, unsigned who);
/* Thread bodies; arg is the feeder.  They return when f->wk.stop is set. */
void *fdr__reader_main(void *arg);
void *fdr__decoder_main(void *arg);

/* window.c (f->mu held by the assembling decoder) */
/* Returns chunk c, emptied, to the free list. */
void fdr__chunk_put_free(struct rc_feeder *f, struct fdr_chunk *c);
/* Lets go of the first n records picked into slot s (their chunks may come free). */
void fdr__picks_drop(struct rc_feeder *f, struct rc_batch *s, size_t n);
/*
 * Tops the window up to W chunks, taking the lanes in round-robin order.
 * Returns 1 when records can be picked, 0 when the epoch's records are all
 * taken, -EAGAIN when paused or stopping, or the epoch's error.  May wait on
 * f->cv_dec.
 */
int fdr__window_topup(struct rc_feeder *f);
/* Takes one record from the window (f->prod.win_pending > 0). */
struct fdr_pick fdr__window_pick(struct rc_feeder *f);

/* slot.c */
/*
 * Allocates slot s's buffers (host block, ragged values, device block and
 * events in device mode).  Returns 0 or -errno; fdr__slot_free frees a
 * partially initialised slot.  Open only.
 */
int fdr__slot_init(struct rc_feeder *f, struct rc_batch *s);
void fdr__slot_free(struct rc_feeder *f, struct rc_batch *s);
/*
 * Decodes the slot's picked records into it and starts the device copy.
 * Runs without f->mu, by the decoder that filled the slot.  Returns 0 or
 * -errno with a message naming the file, record and feature.
 */
int fdr__slot_decode(struct rc_feeder *f, struct rc_batch *s, char *err, size_t errlen);

/* epoch.c (f->mu held unless said otherwise) */
/*
 * Records a failure of generation gen at batch index `batch`.  The earliest
 * batch wins, so the consumer gets every batch before it and then the same
 * error whatever the thread timing was.  Ignored for an epoch already left.
 */
void fdr__error_set(struct rc_feeder *f, int rc, const char *msg, uint32_t gen, uint64_t batch);
/* Production of pgen is complete with `total` batches. */
void fdr__production_done(struct rc_feeder *f, uint64_t total);
/* Slot s's decoding is over: the file list it names may be freed. */
void fdr__decode_finished(struct rc_feeder *f, struct rc_batch *s);
/*
 * Resets the whole pipeline for epoch f->ep.epoch over f->ep.files;
 * workers paused (or not started).  Held slots stay held; everything else
 * returns to the pools.
 */
void fdr__epoch_reset(struct rc_feeder *f);
/*
 * Makes epoch `epoch` with listing *l (taken over when rc is 0) the one the
 * paused workers produce, from batch `skip`, or records rc and err as the
 * epoch's error; unpauses the workers.  f->mu not held.  Returns rc.
 */
int fdr__epoch_install(struct rc_feeder *f, uint64_t epoch, struct fdr_listing *l, uint64_t skip,
		       int rc, const char *err);
/*
 * Starts producing epoch pepoch + 1 while the consumer still reads pgen
 * (never in a rollcache mount).  Called by a decoder; drops f->mu while
 * listing and counts as active meanwhile.
 */
void fdr__producer_advance(struct rc_feeder *f);
/* Closes every lane's file; workers paused or stopped, no lock needed. */
void fdr__lanes_close(struct rc_feeder *f);
/*
 * Lists epoch `epoch` (MOUNT/epochs/<base + epoch> in a mount), orders it
 * with seed + epoch and plans this rank's segments into *out.  Takes no
 * lock.  0 or -errno with a message; *out is untouched on failure.
 */
int fdr__epoch_list(struct rc_feeder *f, uint64_t epoch, struct fdr_listing *out, char *err,
		    size_t errlen);
/* Frees a listing's arrays and closes its directory; leaves it empty. */
void fdr__listing_free(struct fdr_listing *l);
/* Pauses the workers and waits until none works outside the lock; f->mu held. */
void fdr__workers_pause(struct rc_feeder *f);

/* files.c */
/*
 * Lists a directory (regular files not starting with '.'), a glob, one file,
 * or copies the caller's list; sorted unless a list.  An empty result is
 * -ENOENT unless allow_empty.  0 or -errno with a message; *out is the
 * caller's (fdr__files_free).
 */
int fdr__files_list(const char *path, const char *const *paths, size_t n_paths, bool allow_empty,
		    char ***out, size_t *out_n, char *err, size_t errlen);
void fdr__files_free(char **files, size_t n);
void fdr__files_shuffle(char **files, size_t n, uint64_t seed);
/*
 * The message for a listed file that could not be opened (rc < 0): under a
 * rollcache mount a vanished file (-ENOENT) was retired by the mount after
 * it was fully read in this epoch (DESIGN invariant 3), and the message
 * says so; otherwise "<path>: <strerror>".  Returns rc.
 */
int fdr__open_error(const struct rc_feeder *f, const char *name, int rc, char *err, size_t errlen);
/* MOUNT/.rollcache/control above path (or first_file) into out.  0 or -ENOENT. */
int fdr__find_control(const char *path, const char *first_file, char *out, size_t outlen);
/* Writes cmd to the control file; returns when the daemon answered.  0 or -errno. */
int fdr__advance_cache(const char *control, const char *cmd, char *err, size_t errlen);

/* split.c */
/* The xattr a rollcache mount puts on every file: its record count, decimal ASCII. */
#define FDR_XATTR_RECORDS "user.rollcache.records"
/*
 * This rank's segments of an epoch whose files (in the epoch's order) are
 * files[0..n): all of every file with world_size 1 (*records FDR_UNKNOWN),
 * else the rank's share of the records (counted, see split.c).  *segs is
 * the caller's (free).  0 or -errno with a message.  No f->mu needed.
 */
int fdr__split_plan(struct rc_feeder *f, char *const *files, size_t n, struct fdr_seg **segs,
		    size_t *nsegs, uint64_t *records, char *err, size_t errlen);
/* The same for rank r of world size w (resplit.c replays other splits). */
int fdr__split_plan_rank(struct rc_feeder *f, char *const *files, size_t n, uint32_t w, uint32_t r,
			 struct fdr_seg **segs, size_t *nsegs, uint64_t *records, char *err,
			 size_t errlen);
/*
 * This rank's segments of the records of files[0..n) (cnt[i] records each,
 * total in all) that are not marked in excl: the unmarked records, in the
 * stream's order, split as usual among this world size.  Segments span
 * original positions, marked ones included (the reader skips them);
 * *records is the rank's unmarked records.  0 or -errno with a message.
 */
int fdr__split_plan_rest(struct rc_feeder *f, char *const *files, size_t n, const uint64_t *cnt,
			 uint64_t total, const uint8_t *excl, struct fdr_seg **segs, size_t *nsegs,
			 uint64_t *records, char *err, size_t errlen);
/* The records of files[0..n) (cached per file).  0 or -errno with a message. */
/*
 * The compression of an open input file: the option, or with auto
 * cmn_tfr_detect_fd() (the detection the sampler and `check` use).
 */
enum cmn_tfr_compression fdr__compression(const struct rc_feeder *f, int fd);

int fdr__count_files(struct rc_feeder *f, char *const *files, size_t n, uint64_t *total, char *err,
		     size_t errlen);
/* Batches that `records` records make (drop_last: full ones only). */
uint64_t fdr__batches_of(const struct rc_feeder *f, uint64_t records);
void fdr__counts_free(struct rc_feeder *f);

/* mount.c */
/*
 * Finds the rollcache mount above the input (cfg.control, cfg.mount) and
 * whether the feeder reads its epochs (cfg.mount_epochs, f->ep.base).
 * Never fails: no mount leaves them empty.
 */
void fdr__mount_find(struct rc_feeder *f);
/* MOUNT/epochs/<mepoch> into out.  0 or -ENAMETOOLONG. */
int fdr__mount_epoch_dir(const struct rc_feeder *f, int64_t mepoch, char *out, size_t outlen);
/*
 * A feeder with world_size 1 drives the mount's epochs and reads each file
 * of an epoch once: it asks for retire = read (docs/mount.md), so a victim's
 * room goes back to the samplers as soon as it was read.  Several ranks read
 * parts of every file, so one rank reaching a file's end must retire
 * nothing: they ask for retire = boundary.  Errors are ignored.
 */
void fdr__mount_retire_read(struct rc_feeder *f);
/* At close: the mount goes back to its configured retire mode ("retire config"). */
void fdr__mount_retire_restore(struct rc_feeder *f);
/* Asks the mount for epoch mepoch ("next N" [wait]); blocks until there.  0 or -errno. */
int fdr__mount_ask(const struct rc_feeder *f, int64_t mepoch, bool wait, char *err, size_t errlen);
/*
 * At open: while MOUNT/epochs/<base> has no file, waits for data to be
 * resident and asks for the next epoch, moving f->ep.base (all ranks move
 * alike), up to opts.wait_ms.  0 or -ETIMEDOUT / -errno with a message.
 */
int fdr__mount_wait_data(struct rc_feeder *f, char *err, size_t errlen);
uint64_t fdr__rng_next(uint64_t *s);
uint64_t fdr__rng_below(uint64_t *s, uint64_t n);

/* reader.c */
/*
 * Fills chunk c with the next records of lane l (one file per chunk).
 * Returns 1 (c holds >= 1 record), 0 (the lane has no more files), or -errno
 * with a message naming the file and record.  Called without f->mu by the
 * reader that owns the lane.
 */
int fdr__lane_fill(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, char *err,
		   size_t errlen);
/* A chunk's usual capacity: a read, room to complete a cut record, and the
 * up to 4 KiB a plain read is shifted by to be page-aligned (reader.c). */
#define FDR_CHUNK_CAP(f) ((f)->cfg.read_size + (f)->cfg.read_size / 4 + 4096)
/* Initial record table of a chunk. */
#define FDR_CHUNK_RECS(f) ((f)->cfg.read_size / 1024 > 64 ? (f)->cfg.read_size / 1024 : 64)
/* Grows chunk c's buffer to `need` bytes, keeping `keep`.  0 or -ENOMEM. */
int fdr__chunk_reserve(struct rc_feeder *f, struct fdr_chunk *c, size_t need, size_t keep);
/* Closes the lane's file and forgets its position (workers paused). */
void fdr__lane_reset(struct fdr_lane *l);
/* Memory for a chunk or a slot: pinned when f->pinned.  0 or -ENOMEM. */
int fdr__mem_alloc(struct rc_feeder *f, void **p, size_t len);
void fdr__mem_free(struct rc_feeder *f, void *p);

#endif
