/*
 * verify.h - integrity of sealed files after admission.
 *
 * DESIGN invariant 5 checks every record's CRC32C when it is admitted; this
 * module checks it again after that, because bytes at rest can change (a
 * bad disk, a stray write into CACHE_DIR).  Three users:
 *
 *   - the FUSE read path (fs_read.c): a file's first daemon-served read
 *     checks the whole file before any byte of it is returned
 *     (cfs_verify_read): a TFRecord file's records, each frame and payload
 *     CRC, and their digest against the catalog's (shards.records_crc,
 *     carried by the snapshot); a raw object's CRC-32C against the
 *     catalog's; a file that fails answers EIO to every read, is marked
 *     corrupt in memory and its id queued for the daemon.
 *     Passthrough is allowed only once the whole file passed
 *     (cfs_verify_done), so the kernel never serves unchecked bytes;
 *   - the daemon's scrubber (daemon/scrub.c) and `rollcache check
 *     --cache-dir` (cli/cmd_check.c): every record of a file against the
 *     catalog's (offset, length, crc) rows (struct cfs_vcheck).
 *
 * What a record check compares: the 12-byte header (length and its masked
 * CRC), the payload's CRC32C against the footer's stored CRC and, when the
 * catalog's row is given, the length and the CRC the catalog recorded at
 * admission.  Records must tile the file: a byte outside every record is
 * corruption too.  A format=raw file has no framing: its one sample row
 * holds the CRC-32C of the whole object, computed as it was admitted, and
 * the whole file is checked against it (cfs_verify_raw_fd).
 *
 * Errors: 0 or -errno; -EBADMSG means "the bytes are corrupt" (the offset of
 * the first bad record and a one-line reason are returned), any other
 * -errno is an I/O failure that says nothing about the bytes.
 */
#ifndef RC_CACHEFS_VERIFY_H
#define RC_CACHEFS_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cachefs/catalog.h"

struct cfs_efile;
struct cmn_events;

/* Room for a reason ("record at 1234: payload crc 0x... != stored 0x...") */
#define CFS_VERIFY_WHY_MAX 160

/* ---- whole-file checks against the catalog (scrubber, check) --------- */

/*
 * An incremental check of one TFRecord file against its catalog samples
 * (sorted by offset, as cfs_catalog_samples_of() returns them).  Fields
 * are the caller's to read; set up with cfs_vcheck_init().
 */
struct cfs_vcheck {
	int fd;			    /* borrowed */
	uint64_t size;		    /* the file's size (catalog bytes) */
	const struct cfs_sample *s; /* borrowed, n rows */
	size_t n;
	size_t i;		      /* next sample to check */
	uint64_t pos;		      /* where sample i must start */
	uint64_t bytes_read;	      /* file bytes read so far */
	uint64_t bad_off;	      /* on -EBADMSG: offset of the bad record */
	char why[CFS_VERIFY_WHY_MAX]; /* on failure: what is wrong */
};

void cfs_vcheck_init(struct cfs_vcheck *v, int fd, uint64_t size, const struct cfs_sample *s,
		     size_t n);

/*
 * Checks samples until at least `budget` bytes were read in this call or
 * the file ends (a record is never split).  buf (cap >= 64 KiB advised) is
 * scratch.  Returns 1 when more remains, 0 when the whole file passed,
 * -EBADMSG (v->bad_off, v->why), or -errno for an I/O error (v->why).
 * Any thread; v is the caller's.
 */
int cfs_vcheck_step(struct cfs_vcheck *v, uint64_t budget, void *buf, size_t cap);

/*
 * Offline check of one file of a cache directory (`rollcache check
 * --cache-dir`): the file of si under cache_dir exists, has the catalog's
 * size and, for a TFRecord file, every record matches the catalog
 * (cfs_vcheck over the whole file); for a raw object, the CRC-32C of the
 * whole file matches its sample row's.  buf/cap as for cfs_vcheck_step.  *bytes_read gets the bytes
 * read.  Returns 0 (good), -EBADMSG (corrupt, truncated or missing: why says which), or -errno (why
 * says what failed).  Reads the catalog through cat (read-only is fine); changes nothing.
 */
