/*
 * report_fixture.c - writes a cache directory's catalog through the
 * cachefs/catalog.h API (no daemon, no FUSE) with a crafted run of three
 * epochs, for test_report.py to check `rollcache report` against.
 *
 *   report_fixture DIR [--reap]   creates DIR/catalog.db (DIR must exist)
 *
 * The run (bytes are small made-up sizes; records = samples):
 *   epoch 0  fifo, limit 1000, admit 500; files 1 (100 B, 2 records) and
 *            2 (200 B, 3 records) admitted.
 *   epoch 1  lru, limit 1000, admit 400; starts with files 1, 2; file 3
 *            (150 B, 1 record) admitted; file 1 read to the end once, file 2
 *            read partly (100 + 50 bytes read).
 *   epoch 2  none, limit 900, admit 0; the boundary evicts files 1 and 2
 *            (file 1 then deleted: GONE; file 2 still EVICTING); file 3
 *            read to the end twice (300 bytes); file 4 (80 B, 4 records)
 *            admitted, never read.
 *   epoch 3  never begun: file 5 (60 B, 2 records) counted into it (as a
 *            sampler or `ingest` does before the boundary that begins it).
 * With --reap file 2 is deleted last (GONE, as the reaper does on its last
 * release): no row of files 1 and 2 is left, and every figure of the
 * report must stay the same (the epochs counters keep them).
 * Every record is of object 10, at offset 16 * (its index in the file) +
 * `first`: files 1 and 2 hold records 0-1 and 2-4; file 3's one record is
 * record 0 again (a second pass brought it): served once, in epoch 1.
 * Exit 0, or 1 with the failing step on stderr.
 */
#include "cachefs/catalog.h"

#include <stdio.h>
#include <string.h>

static int insert(struct cfs_catalog *c, int64_t id, uint64_t bytes, size_t records, uint32_t epoch,
		  uint64_t first)
{
	struct cfs_sample smp[8];
	memset(smp, 0, sizeof(smp));
	for (size_t i = 0; i < records; i++) {
		smp[i].offset = i * 16;
		smp[i].length = 4;
		smp[i].crc = (uint32_t)i;
		smp[i].object_id = 10;
		smp[i].object_offset = first + i * 16;
	}
	struct cfs_shard_new sh = {
	    .id = id, .kind = CFS_KIND_TFRECORD, .bytes = bytes, .created_epoch = epoch};
	cfs_catalog_note_id(c, id);
	return cfs_catalog_shard_insert(c, &sh, smp, records);
}

static int begin(struct cfs_catalog *c, uint32_t n, uint64_t limit, uint64_t admit,
		 const char *policy, uint64_t files, uint64_t bytes, uint64_t records)
{
	struct cfs_epoch_row r = {
	    .number = n,
	    .started_ms = 1700000000000ull + n * 1000u,
	    .limit = limit,
	    .admit = admit,
	    .resident_files = files,
	    .resident_bytes = bytes,
	    .resident_records = records,
	};
	snprintf(r.policy, sizeof(r.policy), "%s", policy);
	return cfs_catalog_epoch_begin(c, &r);
}

#define STEP(what, call)                                                                           \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != 0) {                                                                    \
			fprintf(stderr, "report_fixture: %s: %d\n", what, rc_);                    \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	char path[4096], err[512];
	struct cfs_catalog *c = NULL;
	int ec = 1;
	if (argc != 2 && (argc != 3 || strcmp(argv[2], "--reap") != 0)) {
		fprintf(stderr, "usage: report_fixture DIR [--reap]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/catalog.db", argv[1]);
	if (cfs_catalog_open(&c, path, 0, err, sizeof(err)) != 0) {
		fprintf(stderr, "report_fixture: %s\n", err);
		return 1;
	}
	STEP("begin 0", begin(c, 0, 1000, 500, "fifo", 0, 0, 0));
	STEP("insert 1", insert(c, 1, 100, 2, 0, 0));
	STEP("insert 2", insert(c, 2, 200, 3, 0, 32));
	STEP("begin 1", begin(c, 1, 1000, 400, "lru", 2, 300, 5));
	STEP("insert 3", insert(c, 3, 150, 1, 1, 0));
	struct cfs_shard_stat_delta d1[] = {
	    {.id = 1,
	     .reads = 1,
	     .full_reads = 1,
	     .read_bytes = 100,
	     .last_read_ms = 1700000001500ull},
	    {.id = 2,
	     .reads = 1,
	     .full_reads = 0,
	     .read_bytes = 50,
	     .last_read_ms = 1700000001600ull},
	};
	STEP("stats 1", cfs_catalog_shards_add_stats(c, d1, 2, 1));
	STEP("txn 2", cfs_catalog_begin(c));
	int64_t ev[] = {1, 2};
	if (cfs_catalog_shards_evict(c, ev, 2, 2) != 0 ||
	    begin(c, 2, 900, 0, "none", 1, 150, 1) != 0) {
		cfs_catalog_rollback(c);
		fprintf(stderr, "report_fixture: boundary 2 failed\n");
		goto out;
	}
	STEP("commit 2", cfs_catalog_commit(c));
	STEP("gone 1", cfs_catalog_shards_gone(c, ev, 1));
	struct cfs_shard_stat_delta d2[] = {
	    {.id = 3,
	     .reads = 2,
	     .full_reads = 2,
	     .read_bytes = 300,
	     .last_read_ms = 1700000002500ull},
	};
	STEP("stats 2", cfs_catalog_shards_add_stats(c, d2, 1, 2));
	STEP("insert 4", insert(c, 4, 80, 4, 2, 1000));
	STEP("insert 5", insert(c, 5, 60, 2, 3, 2000));
	if (argc == 3)
		STEP("gone 2", cfs_catalog_shards_gone(c, ev + 1, 1));
	ec = 0;
out:
	cfs_catalog_close(c);
	return ec;
}
