/*
 * cmd_check.c - `rollcache check FILE|DIR...`: verify TFRecord framing and CRCs.
 *
 * Owns the command line of `check`, the directory walk (sorted by byte
 * order, regular files only, hidden entries skipped, symlinked directories
 * not followed) and the summary.  Reading and verifying is common/tfrecord.c:
 * the fd reader with 1 MiB reads (no syscall per record) and GZIP detected
 * by its magic bytes.
 *
 * A file with a payload CRC mismatch is read on to the end (the bad records
 * are counted); a framing error (length CRC, oversized length, truncation,
 * corrupt gzip) ends that file.  Either way the first bad record of each
 * file is named on stderr as "FILE: offset N: what", and the exit code is 1.
 * Exit 2 on usage errors, 0 when every record of every file passed.
 *
 * --cache-dir DIR checks a rollcache cache directory offline:
 * every resident (SEALED) file against the catalog's rows: present, of the
 * catalog's size, and for TFRecord shards every record's length and CRC32C
 * equal to what the catalog recorded at admission (cachefs/verify.c).  One
 * line per bad file on stderr ("DIR/shards/12.tfrecord: record at N: ..."),
 * exit 1 then.  The catalog is opened read-only and nothing is changed, so
 * it may run beside a mount of the same directory.
 */
#include "cli/cmd.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/tfrecord.h"
#include "common/units.h"
#if defined(RC_HAVE_CACHEFS) && RC_HAVE_CACHEFS
#include "cachefs/catalog.h"
#include "cachefs/verify.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_MAX_DEPTH 64

struct check {
	size_t max_record;
	int verbose; /* -1 quiet, 0 summary, 1 a line per file */
	uint64_t files, bad_files, records, bad_records, payload, file_bytes;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rollcache check [-v | -q] [--max-record SIZE] FILE|DIR...\n"
		     "       rollcache check [-v | -q] --cache-dir DIR\n"
		     "\n"
		     "Verifies the TFRecord framing and the CRC32C of every record.  GZIP and\n"
		     "ZLIB files (TensorFlow's compression types) are recognised by their first\n"
		     "bytes.\n"
		     "Directories are walked in sorted order; hidden entries and files that\n"
		     "are plainly not records (README*, LICENSE*, MANIFEST, *.md, *.txt, *.json,\n"
		     "*.py, *.sh, *.yaml, *.html, *.proto, *.sha256, *.md5, *.db, *.lock) are\n"
		     "skipped; a FILE named on the command line is always checked, and - is\n"
		     "standard input.\n"
		     "\n"
		     "  --cache-dir DIR       check a rollcache cache directory: every resident\n"
		     "                        file against the CRCs its catalog recorded at\n"
		     "                        admission (read-only; may run beside a mount)\n"
		     "  -v, --verbose         a line per file\n"
		     "  -q, --quiet           print only errors\n"
		     "  --max-record SIZE     refuse records larger than SIZE (default 256M)\n"
		     "  -h, --help            this text\n"
		     "\n"
		     "Exit status: 0 all records good, 1 a bad record or unreadable file (named\n"
		     "as FILE: offset N: what), 2 usage error.\n");
}

/* Checks one file.  Returns 0 if every record passed, 1 otherwise. */
static int check_file(struct check *c, const char *path)
{
	struct cmn_tfr_opts o = {.max_record = c->max_record, .name = path};
	struct cmn_tfr_reader *r = NULL;
	struct cmn_tfr_record rec;
	struct stat st;
	uint64_t payload = 0;
	bool reported = false;
	char err[512];
	int fd, rc;

	c->files++;
	fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "rollcache check: %s: cannot open: %s\n", path, strerror(errno));
		c->bad_files++;
		return 1;
	}
	if (fstat(fd, &st) == 0)
		c->file_bytes += (uint64_t)st.st_size;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	rc = cmn_tfr_reader_open_fd(&r, fd, &o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache check: %s\n", err);
		close(fd);
		c->bad_files++;
		return 1;
	}
	while ((rc = cmn_tfr_next(r, &rec)) != 0) {
		if (rc == 1) {
			payload += rec.len;
			continue;
		}
		if (!reported)
			fprintf(stderr, "rollcache check: %s\n", cmn_tfr_reader_error(r));
		reported = true;
		if (rc != -EBADMSG)
			break; /* framing lost: nothing more to read in this file */
	}
	c->records += cmn_tfr_reader_records(r);
	c->bad_records += cmn_tfr_reader_bad_records(r);
	c->payload += payload;
	if (c->verbose > 0)
		printf("%s: %" PRIu64 " records, %" PRIu64 " payload bytes%s\n", path,
		       cmn_tfr_reader_records(r), payload, reported ? " (BAD)" : "");
	if (reported)
		c->bad_files++;
	cmn_tfr_reader_free(r);
	close(fd);
	return reported ? 1 : 0;
}

