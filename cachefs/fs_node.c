/*
 * fs_node.c - names and attributes of the FUSE view: lookup, forget,
 * getattr, readlink, opendir/readdir/releasedir and statfs.
 *
 * Inodes: 1..8 are the fixed nodes, described by the table `fixed` below
 * and by nothing else; every other inode number is the address of a struct
 * cfs_efile, cfs_epoch, cfs_edir or cfs_eindex, whose first field says
 * which (as passthrough_ll.c uses struct lo_inode addresses).  Lookup counts
 * are kept by epoch.c so an inode the kernel still knows is never freed.
 * Generation numbers are 0: addresses are reused only after the kernel
 * forgot the inode.  One inode per file across epochs: a shard read in
 * epoch E is still in the page cache when epoch E+1 reads it.
 *
 * Names resolve in the immutable sorted trees of struct cfs_epoch, never in
 * SQLite.  A retired file (retire = read) is left out of readdir; its name
 * answers ENOENT (cfs_edir_lookup), and fs_read.c drops the kernel's cached
 * entry of it when it retires.  Sealed files never change (DESIGN invariant
 * 1), hence the long entry and attr timeouts (opts.timeout); the fixed
 * nodes whose attributes change (current, the texts) have none.
 *
 * Does not own reads or open files (fs_read.c) nor xattrs (fs_meta.c).
 * Locking: none of its own; epoch.c's set->mu is taken inside its calls.
 * Every handler replies exactly once, through one exit label where it has
 * more than one way out.
 */
#include "cachefs/fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* What a fixed directory lists besides its fixed children. */
enum fixed_lists {
	LISTS_NONE,
	LISTS_EPOCHS,  /* epochs/: every listed epoch, a directory */
	LISTS_INDEXES, /* .rollcache/epochs/: every listed epoch's index file (fs_meta.c) */
};

/* A fixed node of the mount. */
struct fixed_node {
	fuse_ino_t ino;
	fuse_ino_t parent;  /* the root's is itself */
	const char *name;   /* its name in parent; "" for the root */
	mode_t mode;	    /* type and permissions */
	bool volatile_attr; /* attributes change: attr timeout 0 */
	enum fixed_lists lists;
};

/*
 * The fixed nodes, one row each, children in the order readdir lists them.
 * `current` exists only while there is a current epoch (its link text is
 * current_target()); the texts have size 0 and are read until EOF, like
 * /proc; control is opened read-only for the ioctl (fs.c).
 */
static const struct fixed_node fixed[] = {
    {INO_ROOT, INO_ROOT, "", S_IFDIR | 0555, false, LISTS_NONE},
    {INO_CURRENT, INO_ROOT, "current", S_IFLNK | 0444, true, LISTS_NONE},
    {INO_EPOCHS, INO_ROOT, "epochs", S_IFDIR | 0555, false, LISTS_EPOCHS},
    {INO_META, INO_ROOT, ".rollcache", S_IFDIR | 0555, false, LISTS_NONE},
    {INO_CONTROL, INO_META, "control", S_IFREG | 0400, true, LISTS_NONE},
    {INO_META_EPOCHS, INO_META, "epochs", S_IFDIR | 0555, false, LISTS_INDEXES},
    {INO_METRICS, INO_META, "metrics", S_IFREG | 0444, true, LISTS_NONE},
    {INO_STATS, INO_META, "stats", S_IFREG | 0444, true, LISTS_NONE},
};

#define NFIXED (sizeof(fixed) / sizeof(fixed[0]))
_Static_assert(NFIXED == INO_FIXED_MAX, "one row per fixed inode");

/* The row of fixed inode ino, or NULL (a node, or no such inode). */
static const struct fixed_node *fixed_row(fuse_ino_t ino)
{
	for (size_t i = 0; i < NFIXED; i++)
		if (fixed[i].ino == ino)
			return &fixed[i];
	return NULL;
}

/* The fixed child `name` of parent, or NULL. */
static const struct fixed_node *fixed_child(fuse_ino_t parent, const char *name)
{
	for (size_t i = 0; i < NFIXED; i++)
		if (fixed[i].parent == parent && fixed[i].ino != parent &&
		    strcmp(fixed[i].name, name) == 0)
			return &fixed[i];
	return NULL;
}

