/*
 * store.c - a cache directory: its layout, its lock, and eviction of files.
 *
 * Owns CACHE_DIR's directory fds, the flock on CACHE_DIR/lock, and the
 * wiring of catalog + budget + reconciliation at open.  Does not write
 * files (shard_writer.c does), does not choose victims (eviction/ does)
 * and does not speak SQL (catalog.c does).
 *
 * Invariants: DESIGN 3 (an eviction deletes nothing: a file goes in
 * cfs_store_reap, which its caller runs once no handle holds it), DESIGN 4 (budget moves at every
 * state change), DESIGN 6 (reconciliation before the store is handed out), DESIGN 7 (every path is
 * built by cfs__file_name from a numeric id).
 *
 * Locking: the store's fields are immutable after open.  Lock order: see
 * catalog.c (catalog mu, then budget mu; never the reverse).
 */
#include "cachefs/store_i.h"

#include "cachefs/reconcile.h"
#include "cachefs/verity.h"

#include "common/fault.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mkdir -p for the cache directory itself (mode 0755). */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Opens (creating) subdirectory `name` of the cache dir. */
static int open_sub(struct cfs_store *s, const char *name, int *fd, char *err, size_t errlen)
{
	if (mkdirat(s->lay.dir_fd, name, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		snprintf(err, errlen,
			 "%s/%s: cannot create: %s: check the permissions of %s or "
			 "choose another cache_dir",
			 s->lay.dir, name, strerror(e), s->lay.dir);
		return -e;
	}
	*fd = openat(s->lay.dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (*fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s/%s: cannot open: %s: it must be a directory", s->lay.dir,
			 name, strerror(e));
		return -e;
	}
	return 0;
}

/*
 * This system's boot id (/proc/sys/kernel/random/boot_id: a new one at
 * every boot), or "" where it cannot be read.
 */
static void boot_id(char *out, size_t len)
{
	out[0] = '\0';
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* Writes "PID\nBOOT\n" into CACHE_DIR/lock (held).  0 or -errno. */
static int write_lock(struct cfs_store *s, const char *boot)
{
	char buf[96];
	int len = snprintf(buf, sizeof(buf), "%ld\n%s\n", (long)getpid(), boot);
	if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, buf, (size_t)len, 0) != len)
		return -(errno ? errno : EIO);
	return 0;
}

/*
 * Takes CACHE_DIR/lock with flock(LOCK_EX|LOCK_NB) and writes our pid and
 * this system's boot id into it; on -EWOULDBLOCK the message names the
 * holder's pid read from it.  The boot id the last owner wrote tells
 * whether this system has run since then (s->same_boot): if so, nothing
 * it wrote can be torn, whatever happened to the process, and
 * reconciliation need not verify the files of its last seconds (DESIGN
 * 2's departure, docs/design.md).
 */
