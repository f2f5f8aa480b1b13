/*
 * reader.c - files -> chunks: large preads, TFRecord framing, GZIP, raw.
 *
 * Owns a lane's open file and the framing of what it reads.  Plain TFRecord
 * files are read with pread(2) of read_size bytes into the chunk; records are
 * framed in place by the frame walker (cmn_tfr_walk_next: header, cap,
 * payload CRC32C) and the payloads stay where they were read: decoders read
 * them from the chunk (no copy).  A
 * record cut by the end of the read is completed with one more pread when
 * it fits the chunk's capacity (1.25 * read_size, or the largest record
 * seen); otherwise the next chunk starts at it, so at most the cut part of
 * one record per chunk is read twice.  GZIP files go through the framing library's fd
 * reader (inflate) and their records are copied into the chunk.  Raw files
 * are cut into records of the schema's fixed size.
 *
 * Capacity policy: the chunks a pipeline keeps in flight (window, lane
 * queues, two per batch being assembled or decoded) are allocated at open
 * with 1.25 * read_size bytes and max(64, read_size / 1024) record entries; a buffer grows (to the
 * record size rounded up to 1 MiB) only when one record does not fit, and a spare chunk gets its
 * buffer when it is first needed.  So allocations stop once the largest record has been seen.
 *
 * Locking: none here; the caller owns the lane (busy flag) and the chunk.
 */
#include "feeder/feeder_i.h"

#include "feeder/cuda_i.h"

#include "common/log.h"
#include "common/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB	  ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define FDR_PAGE  ((size_t)4096)

/*
 * Memory for read chunks and (unpinned) slots: buffers of 1 MiB or more
 * are 2 MiB-aligned, rounded up to 2 MiB and advised for transparent huge
 * pages.  The decoders read records scattered over the whole window (32 MB
 * with the shuffle defaults) and the kernel copies every read into these
 * pages: with 4 KiB pages most of those touches miss the TLB, which costs
 * a two-level page walk in a VM.  *len is raised to the size allocated.
 * Release with free().  NULL when out of memory.
 */
