/*
 * fdr_gen.h - test data for the feeder: TFRecord (plain or GZIP) or raw
 * files whose every value follows a formula of (global record id g, feature
 * j, element e), so a reader of the batches can check each value without a
 * second decoder.  Global id: g = file * records_per_file + record.
 *
 *   float32: (float)((g % 4096) + (e % 1024) * 0.5 + j)
 *   int64:   (e % 2 ? -1 : 1) * (g * 1000 + e + j)       (negative varints)
 *   uint8:   (g * 7 + e + j) & 255
 *   ragged numeric features hold (g + j) % 4 elements; bytes features hold
 *   (g + j) % 7 bytes, byte e = (g + e + j) & 255.
 *
 * The same formulas are in python/tests (oracle for the Python binding).
 */
#ifndef RC_TESTS_FDR_GEN_H
#define RC_TESTS_FDR_GEN_H

#include "common/example.h"
#include "common/schema.h"
#include "common/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static inline float gen_f32(uint64_t g, size_t j, uint64_t e)
{
	return (float)((double)(g % 4096) + (double)(e % 1024) * 0.5 + (double)j);
}

static inline int64_t gen_i64(uint64_t g, size_t j, uint64_t e)
{
	int64_t v = (int64_t)(g * 1000 + e + j);
	return (e % 2) ? -v : v;
}

static inline uint8_t gen_u8(uint64_t g, size_t j, uint64_t e)
{
	return (uint8_t)((g * 7 + e + j) & 255);
}

static inline uint64_t gen_count(const struct cmn_feature *ft, uint64_t g, size_t j)
{
	if (!ft->ragged)
		return ft->count;
	return ft->dtype == CMN_DT_BYTES ? (g + j) % 7 : (g + j) % 4;
}

/* Fills buf (element bytes of feature j for record g). */
static inline void gen_values(const struct cmn_feature *ft, uint64_t g, size_t j, void *buf,
			      uint64_t n)
{
	for (uint64_t e = 0; e < n; e++) {
		switch (ft->dtype) {
		case CMN_DT_FLOAT32:
			((float *)buf)[e] = gen_f32(g, j, e);
			break;
		case CMN_DT_INT64:
			((int64_t *)buf)[e] = gen_i64(g, j, e);
			break;
		default:
			((uint8_t *)buf)[e] = gen_u8(g, j, e);
			break;
		}
	}
}

/*
 * Writes `files` files named part-NNNNN.tfrecord (or .raw) into dir, each
 * with `records` records for schema spec.  skip_feature >= 0 leaves that
 * feature out of every record with g == skip_g (for error tests).  Returns 0
 * or -errno with a message.
 */
static inline int gen_files(const char *dir, const char *spec, unsigned files, unsigned records,
			    int gzip, int raw, int skip_feature, uint64_t skip_g, char *err,
			    size_t errlen)
{
	struct cmn_schema *s = NULL;
	int rc = cmn_schema_parse(spec, &s, err, errlen);
	if (rc)
		return rc;
	struct cmn_ex_values *v = calloc(s->n, sizeof *v);
	void **vals = calloc(s->n, sizeof *vals);
	size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	for (size_t j = 0; j < s->n; j++)
		vals[j] = malloc(s->feature[j].ragged ? 64 : s->feature[j].row_bytes);
	for (unsigned k = 0; k < files && !rc; k++) {
		char path[4096];
		if (snprintf(path, sizeof path, "%s/part-%05u.%s", dir, k,
			     raw ? "raw" : "tfrecord") >= (int)sizeof path) {
			rc = -ENAMETOOLONG;
			break;
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			rc = -errno;
			snprintf(err, errlen, "%.400s: %s", path, strerror(errno));
			break;
		}
		struct cmn_tfr_writer *w = NULL;
		if (!raw)
			rc = cmn_tfr_writer_open(&w, fd, 0, err, errlen);
		for (unsigned r = 0; r < records && !rc; r++) {
			uint64_t g = (uint64_t)k * records + r;
			struct cmn_schema sub = *s;
			for (size_t j = 0; j < s->n; j++) {
				const struct cmn_feature *ft = &s->feature[j];
				uint64_t n = gen_count(ft, g, j);
				gen_values(ft, g, j, vals[j], n);
				v[j] = (struct cmn_ex_values){.data = vals[j], .n = n};
				if (raw) {
					if (write(fd, vals[j], ft->row_bytes) !=
					    (ssize_t)ft->row_bytes)
						rc = -EIO;
				}
			}
			if (raw)
				continue;
			/* leave one feature out: encode a schema without it */
			struct cmn_feature tmpf[CMN_SCHEMA_MAX_FEATURES];
			struct cmn_ex_values tmpv[CMN_SCHEMA_MAX_FEATURES];
			if (skip_feature >= 0 && g == skip_g) {
				size_t m = 0;
				for (size_t j = 0; j < s->n; j++)
					if ((int)j != skip_feature) {
						tmpf[m] = s->feature[j];
						tmpv[m++] = v[j];
					}
				sub.n = m;
				sub.feature = tmpf;
			}
			const struct cmn_ex_values *vv = sub.feature == s->feature ? v : tmpv;
			size_t need = cmn_ex_encoded_size(&sub, vv);
			if (need > cap) {
				cap = need * 2;
				buf = realloc(buf, cap);
			}
			size_t len = 0;
			rc = cmn_ex_encode(&sub, vv, buf, cap, &len, err, errlen);
			if (!rc)
				rc = cmn_tfr_writer_append(w, buf, len, 0, false);
		}
		if (w) {
			if (!rc)
				rc = cmn_tfr_writer_flush(w);
			cmn_tfr_writer_free(w);
		}
		close(fd);
		if (!rc && gzip && !raw) {
			/* compress in place: one gzip member, as TF's GZIP writer does */
			FILE *in = fopen(path, "rb");
			char gzpath[4200];
			snprintf(gzpath, sizeof gzpath, "%s.gz", path);
			gzFile out = gzopen(gzpath, "wb6");
			size_t n;
			uint8_t tmp[65536];
			while (in && out && (n = fread(tmp, 1, sizeof tmp, in)) > 0)
				gzwrite(out, tmp, (unsigned)n);
			if (in)
				fclose(in);
			if (out)
				gzclose(out);
			unlink(path);
		}
		if (rc && !err[0])
			snprintf(err, errlen, "writing %.400s: %s", path, strerror(-rc));
	}
	for (size_t j = 0; j < s->n; j++)
		free(vals[j]);
	free(vals);
	free(v);
	free(buf);
	cmn_schema_free(s);
	return rc;
}

#endif
