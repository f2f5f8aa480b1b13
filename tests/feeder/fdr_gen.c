/*
 * fdr_gen.c - writes feeder test/benchmark data (formulas in fdr_gen.h).
 *   fdr_gen DIR SPEC FILES RECORDS [gzip|raw]
 */
#include "fdr_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	char err[512] = "";
	if (argc < 5) {
		fprintf(stderr, "usage: fdr_gen DIR SPEC FILES RECORDS [gzip|raw]\n");
		return 2;
	}
	int gz = argc > 5 && !strcmp(argv[5], "gzip");
	int raw = argc > 5 && !strcmp(argv[5], "raw");
	int rc = gen_files(argv[1], argv[2], (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]), gz,
			   raw, -1, 0, err, sizeof err);
	if (rc) {
		fprintf(stderr, "fdr_gen: %s\n", err);
		return 1;
	}
	return 0;
}
