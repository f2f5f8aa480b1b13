/*
 * split.c - the record-level rank split: which records of an epoch this
 * rank reads.
 *
 * The epoch's files, in the epoch's order (sorted, then shuffled with
 * seed + epoch: the same on every rank), make one stream of T records.
 * Rank r of w takes the records [r*n, (r+1)*n) of that stream, where
 * n = floor(T / w) with drop_last and ceil(T / w) without; positions past T
 * wrap to the stream's start (padding: the last ranks repeat at most w - 1
 * records).  So the shares are disjoint but for the padding, together they
 * are the whole epoch, and every rank has n records, hence the same number
 * of batches.  A share is a short list of *segments* (file, first record,
 * its byte offset, count): whole files in the middle, at most a partial
 * file at each end, and one more piece when it wraps.  With world_size 1
 * the share is every file whole and nothing is counted.
 *
 * Counting.  Finding a rank's boundaries needs the records of every file of
 * the epoch.  A file that carries the xattr user.rollcache.records (every
 * file of a rollcache mount: the catalog's count, DESIGN "The mount") is
 * counted by that one getxattr(2), which reads none of its bytes, so
 * counting never retires a file under `retire = read` and each file is
 * read once per epoch, by the lane that reads its records.  Without the
 * xattr (ENODATA, or a filesystem without xattrs) the file is counted by
 * reading it.  A TFRecord file is counted by walking its headers with the
 * frame walker (cmn_tfr_walk_next, headers_only): one pread of up to 64 KiB
 * yields every header inside it, and a record longer than that costs one
 * small pread for its header, skipping the payload (the length's CRC is
 * checked, the payload's is not).  GZIP files are inflated
 * to count them; raw files are size / record size.  Counts are cached by
 * (device, inode, size, mtime): a rollcache mount's files are immutable
 * (DESIGN invariant 1) and keep their inode across epochs, so each shard is
 * counted once per feeder however many epochs list it.  The figure is in
 * docs/feeder.md.  Files must not change while a feeder reads them.
 *
 * Locking: f->counts.mu guards the cache, a leaf lock; the rest works on
 * the caller's arrays.  Runs without f->mu (the consumer lists, or the one
 * decoder that lists ahead).
 */
#include "feeder/feeder_i.h"

#include "common/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define WALK_BLOCK ((size_t)64 << 10) /* bytes of one framing read */

/* ---- the cache -------------------------------------------------------- */

static bool count_lookup(struct rc_feeder *f, const struct fdr_count *key, uint64_t *records)
{
	bool hit = false;
	pthread_mutex_lock(&f->counts.mu);
	for (size_t i = 0; i < f->counts.n && !hit; i++) {
		const struct fdr_count *c = &f->counts.v[i];
		if (c->ino == key->ino && c->dev == key->dev && c->size == key->size &&
		    c->mtime_ns == key->mtime_ns) {
			*records = c->records;
			hit = true;
		}
	}
	pthread_mutex_unlock(&f->counts.mu);
	return hit;
}

/* Remembers a count; a failure to grow only forgets it. */
static void count_store(struct rc_feeder *f, const struct fdr_count *c)
{
	pthread_mutex_lock(&f->counts.mu);
	if (f->counts.n == f->counts.cap) {
		size_t cap = f->counts.cap ? f->counts.cap * 2 : 256;
		struct fdr_count *v = realloc(f->counts.v, cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&f->counts.mu);
			return;
		}
		f->counts.v = v;
		f->counts.cap = cap;
	}
	f->counts.v[f->counts.n++] = *c;
	pthread_mutex_unlock(&f->counts.mu);
}

void fdr__counts_free(struct rc_feeder *f)
{
	free(f->counts.v);
	f->counts.v = NULL;
	f->counts.n = f->counts.cap = 0;
}

/* ---- walking the framing ------------------------------------------------ */

/*
 * Walks the TFRecord headers of fd (size bytes) from the start up to record
 * `stop` or the end.  Returns 0 with *count (records walked) and *off (the
 * offset where the walk stopped), or -errno with a message naming the file
 * and record.
 */