int cfs_verify_cache_file(struct cfs_catalog *cat, const char *cache_dir,
			  const struct cfs_shard_info *si, void *buf, size_t cap,
			  uint64_t *bytes_read, char *why, size_t whylen);

/*
 * A raw object's check: the CRC-32C of the `size` bytes of fd (read in
 * buf/cap) equals `want` (taken at admission, kept in the catalog).  Adds
 * the bytes read to *bytes_read.  Returns 0, -EBADMSG (why says the two
 * CRCs, or that the file is short) or -errno.
 */
int cfs_verify_raw_fd(int fd, uint64_t size, uint32_t want, void *buf, size_t cap,
		      uint64_t *bytes_read, char *why, size_t whylen);

/* ---- the read path (fs_read.c) ---------------------------------------- */

struct cfs_verifier;

/*
 * A mount's verifier: lock stripes for the first-pass checks, the queue of
 * files found corrupt (taken by the daemon), counters.  `events` (borrowed,
 * may be NULL) gets `bit` posted when a corrupt file is queued.
 * Returns 0 or -ENOMEM.
 */
int cfs_verifier_new(struct cfs_verifier **out, struct cmn_events *events, uint32_t bit);
void cfs_verifier_free(struct cfs_verifier *v); /* NULL is ignored */

/*
 * An open of f (before passthrough is chosen): when the backing file's
 * ctime differs from the one seen at f's first open - something wrote to
 * it or its inode - f's checked range goes back to 0, so its bytes are
 * checked again before the daemon serves one and before it is passed
 * through (V5).  A NULL v, or an unchecked kind, does nothing.
 */
void cfs_verify_open(struct cfs_verifier *v, struct cfs_efile *f, int dirfd);

/*
 * Before serving [off, off + len) of f from fd (f's backing file): on f's
 * first daemon-served read, checks the whole file (verify.c V2: TFRecord
 * frames, CRCs and digest; a raw object's CRC) under a lock of f's stripe.
 * Returns 0: the file passed; -EIO: it is corrupt (f is marked, its id
 * queued the first time, a line logged), for every range; other -errno:
 * reading failed (f not marked).  Later reads cost two atomic loads.  Any
 * thread.
 */
int cfs_verify_read(struct cfs_verifier *v, struct cfs_efile *f, int fd, uint64_t off,
		    uint64_t len);

/* Whether every byte of f passed and nothing was found corrupt. */
bool cfs_verify_done(const struct cfs_efile *f);

/* Whether f was found corrupt (reads reaching the bad record get EIO). */
bool cfs_verify_corrupt(const struct cfs_efile *f);

/*
 * Marks f corrupt at `off` (the scrubber found a bad record there): from
 * now on daemon-served reads reaching off get EIO and no new handle of f is
 * passed through.  Not queued (the caller handles the file).  Any thread.
 */
void cfs_verify_mark(struct cfs_efile *f, uint64_t off);

/* Takes up to max queued corrupt file ids (oldest first).  Returns how many. */
size_t cfs_verifier_take(struct cfs_verifier *v, int64_t *ids, size_t max);

/* Counters since the verifier was made (relaxed reads). */
struct cfs_verifier_stat {
	uint64_t bytes;	   /* file bytes checked by the read path */
	uint64_t files;	   /* files whose every record passed on the read path */
	uint64_t corrupt;  /* files the read path found corrupt */
	uint64_t dropped;  /* corrupt ids not queued (queue full; the scrubber finds them) */
	uint64_t rechecks; /* files checked again: their ctime changed after a check (V5) */
};
void cfs_verifier_stat(const struct cfs_verifier *v, struct cfs_verifier_stat *st);

#endif
