/*
 * files.c - which files an epoch reads, and the rollcache mount's control file.
 *
 * Owns listing (a directory, a glob, one file or a caller's list), the
 * seeded per-epoch file order, and finding and writing
 * MOUNT/.rollcache/control.  Lists are plain arrays of malloc'ed paths owned
 * by the caller (fdr__files_free).  No locking: the feeder calls these with
 * its workers paused (or from the one decoder that lists ahead).
 *
 * Every rank lists the same sorted list and shuffles it with the same seed,
 * so they agree on the epoch's order; which records of it a rank reads is
 * split.c's job.  Directories are listed again every epoch.
 */
#include "common/control.h"
#include "feeder/feeder_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fdr__files_free(char **files, size_t n)
{
	for (size_t i = 0; files && i < n; i++)
		free(files[i]);
	free(files);
}

int fdr__open_error(const struct rc_feeder *f, const char *name, int rc, char *err, size_t errlen)
{
	if (rc == -ENOENT && f->cfg.mount[0])
		snprintf(err, errlen,
			 "%s: already read in this epoch (the mount retired it; read each file "
			 "once per epoch, or use retire = boundary)",
			 name);
	else
		snprintf(err, errlen, "%s: %s", name, strerror(-rc));
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of s to *v (n entries, cap *cap).  0 or -ENOMEM. */
static int push(char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		char **nv = realloc(*v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	char *c = strdup(s);
	if (!c)
		return -ENOMEM;
	(*v)[(*n)++] = c;
	return 0;
}

static int list_dir(const char *dir, char ***v, size_t *n, size_t *cap, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];
	int rc = 0;

	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	while (!rc && (e = readdir(d))) {
		struct stat sb;
		if (e->d_name[0] == '.')
			continue; /* ., .., .rollcache and hidden files */
		if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p)
			continue;
		if (stat(p, &sb) || !S_ISREG(sb.st_mode))
			continue;
		rc = push(v, n, cap, p);
	}
	closedir(d);
	if (rc)
		snprintf(err, errlen, "%s: out of memory", dir);
	return rc;
}

int fdr__files_list(const char *path, const char *const *paths, size_t n_paths, bool allow_empty,
		    char ***out, size_t *out_n, char *err, size_t errlen)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (path) {
		struct stat sb;
		if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
			rc = list_dir(path, &v, &n, &cap, err, errlen);
		} else if (strpbrk(path, "*?[")) {
			glob_t g;
			int grc = glob(path, 0, NULL, &g);
			if (grc == 0) {
				for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
					struct stat s2;
					if (!stat(g.gl_pathv[i], &s2) && S_ISREG(s2.st_mode))
						rc = push(&v, &n, &cap, g.gl_pathv[i]);
				}
				globfree(&g);
			} else if (grc != GLOB_NOMATCH) {
				rc = -EIO;
				snprintf(err, errlen, "%s: glob failed", path);
			}
		} else if (!stat(path, &sb)) {
			rc = push(&v, &n, &cap, path);
		} else {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		}
		if (!rc && n > 1)
			qsort(v, n, sizeof *v, cmp_str);
	} else {
		for (size_t i = 0; !rc && i < n_paths; i++)
			rc = push(&v, &n, &cap, paths[i]);
	}
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory listing files");
		fdr__files_free(v, n);
		return rc;
	}
	if (n == 0 && !allow_empty) {
		snprintf(err, errlen, "%s: no files to read", path ? path : "(path list)");
		fdr__files_free(v, n);
		return -ENOENT;
	}
	*out = v;
	*out_n = n;
	return 0;
}

uint64_t fdr__rng_next(uint64_t *s)
{
	/* splitmix64: tiny, seedable, good enough for shuffling */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t fdr__rng_below(uint64_t *s, uint64_t n)
{
	/* n is small (records in a window); modulo bias is below 2^-40 */
	return n ? fdr__rng_next(s) % n : 0;
}

void fdr__files_shuffle(char **files, size_t n, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)fdr__rng_below(&s, i);
		char *t = files[i - 1];
		files[i - 1] = files[j];
		files[j] = t;
	}
}

int fdr__find_control(const char *path, const char *first_file, char *out, size_t outlen)
{
	char dir[PATH_MAX];
	struct stat sb;
	const char *start = path ? path : first_file;

	if (!start || strlen(start) >= sizeof dir)
		return -ENOENT;
	strcpy(dir, start);
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			strcpy(dir, ".");
		else if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
	}
	/* absolute, so that walking up reaches the mount root from "current"
	 * or "." too (MOUNT/current resolves to MOUNT/epochs/N: still below) */
	char abs[PATH_MAX];
	if (realpath(dir, abs) && strlen(abs) < sizeof dir)
		strcpy(dir, abs);
	for (int depth = 0; depth < 64; depth++) {
		char p[PATH_MAX];
		if ((size_t)snprintf(p, sizeof p, "%s/.rollcache/control", dir) < sizeof p &&
		    !stat(p, &sb) && !S_ISDIR(sb.st_mode)) {
			if (strlen(p) >= outlen)
				return -ENAMETOOLONG;
			strcpy(out, p);
			return 0;
		}
		char *slash = strrchr(dir, '/');
		if (!slash || !strcmp(dir, "/"))
			break;
		if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
		if (!strcmp(dir, "."))
			break;
	}
	return -ENOENT;
}

int fdr__advance_cache(const char *control, const char *cmd, char *err, size_t errlen)
{
	int rc = cmn_control_send(control, cmd);
	if (rc != 0)
		snprintf(err, errlen, "%s: '%s': %s", control, cmd, strerror(-rc));
	return rc;
}
