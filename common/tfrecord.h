/*
 * tfrecord.h - TFRecord framing: reading (pull and push), writing, GZIP.
 *
 * A record on disk is
 *     uint64 LE length | uint32 LE masked crc32c(length bytes) |
 *     payload[length]  | uint32 LE masked crc32c(payload)
 * (mask: see cmn_crc32c_mask).  A GZIP-compressed file is that stream inside
 * one or more gzip members (TensorFlow's "GZIP" compression_type); gzip
 * headers may carry FNAME/MTIME/EXTRA/COMMENT fields.  A ZLIB-compressed file
 * is that stream inside one or more zlib streams (RFC 1950: a 2-byte header,
 * deflate data, an Adler-32 trailer), which is what TensorFlow's "ZLIB"
 * compression_type writes (its ZlibOutputBuffer deflates with zlib's default
 * window bits, i.e. with the zlib wrapper).
 *
 * One frame walker (cmn_tfr_walk_next, below) serves three front ends:
 *   - a pull reader over a memory buffer (zero copy: payload pointers point
 *     into the caller's buffer);
 *   - a pull reader over a file descriptor (large reads into an internal
 *     buffer, no syscall per record; payloads valid until the next call);
 *   - a push decoder fed arbitrary chunks (network bodies), which calls back
 *     once per complete record.
 * Each may sit on top of zlib inflate for GZIP input.
 *
 * Errors carry the stream offset of the record that failed (the offset in
 * the uncompressed stream for GZIP and ZLIB input) and are:
 *   -EBADMSG   payload CRC mismatch: the record is skipped, reading may go on
 *              (cmn_tfr_*_resumable() says so);
 *   -EILSEQ    length CRC mismatch: framing is lost, the stream is dead;
 *   -EMSGSIZE  a length above the reader's max_record cap: stream is dead;
 *   -EPROTO    the stream ends inside a record (truncated): stream is dead;
 *   -EIO       read(2) or inflate failure (corrupt gzip or zlib data): stream is dead;
 *   -ENOMEM    allocation failure.
 * Messages are one line for people, e.g.
 *   "data.tfrecord: offset 1048588: payload crc mismatch (record of 4096 bytes)".
 */
#ifndef RC_COMMON_TFRECORD_H
#define RC_COMMON_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMN_TFR_HEADER_SIZE 12 /* length + masked crc of the length */
#define CMN_TFR_FOOTER_SIZE 4  /* masked crc of the payload */
#define CMN_TFR_OVERHEAD    (CMN_TFR_HEADER_SIZE + CMN_TFR_FOOTER_SIZE)

/* Default cap on one record's payload (readers refuse larger lengths). */
#define CMN_TFR_DEFAULT_MAX_RECORD ((size_t)256 << 20)

/* Compression of an input stream. */
enum cmn_tfr_compression {
	CMN_TFR_AUTO = 0, /* decided by cmn_tfr_detect() on the stream's first bytes */
	CMN_TFR_NONE = 1,
	CMN_TFR_GZIP = 2,
	CMN_TFR_ZLIB = 3,
};

/* "auto", "none", "gzip", "zlib" ("?" for other values). */
const char *cmn_tfr_compression_name(enum cmn_tfr_compression c);

/* Bytes cmn_tfr_detect() looks at (fewer are fine at the end of a stream). */
#define CMN_TFR_DETECT_BYTES CMN_TFR_HEADER_SIZE

/*
 * The one compression detection of the project (sampler, feeder, check and
 * the readers below all call it).  Given the first `len` bytes of a stream
 * (CMN_TFR_DETECT_BYTES, or all of a shorter stream), returns in this order:
 *   NONE  the first 12 bytes are a TFRecord header whose length CRC holds
 *         (a gzip or zlib stream passes that check with odds of 2^-32);
 *   GZIP  the gzip magic 1f 8b 08 (RFC 1952, deflate);
 *   ZLIB  a zlib header (RFC 1950): CM = 8 (deflate), CINFO <= 7,
 *         (CMF * 256 + FLG) % 31 == 0, no preset dictionary;
 *   NONE  otherwise, so that the framing reports what is wrong.
 * What it cannot tell: a stream whose first record header is corrupt, or
 * that is not TFRecord at all, yet starts like a zlib header (32 of the
 * 65536 pairs of first bytes are zlib headers) is taken as ZLIB and fails as corrupt zlib
 * data rather than as lost framing.  Pure; never fails.
 */