static int take_lock(struct cfs_store *s, char *err, size_t errlen)
{
	char buf[96], boot[40];
	ssize_t n;

	s->lock_fd = openat(s->lay.dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (s->lock_fd < 0) {
		int e = errno;
		snprintf(err, errlen,
			 "%s/lock: cannot open: %s: check the permissions of %s or "
			 "choose another cache_dir",
			 s->lay.dir, strerror(e), s->lay.dir);
		return -e;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK) {
			n = pread(s->lock_fd, buf, sizeof(buf) - 1, 0);
			buf[n > 0 ? n : 0] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			snprintf(err, errlen,
				 "%s is in use by pid %s (another rollcache mount or "
				 "ingest): stop that process, or use another cache_dir",
				 s->lay.dir, buf[0] ? buf : "(unknown)");
		} else {
			snprintf(err, errlen, "%s/lock: cannot lock: %s", s->lay.dir, strerror(e));
		}
		return -e;
	}
	boot_id(boot, sizeof(boot));
	n = pread(s->lock_fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	const char *last = strchr(buf, '\n');
	s->same_boot = boot[0] && last && strncmp(last + 1, boot, strlen(boot)) == 0 &&
		       last[1 + strlen(boot)] == '\n';
	int rc = write_lock(s, boot);
	if (rc < 0) {
		snprintf(err, errlen, "%s/lock: cannot write our pid: %s: check the disk",
			 s->lay.dir, strerror(-rc));
		return rc;
	}
	return 0;
}

/*
 * Refuses to adopt a directory that holds something else: without
 * catalog.db, only the names a cache itself creates may be there (a crash
 * during the very first open leaves some of them).  Reconciliation empties
 * tmp/ and deletes unknown files in shards/ and objects/, so pointing
 * cache_dir at, say, / or $HOME by mistake must stop here.
 */
static int check_foreign(struct cfs_store *s, char *err, size_t errlen)
{
	static const char *const ours[] = {"lock",
					   "shards",
					   "objects",
					   "tmp",
					   "catalog.db-wal",
					   "catalog.db-shm",
					   "catalog.db-journal",
					   "ballast"};
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(s->lay.dir_fd, "catalog.db", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	fd = dup(s->lay.dir_fd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "%s: cannot list: %s", s->lay.dir, strerror(-rc));
		return rc;
	}
	while ((de = readdir(d))) {
		bool known = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
		for (size_t i = 0; !known && i < sizeof(ours) / sizeof(ours[0]); i++)
			known = strcmp(de->d_name, ours[i]) == 0;
		if (!known) {
			snprintf(err, errlen,
				 "%s is not empty and has no catalog.db (it holds "
				 "'%.64s'): it is not a rollcache cache directory; choose a new or "
				 "empty directory for cache_dir",
				 s->lay.dir, de->d_name);
			rc = -ENOTEMPTY;
			break;
		}
	}
	closedir(d);
	return rc;
}

/*
 * Decides whether this store seals files with fs-verity: a probe file in
 * tmp/ (after reconciliation, which empties tmp/ of one a crash left).
 * ON without it is an error naming the reason and the way out.
 */
static int open_verity(struct cfs_store *s, enum cmn_verity want, char *err, size_t errlen)
{
	if (want == CMN_VERITY_OFF) {
		snprintf(s->verity_why, sizeof(s->verity_why), "off (verity = off)");
		return 0;
	}
	char why[128];
	int rc = cfs_verity_probe(s->lay.tmp_fd, "verity-probe", why, sizeof(why));
	s->verity = rc == 0;
	if (rc == 0)
		return 0;
	snprintf(s->verity_why, sizeof(s->verity_why), "unavailable: %s", why);
	if (want != CMN_VERITY_ON)
		return 0;
	snprintf(err, errlen,
		 "%s: verity = on, but files there cannot be sealed with fs-verity: %s; use a "
		 "file system with it (ext4 with `tune2fs -O verity`, a kernel with "
		 "CONFIG_FS_VERITY) or set verity = auto",
		 s->lay.dir, why);
	return rc;
}

/*
 * Makes every file listed as unsynced durable, then shards/ and objects/
 * (their renames).  Up to CFS_SYNC_FILES_MAX files: an fsync of each
 * that is still there (one evicted or withdrawn since needs nothing).
 * More: one syncfs() of the cache's file system.  Each fsync writes that
 * file's inode and waits for it (on ext4 without a journal a cache flush
 * too), one after the other; syncfs() writes every dirty page and inode
 * of the file system in one pass, whoever dirtied them - a wait that
 * grows with other processes' writes, which is why few files get their
 * own fsyncs.  Measured on this machine's disk for 20,000 files of 2 KiB:
 * 4.17 s of fsyncs one by one against 0.37 s for one syncfs()
 * (docs/benchmarks.md, "Small objects").  0 or -errno.
 */
static int sync_listed(struct cfs_store *s, char *err, size_t errlen)
{
	int64_t *ids = NULL;
	size_t n = 0;
	int rc = cfs_catalog_unsynced_files(s->cat, &ids, &n);
	if (rc < 0) {
		snprintf(err, errlen, "%s/catalog.db: cannot read the files to sync: %s",
			 s->lay.dir, strerror(-rc));
		return rc;
	}
	if (n > CFS_SYNC_FILES_MAX) {
		free(ids);
		atomic_fetch_add(&s->sync_by_syncfs, 1);
		if (syncfs(s->lay.dir_fd) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: syncfs of %zu files failed: %s", s->lay.dir, n,
				 strerror(-rc));
		}
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char name[32];
		int fd = -1;
		enum cfs_kind kinds[2] = {CFS_KIND_TFRECORD, CFS_KIND_RAW};
		for (int k = 0; k < 2 && fd < 0; k++) {
			cfs__file_name(kinds[k], ids[i], name, sizeof(name));
			fd = openat(cfs__kind_fd(&s->lay, kinds[k]), name,
				    O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		}
		if (fd < 0)
			continue; /* gone since: nothing to make durable */
		if (fsync(fd) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: fsync of %s failed: %s", s->lay.dir, name,
				 strerror(-rc));
		}
		close(fd);
	}
	free(ids);
	atomic_fetch_add(&s->sync_by_fsyncs, 1);
	for (int k = 0; k < 2 && rc == 0; k++)
		if (fsync(cfs__kind_fd(&s->lay, k ? CFS_KIND_RAW : CFS_KIND_TFRECORD)) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: fsync of a directory failed: %s", s->lay.dir,
				 strerror(-rc));
		}
	return rc;
}