static int walk_headers(int fd, const char *name, uint64_t size, uint64_t stop, uint64_t *count,
			uint64_t *off, char *err, size_t errlen)
{
	uint8_t *buf = malloc(WALK_BLOCK);
	struct cmn_tfr_walk w = {.buf = buf, .headers_only = true}; /* the default cap */
	struct cmn_tfr_frame fr;
	uint64_t n = 0, last = 0;
	int rc = 0;

	if (!buf) {
		snprintf(err, errlen, "%s: out of memory counting records", name);
		return -ENOMEM;
	}
	while (n < stop && w.base + w.pos < size) {
		int step = cmn_tfr_walk_next(&w, &fr);
		if (step == 0) {
			/* the header is not in buf: read from it; after a long record only it */
			size_t want = last > WALK_BLOCK / 2 ? 4096 : WALK_BLOCK;
			ssize_t r;
			do
				r = pread(fd, buf, want, (off_t)fr.offset);
			while (r < 0 && errno == EINTR);
			if (r < 0) {
				rc = -errno;
				snprintf(err, errlen,
					 "%s: counting records: read at %" PRIu64 ": %s", name,
					 fr.offset, strerror(-rc));
				goto out;
			}
			if ((size_t)r < CMN_TFR_HEADER_SIZE)
				goto truncated;
			w.base = fr.offset;
			w.len = (size_t)r;
			w.pos = 0;
			continue;
		}
		if (step < 0) {
			snprintf(err, errlen,
				 "%s: record %" PRIu64 " (offset %" PRIu64
				 "): corrupt framing (length crc or size)",
				 name, n, fr.offset);
			rc = -EBADMSG;
			goto out;
		}
		if (fr.offset + fr.need > size)
			goto truncated;
		last = fr.need;
		n++;
	}
	*count = n;
	*off = w.base + w.pos;
	goto out;
truncated:
	snprintf(err, errlen,
		 "%s: record %" PRIu64 " (offset %" PRIu64
		 "): file ends inside the record (truncated)",
		 name, n, fr.offset);
	rc = -EPROTO;
out:
	free(buf);
	return rc;
}

enum cmn_tfr_compression fdr__compression(const struct rc_feeder *f, int fd)
{
	switch (f->cfg.o.compression) {
	case RC_COMPRESSION_NONE:
		return CMN_TFR_NONE;
	case RC_COMPRESSION_GZIP:
		return CMN_TFR_GZIP;
	case RC_COMPRESSION_ZLIB:
		return CMN_TFR_ZLIB;
	default:
		return cmn_tfr_detect_fd(fd);
	}
}

/* Whether fd is read through an inflater (GZIP or ZLIB). */
static bool is_gzip(const struct rc_feeder *f, int fd)
{
	return fdr__compression(f, fd) != CMN_TFR_NONE;
}

/* Counts a GZIP or ZLIB TFRecord file by inflating it. */
static int count_gzip(const struct rc_feeder *f, int fd, const char *name, uint64_t *count,
		      char *err, size_t errlen)
{
	struct cmn_tfr_opts to = {
	    .max_record = CMN_TFR_DEFAULT_MAX_RECORD,
	    .read_size = f->cfg.read_size,
	    .skip_crc = true,
	    .compression = fdr__compression(f, fd),
	    .name = name,
	};
	struct cmn_tfr_reader *r;
	struct cmn_tfr_record rec;
	uint64_t n = 0;
	int rc = cmn_tfr_reader_open_fd(&r, fd, &to, err, errlen);
	if (rc)
		return rc;
	while ((rc = cmn_tfr_next(r, &rec)) == 1)
		n++;
	if (rc < 0)
		snprintf(err, errlen, "%s (counting records)", cmn_tfr_reader_error(r));
	cmn_tfr_reader_free(r);
	*count = n;
	return rc < 0 ? rc : 0;
}

/*
 * The record count the file's FDR_XATTR_RECORDS says (decimal ASCII, no
 * NUL).  Returns 1 with *records, 0 when the file has no such xattr or its
 * filesystem none at all (count by reading), or -errno with a message: the
 * file is gone (fdr__open_error) or the value is not a count.
 */
static int count_xattr(const struct rc_feeder *f, const char *name, uint64_t *records, char *err,
		       size_t errlen)
{
	char v[32];
	ssize_t n = getxattr(name, FDR_XATTR_RECORDS, v, sizeof v - 1);
	if (n < 0) {
		int e = errno;
		if (e == ENODATA || e == ENOTSUP || e == EOPNOTSUPP || e == ENOSYS)
			return 0;
		if (e != ERANGE) /* ERANGE: longer than any count, refused below */
			return fdr__open_error(f, name, -e, err, errlen);
		n = 0;
	}
	if (n > 0 && n <= 20)
		v[n] = '\0';
	if (n > 0 && n <= 20 && strspn(v, "0123456789") == (size_t)n) {
		errno = 0;
		unsigned long long c = strtoull(v, NULL, 10);
		if (errno == 0) {
			*records = (uint64_t)c;
			return 1;
		}
	}
	snprintf(err, errlen, "%s: xattr %s is not a record count (expected decimal digits)", name,
		 FDR_XATTR_RECORDS);
	return -EBADMSG;
}

