/*
 * file_list_i.h - listing a file:// source (file_list.c), for source.c.
 */
#ifndef RC_SAMPLER_FILE_LIST_I_H
#define RC_SAMPLER_FILE_LIST_I_H

#include <stddef.h>

#include "sampler/listing.h"

/*
 * Walks the directory `dir` ("/abs/dir/") and appends every regular file to
 * l, keyed by its path relative to dir.  Symbolic links are not followed;
 * nesting is bounded by SMP_LIST_MAX_DEPTH.  Returns 0, or -errno with a
 * message (l may hold a part of the listing then: the caller frees it).
 */
int smp__file_list(const char *dir, struct smp_listing *l, char *err, size_t errlen);

#endif