/*
 * Checks every SEALED file of cache directory dir against its catalog.
 * Returns 0 all good, 1 a bad file (one line each on stderr), 2 when dir is
 * not a cache directory.
 */
static int check_cache(struct check *c, const char *dir)
{
#if defined(RC_HAVE_CACHEFS) && RC_HAVE_CACHEFS
	struct cfs_catalog *cat = NULL;
	struct cfs_shard_info *arr = NULL;
	size_t n = 0;
	char db[4096], err[512], why[CFS_VERIFY_WHY_MAX];
	struct stat st;
	int bad = 0, rc;

	if (snprintf(db, sizeof(db), "%s/catalog.db", dir) >= (int)sizeof(db) ||
	    stat(db, &st) != 0) {
		fprintf(stderr,
			"rollcache check: %s: no catalog.db: not a rollcache cache directory "
			"(give the cache_dir of a mount or ingest)\n",
			dir);
		return 2;
	}
	rc = cfs_catalog_open(&cat, db, CFS_CATALOG_READONLY, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache check: %s\n", err);
		return 2;
	}
	/* the catalog's own pages first (SQLite's PRAGMA integrity_check) */
	rc = cfs_catalog_integrity_check(cat, err, sizeof(err));
	if (rc) {
		fprintf(stderr,
			"rollcache check: %s (the catalog is damaged: move the cache directory "
			"aside and mount a new one)\n",
			err);
		cfs_catalog_close(cat);
		return 1;
	}
	uint8_t *buf = malloc((size_t)1 << 20);
	rc = buf ? cfs_catalog_shards_list(cat, 1u << CFS_SHARD_SEALED, &arr, &n) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "rollcache check: %s: cannot list its files: %s\n", dir,
			strerror(-rc));
		free(buf);
		cfs_catalog_close(cat);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cfs_shard_info *si = &arr[i];
		uint64_t got = 0;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s/%" PRId64 "%s", dir,
			 si->kind == CFS_KIND_TFRECORD ? "shards" : "objects", si->id,
			 si->kind == CFS_KIND_TFRECORD ? ".tfrecord" : "");
		c->files++;
		rc = cfs_verify_cache_file(cat, dir, si, buf, (size_t)1 << 20, &got, why,
					   sizeof(why));
		c->file_bytes += got;
		if (rc == 0) {
			c->records += si->records;
			if (si->kind == CFS_KIND_TFRECORD)
				c->payload += si->bytes - si->records * CMN_TFR_OVERHEAD;
			else
				c->payload += si->bytes;
			if (c->verbose > 0)
				printf("%s: %" PRIu64 " records%s\n", path, si->records,
				       si->kind == CFS_KIND_TFRECORD
					   ? ""
					   : " (raw: CRC-32C of the object)");
			continue;
		}
		fprintf(stderr, "rollcache check: %s: %s%s%s\n", path,
			rc == -EBADMSG ? "corrupt: " : "", why,
			rc == -EBADMSG ? " (a mount drops it when it reads it; or delete the "
					 "file while unmounted)"
				       : "");
		c->bad_files++;
		bad = 1;
	}
	cfs_shard_info_free(arr, n);
	free(buf);
	cfs_catalog_close(cat);
	return bad;
#else
	fprintf(stderr,
		"rollcache check: --cache-dir %s: this rollcache is built without the "
		"cache (meson -Dcatalog=enabled)\n",
		dir);
	return 2;
#endif
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/*
 * In a walked directory, names that are plainly not record files (a dataset's
 * README, MANIFEST, checksums) are skipped; a FILE named on the command line
 * is always checked.
 */
static bool not_data(const char *name)
{
	static const char *const exts[] = {".md",   ".txt", ".json", ".py",    ".sh",
					   ".yaml", ".yml", ".html", ".proto", ".sha256",
					   ".md5",  ".db",  ".lock"};
	size_t n = strlen(name);

	if (strncmp(name, "README", 6) == 0 || strncmp(name, "LICENSE", 7) == 0 ||
	    strcmp(name, "MANIFEST") == 0)
		return true;
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);
		if (n > e && strcasecmp(name + n - e, exts[i]) == 0)
			return true;
	}
	return false;
}