/*
 * The records of one file: its xattr, the cache, or counted by reading.
 * 0 or -errno with a message.
 */
static int count_file(struct rc_feeder *f, const char *name, uint64_t *records, char *err,
		      size_t errlen)
{
	struct stat sb;
	int rc = count_xattr(f, name, records, err, errlen);
	if (rc)
		return rc < 0 ? rc : 0;

	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb)) {
		rc = fdr__open_error(f, name, -errno, err, errlen);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	struct fdr_count key = {
	    .dev = (uint64_t)sb.st_dev,
	    .ino = (uint64_t)sb.st_ino,
	    .size = (uint64_t)sb.st_size,
	    .mtime_ns = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec,
	};
	if (count_lookup(f, &key, records)) {
		close(fd);
		return 0;
	}
	uint64_t off;
	if (f->cfg.o.format == RC_FORMAT_RAW) {
		key.records = key.size / f->cfg.raw_size; /* a remainder is the reader's error */
	} else if (is_gzip(f, fd)) {
		rc = count_gzip(f, fd, name, &key.records, err, errlen);
	} else {
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* headers only: no readahead */
		rc = walk_headers(fd, name, key.size, UINT64_MAX, &key.records, &off, err, errlen);
	}
	close(fd);
	if (rc)
		return rc;
	count_store(f, &key);
	*records = key.records;
	return 0;
}

int fdr__count_files(struct rc_feeder *f, char *const *files, size_t n, uint64_t *total, char *err,
		     size_t errlen)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t c;
		int rc = count_file(f, files[i], &c, err, errlen);
		if (rc)
			return rc;
		t += c;
	}
	*total = t;
	return 0;
}

uint64_t fdr__batches_of(const struct rc_feeder *f, uint64_t records)
{
	return f->cfg.o.drop_last ? records / f->cfg.B : (records + f->cfg.B - 1) / f->cfg.B;
}

/* ---- the plan -------------------------------------------------------------- */

/*
 * The byte offset of record `first` of a plain TFRecord or raw file (GZIP
 * files are skipped into by their reader: 0).  0 or -errno with a message.
 */
