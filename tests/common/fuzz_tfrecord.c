/*
 * fuzz_tfrecord.c - libFuzzer target for the TFRecord framing readers
 * (common/tfrecord.h): the buffer reader, the fd reader and the push
 * decoder, each with automatic GZIP detection, and the frame walker they
 * share (whole frames, and headers only over refilled windows).
 *
 * The first input byte sets the chunk size for the push decoder and the
 * read size of the fd reader (small sizes exercise refills and records
 * split across chunks), and whether the fd reader runs (one input in four:
 * it costs a memfd); the rest is the stream.  The three front ends and the
 * walker must agree on how many records they return.  A small max_record keeps huge
 * declared lengths cheap.  Built with -fsanitize=fuzzer,address,undefined.
 */
#include "common/tfrecord.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORD (1u << 16)

static uint64_t run_buf(const uint8_t *buf, size_t len)
{
	struct cmn_tfr_opts o = {
	    .max_record = MAX_RECORD, .compression = CMN_TFR_AUTO, .name = "fuzz"};
	struct cmn_tfr_reader *r;
	char err[256];
	if (cmn_tfr_reader_open_buf(&r, buf, len, &o, err, sizeof(err)))
		return 0;
	struct cmn_tfr_record rec;
	uint64_t n = 0;
	for (int guard = 0; guard < 1000000; guard++) {
		int rc = cmn_tfr_next(r, &rec);
		if (rc == 1) {
			if (rec.len > MAX_RECORD)
				abort();
			/* Touch every payload byte: must be readable. */
			volatile uint8_t x = 0;
			for (size_t i = 0; i < rec.len; i++)
				x ^= rec.data[i];
			(void)x;
			n++;
			continue;
		}
		if (rc == -EBADMSG)
			continue; /* skippable */
		if (rc < 0 && cmn_tfr_reader_error(r)[0] == '\0')
			abort();
		break;
	}
	cmn_tfr_reader_free(r);
	return n;
}

static uint64_t run_fd(const uint8_t *buf, size_t len, size_t read_size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (len && write(fd, buf, len) != (ssize_t)len) {
		close(fd);
		return 0;
	}
	lseek(fd, 0, SEEK_SET);
	struct cmn_tfr_opts o = {.max_record = MAX_RECORD,
				 .read_size = read_size,
				 .compression = CMN_TFR_AUTO,
				 .name = "fuzz"};
	struct cmn_tfr_reader *r;
	char err[256];
	uint64_t n = 0;
	if (cmn_tfr_reader_open_fd(&r, fd, &o, err, sizeof(err)) == 0) {
		struct cmn_tfr_record rec;
		for (int guard = 0; guard < 1000000; guard++) {
			int rc = cmn_tfr_next(r, &rec);
			if (rc == 1) {
				volatile uint8_t x = 0;
				for (size_t i = 0; i < rec.len; i++)
					x ^= rec.data[i];
				(void)x;
				n++;
				continue;
			}
			if (rc == -EBADMSG)
				continue;
			break;
		}
		cmn_tfr_reader_free(r);
	}
	close(fd);
	return n;
}

static int count_cb(const struct cmn_tfr_record *rec, void *ctx)
{
	volatile uint8_t x = 0;
	for (size_t i = 0; i < rec->len; i++)
		x ^= rec->data[i];
	(void)x;
	(*(uint64_t *)ctx)++;
	return 0;
}

static uint64_t run_push(const uint8_t *buf, size_t len, size_t chunk)
{
	struct cmn_tfr_opts o = {
	    .max_record = MAX_RECORD, .compression = CMN_TFR_AUTO, .name = "fuzz"};
	struct cmn_tfr_push *p;
	char err[256];
	uint64_t n = 0;
	if (cmn_tfr_push_new(&p, &o, count_cb, &n, err, sizeof(err)))
		return 0;
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += chunk) {
		size_t k = len - off < chunk ? len - off : chunk;
		/* Each chunk in its own exact allocation: overreads are caught. */
		uint8_t *c = malloc(k);
		memcpy(c, buf + off, k);
		rc = cmn_tfr_push_feed(p, c, k);
		free(c);
	}
	if (rc == 0)
		cmn_tfr_push_finish(p);
	if (cmn_tfr_push_records(p) != n)
		abort();
	cmn_tfr_push_free(p);
	return n;
}

/*
 * The frame walker on its own.  Whole frames over the buffer, CRCs checked:
 * returns the good ones (the buffer reader's count on uncompressed input).
 * The headers-only walk over windows of `chunk` bytes, each in its own
 * exact allocation and read where the walker asks (as feeder/split.c
 * reads), must find the same frames.
 */
static uint64_t run_walk(const uint8_t *buf, size_t len, size_t chunk)
{
	struct cmn_tfr_walk w = {
	    .buf = buf, .len = len, .max_record = MAX_RECORD, .check_crc = true};
	struct cmn_tfr_walk h = {.max_record = MAX_RECORD, .headers_only = true};
	struct cmn_tfr_frame fr;
	uint64_t good = 0, frames = 0, heads = 0;
	uint8_t *win = NULL;
	int rc;

	while ((rc = cmn_tfr_walk_next(&w, &fr)) == 1 || rc == -EBADMSG) {
		good += rc == 1;
		frames++;
	}
	for (int guard = 0; guard < 1000000; guard++) {
		rc = cmn_tfr_walk_next(&h, &fr);
		if (rc == 1) {
			heads += fr.offset + fr.need <= len; /* a payload past the end is cut */
			continue;
		}
		size_t k = fr.offset < len ? len - fr.offset : 0;
		if (rc < 0 || k < CMN_TFR_HEADER_SIZE)
			break;
		k = k < chunk + CMN_TFR_HEADER_SIZE ? k : chunk + CMN_TFR_HEADER_SIZE;
		free(win);
		win = malloc(k);
		memcpy(win, buf + fr.offset, k);
		h = (struct cmn_tfr_walk){.buf = win,
					  .len = k,
					  .base = fr.offset,
					  .max_record = MAX_RECORD,
					  .headers_only = true};
	}
	free(win);
	if (heads != frames)
		abort();
	return good;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t chunk = 1 + data[0] % 37;
	uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
	memcpy(buf, data + 1, size - 1);
	uint64_t a = run_buf(buf, size - 1);
	/* The fd reader costs a memfd per input: one input in four. */
	uint64_t b = (data[0] & 3) == 0 ? run_fd(buf, size - 1, chunk * 13) : a;
	uint64_t c = run_push(buf, size - 1, chunk);
	uint64_t d = run_walk(buf, size - 1, chunk);
	/*
	 * Valid records before the first fatal error are delivered by all
	 * three; they stop at the same record for uncompressed input (as
	 * cmn_tfr_detect tells it: not GZIP, not ZLIB).
	 */
	size_t head = size - 1 < CMN_TFR_DETECT_BYTES ? size - 1 : CMN_TFR_DETECT_BYTES;
	if (cmn_tfr_detect(buf, head) == CMN_TFR_NONE && (a != b || a != c || a != d))
		abort();
	if (size >= 13) {
		uint64_t len;
		(void)cmn_tfr_get_header(buf, MAX_RECORD, &len);
	}
	free(buf);
	return 0;
}
