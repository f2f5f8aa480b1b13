/*
 * stale.c - copying the current records out of a file of a changed object
 * (see stale.h).  Reads the old file through the store (pread, no page of
 * it is written), walks each record's frame (cmn_tfr_walk_next: the CRCs
 * of its header and payload), checks it against its catalog row (length
 * and CRC, so a record rewritten with valid framing is refused), appends
 * it to a new shard writer.  Speaks no SQL: the rows come from the catalog's
 * functions.
 */
#include "cachefs/stale.h"

#include "common/tfrecord.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads the record of row r from fd into *buf (grown as needed); its payload at *buf + header. */
static int read_record(int fd, const struct cfs_sample *r, uint8_t **buf, size_t *cap, char *err,
		       size_t errlen)
{
	size_t need = CMN_TFR_OVERHEAD + (size_t)r->length;
	if (need > *cap) {
		uint8_t *p = realloc(*buf, need);
		if (!p) {
			snprintf(err, errlen, "out of memory for a record of %" PRIu64 " bytes",
				 r->length);
			return -ENOMEM;
		}
		*buf = p;
		*cap = need;
	}
	ssize_t got = pread(fd, *buf, need, (off_t)r->offset);
	if (got < 0) {
		int e = errno;
		snprintf(err, errlen, "read at offset %" PRIu64 ": %s", r->offset, strerror(e));
		return -e;
	}
	/* the frame as every reader walks it, then its CRC against the catalog's */
	struct cmn_tfr_walk w = {
	    .buf = *buf, .len = (size_t)got, .max_record = SIZE_MAX - 16, .check_crc = true};
	struct cmn_tfr_frame fr;
	if (cmn_tfr_walk_next(&w, &fr) != 1 || fr.len != r->length || fr.crc != r->crc) {
		snprintf(err, errlen, "the record at offset %" PRIu64 " does not match its row",
			 r->offset);
		return -EBADMSG;
	}
	return 0;
}

/* Appends every row's record from fd to w. */
static int copy_rows(struct cfs_shard_writer *w, int fd, const struct cfs_sample *rows, size_t n,
		     char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t cap = 0;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = read_record(fd, &rows[i], &buf, &cap, err, errlen);
		if (rc == 0)
			rc = cfs_shard_writer_append(w, buf + CMN_TFR_HEADER_SIZE,
						     (size_t)rows[i].length, rows[i].crc,
						     rows[i].object_id, rows[i].object_offset);
		if (rc != 0 && rc != -EBADMSG && !*err)
			snprintf(err, errlen, "append: %s", strerror(-rc));
	}
	free(buf);
	return rc;
}

int cfs_stale_copy(struct cfs_store *s, int64_t id, uint32_t epoch, struct cfs_shard_writer **out,
		   uint64_t *records, char *err, size_t errlen)
{
	struct cfs_catalog *cat = cfs_store_catalog(s);
	struct cfs_shard_info si;
	struct cfs_sample *rows = NULL;
	struct cfs_shard_writer *w = NULL;
	size_t n = 0;
	int fd = -1;

	*out = NULL;
	*records = 0;
	err[0] = '\0';
	int rc = cfs_catalog_shard_get(cat, id, &si);
	if (rc != 0) {
		snprintf(err, errlen, "file %" PRId64 ": its row: %s", id, strerror(-rc));
		return rc;
	}
	free(si.name);
	rc = cfs_catalog_samples_current(cat, id, &rows, &n);
	if (rc != 0) {
		snprintf(err, errlen, "file %" PRId64 ": its records: %s", id, strerror(-rc));
		return rc;
	}
	if (n == 0)
		goto out;
	if (si.kind != CFS_KIND_TFRECORD) {
		snprintf(err, errlen, "file %" PRId64 ": a raw object with a current record", id);
		rc = -EINVAL;
		goto out;
	}
	uint64_t need = 0;
	for (size_t i = 0; i < n; i++)
		need += cfs_shard_writer_record_bytes((size_t)rows[i].length);
	rc = cfs_budget_try_reserve_copy(cfs_store_budget(s), need);
	if (rc != 0) {
		snprintf(err, errlen, "no room for a copy of %" PRIu64 " bytes: %s", need,
			 strerror(-rc));
		goto out;
	}
	rc = cfs_shard_writer_open(&w, s, epoch, err, errlen);
	if (rc != 0) {
		cfs_budget_release(cfs_store_budget(s), need);
		goto out;
	}
	cfs_shard_writer_adopt(w, need);
	if (rc == 0) {
		fd = cfs_store_open_file(s, CFS_KIND_TFRECORD, id);
		if (fd < 0) {
			rc = fd;
			snprintf(err, errlen, "file %" PRId64 ": open: %s", id, strerror(-rc));
		}
	}
	if (rc == 0)
		rc = copy_rows(w, fd, rows, n, err, errlen);
	if (rc == 0) {
		cfs_shard_writer_replaces(w, id);
		*out = w;
		*records = n;
		w = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	cfs_shard_writer_abort(w);
	free(rows);
	return rc;
}
