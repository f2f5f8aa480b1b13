/*
 * fs_meta.c - what the FUSE view says about its files without reading
 * them (DESIGN "The mount"):
 *
 *   xattr user.rollcache.records     on every file of an epoch: its record
 *                                    count, decimal ASCII without a NUL
 *                                    (a raw object counts 1)
 *   .rollcache/epochs/<E>            the index of epoch E: one line
 *                                    "name bytes records\n" per file it lists
 *
 * Both come from the in-memory snapshot (struct cfs_efile's name, bytes and
 * records, immutable; epoch.c), never from SQLite, and neither counts as a
 * read: no read statistics move and nothing retires (DESIGN invariant 3,
 * "metadata never needs one").  The index lists what readdir of epochs/<E>
 * lists when the line is made (cfs_epoch_shown_files: not hidden, not
 * retired), in name order; the name is the file's path under epochs/<E>
 * ('/' between directories) and may hold spaces but never a newline or a
 * control byte (cachefs/names.h), so a reader splits each line at its last
 * two spaces.  The text is made as it is read, CHUNK_BYTES at a time, so
 * an epoch of any size costs a reader O(chunk) memory; its size is shown
 * as 0 (read it to EOF, like /proc), and its handle is direct_io.
 *
 * Does not own inodes (fs_node.c), handles (fs_handle.c) or replies other
 * than the xattr ones: fs_read.c opens and reads index files through it.
 * Locking: an index's mu serialises reads of one handle; the set's mu is
 * taken inside epoch.c calls, never while formatting.
 */
#include "cachefs/fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES ((size_t)64 << 10) /* index text made per step */
#define BATCH_FILES 64		       /* files taken from the set per call */

/* ---- xattr ------------------------------------------------------------ */

/* The file an inode is, or NULL (fixed nodes, directories, index files). */
static const struct cfs_efile *efile_of(fuse_ino_t ino)
{
	if (!cfs__is_node(ino) || cfs__node_type(ino) != CFS_NODE_FILE)
		return NULL;
	return (const struct cfs_efile *)(uintptr_t)ino;
}

/* Replies a value of len bytes to an xattr request of `size` (0: its length). */
static void reply_value(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

void cfs__fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	const struct cfs_efile *f = efile_of(ino);
	if (!f || strcmp(name, CFS_XATTR_RECORDS) != 0) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	char val[24];
	int n = snprintf(val, sizeof(val), "%" PRIu64, f->records); /* immutable: no lock */
	reply_value(req, val, (size_t)n, size);
}

void cfs__fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = CFS_XATTR_RECORDS; /* the list: each name and its NUL */
	if (efile_of(ino))
		reply_value(req, names, sizeof(names), size);
	else
		reply_value(req, "", 0, size);
}

/* ---- index files -------------------------------------------------------- */

struct cfs__index {
	struct cfs_epochs *set;
	struct cfs_epoch *ep; /* held (cfs_epoch_hold) while open */
	pthread_mutex_t mu;   /* protects the fields below */
	size_t pos;	      /* next ep->files index to make lines of */
	uint64_t chunk_off;   /* offset of chunk[0] in the text */
	char *chunk;	      /* lines made last, chunk_len bytes (capacity chunk_cap) */
	size_t chunk_len, chunk_cap;
	bool eof; /* every line has been made */
};

int cfs__index_open(struct cfs_epochs *s, struct cfs_epoch *ep, struct cfs__index **out)
{
	struct cfs__index *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	int rc = cfs_epoch_hold(s, ep);
	if (rc != 0) {
		free(x);
		return rc;
	}
	x->set = s;
	x->ep = ep;
	pthread_mutex_init(&x->mu, NULL);
	*out = x;
	return 0;
}

void cfs__index_close(struct cfs__index *x)
{
	if (!x)
		return;
	cfs_epoch_releasedir(x->set, x->ep);
	pthread_mutex_destroy(&x->mu);
	free(x->chunk);
	free(x);
}

/* Appends one line for f to the chunk.  Returns 0 or -ENOMEM (chunk unchanged). */
static int chunk_add_line(struct cfs__index *x, const struct cfs_efile *f)
{
	size_t need = strlen(f->name) + 2 * 21 + 3;
	if (x->chunk_len + need > x->chunk_cap) {
		size_t cap = x->chunk_cap ? x->chunk_cap : CHUNK_BYTES + 4096;
		while (cap < x->chunk_len + need)
			cap *= 2;
		char *v = realloc(x->chunk, cap);
		if (!v)
			return -ENOMEM;
		x->chunk = v;
		x->chunk_cap = cap;
	}
	int n = snprintf(x->chunk + x->chunk_len, x->chunk_cap - x->chunk_len,
			 "%s %" PRIu64 " %" PRIu64 "\n", f->name, f->bytes, f->records);
	x->chunk_len += (size_t)n;
	return 0;
}

/*
 * Under x->mu: makes the next chunk of lines (about CHUNK_BYTES), which
 * starts where the previous one ended; sets eof once the files ran out.
 * Returns 0 or -ENOMEM.
 */
static int next_chunk(struct cfs__index *x)
{
	struct cfs_efile *batch[BATCH_FILES];
	x->chunk_off += x->chunk_len;
	x->chunk_len = 0;
	while (x->chunk_len < CHUNK_BYTES) {
		size_t pos = x->pos;
		size_t n = cfs_epoch_shown_files(x->set, x->ep, &pos, batch, BATCH_FILES);
		if (n == 0) {
			x->eof = true;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			if (chunk_add_line(x, batch[i]) != 0) {
				/* lines of this batch already added stay; the rest come next time
				 */
				while (x->pos < pos && x->ep->files[x->pos] != batch[i])
					x->pos++;
				return x->chunk_len ? 0 : -ENOMEM;
			}
		}
		x->pos = pos;
	}
	return 0;
}

int cfs__index_read(struct cfs__index *x, uint64_t off, char *buf, size_t size, size_t *got)
{
	size_t n = 0;
	int rc = 0;
	pthread_mutex_lock(&x->mu);
	while (n < size) {
		uint64_t want = off + n;
		if (want < x->chunk_off) { /* before what was made: start again */
			x->pos = 0;
			x->chunk_off = 0;
			x->chunk_len = 0;
			x->eof = false;
		}
		while (want >= x->chunk_off + x->chunk_len && !x->eof) {
			rc = next_chunk(x);
			if (rc != 0)
				goto out;
		}
		if (want >= x->chunk_off + x->chunk_len)
			break; /* the end of the text */
		size_t o = (size_t)(want - x->chunk_off);
		size_t k = x->chunk_len - o < size - n ? x->chunk_len - o : size - n;
		memcpy(buf + n, x->chunk + o, k);
		n += k;
	}
out:
	pthread_mutex_unlock(&x->mu);
	*got = n;
	return n ? 0 : rc;
}