/*
 * After a failed fsync the kernel may have dropped the pages it could not
 * write, with no restart of the system: the lock's boot id is struck, so
 * that the next start verifies the listed files whatever the boot.
 */
static void forget_boot(struct cfs_store *s)
{
	int rc = write_lock(s, "sync-failed");
	if (rc < 0)
		cmn_log(CMN_LOG_WARN, "%s/lock: cannot write: %s", s->lay.dir, strerror(-rc));
}

/* A sync point of the entries up to `upto` (all: INT64_MAX); cfs_store_sync. */
static int sync_point(struct cfs_store *s, int64_t upto, char *err, size_t errlen)
{
	int64_t mark = 0;
	pthread_mutex_lock(&s->sync_mu);
	int rc = cfs_catalog_unsynced_mark(s->cat, &mark);
	if (rc < 0)
		snprintf(err, errlen, "%s/catalog.db: cannot read the files to sync: %s",
			 s->lay.dir, strerror(-rc));
	if (mark > upto)
		mark = upto;
	if (rc == 0 && mark > 0) {
		cmn_fault("before_sync");
		rc = sync_listed(s, err, errlen);
		if (rc < 0) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l,
				 ": the files sealed since the last sync point are verified at the "
				 "next start");
			atomic_store(&s->sync_failed, true);
			forget_boot(s);
		} else if (atomic_load(&s->sync_failed)) {
			rc = -EIO;
			snprintf(err, errlen,
				 "%s: an earlier sync point failed: the files sealed since are "
				 "verified at the next start",
				 s->lay.dir);
		} else {
			rc = cfs_catalog_unsynced_clear(s->cat, mark);
			if (rc < 0)
				snprintf(err, errlen,
					 "%s/catalog.db: cannot record a sync point: %s",
					 s->lay.dir, strerror(-rc));
		}
	}
	pthread_mutex_unlock(&s->sync_mu);
	return rc;
}

int cfs_store_sync(struct cfs_store *s, char *err, size_t errlen)
{
	return sync_point(s, INT64_MAX, err, errlen);
}

void cfs_store_sync_ways(struct cfs_store *s, uint64_t *by_fsyncs, uint64_t *by_syncfs)
{
	*by_fsyncs = atomic_load(&s->sync_by_fsyncs);
	*by_syncfs = atomic_load(&s->sync_by_syncfs);
}

/*
 * The syncer thread: a sync point at once of the files listed at open
 * (what start-up reconciliation verified or trusted: up to a period's
 * worth of sealed files, whose fsyncs the start does not wait for), then
 * one of every listed file every sync_period_ms until close.
 */
static void *syncer_main(void *arg)
{
	struct cfs_store *s = arg;
	char err[512];
	bool logged = false;
	pthread_mutex_lock(&s->sync_mu);
	for (bool first = true; !s->sync_stop; first = false) {
		if (!first) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			uint64_t ns = (uint64_t)t.tv_nsec + s->sync_period_ms % 1000 * 1000000u;
			t.tv_sec += (time_t)(s->sync_period_ms / 1000 + ns / 1000000000u);
			t.tv_nsec = (long)(ns % 1000000000u);
			pthread_cond_timedwait(&s->sync_cv, &s->sync_mu, &t);
			if (s->sync_stop)
				break;
		}
		pthread_mutex_unlock(&s->sync_mu);
		int rc = sync_point(s, first ? s->open_mark : INT64_MAX, err, sizeof(err));
		if (rc < 0 && !logged) /* once: the state does not change until a restart */
			cmn_log(CMN_LOG_ERROR, "%s", err);
		logged = logged || rc < 0;
		pthread_mutex_lock(&s->sync_mu);
	}
	pthread_mutex_unlock(&s->sync_mu);
	return NULL;
}

