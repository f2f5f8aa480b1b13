/*
 * copy_floor.c - the kernel's part of ingesting small raw objects, alone:
 * the system calls `rollcache ingest` makes per object of a file:// tree
 * (open, pread to the end and close the source; create objects/<id> in
 * one directory, write, close), on one thread, with nothing else, then one
 * syncfs() (docs/benchmarks.md, "Small objects").
 *
 *   build/bench/copy_floor SRC DST N FOLDERS
 *
 * SRC is a tree of bench/raw_ingest.sh (SRC/n%08d/img_%08d.JPEG, object i
 * in folder i % FOLDERS); DST must not exist.  Prints the seconds of each
 * part.  What ingest adds over this is its own work (the plan, the
 * catalog, the threads' hand-offs); what `cp -r` takes for the same tree
 * is the peer in the same run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Reads the whole of path into buf (at most cap bytes); returns its length or -1. */
static ssize_t read_source(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t len = 0, n;
	while ((n = pread(fd, buf + len, cap - (size_t)len, len)) > 0)
		len += n;
	close(fd);
	return n < 0 ? -1 : len;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: copy_floor SRC DST N FOLDERS\n");
		return 2;
	}
	const char *src = argv[1], *dst = argv[2];
	long n = strtol(argv[3], NULL, 10), folders = strtol(argv[4], NULL, 10);
	if (n <= 0 || folders <= 0) {
		fprintf(stderr, "copy_floor: N and FOLDERS must be positive\n");
		return 2;
	}
	if (mkdir(dst, 0755) < 0) {
		fprintf(stderr, "copy_floor: %s: %s (give a new directory)\n", dst,
			strerror(errno));
		return 1;
	}
	int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	static char buf[1 << 20];
	double t_src = 0, t_create = 0, t_write = 0, t0 = now();
	for (long i = 0; i < n; i++) {
		char path[4096], name[32];
		snprintf(path, sizeof(path), "%s/n%08ld/img_%08ld.JPEG", src, i % folders, i);
		snprintf(name, sizeof(name), "%ld", i + 1);
		double a = now();
		ssize_t len = read_source(path, buf, sizeof(buf));
		double b = now();
		int fd =
		    openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
		double c = now();
		if (len < 0 || fd < 0 || write(fd, buf, (size_t)len) != len) {
			fprintf(stderr, "copy_floor: object %ld: %s\n", i, strerror(errno));
			return 1;
		}
		close(fd);
		double d = now();
		t_src += b - a;
		t_create += c - b;
		t_write += d - c;
	}
	double t1 = now();
	syncfs(dfd);
	double t2 = now();
	close(dfd);
	printf("%ld objects: sources opened, read, closed %.3f s; created %.3f s; written, closed "
	       "%.3f s; all %.3f s; syncfs %.3f s; with it %.3f s\n",
	       n, t_src, t_create, t_write, t1 - t0, t2 - t1, t2 - t0);
	return 0;
}