/* The n-th (from 0) fixed child of parent in readdir order, or NULL. */
static const struct fixed_node *fixed_nth_child(fuse_ino_t parent, size_t n)
{
	for (size_t i = 0; i < NFIXED; i++)
		if (fixed[i].parent == parent && fixed[i].ino != parent && n-- == 0)
			return &fixed[i];
	return NULL;
}

/* An open directory: a snapshot of its entries (epochs/) or an epoch. */
struct cfs__dir {
	struct cfs_epoch *ep; /* epoch of an epoch dir or a dir inside one, or NULL */
	struct cfs_edir *dir; /* that directory */
	uint32_t *numbers;    /* epochs/: listed epoch numbers at opendir */
	size_t nnumbers;
};

/* The directory (inside an epoch) that ino is, or NULL. */
static struct cfs_edir *edir_of(fuse_ino_t ino)
{
	if (!cfs__is_node(ino))
		return NULL;
	if (cfs__node_type(ino) == CFS_NODE_EPOCH)
		return &((struct cfs_epoch *)(uintptr_t)ino)->root;
	if (cfs__node_type(ino) == CFS_NODE_DIR)
		return (struct cfs_edir *)(uintptr_t)ino;
	return NULL;
}

static void fill_common(struct cfs_fs *fs, struct stat *st, fuse_ino_t ino)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = fs->t0;
	st->st_mtim = fs->t0;
	st->st_ctim = fs->t0;
	st->st_blksize = 1 << 20;
}

/* The text of `current` ("epochs/<E>") into buf; 0, or -ENOENT without a current epoch. */
static int current_target(struct cfs_fs *fs, char *buf, size_t len)
{
	bool have;
	uint32_t n = cfs_epochs_current_number(fs->set, &have);
	if (!have)
		return -ENOENT;
	snprintf(buf, len, "epochs/%" PRIu32, n);
	return 0;
}

/* Fills st for the fixed node x; returns 0 or -ENOENT.  *timeout as fs_stat(). */
static int fixed_stat(struct cfs_fs *fs, const struct fixed_node *x, struct stat *st,
		      double *timeout)
{
	char target[32];
	if (S_ISLNK(x->mode)) {
		if (current_target(fs, target, sizeof(target)) != 0)
			return -ENOENT;
		st->st_size = (off_t)strlen(target);
	}
	st->st_mode = x->mode;
	st->st_nlink = S_ISDIR(x->mode) ? 2 : 1;
	if (x->volatile_attr)
		*timeout = 0;
	return 0;
}

/* Fills st for ino; returns 0 or -ENOENT.  The attr timeout goes to *timeout. */
static int fs_stat(struct cfs_fs *fs, fuse_ino_t ino, struct stat *st, double *timeout)
{
	fill_common(fs, st, ino);
	*timeout = fs->opts.timeout;
	if (!cfs__is_node(ino)) {
		const struct fixed_node *x = fixed_row(ino);
		return x ? fixed_stat(fs, x, st, timeout) : -ENOENT;
	}
	if (cfs__node_type(ino) == CFS_NODE_EPOCH || cfs__node_type(ino) == CFS_NODE_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (cfs__node_type(ino) == CFS_NODE_INDEX) {
		st->st_mode = S_IFREG | 0444; /* size 0, read until EOF (fs_meta.c) */
		st->st_nlink = 1;
		*timeout = 0;
		return 0;
	}
	struct cfs_efile *f = (struct cfs_efile *)(uintptr_t)ino;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)f->bytes;
	st->st_blocks = (blkcnt_t)((f->bytes + 511) / 512);
	return 0;
}

static void reply_entry(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, double entry_timeout)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 0;
	if (fs_stat(fs, ino, &e.attr, &e.attr_timeout) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.entry_timeout = entry_timeout;
	fuse_reply_entry(req, &e);
}

/* Strict decimal epoch number: no sign, no leading zero, fits 32 bits. */
static int parse_epoch_name(const char *name, uint32_t *out)
{
	uint64_t v = 0;
	if (!name[0] || (name[0] == '0' && name[1]))
		return -ENOENT;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return -ENOENT;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return -ENOENT;
	}
	*out = (uint32_t)v;
	return 0;
}

/*
 * The inode of `name` in the fixed directory x: a fixed child, an epoch
 * (epochs/) or an epoch's index (.rollcache/epochs/).  Returns 0 and *ino
 * (an epoch's lookup counted, its index's too), or -ENOENT.
 */