int cfs_store_ballast(struct cfs_store *s, bool keep)
{
	if (!keep) {
		if (unlinkat(s->lay.dir_fd, "ballast", 0) == 0)
			cmn_log(CMN_LOG_INFO,
				"%s: ballast released: %u KiB for the catalog on a full disk",
				s->lay.dir, (unsigned)(CFS_BALLAST_BYTES >> 10));
		return 0;
	}
	struct stat st;
	if (fstatat(s->lay.dir_fd, "ballast", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (uint64_t)st.st_blocks * 512 >= CFS_BALLAST_BYTES)
		return 0;
	int fd =
	    openat(s->lay.dir_fd, "ballast", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int rc = -posix_fallocate(fd, 0, (off_t)CFS_BALLAST_BYTES);
	close(fd);
	if (rc < 0) /* a partial one would hold room the catalog cannot get back as a whole */
		unlinkat(s->lay.dir_fd, "ballast", 0);
	return rc;
}

/* The syncer thread (its first sync point makes what reconciliation verified durable). */
static int start_syncer(struct cfs_store *s, uint64_t period_ms, char *err, size_t errlen)
{
	s->sync_period_ms = period_ms ? period_ms : CFS_SYNC_PERIOD_MS;
	int rc = cfs_catalog_unsynced_mark(s->cat, &s->open_mark);
	if (rc < 0) {
		snprintf(err, errlen, "%s/catalog.db: cannot read the files to sync: %s",
			 s->lay.dir, strerror(-rc));
		return rc;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->sync_cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&s->syncer, NULL, syncer_main, s);
	if (rc < 0) {
		pthread_cond_destroy(&s->sync_cv);
		snprintf(err, errlen, "%s: cannot start the sync thread: %s", s->lay.dir,
			 strerror(-rc));
		return rc;
	}
	s->syncer_on = true;
	return 0;
}

/* Stops the syncer thread and runs the last sync point (logged when it fails). */
static void stop_syncer(struct cfs_store *s)
{
	char err[512];
	if (!s->syncer_on)
		return;
	pthread_mutex_lock(&s->sync_mu);
	s->sync_stop = true;
	pthread_cond_signal(&s->sync_cv);
	pthread_mutex_unlock(&s->sync_mu);
	pthread_join(s->syncer, NULL);
	pthread_cond_destroy(&s->sync_cv);
	s->syncer_on = false;
	if (cfs_store_sync(s, err, sizeof(err)) < 0)
		cmn_log(CMN_LOG_ERROR, "%s", err);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int cfs_store_open(struct cfs_store **out, const struct cfs_store_opts *o, char *err, size_t errlen)
{
	struct cfs_store *s;
	char path[PATH_MAX];
	int rc;

	if (!o->dir || !*o->dir) {
		snprintf(err, errlen, "cache directory not set: give --cache-dir DIR");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->lay.dir = strdup(o->dir))) {
		free(s);
		snprintf(err, errlen, "%s: out of memory", o->dir);
		return -ENOMEM;
	}
	s->lay.dir_fd = s->lay.shards_fd = s->lay.objects_fd = s->lay.tmp_fd = s->lock_fd = -1;
	pthread_mutex_init(&s->sync_mu, NULL);

	rc = mkdir_p(s->lay.dir);
	if (rc < 0) {
		snprintf(err, errlen,
			 "%s: cannot create the cache directory: %s: check the path "
			 "and its permissions",
			 s->lay.dir, strerror(-rc));
		goto fail;
	}
	s->lay.dir_fd = open(s->lay.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->lay.dir_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open the cache directory: %s", s->lay.dir,
			 strerror(-rc));
		goto fail;
	}
	rc = check_foreign(s, err, errlen);
	if (rc < 0)
		goto fail;
	rc = take_lock(s, err, errlen);
	if (rc < 0)
		goto fail;
	if ((rc = open_sub(s, "shards", &s->lay.shards_fd, err, errlen)) < 0 ||
	    (rc = open_sub(s, "objects", &s->lay.objects_fd, err, errlen)) < 0 ||
	    (rc = open_sub(s, "tmp", &s->lay.tmp_fd, err, errlen)) < 0)
		goto fail;

	if (snprintf(path, sizeof(path), "%s/catalog.db", s->lay.dir) >= (int)sizeof(path)) {
		rc = -ENAMETOOLONG;
		snprintf(err, errlen, "%s: path too long", s->lay.dir);
		goto fail;
	}
	rc = cfs_catalog_open(&s->cat, path, 0, err, errlen);
	if (rc < 0)
		goto fail;
	rc = cfs_budget_new(&s->budget, o->limit);
	if (rc < 0) {
		snprintf(err, errlen, "%s: out of memory", s->lay.dir);
		goto fail;
	}
	rc = cfs__reconcile(&s->lay, s->cat, s->budget, o->keep_retiring, s->same_boot, &s->rec,
			    o->keep_start_rows ? &s->start_rows : NULL, &s->nstart_rows, err,
			    errlen);
	if (rc < 0)
		goto fail;
	rc = open_verity(s, o->verity, err, errlen);
	if (rc == 0)
		rc = start_syncer(s, o->sync_period_ms, err, errlen);
	if (rc == 0)
		(void)cfs_store_ballast(s, true); /* none on a disk already full: fine */
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;

fail:
	cfs_store_close(s);
	return rc;
}

void cfs_store_close(struct cfs_store *s)
{
	if (!s)
		return;
	stop_syncer(s); /* the last sync point: what was sealed is on disk */
	cfs_shard_info_free(s->start_rows, s->nstart_rows);
	if (s->budget)
		cfs_budget_cancel(s->budget);
	cfs_catalog_close(s->cat);
	cfs_budget_free(s->budget);
	close_fd(&s->lay.tmp_fd);
	close_fd(&s->lay.objects_fd);
	close_fd(&s->lay.shards_fd);
	close_fd(&s->lock_fd); /* releases the flock */
	close_fd(&s->lay.dir_fd);
	free(s->lay.dir);
	pthread_mutex_destroy(&s->sync_mu);
	free(s);
}

int cfs_store_take_start_rows(struct cfs_store *s, struct cfs_shard_info **rows, size_t *n)
{
	if (!s->start_rows)
		return -ENOENT;
	*rows = s->start_rows;
	*n = s->nstart_rows;
	s->start_rows = NULL;
	s->nstart_rows = 0;
	return 0;
}

bool cfs_store_verity(const struct cfs_store *s, const char **why)
{
	if (why)
		*why = s->verity ? "" : s->verity_why;
	return s->verity;
}

struct cfs_catalog *cfs_store_catalog(struct cfs_store *s)
{
	return s->cat;
}

int cfs_store_catalog_reader(struct cfs_store *s, struct cfs_catalog **out, char *err,
			     size_t errlen)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/catalog.db", s->lay.dir) >= (int)sizeof(path)) {
		snprintf(err, errlen, "%s: path too long", s->lay.dir);
		return -ENAMETOOLONG;
	}
	return cfs_catalog_open(out, path, CFS_CATALOG_READONLY, err, errlen);
}