enum cmn_tfr_compression cmn_tfr_detect(const void *head, size_t len);

/*
 * cmn_tfr_detect() on the first bytes of a file, read with pread(2) at
 * offset 0 (the file position is unchanged).  A file that cannot be read
 * gives NONE: the reader that follows reports the error.
 */
enum cmn_tfr_compression cmn_tfr_detect_fd(int fd);

struct cmn_tfr_opts {
	size_t max_record;		      /* 0: CMN_TFR_DEFAULT_MAX_RECORD */
	size_t read_size;		      /* fd reader read(2) size; 0: 1 MiB */
	bool skip_crc;			      /* trust the payload CRC (lengths still checked) */
	enum cmn_tfr_compression compression; /* fd and push front ends */
	const char *name;		      /* for messages; copied; NULL: "<stream>" */
};

/* One record as handed out by the readers. */
struct cmn_tfr_record {
	const uint8_t *data; /* payload; see the front end for lifetime */
	size_t len;
	uint64_t offset; /* stream offset of the record's header */
	uint32_t crc;	 /* unmasked crc32c of the payload (as stored) */
};

/* ---- framing helpers ------------------------------------------------- */

/* Writes the 12-byte header for a payload of `len` bytes. */
void cmn_tfr_put_header(uint8_t hdr[CMN_TFR_HEADER_SIZE], uint64_t len);

/* Writes the 4-byte footer for a payload whose unmasked crc32c is `crc`. */
void cmn_tfr_put_footer(uint8_t ftr[CMN_TFR_FOOTER_SIZE], uint32_t crc);

/*
 * Checks a 12-byte header; returns 0, -EILSEQ on a length CRC mismatch, or
 * -EMSGSIZE if the length exceeds max_record.  *len gets the length field
 * in every case (not to be trusted on failure).
 */
int cmn_tfr_get_header(const uint8_t hdr[CMN_TFR_HEADER_SIZE], size_t max_record, uint64_t *len);

/* The unmasked crc32c of the payload that a 4-byte footer stores. */
uint32_t cmn_tfr_get_footer(const uint8_t ftr[CMN_TFR_FOOTER_SIZE]);

/* ---- frame walker ---------------------------------------------------- */

/*
 * The one walk over TFRecord frames in memory.  Every reader of framing
 * steps with it: the pull and push readers (through tfr__step), the
 * feeder's chunks (feeder/reader.c), the feeder's record count
 * (feeder/split.c), the cache's checker (cachefs/verify.c) and the copy of
 * a stale file's records (cachefs/stale.c), so all of them accept and
 * reject the same bytes.  The walker reads only buf; where
 * the bytes come from, and what to do with a frame cut by the end of buf,
 * is the caller's: it refills by setting buf, len, base and pos again (pos
 * at the same frame) and steps again.
 */
struct cmn_tfr_walk {
	const uint8_t *buf; /* bytes [0, len), the caller's; buf[0] is at stream offset base */
	size_t len;
	uint64_t base;
	size_t pos; /* the next frame's header is at buf[pos]; may pass len (headers_only) */
	size_t
	    max_record; /* payload cap (above SIZE_MAX - 16: that); 0: CMN_TFR_DEFAULT_MAX_RECORD */
	bool check_crc; /* check each payload against its footer */
	bool headers_only; /* a frame is whole once its header is in buf: payloads are skipped */
};

/* One frame as cmn_tfr_walk_next() reports it. */
struct cmn_tfr_frame {
	uint64_t offset; /* stream offset of its header */
	size_t need;	 /* its framed bytes from offset, 16 + len; 12 while the header is cut */
	uint64_t len;	 /* payload bytes: the header's length field (untrusted on -EILSEQ) */
	const uint8_t *data; /* payload, in buf; NULL with headers_only or a cut frame */
	uint32_t crc;	     /* unmasked crc32c its footer stores (when data is set) */
};

