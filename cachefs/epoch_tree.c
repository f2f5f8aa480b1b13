/*
 * epoch_tree.c - the directory tree of an epoch snapshot, built once at
 * publish from its files' names ('/' makes directories).
 *
 * Owns the building and freeing of struct cfs_edir trees (epoch.h); the
 * trees are immutable afterwards, so lookups and readdir walk them without
 * a lock (cfs_edir_lookup in epoch.c).  Does not own the snapshot, its files
 * or any count: epoch.c calls in from cfs_epochs_publish(), under set->mu,
 * and frees the tree with the epoch.
 *
 * Invariant: a name that is both a file and a directory shows the
 * directory; the file is logged and listed in ep->hidden (epoch.c design
 * note, "What an epoch lists").  Locking: none (the caller's).
 */
#include "cachefs/epoch_i.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dent(const void *a, const void *b)
{
	return strcmp(((const struct cfs_dent *)a)->name, ((const struct cfs_dent *)b)->name);
}

static int dent_add(struct cfs_edir *d, size_t *cap, struct cfs_dent e)
{
	if (d->nents == *cap) {
		size_t n = *cap ? *cap * 2 : 8;
		struct cfs_dent *v = realloc(d->ents, n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->ents = v;
		*cap = n;
	}
	d->ents[d->nents++] = e;
	return 0;
}

/*
 * Builds dir's entries from files[0..n), all of whose names start with
 * `prefix` (prefix_len bytes), sorted by name.  A component that is both a
 * file and a directory keeps the directory (the file is logged, hidden and
 * added to ep->hidden).  Returns 0 or -ENOMEM (the caller frees the partial
 * tree).
 */
static int edir_build(struct cfs_epoch *ep, struct cfs_edir *dir, struct cfs_efile **files,
		      size_t n, size_t prefix_len)
{
	size_t cap = 0;
	for (size_t i = 0; i < n;) {
		const char *rest = files[i]->name + prefix_len;
		const char *slash = strchr(rest, '/');
		if (!slash) {
			if (dent_add(dir, &cap, (struct cfs_dent){.name = rest, .f = files[i]}))
				return -ENOMEM;
			i++;
			continue;
		}
		size_t clen = (size_t)(slash - rest);
		size_t j = i + 1;
		while (j < n && strncmp(files[j]->name + prefix_len, rest, clen + 1) == 0)
			j++;
		struct cfs_edir *sub = calloc(1, sizeof(*sub));
		if (!sub)
			return -ENOMEM;
		sub->node_type = CFS_NODE_DIR;
		sub->ep = ep;
		sub->parent = dir == &ep->root ? NULL : dir;
		sub->name = strndup(rest, clen);
		if (!sub->name ||
		    dent_add(dir, &cap, (struct cfs_dent){.name = sub->name, .d = sub})) {
			free(sub->name);
			free(sub);
			return -ENOMEM;
		}
		int rc = edir_build(ep, sub, files + i, j - i, prefix_len + clen + 1);
		if (rc)
			return rc;
		i = j;
	}
	if (dir->nents > 1)
		qsort(dir->ents, dir->nents, sizeof(*dir->ents), cmp_dent);
	/* a name that is both a file and a directory: the directory wins */
	size_t w = 0;
	for (size_t i = 0; i < dir->nents; i++) {
		if (w && strcmp(dir->ents[w - 1].name, dir->ents[i].name) == 0) {
			struct cfs_dent *keep =
			    dir->ents[w - 1].d ? &dir->ents[w - 1] : &dir->ents[i];
			const struct cfs_dent *gone =
			    keep == &dir->ents[i] ? &dir->ents[w - 1] : &dir->ents[i];
			if (gone->f) {
				cmn_log(CMN_LOG_WARN,
					"epoch %u: %s is also a directory: file hidden", ep->number,
					gone->f->name);
				struct cfs_efile **v =
				    realloc(ep->hidden, (ep->nhidden + 1) * sizeof(*v));
				if (!v)
					return -ENOMEM;
				ep->hidden = v;
				ep->hidden[ep->nhidden++] = gone->f;
			}
			dir->ents[w - 1] = *keep;
			continue;
		}
		dir->ents[w++] = dir->ents[i];
	}
	dir->nents = w;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	const struct cfs_efile *fa = *(struct cfs_efile *const *)a;
	const struct cfs_efile *fb = *(struct cfs_efile *const *)b;
	return strcmp(fa->name, fb->name);
}

void cfs__edir_free_children(struct cfs_edir *d)
{
	for (size_t i = 0; i < d->nents; i++) {
		if (d->ents[i].d) {
			cfs__edir_free_children(d->ents[i].d);
			free(d->ents[i].d->name);
			free(d->ents[i].d);
		}
	}
	free(d->ents);
	d->ents = NULL;
	d->nents = 0;
}

int cfs__epoch_build_tree(struct cfs_epoch *ep)
{
	size_t n = ep->nfiles;
	if (n > 1) /* qsort(NULL, 0) is undefined: an empty epoch */
		qsort(ep->files, n, sizeof(*ep->files), cmp_name);
	for (size_t i = 1; i < n; i++)
		if (ep->files[i - 1] == ep->files[i] ||
		    strcmp(ep->files[i - 1]->name, ep->files[i]->name) == 0)
			return -EINVAL;
	return edir_build(ep, &ep->root, ep->files, n, 0);
}