static int fixed_lookup(struct cfs_fs *fs, const struct fixed_node *x, const char *name,
			fuse_ino_t *ino)
{
	const struct fixed_node *c = fixed_child(x->ino, name);
	if (c) {
		*ino = c->ino;
		return 0;
	}
	uint32_t n;
	if (x->lists == LISTS_NONE || parse_epoch_name(name, &n) != 0)
		return -ENOENT;
	struct cfs_epoch *ep = cfs_epochs_lookup(fs->set, n); /* counts the index too */
	if (!ep)
		return -ENOENT;
	*ino = x->lists == LISTS_EPOCHS ? (fuse_ino_t)(uintptr_t)ep
					: (fuse_ino_t)(uintptr_t)&ep->index;
	return 0;
}

void cfs__fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	fuse_ino_t ino;
	int err = ENOENT;

	if (!cfs__is_node(parent)) {
		const struct fixed_node *x = fixed_row(parent);
		if (!x || fixed_lookup(fs, x, name, &ino) != 0)
			goto out;
	} else {
		struct cfs_edir *dir = edir_of(parent);
		struct cfs_dent e;
		if (!dir) {
			err = ENOTDIR;
			goto out;
		}
		if (cfs_edir_lookup(fs->set, dir, name, &e) != 0)
			goto out;
		ino = e.f ? (fuse_ino_t)(uintptr_t)e.f : (fuse_ino_t)(uintptr_t)e.d;
		/* a file that may retire: no dentry to invalidate when it does */
		if (e.f && cfs_efile_may_retire(fs->set, e.f)) {
			reply_entry(req, fs, ino, 0);
			return;
		}
	}
	reply_entry(req, fs, ino, fs->opts.timeout);
	return;
out:
	fuse_reply_err(req, err);
}

static void forget_one(struct cfs_fs *fs, fuse_ino_t ino, uint64_t n)
{
	if (!cfs__is_node(ino))
		return;
	if (cfs__node_type(ino) == CFS_NODE_EPOCH)
		cfs_epoch_forget(fs->set, (struct cfs_epoch *)(uintptr_t)ino, n);
	else if (cfs__node_type(ino) == CFS_NODE_DIR) /* counted on its epoch */
		cfs_epoch_forget(fs->set, ((struct cfs_edir *)(uintptr_t)ino)->ep, n);
	else if (cfs__node_type(ino) == CFS_NODE_INDEX) /* counted on its epoch */
		cfs_epoch_forget(fs->set, ((struct cfs_eindex *)(uintptr_t)ino)->ep, n);
	else
		cfs_efile_forget(fs->set, (struct cfs_efile *)(uintptr_t)ino, n);
}

void cfs__fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(cfs__fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

void cfs__fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void cfs__fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double tmo;
	int rc = fs_stat(cfs__fs_of(req), ino, &st, &tmo);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, tmo);
}

