/*
 * tfr_gen.c - writes a TFRecord file of N pseudo-random records of SIZE bytes
 * with cmn_tfr_writer, for tests and for measuring `rollcache check` before
 * `rollcache synth` exists.  Usage: tfr_gen FILE RECORDS SIZE
 */
#include "common/tfrecord.h"
#include "common/units.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct cmn_tfr_writer *w;
	char err[256];
	uint64_t n, size;
	unsigned char *payload;
	int fd, rc;

	if (argc != 4 || cmn_parse_size(argv[2], &n, err, sizeof(err)) ||
	    cmn_parse_size(argv[3], &size, err, sizeof(err))) {
		fprintf(stderr, "usage: tfr_gen FILE RECORDS SIZE\n");
		return 2;
	}
	payload = malloc(size ? size : 1);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!payload || fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (uint64_t i = 0; i < size; i++)
		payload[i] = (unsigned char)(i * 2654435761u >> 11);
	if (cmn_tfr_writer_open(&w, fd, 0, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	for (uint64_t r = 0; r < n; r++) {
		if (size >= 8)
			memcpy(payload, &r, 8); /* records differ */
		rc = cmn_tfr_writer_append(w, payload, size, 0, false);
		if (rc) {
			fprintf(stderr, "%s: write failed (%d)\n", argv[1], rc);
			return 1;
		}
	}
	if (cmn_tfr_writer_flush(w) || close(fd)) {
		fprintf(stderr, "%s: flush failed\n", argv[1]);
		return 1;
	}
	cmn_tfr_writer_free(w);
	free(payload);
	return 0;
}
