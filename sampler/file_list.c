/*
 * file_list.c - listing a file:// source by walking its directory.
 *
 * Owns nothing: it fills the caller's listing.  Does not read file contents
 * (fetch.c reads them, with O_NOFOLLOW) and follows no symbolic link
 * (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), so a link cannot lead the walk out of
 * the source directory.  Bounds: SMP_LIST_MAX_DEPTH levels, SMP_KEY_MAX
 * bytes per key (longer ones are skipped with a warning), the object cap of
 * smp__listing_add().  The etag is "mtime-size".  No locking.
 */
#include "sampler/file_list_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "sampler/listing_i.h"

static int file_walk(int dfd, const char *rel, int depth, struct smp_listing *l, char *err,
		     size_t errlen)
{
	if (depth > SMP_LIST_MAX_DEPTH) {
		snprintf(err, errlen, "%s: directories nested deeper than %d levels", rel,
			 SMP_LIST_MAX_DEPTH);
		close(dfd);
		return -ELOOP;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		snprintf(err, errlen, "%s: cannot list: %s", *rel ? rel : ".", strerror(e));
		return -e;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char key[SMP_KEY_MAX + 1];
		int n = snprintf(key, sizeof(key), "%s%s", rel, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(key)) {
			cmn_log(CMN_LOG_WARN, "file source: skipping a key longer than %d bytes",
				SMP_KEY_MAX);
			continue;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			if ((size_t)n + 1 >= sizeof(key)) {
				close(sub);
				continue;
			}
			key[n] = '/';
			key[n + 1] = '\0';
			rc = file_walk(sub, key, depth + 1, l, err, errlen);
			if (rc)
				break;
		} else if (S_ISREG(st.st_mode)) {
			char etag[64];
			snprintf(etag, sizeof(etag), "%lld.%09ld-%lld",
				 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				 (long long)st.st_size);
			rc = smp__listing_add(l, key, (size_t)n, (uint64_t)st.st_size, etag);
			if (rc) {
				snprintf(err, errlen, "listing: %s", strerror(-rc));
				break;
			}
		}
	}
	closedir(d);
	return rc;
}

int smp__file_list(const char *dir, struct smp_listing *l, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open the source directory: %s", dir, strerror(e));
		return -e;
	}
	return file_walk(fd, "", 0, l, err, errlen);
}