void cfs__fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const struct fixed_node *x = fixed_row(ino);
	char target[32];
	if (!x || !S_ISLNK(x->mode)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (current_target(cfs__fs_of(req), target, sizeof(target)) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_readlink(req, target);
}

void cfs__fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	struct statvfs sv;
	struct cfs_budget_stat bs;
	cfs_budget_get(fs->budget, &bs);
	uint64_t limit = bs.limit, used = bs.sealed + bs.reserved + bs.draining;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = limit / 4096;
	sv.f_bfree = used < limit ? (limit - used) / 4096 : 0;
	sv.f_bavail = sv.f_bfree;
	struct cfs_epochs_stat es;
	cfs_epochs_stat(fs->set, &es);
	sv.f_files = es.files_alive + INO_FIXED_MAX;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* ---- directories ------------------------------------------------------ */

void cfs__fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	const struct fixed_node *x = fixed_row(ino);
	struct cfs__dir *d = NULL;
	int err = 0;

	if (cfs__is_node(ino) ? !edir_of(ino) : !(x && S_ISDIR(x->mode))) {
		err = ENOTDIR;
		goto out;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		err = EROFS;
		goto out;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		err = ENOMEM;
		goto out;
	}
	if (x && x->lists != LISTS_NONE) {
		int rc = cfs_epochs_list_numbers(fs->set, &d->numbers, &d->nnumbers);
		if (rc != 0) {
			err = -rc;
			goto out;
		}
	} else if (cfs__is_node(ino)) {
		d->dir = edir_of(ino);
		d->ep = d->dir->ep;
		cfs_epoch_opendir(fs->set, d->ep); /* holds the epoch and its tree */
	}
	fi->fh = cfs__handle_add(fs, CFS_HK_DIR, d);
	if (!fi->fh) {
		cfs__dir_close(fs, d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
	return;
out:
	free(d);
	fuse_reply_err(req, err);
}

void cfs__dir_close(struct cfs_fs *fs, struct cfs__dir *d)
{
	if (d->ep)
		cfs_epoch_releasedir(fs->set, d->ep);
	free(d->numbers);
	free(d);
}

/* The inode of ".." of directory ino (fixed row x, or NULL for a node). */
static ino_t dotdot_of(fuse_ino_t ino, const struct fixed_node *x, const struct cfs__dir *d)
{
	if (x)
		return x->parent;
	if (d->dir && d->dir != &d->ep->root)
		return d->dir->parent ? (ino_t)(uintptr_t)d->dir->parent : (ino_t)(uintptr_t)d->ep;
	return INO_EPOCHS;
}

/* Child i of a fixed directory: its fixed children, then its epochs. */
static bool fixed_dir_entry(fuse_ino_t ino, const struct fixed_node *x, struct cfs__dir *d,
			    size_t i, const char **name, char *namebuf, size_t namelen,
			    struct stat *st)
{
	if (x->lists == LISTS_NONE) {
		const struct fixed_node *c = fixed_nth_child(x->ino, i);
		if (!c)
			return false;
		*name = c->name;
		st->st_ino = c->ino;
		st->st_mode = c->mode & S_IFMT;
		return true;
	}
	if (i >= d->nnumbers)
		return false;
	snprintf(namebuf, namelen, "%" PRIu32, d->numbers[i]);
	*name = namebuf;
	st->st_ino = ino; /* placeholder: readdir inode numbers are hints */
	st->st_mode = x->lists == LISTS_EPOCHS ? S_IFDIR : S_IFREG;
	return true;
}

/*
 * One directory entry by index: 0 ".", 1 "..", then the children.  Returns
 * false past the last; *name NULL: skip this index (a retired file).  x is
 * the fixed row of ino, or NULL for a directory of an epoch.
 */
static bool dir_entry(struct cfs_fs *fs, fuse_ino_t ino, const struct fixed_node *x,
		      struct cfs__dir *d, size_t i, const char **name, char *namebuf,
		      size_t namelen, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (i < 2) {
		*name = i == 0 ? "." : "..";
		st->st_ino = i == 0 ? ino : dotdot_of(ino, x, d);
		st->st_mode = S_IFDIR;
		return true;
	}
	i -= 2;
	if (x)
		return fixed_dir_entry(ino, x, d, i, name, namebuf, namelen, st);
	/* the tree is immutable and held by the open handle (nopendir) */
	if (!d->dir || !d->ep->listed || i >= d->dir->nents)
		return false;
	const struct cfs_dent *e = &d->dir->ents[i];
	*name = e->f && cfs_efile_deleted(fs->set, e->f) ? NULL : e->name; /* retired: skip */
	st->st_ino = e->f ? (ino_t)(uintptr_t)e->f : (ino_t)(uintptr_t)e->d;
	st->st_mode = e->f ? S_IFREG : S_IFDIR;
	return true;
}

void cfs__fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	struct cfs__dir *d = cfs__handle_get(fs, fi->fh, CFS_HK_DIR);
	const struct fixed_node *x = fixed_row(ino);
	char *buf = d ? malloc(size) : NULL;
	size_t used = 0;
	char namebuf[32];

	if (!buf) {
		fuse_reply_err(req, d ? ENOMEM : EBADF);
		if (d)
			cfs__handle_put(fs, fi->fh, false);
		return;
	}
	for (size_t i = (size_t)off;; i++) {
		const char *name;
		struct stat st;
		if (!dir_entry(fs, ino, x, d, i, &name, namebuf, sizeof(namebuf), &st))
			break;
		if (!name)
			continue;
		size_t need =
		    fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
	cfs__handle_put(fs, fi->fh, false);
}

void cfs__fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	cfs__handle_put(cfs__fs_of(req), fi->fh, true);
	fuse_reply_err(req, 0);
}
