/*
 * cfs_test.h - helpers shared by the cachefs Check suites: scratch
 * directories, small files, and a minimal TFRecord file check that does
 * not depend on common/tfrecord's reader.
 */
#ifndef RC_TESTS_CFS_TEST_H
#define RC_TESTS_CFS_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cachefs/store.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"

static inline void cfs_test_mkscratch(char *buf, size_t len)
{
	const char *t = getenv("TMPDIR");
	snprintf(buf, len, "%s/rc-cfs-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(buf));
}

static inline int cfs_test_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	chmod(p, 0700);
	return remove(p) < 0 ? 0 : 0;
}

static inline void cfs_test_rmrf(const char *dir)
{
	nftw(dir, cfs_test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes len bytes of `fill` to dir/name (creating it).  Returns 0 or -errno. */
static inline int cfs_test_write_file(const char *dir, const char *name, size_t len, int fill)
{
	char path[4096];
	char buf[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	memset(buf, fill, sizeof(buf));
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);
		if (write(fd, buf, n) != (ssize_t)n) {
			close(fd);
			return -EIO;
		}
		len -= n;
	}
	close(fd);
	return 0;
}

static inline int cfs_test_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

static inline long long cfs_test_size(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Entries in dir/sub other than . and .. */
static inline int cfs_test_count(const char *dir, const char *sub)
{
	char path[4096];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* An eviction as a boundary applies it: the rows EVICTING in `epoch`, then the budget. */
static inline int cfs_test_evict(struct cfs_store *s, const struct cfs_evict_item *items, size_t n,
				 uint32_t epoch)
{
	int64_t ids[64];
	if (n > 64)
		return -E2BIG;
	for (size_t i = 0; i < n; i++)
		ids[i] = items[i].id;
	int rc = n ? cfs_catalog_shards_evict(cfs_store_catalog(s), ids, n, epoch) : 0;
	if (rc == 0)
		cfs_store_evicted(s, items, n);
	return rc;
}

static inline uint32_t cfs_test_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * Independent TFRecord framing check of a whole file: every length CRC and
 * payload CRC must match and the file must end on a record boundary.
 * Returns the number of records, or -1 on any framing error.
 */
static inline long cfs_test_tfrecord_records(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t hdr[12], ftr[4];
	long n = 0;
	uint8_t *buf = NULL;

	if (!f)
		return -1;
	for (;;) {
		size_t got = fread(hdr, 1, sizeof(hdr), f);
		uint64_t len = 0;
		if (got == 0)
			break;
		if (got != sizeof(hdr))
			goto bad;
		for (int i = 7; i >= 0; i--)
			len = len << 8 | hdr[i];
		if (cmn_crc32c_mask(cmn_crc32c(0, hdr, 8)) != cfs_test_le32(hdr + 8))
			goto bad;
		if (len > ((uint64_t)64 << 20))
			goto bad;
		free(buf);
		buf = malloc(len ? len : 1);
		if (!buf || fread(buf, 1, len, f) != len || fread(ftr, 1, 4, f) != 4)
			goto bad;
		if (cmn_crc32c_mask(cmn_crc32c(0, buf, len)) != cfs_test_le32(ftr))
			goto bad;
		n++;
	}
	free(buf);
	fclose(f);
	return n;
bad:
	free(buf);
	fclose(f);
	return -1;
}

/* The epochs row of `number` in s's catalog (the test fails when there is none). */
static inline struct cfs_epoch_row cfs_test_epoch_row(struct cfs_store *s, uint32_t number)
{
	struct cfs_epoch_row *rows, r = {0};
	size_t n;
	int found = 0;
	ck_assert_int_eq(cfs_catalog_epochs_list(cfs_store_catalog(s), &rows, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (rows[i].number == number) {
			r = rows[i];
			found = 1;
		}
	free(rows);
	ck_assert_msg(found, "no epochs row %u", number);
	return r;
}

#endif
