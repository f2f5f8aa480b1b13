/*
 * mount.c - reading a rollcache mount: which of its epochs, asking it for
 * the next one, waiting for an empty one to get data.
 *
 * Owns finding the mount above the input, the feeder's base epoch, the
 * "next N" requests, and the wait at open.  Opened on MOUNT, MOUNT/current
 * or MOUNT/epochs/N, the feeder reads MOUNT/epochs/<base + e> for its epoch
 * e, never `current`: ranks that share a mount read the same epoch whatever
 * the others already asked for (DESIGN "Scale-out").  A glob or a list of
 * files inside a mount keeps the older way: `next`, then list again.
 * Talks to the daemon only through its files (.rollcache/control,
 * .rollcache/metrics, the `current` link); links nothing of it.
 *
 * Locking: none; the consumer thread calls these (at open, next_epoch and
 * seek) with the workers paused or not started.
 */
#include "feeder/feeder_i.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAIT_DEFAULT_MS (600u * 1000u)
#define WAIT_POLL_MS	200u
#define METRICS_MAX	((size_t)1 << 20) /* bytes of .rollcache/metrics read */

/* Parses "N" (digits only) into *n.  true when it is one. */
static bool parse_epoch(const char *s, int64_t *n)
{
	size_t len = strlen(s);
	if (len == 0 || len > 10 || strspn(s, "0123456789") != len)
		return false;
	*n = (int64_t)strtoull(s, NULL, 10);
	return true;
}

/* The epoch `current` points at (readlink "epochs/N").  0 or -errno. */
static int mount_current(const char *mount, int64_t *epoch)
{
	char p[PATH_MAX], t[256];
	if ((size_t)snprintf(p, sizeof p, "%s/current", mount) >= sizeof p)
		return -ENAMETOOLONG;
	ssize_t n = readlink(p, t, sizeof t - 1);
	if (n < 0)
		return -errno;
	t[n] = '\0';
	if (strncmp(t, "epochs/", 7) != 0 || !parse_epoch(t + 7, epoch))
		return -EINVAL;
	return 0;
}

void fdr__mount_find(struct rc_feeder *f)
{
	const char *first = f->cfg.path ? f->cfg.path : f->cfg.paths[0];
	char abs[PATH_MAX], root[PATH_MAX];

	f->cfg.mount[0] = '\0';
	f->cfg.mount_epochs = false;
	f->ep.base = 0;
	if (fdr__find_control(f->cfg.path, first, f->cfg.control, sizeof f->cfg.control)) {
		f->cfg.control[0] = '\0';
		return;
	}
	/* MOUNT/.rollcache/control -> MOUNT */
	snprintf(f->cfg.mount, sizeof f->cfg.mount, "%s", f->cfg.control);
	for (int i = 0; i < 2; i++) {
		char *slash = strrchr(f->cfg.mount, '/');
		if (slash)
			*slash = '\0';
	}
	if (!f->cfg.path || !realpath(f->cfg.path, abs) || !realpath(f->cfg.mount, root))
		return;
	size_t rl = strlen(root);
	int64_t cur = -1, n = -1;
	bool have_cur = mount_current(f->cfg.mount, &cur) == 0;
	if (!strcmp(abs, root)) {
		n = cur; /* MOUNT itself: its current epoch */
	} else if (!strncmp(abs, root, rl) && !strncmp(abs + rl, "/epochs/", 8) &&
		   parse_epoch(abs + rl + 8, &n)) {
		/* MOUNT/current resolves here too */
	} else {
		return; /* somewhere else inside the mount: list it as given */
	}
	if (!have_cur || n < 0)
		return; /* not a mount with epochs (e.g. a test's stand-in) */
	f->cfg.mount_epochs = true;
	f->ep.base = f->cfg.o.mount_epoch >= 0 ? f->cfg.o.mount_epoch : n;
}