struct cfs_budget *cfs_store_budget(struct cfs_store *s)
{
	return s->budget;
}

const char *cfs_store_dir(const struct cfs_store *s)
{
	return s->lay.dir;
}

const struct cfs_reconcile_report *cfs_store_reconcile_report(const struct cfs_store *s)
{
	return &s->rec;
}

int cfs_store_file_path(const struct cfs_store *s, enum cfs_kind kind, int64_t id, bool absolute,
			char *buf, size_t buflen)
{
	char rel[CFS_RELPATH_MAX];
	int n = snprintf(buf, buflen, "%s%s%s", absolute ? s->lay.dir : "", absolute ? "/" : "",
			 cfs__relpath(kind, id, rel));
	if (n < 0 || (size_t)n >= buflen) {
		if (buflen)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int cfs_store_open_file(struct cfs_store *s, enum cfs_kind kind, int64_t id)
{
	char name[32];
	int fd;

	cfs__file_name(kind, id, name, sizeof(name));
	fd = openat(cfs__kind_fd(&s->lay, kind), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

/* Deletes the file; a missing file is fine (already gone). */
static int unlink_file(struct cfs_store *s, enum cfs_kind kind, int64_t id)
{
	char name[32];

	cfs__file_name(kind, id, name, sizeof(name));
	if (unlinkat(cfs__kind_fd(&s->lay, kind), name, 0) < 0 && errno != ENOENT) {
		int e = errno;
		cmn_log(CMN_LOG_ERROR, "%s: cannot delete evicted file %s: %s", s->lay.dir, name,
			strerror(e));
		return -e;
	}
	return 0;
}

void cfs_store_evicted(struct cfs_store *s, const struct cfs_evict_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cfs_budget_sealed_to_draining(s->budget, items[i].bytes);
}

int cfs_store_reap(struct cfs_store *s, const struct cfs_evict_item *items, size_t n)
{
	if (n == 0)
		return 0;
	int64_t *gone = malloc(n * sizeof(*gone));
	if (!gone)
		return -ENOMEM;
	size_t ngone = 0;
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = unlink_file(s, items[i].kind, items[i].id);
		if (rc < 0) { /* still on disk: draining until reconciliation */
			if (!first_err)
				first_err = rc;
			continue;
		}
		cfs_budget_draining_removed(s->budget, items[i].bytes);
		gone[ngone++] = items[i].id;
		cmn_fault("evict");
	}
	int rc = cfs_catalog_shards_gone(s->cat, gone, ngone);
	free(gone);
	return rc ? rc : first_err;
}

int cfs_store_release_evicted(struct cfs_store *s, enum cfs_kind kind, int64_t id, uint64_t bytes)
{
	struct cfs_evict_item it = {id, kind, bytes, false};
	return cfs_store_reap(s, &it, 1);
}
