/*
 * file.c - whole-file reads with a hard cap (see file.h).
 *
 * Grows its buffer by doubling from 64 KiB (or the cap, if smaller); a
 * buffer never exceeds max + 1 bytes.
 */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int cmn_read_fd_capped(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = max < 65536 ? max + 1 : 65536, got = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (got == cap) {
			if (cap > max) { /* cap == max + 1 bytes read: over the cap */
				free(buf);
				return -EFBIG;
			}
			size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *p = realloc(buf, ncap);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;
			free(buf);
			return rc;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0'; /* got < cap: the loop grows the buffer before it is full */
	*out = buf;
	if (len)
		*len = got;
	return 0;
}

int cmn_read_file_capped(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = cmn_read_fd_capped(fd, max, out, len);
	close(fd);
	return rc;
}