/*
 * Steps over the frame at buf[pos].  Returns
 *   1          a whole frame in *fr (with headers_only: a whole header);
 *              pos moves past the frame
 *   0          the frame is cut by the end of buf: fr->offset and fr->need
 *              say where it starts and how many bytes from there it needs
 *              (12 while its header is cut, then 16 + len); pos stays
 *   -EBADMSG   a whole frame whose payload does not match its footer
 *              (check_crc); *fr filled and pos moves past it, so the
 *              caller may skip it or stop
 *   -EILSEQ    the length CRC of the header does not match: framing is lost
 *   -EMSGSIZE  the length is above max_record: framing is lost
 * After -EILSEQ and -EMSGSIZE fr->offset and fr->len say where and what,
 * and pos stays.  Never reads outside buf[0, len); changes only w->pos and
 * *fr.
 */
int cmn_tfr_walk_next(struct cmn_tfr_walk *w, struct cmn_tfr_frame *fr);

/* ---- pull reader ----------------------------------------------------- */

struct cmn_tfr_reader;

/*
 * Opens a reader over `len` bytes at `buf` (uncompressed, GZIP or ZLIB per
 * opts->compression).  The caller keeps buf alive and unchanged until
 * cmn_tfr_reader_free().  For uncompressed input, record data points into buf.
 * Returns 0 and *out, or -errno with a message in err; *out untouched then.
 */
int cmn_tfr_reader_open_buf(struct cmn_tfr_reader **out, const void *buf, size_t len,
			    const struct cmn_tfr_opts *opts, char *err, size_t errlen);

/*
 * Opens a reader over `fd` from its current position.  The reader does not
 * close fd.  Record data stays valid until the next cmn_tfr_next() call.
 */
int cmn_tfr_reader_open_fd(struct cmn_tfr_reader **out, int fd, const struct cmn_tfr_opts *opts,
			   char *err, size_t errlen);

/*
 * Returns 1 with the next record in *rec, 0 at a clean end of stream, or a
 * negative error above (message: cmn_tfr_reader_error()).  After -EBADMSG
 * the next call continues with the following record; after any other error
 * every further call returns that error again.
 */
int cmn_tfr_next(struct cmn_tfr_reader *r, struct cmn_tfr_record *rec);

/* The last error's one-line message ("" if none).  Valid until the next call. */
const char *cmn_tfr_reader_error(const struct cmn_tfr_reader *r);

/* Records returned and payload CRC failures skipped so far. */
uint64_t cmn_tfr_reader_records(const struct cmn_tfr_reader *r);
uint64_t cmn_tfr_reader_bad_records(const struct cmn_tfr_reader *r);

void cmn_tfr_reader_free(struct cmn_tfr_reader *r);

/* ---- push decoder ---------------------------------------------------- */

struct cmn_tfr_push;

/*
 * Called once per complete record whose CRCs passed (unless skip_crc).  Data
 * is valid only during the call.  Return 0 to go on, or a negative errno to
 * stop: cmn_tfr_push_feed() then returns that value.
 */
typedef int (*cmn_tfr_record_cb)(const struct cmn_tfr_record *rec, void *ctx);

int cmn_tfr_push_new(struct cmn_tfr_push **out, const struct cmn_tfr_opts *opts,
		     cmn_tfr_record_cb cb, void *ctx, char *err, size_t errlen);

/*
 * Feeds the next `len` bytes of the stream.  Buffers at most one partial
 * record (bounded by max_record).  Returns 0, a callback's negative value, or
 * a stream error above.  A payload CRC failure is counted (bad_records) and
 * skipped without an error return; the others are fatal for the stream.
 */
int cmn_tfr_push_feed(struct cmn_tfr_push *p, const void *data, size_t len);

/*
 * Inside a record callback only: when rec->data lies in the decoder's own
 * gathering buffer (a record cut by chunk boundaries - with libcurl, whose
 * write callback gets at most 16 KiB at a time, every record above that),
 * hands that buffer to the caller instead of leaving the caller to copy the
 * record out: *buf (malloc'd, the caller frees it with free()) and *cap
 * (its size); rec->data points inside it.  `spare` (malloc'd, spare_cap
 * bytes, or NULL) becomes the decoder's next gathering buffer and is owned
 * by the decoder from then on.  Returns 0, or -ENOENT when rec->data points
 * into the caller's chunk (nothing changes; spare stays the caller's).
 */
