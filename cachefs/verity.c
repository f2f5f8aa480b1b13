/*
 * verity.c - fs-verity on sealed files (see verity.h).
 *
 * The kernel's user API (Documentation/filesystems/fsverity.rst):
 * FS_IOC_ENABLE_VERITY on a descriptor open read-only, with no writer left,
 * builds the Merkle tree from the file's bytes and turns the file
 * read-only for good.
 */
#include "cachefs/verity.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fsverity.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int cfs_verity_enable(int dir_fd, const char *name)
{
	struct fsverity_enable_arg arg = {
	    .version = 1,
	    .hash_algorithm = FS_VERITY_HASH_ALG_SHA256,
	    .block_size = 4096,
	};
	int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, FS_IOC_ENABLE_VERITY, &arg) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

int cfs_verity_probe(int dir_fd, const char *name, char *why, size_t whylen)
{
	int rc,
	    fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot create a probe file: %s", strerror(-rc));
		return rc;
	}
	rc = write(fd, "v", 1) == 1 ? 0 : -errno;
	close(fd);
	if (rc == 0) {
		fd = cfs_verity_enable(dir_fd, name);
		rc = fd < 0 ? fd : 0;
		if (fd >= 0)
			close(fd);
	}
	unlinkat(dir_fd, name, 0);
	if (rc == -EOPNOTSUPP || rc == -ENOTTY)
		snprintf(why, whylen, "the kernel or the file system has no fs-verity (%s)",
			 strerror(-rc));
	else if (rc)
		snprintf(why, whylen, "sealing a probe file with fs-verity failed: %s",
			 strerror(-rc));
	return rc;
}
