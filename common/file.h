/*
 * file.h - whole-file reads with a hard cap.
 *
 * For small texts (config files, a mount's stats and metrics): the size is
 * not trusted (FUSE and /proc files may report 0 or lie), the read goes to
 * EOF and stops with -EFBIG past the cap.
 */
#ifndef RC_COMMON_FILE_H
#define RC_COMMON_FILE_H

#include <stddef.h>

/*
 * Reads fd from its current offset to EOF into a malloc'd NUL-terminated
 * buffer (*out, freed by the caller; *len excludes the NUL; len may be NULL).
 * Returns 0, -EFBIG if more than max bytes are there, -ENOMEM, or the
 * read's -errno; on failure *out is unchanged.  fd stays open.
 */
int cmn_read_fd_capped(int fd, size_t max, char **out, size_t *len);

/* Opens path read-only and calls cmn_read_fd_capped().  Same returns. */
int cmn_read_file_capped(const char *path, size_t max, char **out, size_t *len);

#endif