static int skip_hidden(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Walks dir in sorted order.  Returns 0 if everything in it passed, 1 otherwise. */
static int check_dir(struct check *c, const char *dir, int depth)
{
	struct dirent **names = NULL;
	int n, bad = 0;

	if (depth > WALK_MAX_DEPTH) {
		fprintf(stderr,
			"rollcache check: %s: directories nested more than %d deep: skipped\n", dir,
			WALK_MAX_DEPTH);
		return 1;
	}
	n = scandir(dir, &names, skip_hidden, by_name);
	if (n < 0) {
		fprintf(stderr, "rollcache check: %s: cannot list: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;
		size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
		char *path = malloc(len);

		if (!path) {
			fprintf(stderr, "rollcache check: out of memory\n");
			bad = 1;
			break;
		}
		snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
			 names[i]->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			bad |= check_dir(c, path, depth + 1);
		} else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (!not_data(names[i]->d_name))
				bad |= check_file(c, path);
			else if (c->verbose > 0)
				printf("%s: skipped (not a record file by its name)\n", path);
		}
		free(path);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return bad;
}

int cmd_check(int argc, char **argv)
{
	struct check c = {.max_record = CMN_TFR_DEFAULT_MAX_RECORD};
	char err[256], a[32], b[32];
	const char *cache_dir = NULL;
	int first = argc, bad = 0;
	double t0, dt;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--") == 0) {
			first = i + 1;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0') {
			first = i;
			break;
		}
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(arg, "--cache-dir") == 0 ||
			   strncmp(arg, "--cache-dir=", 12) == 0) {
			cache_dir = arg[11] == '=' ? arg + 12 : (i + 1 < argc ? argv[++i] : NULL);
			if (!cache_dir || !*cache_dir) {
				fprintf(stderr, "rollcache check: --cache-dir needs a directory, "
						"the cache_dir of a mount\n");
				return 2;
			}
		} else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
			c.verbose = 1;
		} else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
			c.verbose = -1;
		} else if (strcmp(arg, "--max-record") == 0 ||
			   strncmp(arg, "--max-record=", 13) == 0) {
			const char *v =
			    arg[12] == '=' ? arg + 13 : (i + 1 < argc ? argv[++i] : NULL);
			uint64_t size;
			if (!v) {
				fprintf(stderr,
					"rollcache check: --max-record needs a size such as 64M\n");
				return 2;
			}
			if (cmn_parse_size(v, &size, err, sizeof(err)) != 0 || size == 0 ||
			    size > SIZE_MAX / 2) {
				fprintf(stderr, "rollcache check: --max-record %s\n",
					size == 0 ? "0: expected a size above zero" : err);
				return 2;
			}
			c.max_record = (size_t)size;
		} else {
			fprintf(
			    stderr,
			    "rollcache check: unknown option '%s': see `rollcache check --help`\n",
			    arg);
			return 2;
		}
	}
	if (first >= argc && !cache_dir) {
		fprintf(
		    stderr,
		    "rollcache check: no FILE or DIR given: usage: rollcache check FILE|DIR...\n");
		return 2;
	}

	t0 = cmn_mono_s();
	if (cache_dir) {
		int r = check_cache(&c, cache_dir);
		if (r == 2)
			return 2;
		bad |= r;
	}
	for (int i = first; i < argc; i++) {
		struct stat st;
		if (strcmp(argv[i], "-") == 0) {
			bad |= check_file(&c, "-"); /* standard input, e.g. from curl */
		} else if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "rollcache check: %s: %s\n", argv[i], strerror(errno));
			bad = 1;
		} else if (S_ISDIR(st.st_mode)) {
			bad |= check_dir(&c, argv[i], 0);
		} else {
			bad |= check_file(&c, argv[i]);
		}
	}
	dt = cmn_mono_s() - t0;

	if (c.verbose >= 0 || bad) {
		printf("%s: %" PRIu64 " files, %" PRIu64 " records, %" PRIu64
		       " payload bytes (%s), %s read in %.3f s (%.0f MB/s)",
		       bad ? "FAILED" : "ok", c.files, c.records, c.payload,
		       cmn_format_size(c.payload, a, sizeof(a)),
		       cmn_format_size(c.file_bytes, b, sizeof(b)), dt,
		       dt > 0 ? (double)c.file_bytes / dt / 1e6 : 0.0);
		if (bad)
			printf("; %" PRIu64 " bad files, %" PRIu64 " bad records", c.bad_files,
			       c.bad_records);
		printf("\n");
	}
	return bad ? 1 : 0;
}
