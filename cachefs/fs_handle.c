/*
 * fs_handle.c - the FUSE view's table of open handles.
 *
 * Owns the table that fi->fh indexes: fi->fh is (generation << 32 | slot
 * + 1), never a pointer, so a request that arrives for a handle already
 * released (an interrupted request the kernel stopped waiting for) finds
 * nothing instead of freed memory.  Each request holds a reference for its
 * duration; the last reference frees the handle through its kind's close
 * (fs_i.h, enum cfs__hkind).  Does not know what a handle holds: the files
 * that make each kind free it.
 *
 * Locking: fs->hmu protects the table and is a leaf; a handle is freed
 * after hmu is released.
 */
#include "cachefs/fs_i.h"

#include <stdlib.h>
#include <string.h>

struct cfs__hslot {
	void *h; /* NULL when free */
	enum cfs__hkind kind;
	uint32_t gen;
	uint32_t refs; /* 1 for the open + 1 per request in progress */
	bool closing;  /* released: destroyed when refs reaches 0 */
	uint32_t next_free;
};

uint64_t cfs__handle_add(struct cfs_fs *fs, enum cfs__hkind kind, void *h)
{
	uint64_t fh = 0;
	pthread_mutex_lock(&fs->hmu);
	if (!fs->free_head) {
		uint32_t n = fs->nslots ? fs->nslots * 2 : 64;
		struct cfs__hslot *v = realloc(fs->slots, (size_t)n * sizeof(*v));
		if (!v)
			goto out;
		memset(v + fs->nslots, 0, (size_t)(n - fs->nslots) * sizeof(*v));
		for (uint32_t i = fs->nslots; i < n; i++)
			v[i].next_free = i + 1 < n ? i + 2 : 0;
		fs->free_head = fs->nslots + 1;
		fs->slots = v;
		fs->nslots = n;
	}
	uint32_t i = fs->free_head - 1;
	struct cfs__hslot *sl = &fs->slots[i];
	fs->free_head = sl->next_free;
	sl->h = h;
	sl->kind = kind;
	sl->gen++;
	sl->refs = 1;
	sl->closing = false;
	fh = ((uint64_t)sl->gen << 32) | (i + 1);
out:
	pthread_mutex_unlock(&fs->hmu);
	return fh;
}

void *cfs__handle_get(struct cfs_fs *fs, uint64_t fh, enum cfs__hkind kind)
{
	uint32_t i = (uint32_t)fh - 1;
	void *h = NULL;
	pthread_mutex_lock(&fs->hmu);
	if ((uint32_t)fh && i < fs->nslots && fs->slots[i].h && fs->slots[i].kind == kind &&
	    fs->slots[i].gen == (uint32_t)(fh >> 32) && !fs->slots[i].closing) {
		fs->slots[i].refs++;
		h = fs->slots[i].h;
	}
	pthread_mutex_unlock(&fs->hmu);
	return h;
}

void cfs__handle_put(struct cfs_fs *fs, uint64_t fh, bool release)
{
	uint32_t i = (uint32_t)fh - 1;
	void *h = NULL;
	enum cfs__hkind kind = CFS_HK_FILE;
	pthread_mutex_lock(&fs->hmu);
	if ((uint32_t)fh && i < fs->nslots && fs->slots[i].h &&
	    fs->slots[i].gen == (uint32_t)(fh >> 32)) {
		struct cfs__hslot *sl = &fs->slots[i];
		if (release) {
			if (sl->closing)
				goto out; /* released twice: ignore */
			sl->closing = true;
		}
		if (--sl->refs == 0) {
			h = sl->h;
			kind = sl->kind;
			sl->h = NULL;
			sl->next_free = fs->free_head;
			fs->free_head = i + 1;
		}
	}
out:
	pthread_mutex_unlock(&fs->hmu);
	if (h)
		cfs__handle_destroy(fs, kind, h);
}

void cfs__handle_destroy(struct cfs_fs *fs, enum cfs__hkind kind, void *h)
{
	switch (kind) {
	case CFS_HK_FILE:
		cfs__file_close(fs, h);
		break;
	case CFS_HK_TEXT:
		cfs__text_close(h);
		break;
	case CFS_HK_DIR:
		cfs__dir_close(fs, h);
		break;
	case CFS_HK_INDEX:
		cfs__index_close(h);
		break;
	}
}

void cfs__handles_free(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->nslots; i++)
		if (fs->slots[i].h)
			cfs__handle_destroy(fs, fs->slots[i].kind, fs->slots[i].h);
	free(fs->slots);
	fs->slots = NULL;
	fs->nslots = 0;
	fs->free_head = 0;
}
