/*
 * layout.c - names and directories of the cache's files (see layout.h).
 *
 * Invariant 7: a file's name is its catalog id and a suffix, nothing else.
 */
#include "cachefs/layout.h"

#include <inttypes.h>
#include <stdio.h>

void cfs__file_name(enum cfs_kind kind, int64_t id, char *buf, size_t buflen)
{
	if (kind == CFS_KIND_TFRECORD)
		snprintf(buf, buflen, "%" PRId64 ".tfrecord", id);
	else
		snprintf(buf, buflen, "%" PRId64, id);
}

const char *cfs__relpath(enum cfs_kind kind, int64_t id, char buf[CFS_RELPATH_MAX])
{
	/* at most 7 + 20 + 9 + 1 bytes: "shards/", an int64, ".tfrecord", NUL */
	if (kind == CFS_KIND_TFRECORD)
		snprintf(buf, CFS_RELPATH_MAX, "shards/%" PRId64 ".tfrecord", id);
	else
		snprintf(buf, CFS_RELPATH_MAX, "objects/%" PRId64, id);
	return buf;
}

int cfs__kind_fd(const struct cfs_layout *l, enum cfs_kind kind)
{
	return kind == CFS_KIND_TFRECORD ? l->shards_fd : l->objects_fd;
}