int fdr__mount_epoch_dir(const struct rc_feeder *f, int64_t mepoch, char *out, size_t outlen)
{
	if ((size_t)snprintf(out, outlen, "%s/epochs/%" PRId64, f->cfg.mount, mepoch) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

void fdr__mount_retire_read(struct rc_feeder *f)
{
	char err[256];
	/*
	 * Several ranks take records of every file: one rank's read to the end
	 * says nothing of the others', so a file must not retire on it (it
	 * would leave the listing under them).  An older daemon answers
	 * EINVAL: its configured retire mode stays.
	 */
	const char *cmd = f->cfg.o.world_size > 1 ? "retire boundary" : "retire read";
	f->cfg.retire_asked = fdr__advance_cache(f->cfg.control, cmd, err, sizeof err) == 0;
}

void fdr__mount_retire_restore(struct rc_feeder *f)
{
	char err[256];
	if (!f->cfg.retire_asked)
		return;
	f->cfg.retire_asked = false;
	(void)fdr__advance_cache(f->cfg.control, "retire config", err, sizeof err);
}

int fdr__mount_ask(const struct rc_feeder *f, int64_t mepoch, bool wait, char *err, size_t errlen)
{
	char cmd[64];
	snprintf(cmd, sizeof cmd, "next %" PRId64 "%s", mepoch, wait ? " wait" : "");
	return fdr__advance_cache(f->cfg.control, cmd, err, errlen);
}

/* Records resident in the cache, from .rollcache/metrics.  0 or -errno. */
static int mount_resident(const char *mount, uint64_t *records)
{
	char p[PATH_MAX];
	static const char key[] = "\nrollcache_resident_records ";
	if ((size_t)snprintf(p, sizeof p, "%s/.rollcache/metrics", mount) >= sizeof p)
		return -ENAMETOOLONG;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = malloc(METRICS_MAX + 2);
	size_t len = 1;
	int rc = buf ? 0 : -ENOMEM;
	while (!rc && len < METRICS_MAX + 1) {
		ssize_t n = read(fd, buf + len, METRICS_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (!rc) {
		buf[0] = '\n'; /* so that the first line matches too */
		buf[len] = '\0';
		const char *at = strstr(buf, key);
		if (at)
			*records = strtoull(at + sizeof key - 1, NULL, 10);
		else
			rc = -ENOENT;
	}
	free(buf);
	return rc;
}

/* Whether MOUNT/epochs/<mepoch> holds at least one file.  0 or -errno with a message. */
static int epoch_has_files(struct rc_feeder *f, int64_t mepoch, bool *has, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	char **files = NULL;
	size_t n = 0;
	int rc = fdr__mount_epoch_dir(f, mepoch, dir, sizeof dir);
	if (!rc)
		rc = fdr__files_list(dir, NULL, 0, true, &files, &n, err, errlen);
	fdr__files_free(files, n);
	*has = n > 0;
	return rc;
}

int fdr__mount_wait_data(struct rc_feeder *f, char *err, size_t errlen)
{
	uint64_t wait_ms = f->cfg.o.wait_ms ? f->cfg.o.wait_ms : WAIT_DEFAULT_MS;
	uint64_t t0 = cmn_mono_ms();
	uint64_t resident = 0;
	bool logged = false;

	for (;;) {
		bool has;
		int rc = epoch_has_files(f, f->ep.base, &has, err, errlen);
		int64_t cur;
		bool moved = mount_current(f->cfg.mount, &cur) == 0 && cur > f->ep.base;
		if (rc == -ENOENT && moved && !has) {
			/* the empty epoch left the listing: the mount moved on (its first
			 * epoch, another rank, advance = auto) */
			f->ep.base = cur;
			continue;
		}
		if (rc || has)
			return rc;
		if (moved) {
			f->ep.base = cur; /* another rank (or advance = auto) moved on */
			continue;
		}
		if (cmn_mono_ms() - t0 >= wait_ms)
			break;
		if (!logged) {
			cmn_log(CMN_LOG_INFO,
				"feeder: %s/epochs/%" PRId64 " has no files yet: waiting for data",
				f->cfg.mount, f->ep.base);
			logged = true;
		}
		if (mount_resident(f->cfg.mount, &resident) == 0 && resident > 0) {
			/* the next epoch's snapshot will hold them: every rank asks
			 * for the same epoch, the mount advances once */
			rc = fdr__mount_ask(f, f->ep.base + 1, true, err, errlen);
			if (rc)
				return rc;
			f->ep.base++;
		}
		struct timespec ts = {0, WAIT_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	snprintf(err, errlen,
		 "%s: epoch %" PRId64 " has no files and no data arrived in %" PRIu64 " s (%" PRIu64
		 " records resident; `rollcache status %s` says what the "
		 "samplers do)",
		 f->cfg.mount, f->ep.base, wait_ms / 1000, resident, f->cfg.mount);
	return -ETIMEDOUT;
}
