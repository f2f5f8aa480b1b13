/*
 * epoch_i.h - internals of the epoch set shared by epoch.c (the set, its
 * snapshots and pins) and epoch_tree.c (a snapshot's directory tree).
 */
#ifndef RC_CACHEFS_EPOCH_I_H
#define RC_CACHEFS_EPOCH_I_H

#include "cachefs/epoch.h"

/*
 * Sorts ep's files (ep->files[0..nfiles)) by name and builds ep->root's
 * tree from their names, adding to ep->hidden (unsorted) each file that a
 * directory of the same name hides.  Returns 0, -EINVAL (a file listed
 * twice, or two files of one name) or -ENOMEM; on failure the partial tree
 * is left for cfs__edir_free_children().  Called under set->mu at publish.
 */
int cfs__epoch_build_tree(struct cfs_epoch *ep);

/* Frees the directories under d and d's entries (not d itself). */
void cfs__edir_free_children(struct cfs_edir *d);

#endif