/*
 * The compression the decoder reads: as opened, or, when opened AUTO, what
 * cmn_tfr_detect() found on the first bytes (AUTO until it has seen
 * CMN_TFR_DETECT_BYTES bytes or the end of the stream).
 */
enum cmn_tfr_compression cmn_tfr_push_compression(const struct cmn_tfr_push *p);

int cmn_tfr_push_take(struct cmn_tfr_push *p, void *spare, size_t spare_cap, void **buf,
		      size_t *cap);

/* Declares end of stream: returns 0, or -EPROTO if it ends inside a record. */
int cmn_tfr_push_finish(struct cmn_tfr_push *p);

/* Forgets all state, as if new (for a retried transfer from offset 0). */
void cmn_tfr_push_reset(struct cmn_tfr_push *p);

/*
 * Forgets all state like cmn_tfr_push_reset() but keeps the compression
 * found so far: for an uncompressed stream retried from a record boundary
 * inside it, whose first bytes must not be detected again.
 */
void cmn_tfr_push_resume(struct cmn_tfr_push *p);

const char *cmn_tfr_push_error(const struct cmn_tfr_push *p);
uint64_t cmn_tfr_push_records(const struct cmn_tfr_push *p);
uint64_t cmn_tfr_push_bad_records(const struct cmn_tfr_push *p);
/* Bytes of the (uncompressed) stream consumed up to the end of the last whole record. */
uint64_t cmn_tfr_push_offset(const struct cmn_tfr_push *p);

void cmn_tfr_push_free(struct cmn_tfr_push *p);

/* ---- writer ---------------------------------------------------------- */

struct cmn_tfr_writer;

/*
 * Opens a buffered writer appending uncompressed TFRecord framing to `fd`
 * (not closed by the writer).  buf_size 0 means 1 MiB.
 */
int cmn_tfr_writer_open(struct cmn_tfr_writer **out, int fd, size_t buf_size, char *err,
			size_t errlen);

/*
 * Appends one record.  `crc` is the payload's unmasked crc32c when the caller
 * already verified it (sampler), or pass crc_known=false to compute it.
 * Returns 0 or -errno (write failure, e.g. -ENOSPC); on failure the file may
 * hold a partial record and must be discarded.
 */
int cmn_tfr_writer_append(struct cmn_tfr_writer *w, const void *payload, size_t len, uint32_t crc,
			  bool crc_known);

/* Gives back a block lent to cmn_tfr_writer_append_lent once its bytes are written. */
typedef void (*cmn_tfr_release_fn)(void *ctx, void *block, size_t cap);

/*
 * Switches w to write-behind: its writes go to a thread of its own, started
 * here, in order, at most 8 MiB in flight; appends wait while that much is
 * queued.  A failed write is returned by a later append or by flush.
 * release, called on that thread, gives lent blocks back.  Returns 0 or
 * -errno (no thread: w stays as it was).
 */
int cmn_tfr_writer_behind(struct cmn_tfr_writer *w, cmn_tfr_release_fn release, void *ctx);

/*
 * Appends one record whose payload lies in `block` (cap bytes, the
 * caller's).  Returns 1 when the writer took the block: its bytes are
 * written from there and the block goes to the release callback afterwards
 * (maybe before this call returns); 0 when the record was copied or written
 * at once and the block stays the caller's; or -errno (the block stays the
 * caller's).  Without write-behind, or under 32 KiB, it does not take it.
 */
int cmn_tfr_writer_append_lent(struct cmn_tfr_writer *w, const void *payload, size_t len,
			       uint32_t crc, void *block, size_t cap);

/* Writes out the buffer and waits for what is queued.  Returns 0 or -errno. */
int cmn_tfr_writer_flush(struct cmn_tfr_writer *w);

/* Bytes appended so far (framing included), flushed or not. */
uint64_t cmn_tfr_writer_bytes(const struct cmn_tfr_writer *w);

/* Frees the writer without flushing; lent blocks still queued are released, not written. */
void cmn_tfr_writer_free(struct cmn_tfr_writer *w);

#endif
