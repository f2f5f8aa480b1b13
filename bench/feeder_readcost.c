/*
 * feeder_readcost.c - CPU cost of getting file bytes from the page cache,
 * with nothing else: the floor under the feeder's reader.
 *
 * Reads every file of DIR three times in windows of SIZE bytes, either with
 * pread(2) into one 2 MiB-aligned, huge-page-advised buffer (what the
 * feeder's reader does, minus framing and CRC), or by mmap(MAP_POPULATE)
 * and munmap of each window (the alternative in docs/TODO.md (feeder)), and
 * prints user + system CPU seconds per GB.  Run it on warm files (run it
 * twice; the first may read from disk).  Built as build/bench/feeder_readcost:
 *
 *   build/bench/feeder_readcost DATA/dense pread 4194304
 *   build/bench/feeder_readcost DATA/dense mmap 4194304
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6 +
	       (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[2], "pread") && strcmp(argv[2], "mmap"))) {
		fprintf(stderr, "usage: %s DIR pread|mmap SIZE\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	int use_mmap = !strcmp(argv[2], "mmap");
	size_t rs = (size_t)strtoull(argv[3], NULL, 0);
	size_t cap = (rs + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
	unsigned char *buf = aligned_alloc((size_t)2 << 20, cap);
	if (!rs || !buf) {
		fprintf(stderr, "bad size or out of memory\n");
		return 1;
	}
	(void)madvise(buf, cap, MADV_HUGEPAGE);
	memset(buf, 0, cap); /* fault the buffer in before measuring */
	double bytes = 0, t0 = cpu_s();
	unsigned long sink = 0;
	for (int pass = 0; pass < 3; pass++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		if (!d) {
			perror(dir);
			return 1;
		}
		while ((e = readdir(d))) {
			char p[4096];
			struct stat sb;
			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			int fd = open(p, O_RDONLY);
			if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
				if (fd >= 0)
					close(fd);
				continue;
			}
			for (off_t off = 0; off < sb.st_size; off += (off_t)rs) {
				size_t n = (size_t)(sb.st_size - off) < rs
					       ? (size_t)(sb.st_size - off)
					       : rs;
				if (use_mmap) {
					unsigned char *m =
					    mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd,
						 off);
					if (m == MAP_FAILED) {
						perror("mmap");
						return 1;
					}
					sink += m[n - 1];
					munmap(m, n);
				} else {
					ssize_t k = pread(fd, buf, n, off);
					if (k <= 0) {
						perror("pread");
						return 1;
					}
					sink += buf[k - 1];
				}
				bytes += (double)n;
			}
			close(fd);
		}
		closedir(d);
	}
	printf("%s, %zu-byte windows: %.3f CPU-s per GB (%.0f MB; sink %lu)\n",
	       use_mmap ? "mmap+populate+munmap" : "pread", rs, (cpu_s() - t0) / (bytes / 1e9),
	       bytes / 1e6, sink & 1);
	free(buf);
	return 0;
}