static int record_offset(struct rc_feeder *f, const char *name, uint64_t first, uint64_t *off,
			 char *err, size_t errlen)
{
	*off = 0;
	if (first == 0)
		return 0;
	if (f->cfg.o.format == RC_FORMAT_RAW) {
		*off = first * f->cfg.raw_size;
		return 0;
	}
	struct stat sb;
	int rc = 0;
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb)) {
		rc = fdr__open_error(f, name, -errno, err, errlen);
	} else if (!is_gzip(f, fd)) {
		uint64_t n;
		rc = walk_headers(fd, name, (uint64_t)sb.st_size, first, &n, off, err, errlen);
		if (!rc && n < first) {
			snprintf(err, errlen,
				 "%s: %" PRIu64 " records, expected at least %" PRIu64
				 " (did the file change?)",
				 name, n, first + 1);
			rc = -ESTALE;
		}
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Appends a segment.  0 or -ENOMEM. */
static int seg_push(struct fdr_seg **v, size_t *n, size_t *cap, struct fdr_seg s)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct fdr_seg *nv = realloc(*v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = s;
	return 0;
}

/*
 * Cuts stream positions [a, a + len) (a < total; len <= total) into
 * segments over the files' counts, wrapping past the end.
 */
static int cut_range(struct rc_feeder *f, char *const *files, const uint64_t *cnt, size_t n,
		     uint64_t total, uint64_t a, uint64_t len, struct fdr_seg **v, size_t *nv,
		     size_t *cap, char *err, size_t errlen)
{
	uint64_t start = 0;
	size_t i = 0;
	while (len > 0) {
		while (i < n && a >= start + cnt[i]) { /* the file holding position a */
			start += cnt[i];
			i++;
		}
		if (i == n) { /* past the end: wrap to the stream's start */
			a -= total;
			start = 0;
			i = 0;
			continue;
		}
		uint64_t first = a - start;
		uint64_t take = cnt[i] - first < len ? cnt[i] - first : len;
		struct fdr_seg s = {.file = (uint32_t)i, .first = first, .n = take};
		int rc = record_offset(f, files[i], first, &s.off, err, errlen);
		if (!rc)
			rc = seg_push(v, nv, cap, s);
		if (rc) {
			if (rc == -ENOMEM)
				snprintf(err, errlen, "out of memory planning the rank split");
			return rc;
		}
		a += take;
		len -= take;
	}
	return 0;
}

int fdr__split_plan(struct rc_feeder *f, char *const *files, size_t n, struct fdr_seg **segs,
		    size_t *nsegs, uint64_t *records, char *err, size_t errlen)
{
	return fdr__split_plan_rank(f, files, n, f->cfg.o.world_size, f->cfg.o.rank, segs, nsegs,
				    records, err, errlen);
}

int fdr__split_plan_rank(struct rc_feeder *f, char *const *files, size_t n, uint32_t w, uint32_t r,
			 struct fdr_seg **segs, size_t *nsegs, uint64_t *records, char *err,
			 size_t errlen)
{
	struct fdr_seg *v = NULL;
	size_t nv = 0, cap = 0;
	uint64_t *cnt = NULL, total = 0;
	int rc = 0;

	if (n > UINT32_MAX) {
		snprintf(err, errlen, "%zu files in one epoch: at most %u", n, UINT32_MAX);
		return -E2BIG;
	}
	if (w == 1) {
		for (size_t i = 0; !rc && i < n; i++)
			rc = seg_push(&v, &nv, &cap,
				      (struct fdr_seg){.file = (uint32_t)i, .n = FDR_SEG_ALL});
		if (rc) {
			snprintf(err, errlen, "out of memory planning the epoch");
			free(v);
			return rc;
		}
		*segs = v;
		*nsegs = nv;
		*records = FDR_UNKNOWN;
		/*
		 * In a mount, each file's count is an xattr: taken now, before
		 * any read of the epoch, since a file read to its end under
		 * retire = read leaves the epoch (a count taken later, by
		 * len(), would find it gone).  Elsewhere counting reads the
		 * files: only when asked (rc_feeder_batches).
		 */
		if (f->cfg.mount_epochs && fdr__count_files(f, files, n, &total, err, errlen) == 0)
			*records = total;
		return 0;
	}
	cnt = calloc(n ? n : 1, sizeof *cnt);
	if (!cnt) {
		snprintf(err, errlen, "out of memory planning the rank split");
		return -ENOMEM;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		rc = fdr__count_files(f, &files[i], 1, &cnt[i], err, errlen);
		total += cnt[i];
	}
	uint64_t share = f->cfg.o.drop_last ? total / w : (total + w - 1) / w;
	if (!rc && share > 0)
		rc = cut_range(f, files, cnt, n, total, (uint64_t)r * share % total, share, &v, &nv,
			       &cap, err, errlen);
	free(cnt);
	if (rc) {
		free(v);
		return rc;
	}
	*segs = v;
	*nsegs = nv;
	*records = share;
	return 0;
}

/* ---- the rest of an epoch (resume at another world size) ------------------- */

/* The position of the q-th (from 0) unmarked bit of bits[0..total); q < unmarked. */
static uint64_t nth_unmarked(const uint8_t *bits, uint64_t total, uint64_t q)
{
	uint64_t i = 0;
	for (; i + 64 <= total; i += 64) { /* whole words first */
		uint64_t word;
		memcpy(&word, bits + (i >> 3), sizeof word);
		uint64_t free_bits = 64 - (uint64_t)__builtin_popcountll(word);
		if (q < free_bits)
			break;
		q -= free_bits;
	}
	for (; i < total; i++)
		if (!fdr__bit(bits, i) && q-- == 0)
			return i;
	return total;
}

int fdr__split_plan_rest(struct rc_feeder *f, char *const *files, size_t n, const uint64_t *cnt,
			 uint64_t total, const uint8_t *excl, struct fdr_seg **segs, size_t *nsegs,
			 uint64_t *records, char *err, size_t errlen)
{
	uint32_t w = f->cfg.o.world_size, r = f->cfg.o.rank;
	struct fdr_seg *v = NULL;
	size_t nv = 0, cap = 0;
	uint64_t marked = 0;
	int rc = 0;

	for (uint64_t i = 0; i < total; i++)
		marked += fdr__bit(excl, i);
	uint64_t rest = total - marked;
	uint64_t share = f->cfg.o.drop_last ? rest / w : (rest + w - 1) / w;
	/* positions [q, q + share) of the unmarked records, wrapping (share <= rest) */
	uint64_t q = share ? (uint64_t)r * share % rest : 0, len = share;
	while (!rc && len > 0) {
		uint64_t take = len < rest - q ? len : rest - q;
		uint64_t a = nth_unmarked(excl, total, q);
		uint64_t z = nth_unmarked(excl, total, q + take - 1) + 1;
		rc = cut_range(f, files, cnt, n, total, a, z - a, &v, &nv, &cap, err, errlen);
		len -= take;
		q = 0;
	}
	if (rc) {
		free(v);
		return rc;
	}
	*segs = v;
	*nsegs = nv;
	*records = share;
	return 0;
}