static void *big_alloc(size_t *len)
{
	if (*len < MIB)
		return malloc(*len);
	size_t n = (*len + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	void *p = aligned_alloc(HUGE_PAGE, n);
	if (!p)
		return NULL;
	(void)madvise(p, n, MADV_HUGEPAGE); /* a hint: ignored where THP is off */
	*len = n;
	return p;
}

int fdr__mem_alloc(struct rc_feeder *f, void **p, size_t len)
{
	if (len == 0)
		len = 64;
	if (f->cfg.pinned) {
		/* pinned via cudaHostAlloc (see cuda.c); only at open or on rare growth */
		return fdr__cuda_host_alloc(p, len);
	}
	len = (len + 4095) & ~(size_t)4095;
	*p = len >= MIB ? big_alloc(&len) : aligned_alloc(4096, len);
	return *p ? 0 : -ENOMEM;
}

void fdr__mem_free(struct rc_feeder *f, void *p)
{
	if (!p)
		return;
	if (f->cfg.pinned) {
		fdr__cuda_host_free(p);
	} else {
		free(p);
	}
}

/* Ensures c->buf holds at least `need` bytes, keeping the first `keep`. */
int fdr__chunk_reserve(struct rc_feeder *f, struct fdr_chunk *c, size_t need, size_t keep)
{
	if (c->cap >= need)
		return 0;
	size_t ncap = need < FDR_CHUNK_CAP(f) ? FDR_CHUNK_CAP(f) : (need + MIB - 1) & ~(MIB - 1);
	uint8_t *nb = big_alloc(&ncap);
	if (!nb)
		return -ENOMEM;
	if (keep)
		memcpy(nb, c->buf, keep);
	free(c->buf);
	c->buf = nb;
	c->cap = ncap;
	__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
	cmn_log(CMN_LOG_DEBUG, "feeder: chunk %p buffer grows to %zu bytes", (void *)c, ncap);
	return 0;
}

static int chunk_add(struct rc_feeder *f, struct fdr_chunk *c, uint64_t off, uint64_t len,
		     uint64_t index)
{
	if (c->nrec == c->rec_cap) {
		size_t nc = c->rec_cap ? c->rec_cap * 2 : FDR_CHUNK_RECS(f);
		struct fdr_rec *nr = realloc(c->recs, nc * sizeof *nr);
		if (!nr)
			return -ENOMEM;
		c->recs = nr;
		c->rec_cap = nc;
		__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
		cmn_log(CMN_LOG_DEBUG, "feeder: chunk %p record table grows to %zu", (void *)c, nc);
	}
	c->recs[c->nrec++] = (struct fdr_rec){.off = off, .len = len, .index = index};
	return 0;
}

/* pread until len bytes or end of file; returns bytes read or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Reads up to len bytes of the lane's file at off into dst (fewer only at its
 * end), counted in bytes_read.  Returns the bytes read, or -errno with a
 * message naming the file and offset.
 */
static ssize_t lane_read(struct rc_feeder *f, struct fdr_lane *l, void *dst, size_t len,
			 uint64_t off, char *err, size_t errlen)
{
	ssize_t n = pread_full(l->fd, dst, len, off);
	if (n < 0)
		snprintf(err, errlen, "%s: read at offset %" PRIu64 ": %s",
			 f->ep.lst.files[l->cur_file], off, strerror((int)-n));
	else
		__atomic_add_fetch(&f->st.bytes_read, (uint64_t)n, __ATOMIC_RELAXED);
	return n;
}

void fdr__lane_reset(struct fdr_lane *l)
{
	if (l->tfr)
		cmn_tfr_reader_free(l->tfr);
	l->tfr = NULL;
	l->held = NULL;
	if (l->open && l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->open = false;
	l->k = 0;
	l->off = 0;
	l->rec_index = 0;
}

static void lane_close_file(struct rc_feeder *f, struct fdr_lane *l)
{
	if (l->gz)
		__atomic_add_fetch(&f->st.bytes_read, l->fsize, __ATOMIC_RELAXED);
	if (l->tfr)
		cmn_tfr_reader_free(l->tfr);
	l->tfr = NULL;
	l->held = NULL;
	close(l->fd);
	l->fd = -1;
	l->open = false;
}

static int lane_open_next(struct rc_feeder *f, struct fdr_lane *l, char *err, size_t errlen)
{
	size_t si = l->id + l->k * f->prod.nlanes;
	struct stat sb;
	const char *name;
	int rc;

	if (si >= f->ep.lst.nsegs)
		return 0;
	l->k++;
	const struct fdr_seg *seg = &f->ep.lst.segs[si];
	size_t fi = seg->file;
	name = f->ep.lst.files[fi];
	l->fd = open(name, O_RDONLY | O_CLOEXEC);
	if (l->fd < 0)
		return fdr__open_error(f, name, -errno, err, errlen);
	if (fstat(l->fd, &sb)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", name, strerror(-rc));
		close(l->fd);
		return rc;
	}
	(void)posix_fadvise(l->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	l->open = true;
	l->cur_file = (uint32_t)fi;
	l->off = seg->off;
	l->rec_index = seg->first;
	l->left = seg->n;
	l->fsize = (uint64_t)sb.st_size;
	l->gz = false;
	if (f->cfg.o.format == RC_FORMAT_RAW) {
		if (l->fsize % f->cfg.raw_size) {
			snprintf(err, errlen,
				 "%s: size %" PRIu64
				 " is not a multiple of the raw record size %zu "
				 "(the schema's fixed features)",
				 name, l->fsize, f->cfg.raw_size);
			lane_close_file(f, l);
			return -EINVAL;
		}
		return 1;
	}
	enum cmn_tfr_compression comp = fdr__compression(f, l->fd);
	l->gz = comp == CMN_TFR_GZIP || comp == CMN_TFR_ZLIB;
	if (l->gz) {
		struct cmn_tfr_opts to = {
		    .max_record = CMN_TFR_DEFAULT_MAX_RECORD,
		    .read_size = f->cfg.read_size,
		    .skip_crc = !f->cfg.o.verify_crc,
		    .compression = comp,
		    .name = name,
		};
		rc = cmn_tfr_reader_open_fd(&l->tfr, l->fd, &to, err, errlen);
		if (rc) {
			lane_close_file(f, l);
			return rc;
		}
		/* a segment that starts inside the file: inflate up to it */
		for (uint64_t i = 0; i < seg->first; i++) {
			struct cmn_tfr_record rec;
			rc = cmn_tfr_next(l->tfr, &rec);
			if (rc <= 0) {
				snprintf(err, errlen, "%s: skipping to record %" PRIu64 ": %s",
					 name, seg->first,
					 rc ? cmn_tfr_reader_error(l->tfr)
					    : "the file ends before it");
				lane_close_file(f, l);
				return rc ? rc : -ESTALE;
			}
		}
	}
	return 1;
}

/* Counts one record of the lane's segment. */
static void lane_took(struct fdr_lane *l)
{
	if (l->left != FDR_SEG_ALL)
		l->left--;
}

/*
 * Plain TFRecord: frame records in place.
 *
 * The read lands at c->buf + skew, skew = the file offset modulo 4 KiB, so
 * that the kernel copies each page-cache page to a page-aligned place: with
 * source and destination at different offsets within a page, the copy (rep
 * movsb) ran markedly slower.  The walker walks c->buf: its pos and len count
 * from c->buf, and its base, the file offset of c->buf, is l->off - skew.
 */
static int fill_plain(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, char *err,
		      size_t errlen)
{
	const char *name = f->ep.lst.files[l->cur_file];
	size_t skew = (size_t)(l->off & (FDR_PAGE - 1));
	size_t want = f->cfg.read_size;
	struct cmn_tfr_walk w = {
	    .base = l->off - skew, .pos = skew, .check_crc = f->cfg.o.verify_crc};
	struct cmn_tfr_frame fr;
	ssize_t n;
	int rc;

	if (l->left == 0)
		return 0;				    /* the segment is done */
	rc = fdr__chunk_reserve(f, c, FDR_CHUNK_CAP(f), 0); /* >= skew + want */
	if (rc)
		goto nomem;
	n = lane_read(f, l, c->buf + skew, want, l->off, err, errlen);
	if (n < 0)
		return (int)n;
	bool eof = (size_t)n < want;
	w.buf = c->buf;
	w.len = skew + (size_t)n;
	while (l->left) {
		rc = cmn_tfr_walk_next(&w, &fr);
		if (rc == 0) {
			/* complete a cut record when it fits (or is the only one) */
			if (eof || fr.need == CMN_TFR_HEADER_SIZE ||
			    (w.pos > skew && w.pos + fr.need > c->cap))
				break;
			rc = fdr__chunk_reserve(f, c, w.pos + fr.need, w.len);
			if (rc)
				goto nomem;
			w.buf = c->buf; /* grown when the record is the only one */
			n = lane_read(f, l, c->buf + w.len, w.pos + fr.need - w.len, w.base + w.len,
				      err, errlen);
			if (n < 0)
				return (int)n;
			w.len += (size_t)n;
			eof = w.pos + fr.need > w.len;
			continue;
		}
		if (rc == -EBADMSG) {
			snprintf(err, errlen,
				 "%s: record %" PRIu64 " (offset %" PRIu64
				 "): payload crc mismatch (corrupt record of %" PRIu64 " bytes)",
				 name, l->rec_index, fr.offset, fr.len);
			return rc;
		}
		if (rc < 0) {
			snprintf(err, errlen, "%s: record %" PRIu64 " (offset %" PRIu64 "): %s",
				 name, l->rec_index, fr.offset,
				 rc == -EMSGSIZE ? "length above the 256 MiB cap"
						 : "length crc mismatch (corrupt framing)");
			return rc;
		}
		rc = chunk_add(f, c, (uint64_t)(fr.data - c->buf), fr.len, l->rec_index++);
		if (rc)
			goto nomem;
		lane_took(l);
	}
	if (eof && w.pos < w.len && l->left) {
		snprintf(err, errlen,
			 "%s: record %" PRIu64 " (offset %" PRIu64
			 "): file ends inside the record (truncated)",
			 name, l->rec_index, w.base + w.pos);
		return -EPROTO;
	}
	l->off = w.base + w.pos;
	return c->nrec > 0 ? 1 : 0;
nomem:
	snprintf(err, errlen, "%s: out of memory for a read chunk", name);
	return -ENOMEM;
}

/* GZIP TFRecord: inflate through the framing library, copy records in. */
static int fill_gzip(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, char *err,
		     size_t errlen)
{
	size_t fill = 0;
	int rc = fdr__chunk_reserve(f, c, FDR_CHUNK_CAP(f), 0);

	if (rc)
		goto nomem;
	while (fill < f->cfg.read_size && l->left) {
		if (!l->held) {
			struct cmn_tfr_record rec;
			rc = cmn_tfr_next(l->tfr, &rec);
			if (rc == 0)
				break;
			if (rc < 0) {
				snprintf(err, errlen, "%s (record %" PRIu64 ")",
					 cmn_tfr_reader_error(l->tfr), l->rec_index);
				return rc;
			}
			l->held = rec.data;
			l->held_len = rec.len;
		}
		if (fill + l->held_len > c->cap) {
			if (c->nrec)
				break;
			rc = fdr__chunk_reserve(f, c, l->held_len, 0);
			if (rc)
				goto nomem;
		}
		memcpy(c->buf + fill, l->held, l->held_len);
		rc = chunk_add(f, c, fill, l->held_len, l->rec_index++);
		if (rc)
			goto nomem;
		lane_took(l);
		fill += l->held_len;
		l->held = NULL;
	}
	return c->nrec > 0 ? 1 : 0;
nomem:
	snprintf(err, errlen, "%s: out of memory for a read chunk", f->ep.lst.files[l->cur_file]);
	return -ENOMEM;
}

/* Raw: consecutive records of raw_size bytes. */
static int fill_raw(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, char *err,
		    size_t errlen)
{
	size_t per = f->cfg.read_size / f->cfg.raw_size;
	if (per == 0)
		per = 1;
	if (l->left < per)
		per = (size_t)l->left;
	if (per == 0)
		return 0; /* the segment is done */
	size_t want = per * f->cfg.raw_size;
	int rc = fdr__chunk_reserve(f, c, want, 0);
	if (rc) {
		snprintf(err, errlen, "%s: out of memory for a read chunk",
			 f->ep.lst.files[l->cur_file]);
		return rc;
	}
	ssize_t n = lane_read(f, l, c->buf, want, l->off, err, errlen);
	if (n < 0)
		return (int)n;
	size_t recs = (size_t)n / f->cfg.raw_size;
	for (size_t i = 0; i < recs; i++) {
		rc = chunk_add(f, c, i * f->cfg.raw_size, f->cfg.raw_size, l->rec_index++);
		if (rc) {
			snprintf(err, errlen, "%s: out of memory", f->ep.lst.files[l->cur_file]);
			return rc;
		}
		lane_took(l);
	}
	if ((size_t)n % f->cfg.raw_size) {
		snprintf(err, errlen,
			 "%s: record %" PRIu64 ": file ends inside the record (truncated)",
			 f->ep.lst.files[l->cur_file], l->rec_index);
		return -EPROTO;
	}
	l->off += recs * f->cfg.raw_size;
	return recs ? 1 : 0;
}

/*
 * Drops from chunk c the records marked as consumed before a resume at
 * another world size (the listing's excl, resplit.c).  Returns the records
 * left.
 */
static size_t chunk_exclude(const struct fdr_listing *lst, struct fdr_chunk *c)
{
	uint64_t base = lst->first_pos[c->file];
	size_t k = 0;
	for (size_t i = 0; i < c->nrec; i++)
		if (!fdr__bit(lst->excl, base + c->recs[i].index))
			c->recs[k++] = c->recs[i];
	c->nrec = k;
	return k;
}

int fdr__lane_fill(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, char *err,
		   size_t errlen)
{
	c->nrec = 0;
	for (;;) {
		int rc;
		if (!l->open) {
			rc = lane_open_next(f, l, err, errlen);
			if (rc <= 0)
				return rc;
		}
		c->file = l->cur_file;
		if (f->cfg.o.format == RC_FORMAT_RAW)
			rc = fill_raw(f, l, c, err, errlen);
		else if (l->gz)
			rc = fill_gzip(f, l, c, err, errlen);
		else
			rc = fill_plain(f, l, c, err, errlen);
		if (rc > 0 && f->ep.lst.excl && chunk_exclude(&f->ep.lst, c) == 0)
			continue; /* every record read was consumed before the resume */
		if (rc != 0) {
			if (rc < 0)
				lane_close_file(f, l);
			return rc;
		}
		lane_close_file(f, l); /* end of this file: on to the lane's next */
	}
}
