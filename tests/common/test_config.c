/*
 * test_config.c - Check suite for common/config.c (INI, --key, -o, finish).
 *
 * Config files are written to a temporary directory; every error case of
 * config.h is checked for its code and for a message naming file:line, the
 * key, the value and what is expected.
 */
#include "common/config.h"

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];
static char path[128];

static void write_ini(const char *text)
{
	FILE *f;

	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/rc-config-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	}
	snprintf(path, sizeof(path), "%s/t.ini", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void cleanup(void)
{
	if (tmpdir[0]) {
		unlink(path);
		rmdir(tmpdir);
	}
}

/* Loads text; returns the rc and leaves the message in err. */
static int load(struct cmn_config *c, const char *text, char *err, size_t errlen)
{
	write_ini(text);
	cmn_config_init(c);
	err[0] = '\0';
	return cmn_config_load_file(c, path, err, errlen);
}

/* shard_size unset is derived from the smallest limit and never refused */
START_TEST(shard_size_derived_never_refused)
{
	static const struct {
		const char *limit;
		uint64_t want;
	} cases[] = {
	    {"200G", 64ull << 20}, {"512M", 32ull << 20}, {"64M", 4ull << 20},
	    {"8M", 512ull << 10},  {"1M", 64ull << 10},	  {"40K", 40ull << 10},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cmn_config c;
		char err[256];
		cmn_config_init(&c);
		ck_assert_int_eq(
		    cmn_config_set(&c, "limit", cases[i].limit, "--limit", err, sizeof(err)), 0);
		ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "limit %s: %s",
			      cases[i].limit, err);
		ck_assert_uint_eq(c.shard_size, cases[i].want);
		cmn_config_free(&c);
	}
	/* a schedule's smaller limit counts */
	struct cmn_config c;
	char err[256];
	cmn_config_init(&c);
	const char *ini = "[cache]\nlimit = 1G\n[epoch 0-1]\nlimit = 16M\n[epoch 2-]\n";
	char tmpl[] = "/tmp/rc-config-XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, ini, strlen(ini)), (int)strlen(ini));
	close(fd);
	ck_assert_int_eq(cmn_config_load_file(&c, tmpl, err, sizeof(err)), 0);
	unlink(tmpl);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(c.shard_size, 1ull << 20);
	cmn_config_free(&c);
}
END_TEST

START_TEST(test_defaults)
{
	struct cmn_config c;
	char err[256];

	cmn_config_init(&c);
	ck_assert_ptr_null(c.path);
	ck_assert_ptr_null(c.cache_dir);
	ck_assert(!c.has_limit);
	ck_assert_int_eq(c.advance, CMN_ADVANCE_MANUAL);
	ck_assert_uint_eq(c.min_records, 1000);
	ck_assert_ptr_null(c.url);
	ck_assert_ptr_null(c.endpoint);
	/* resolved later, like the AWS CLI (sampler/s3_credentials.c) */
	ck_assert_ptr_null(c.region);
	ck_assert_ptr_null(c.profile);
	ck_assert_int_eq(c.format, CMN_FORMAT_TFRECORD);
	ck_assert_int_eq(c.compression, CMN_COMPRESSION_AUTO);
	ck_assert_uint_eq(c.rank, 0);
	ck_assert_uint_eq(c.world_size, 1);
	ck_assert_uint_eq(c.relist, 1);
	ck_assert_uint_eq(c.connections, 8);
	ck_assert_int_eq(c.strategy, CMN_STRATEGY_OBJECTS);
	ck_assert_uint_eq(c.shard_size, 0); /* unset: derived by finish */
	ck_assert_int_eq(c.retire, CMN_RETIRE_READ);
	ck_assert_uint_eq(c.retries, 5);
	ck_assert_uint_eq(c.timeout_ms, 30000);
	ck_assert_uint_eq(c.wait_timeout_ms, 10 * 60 * 1000);
	ck_assert_uint_eq(c.first_epoch, 1ull << 20);
	ck_assert_uint_eq(c.scrub_rate, 50ull << 20);
	ck_assert(!c.unverified_reads);
	ck_assert(!c.allow_empty);
	ck_assert_ptr_null(c.metrics_listen);
	ck_assert_ptr_null(c.log_file);
	ck_assert_uint_eq(c.n_epochs, 0);
	/* finish without a limit says what to set */
	ck_assert_int_eq(cmn_config_finish(&c, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "limit is not set") && strstr(err, "--limit"), "%s", err);
	cmn_config_free(&c);
}
END_TEST

/*
 * The default that --help and the man page show for a key is the value
 * cmn_config_init() sets, or for an [epoch] key the value
 * cmn_epoch_defaults() sets: given back as that key's value, it changes
 * nothing.  limit, shard_size and admit show how their default is found
 * instead (required; derived from the limit: test_epoch_defaults), strings
 * where theirs is computed.
 */
START_TEST(test_defaults_shown_are_the_values)
{
	struct cmn_config_key_info k;
	size_t checked = 0, epoch_checked = 0;

	for (size_t i = 0; cmn_config_key(i, &k); i++) {
		struct cmn_config init, set;
		char err[256];
		bool number = k.values || strcmp(k.metavar, "SIZE") == 0 ||
			      strcmp(k.metavar, "TIME") == 0 || strcmp(k.metavar, "RATE") == 0 ||
			      strcmp(k.metavar, "N") == 0;
		bool epoch = strcmp(k.section, "epoch N") == 0;

		if (!number || !k.flat || strcmp(k.ini, "limit") == 0 ||
		    strcmp(k.ini, "shard_size") == 0 || strcmp(k.ini, "admit") == 0)
			continue;
		cmn_config_init(&init);
		cmn_config_init(&set);
		/* an [epoch] flag is stored in cli_epoch: compare it with an entry's defaults */
		if (epoch) {
			cmn_epoch_defaults(&init.cli_epoch, 0);
			memcpy(&set.cli_epoch, &init.cli_epoch, sizeof(set.cli_epoch));
		}
		ck_assert_msg(
		    cmn_config_set(&set, k.flat, k.def, "--default", err, sizeof(err)) == 0,
		    "%s: the default shown, '%s', does not parse: %s", k.flat, k.def, err);
		if (epoch) {
			ck_assert(set.cli_epoch.has_policy || set.cli_epoch.has_min_uses ||
				  set.cli_epoch.has_seed);
			set.cli_epoch.has_policy = false;
			set.cli_epoch.has_min_uses = false;
			set.cli_epoch.has_seed = false;
			epoch_checked++;
		}
		ck_assert_msg(memcmp(&init, &set, sizeof(init)) == 0,
			      "%s: the default shown, '%s', is not the value %s sets", k.flat,
			      k.def, epoch ? "cmn_epoch_defaults()" : "cmn_config_init()");
		cmn_config_free(&init);
		cmn_config_free(&set);
		checked++;
	}
	ck_assert_uint_ge(checked, 18);
	ck_assert_uint_eq(epoch_checked, 3); /* policy, min_uses, seed */
}
END_TEST

/*
 * An [epoch] entry's defaults: [epoch 0-] with no key given, limit the one
 * passed (the cache's, or the entry's own) and admit half of it, as the
 * text --help shows for them says.
 */
START_TEST(test_epoch_defaults)
{
	struct cmn_config_key_info k;
	struct cmn_epoch_section d;
	size_t shown = 0;

	cmn_epoch_defaults(&d, 20ull << 30);
	ck_assert_uint_eq(d.first, 0);
	ck_assert_uint_eq(d.last, CMN_EPOCH_OPEN);
	ck_assert_int_eq(d.line, 0);
	ck_assert(!d.has_limit && !d.has_admit && !d.has_policy && !d.has_min_uses && !d.has_seed);
	ck_assert_uint_eq(d.limit, 20ull << 30);
	ck_assert_uint_eq(d.admit, 10ull << 30);
	ck_assert_int_eq(d.policy, CMN_POLICY_FIFO);
	ck_assert_uint_eq(d.min_uses, 0);
	ck_assert_uint_eq(d.seed, 0);
	cmn_epoch_defaults(&d, 3);
	ck_assert_uint_eq(d.limit, 3);
	ck_assert_uint_eq(d.admit, 1);
	for (size_t i = 0; cmn_config_key(i, &k); i++) {
		if (strcmp(k.section, "epoch N") != 0)
			continue;
		if (strcmp(k.ini, "limit") == 0) {
			ck_assert_str_eq(k.def, "the cache limit");
			shown++;
		} else if (strcmp(k.ini, "admit") == 0) {
			ck_assert_str_eq(k.def, "limit/2 (first entry)");
			shown++;
		}
	}
	ck_assert_uint_eq(shown, 2);
}
END_TEST

/* scrub_rate 0 is refused unless unverified_reads says it is wanted. */
START_TEST(test_unverified_reads)
{
	struct cmn_config c;
	char err[512];

	/* refused: one line saying what is wrong and what to do */
	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_parse_o(&c, "limit=1G,scrub_rate=0", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_finish(&c, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "scrub_rate = 0 turns off the re-verification of resident files: set "
			      "unverified_reads = true to accept unverified reads, or give a rate "
			      "such as 50M/s");
	cmn_config_free(&c);

	/* accepted with unverified_reads = true, in each spelling */
	cmn_config_init(&c);
	ck_assert_int_eq(
	    cmn_config_parse_o(&c, "limit=1G,scrub_rate=0,unverified_reads=true", err, sizeof(err)),
	    0);
	ck_assert(c.unverified_reads);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(c.scrub_rate, 0);
	cmn_config_free(&c);

	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_set(&c, "limit", "1G", "--limit", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_set(&c, "scrub-rate", "0", "--scrub-rate", err, sizeof(err)),
			 0);
	ck_assert_int_eq(
	    cmn_config_set(&c, "unverified-reads", "true", "--unverified-reads", err, sizeof(err)),
	    0);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	cmn_config_free(&c);

	ck_assert_msg(load(&c, "[cache]\nlimit = 1G\nscrub_rate = 0\nunverified_reads = true\n",
			   err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	cmn_config_free(&c);

	/* the file's true is overridden by the command line's false */
	ck_assert_int_eq(load(&c, "[cache]\nlimit = 1G\nscrub_rate = 0\nunverified_reads = true\n",
			      err, sizeof(err)),
			 0);
	ck_assert_int_eq(cmn_config_parse_o(&c, "unverified_reads=false", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_finish(&c, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "scrub_rate = 0 turns off"), "%s", err);
	cmn_config_free(&c);

	/* a rate needs no unverified_reads, and unverified_reads alone changes nothing */
	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_parse_o(&c, "limit=1G,scrub_rate=1M/s,unverified_reads=true",
					    err, sizeof(err)),
			 0);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(c.scrub_rate, 1ull << 20);
	cmn_config_free(&c);

	/* only false or true */
	cmn_config_init(&c);
	ck_assert_int_eq(
	    cmn_config_set(&c, "unverified_reads", "yes", "--unverified-reads", err, sizeof(err)),
	    -EINVAL);
	ck_assert_str_eq(err, "--unverified-reads yes: expected false or true");
	cmn_config_free(&c);
}
END_TEST

/* The DESIGN example, every key, inline comments, epoch sections. */
START_TEST(test_full_file)
{
	static const char ini[] =
	    "; rollcache config\n"
	    "[cache]\n"
	    "dir = /var/cache/rollcache/train   ; default: somewhere\n"
	    "limit = 200G\n"
	    "advance = auto\n"
	    "min_records = 1000\n"
	    "\n"
	    "[source]\n"
	    "url = s3://bucket/train/\n"
	    "endpoint = http://127.0.0.1:9000   ; S3-compatible store\n"
	    "region = eu-west-1\n"
	    "profile = training\n"
	    "format = tfrecord\n"
	    "compression = gzip\n"
	    "rank = 1\n"
	    "world_size = 4\n"
	    "relist = 3\n"
	    "\n"
	    "[sampler]\n"
	    "connections = 16\n"
	    "strategy = records\n"
	    "shard_size = 128M\n"
	    "retries = 7\n"
	    "timeout = 2m\n"
	    "\n"
	    "[epoch 0]\n"
	    "limit = 20G\n"
	    "admit = 5G\n"
	    "policy = fifo\n"
	    "[epoch 1-4]\n"
	    "  policy = uses     ; indented keys are keys, not continuations\n"
	    "  min_uses = 2\n"
	    "[epoch 5-]\n"
	    "limit = 200G\n"
	    "admit = 20G\n"
	    "policy = lru\n"
	    "seed = 42\n"
	    "[ cache ]\n"
	    "min-records = 5\n";
	struct cmn_config c;
	char err[256];

	ck_assert_msg(load(&c, ini, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(c.path, path);
	ck_assert_str_eq(c.cache_dir, "/var/cache/rollcache/train");
	ck_assert(c.has_limit);
	ck_assert_uint_eq(c.limit, 200ull << 30);
	ck_assert_int_eq(c.advance, CMN_ADVANCE_AUTO);
	ck_assert_uint_eq(c.min_records, 5);
	ck_assert_str_eq(c.url, "s3://bucket/train/");
	ck_assert_str_eq(c.endpoint, "http://127.0.0.1:9000");
	ck_assert_str_eq(c.region, "eu-west-1");
	ck_assert_str_eq(c.profile, "training");
	ck_assert_int_eq(c.compression, CMN_COMPRESSION_GZIP);
	ck_assert_uint_eq(c.rank, 1);
	ck_assert_uint_eq(c.world_size, 4);
	ck_assert_uint_eq(c.relist, 3);
	ck_assert_uint_eq(c.connections, 16);
	ck_assert_int_eq(c.strategy, CMN_STRATEGY_RECORDS);
	ck_assert_uint_eq(c.shard_size, 128ull << 20);
	ck_assert_uint_eq(c.retries, 7);
	ck_assert_uint_eq(c.timeout_ms, 120000);

	ck_assert_uint_eq(c.n_epochs, 3);
	ck_assert_uint_eq(c.epochs[0].first, 0);
	ck_assert_uint_eq(c.epochs[0].last, 0);
	ck_assert_int_eq(c.epochs[0].line, 26);
	ck_assert(c.epochs[0].has_limit && c.epochs[0].has_admit && c.epochs[0].has_policy);
	ck_assert(!c.epochs[0].has_min_uses && !c.epochs[0].has_seed);
	ck_assert_uint_eq(c.epochs[0].limit, 20ull << 30);
	ck_assert_uint_eq(c.epochs[0].admit, 5ull << 30);
	ck_assert_int_eq(c.epochs[0].policy, CMN_POLICY_FIFO);
	ck_assert_uint_eq(c.epochs[1].first, 1);
	ck_assert_uint_eq(c.epochs[1].last, 4);
	ck_assert_int_eq(c.epochs[1].line, 30);
	ck_assert(!c.epochs[1].has_limit && c.epochs[1].has_policy && c.epochs[1].has_min_uses);
	ck_assert_int_eq(c.epochs[1].policy, CMN_POLICY_USES);
	ck_assert_uint_eq(c.epochs[1].min_uses, 2);
	ck_assert_uint_eq(c.epochs[2].first, 5);
	ck_assert_uint_eq(c.epochs[2].last, CMN_EPOCH_OPEN);
	ck_assert_int_eq(c.epochs[2].line, 33);
	ck_assert_int_eq(c.epochs[2].policy, CMN_POLICY_LRU);
	ck_assert(c.epochs[2].has_seed);
	ck_assert_uint_eq(c.epochs[2].seed, 42);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	cmn_config_free(&c);
}
END_TEST

/* Bad files: code, and a message with file:line and the expected form. */
static const struct {
	const char *ini;
	int line;
	const char *want; /* substring after "path:line: " */
} bad_files[] = {
    {"[cache]\nlimit = 20X\n", 2, "[cache] limit = 20X: unknown unit: expected a size"},
    {"[cache]\nlimit = -5G\n", 2, "[cache] limit = -5G: negative"},
    {"[cache]\nlimit = 20000P\n", 2, "[cache] limit = 20000P: size out of range"},
    {"[cache]\nlimit = 0\n", 2, "[cache] limit = 0: expected a size such as 200G"},
    {"[cache]\nlimit = 20G\nlimt = 20G\n", 3, "[cache] unknown key 'limt': did you mean 'limit'?"},
    {"[cache]\nzzzzzz = 20G\n", 2, "[cache] unknown key 'zzzzzz': expected one of dir, limit"},
    {"[source]\nlimit = 20G\n", 2, "[source] unknown key 'limit': it belongs in [cache]"},
    {"[cache]\nadvance = sometimes\n", 2, "[cache] advance = sometimes: expected manual or auto"},
    {"[cache]\nmin_records = many\n", 2, "[cache] min_records = many: expected a record count"},
    {"[cache]\nmin_records = -1\n", 2, "[cache] min_records = -1: expected a record count"},
    {"[cahce]\nlimit = 20G\n", 1, "unknown section [cahce]: expected [cache], [source]"},
    {"[cache]\nlimit = 1G\n[typo]\n", 3, "unknown section [typo]"},
    {"limit = 20G\n", 1, "limit = 20G: key outside a section"},
    {"[source]\nurl = ftp://host/data/\n", 2,
     "[source] url = ftp://host/data/: expected a URL starting with file://, http://, https:// or "
     "s3://"},
    {"[source]\nurl = file://relative/\n", 2,
     "[source] url = file://relative/: expected an absolute file URL"},
    {"[source]\nurl = s3://\n", 2, "[source] url = s3://: the URL names no bucket"},
    {"[source]\nendpoint = 127.0.0.1:9000\n", 2,
     "[source] endpoint = 127.0.0.1:9000: expected an http"},
    {"[source]\nformat = parquet\n", 2, "[source] format = parquet: expected tfrecord or raw"},
    {"[source]\ncompression = zstd\n", 2,
     "[source] compression = zstd: expected none, gzip, zlib or auto"},
    {"[source]\nrank = x\n", 2, "[source] rank = x: expected a node index"},
    {"[source]\nworld_size = 0\n", 2,
     "[source] world_size = 0: expected a node count of at least 1"},
    {"[source]\nworld_size = 99999999999\n", 2, "[source] world_size = 99999999999: expected"},
    {"[source]\nregion =\n", 2, "[source] region = (empty): expected a region"},
    {"[sampler]\nconnections = 0\n", 2,
     "[sampler] connections = 0: expected a number of parallel transfers from 1 to 1024"},
    {"[sampler]\nconnections = 1025\n", 2, "[sampler] connections = 1025: expected"},
    {"[sampler]\nstrategy = all\n", 2, "[sampler] strategy = all: expected objects or records"},
    {"[sampler]\nshard_size = 1.5\n", 2, "[sampler] shard_size = 1.5: not a whole number of bytes"},
    {"[sampler]\ntimeout = soon\n", 2, "[sampler] timeout = soon: expected a duration"},
    {"[sampler]\ntimeout = 0s\n", 2,
     "[sampler] timeout = 0s: expected a duration such as 30s (more than zero)"},
    {"[sampler]\nretries = 5x\n", 2, "[sampler] retries = 5x: expected a retry count"},
    {"[epoch 0]\npolicy = mru\n", 2,
     "[epoch 0] policy = mru: expected fifo, lru, uses, random or none"},
    {"[epoch 0]\nlimit = 20X\n", 2, "[epoch 0] limit = 20X: unknown unit"},
    {"[epoch 0]\nadmit = lots\n", 2, "[epoch 0] admit = lots"},
    {"[epoch 0]\nmin_uses = -2\n", 2, "[epoch 0] min_uses = -2: expected a read count"},
    {"[epoch 0]\nseed = 0x10\n", 2, "[epoch 0] seed = 0x10: expected an integer"},
    {"[epoch 0]\nconnections = 3\n", 2,
     "[epoch 0] unknown key 'connections': it belongs in [sampler]"},
    {"[epoch 0]\npolcy = lru\n", 2, "[epoch 0] unknown key 'polcy': did you mean 'policy'?"},
    {"[epoch 0]\nxyz = 3\n", 2,
     "[epoch 0] unknown key 'xyz': expected one of limit, admit, policy, min_uses, seed"},
    {"[epoch 5-3]\nlimit = 1G\n", 1, "[epoch 5-3]: expected an epoch section such as [epoch 0]"},
    {"[epoch x]\n", 1, "[epoch x]: expected an epoch section"},
    {"[epoch]\n", 1, "unknown section [epoch]"},
    {"[epoch -3]\n", 1, "[epoch -3]: expected an epoch section"},
    {"[cache]\nthis line has no equals sign\n", 2, "syntax error"},
    {"[cache]\n[broken\nlimit = 1G\n", 2, "syntax error"},
    {"[cache]\nlimit = 1G\n\n\n[source]\nurl = gopher://x/\n[typo]\n", 6,
     "[source] url = gopher://x/"},
};

START_TEST(test_bad_file)
{
	struct cmn_config c;
	char err[512], want[512];
	int rc = load(&c, bad_files[_i].ini, err, sizeof(err));

	ck_assert_msg(rc == -EINVAL, "case %d: rc %d (%s)", _i, rc, err);
	snprintf(want, sizeof(want), "%s:%d: %s", path, bad_files[_i].line, bad_files[_i].want);
	ck_assert_msg(strstr(err, want) != NULL, "case %d:\n got  '%s'\n want '%s'", _i, err, want);
	cmn_config_free(&c);
}
END_TEST

START_TEST(test_file_edge_cases)
{
	struct cmn_config c;
	char err[512], line[400];
	int rc;

	/* missing file */
	cmn_config_init(&c);
	rc = cmn_config_load_file(&c, "/nonexistent/rollcache.ini", err, sizeof(err));
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_msg(strstr(err, "/nonexistent/rollcache.ini: cannot open"), "%s", err);
	cmn_config_free(&c);
	/* a directory */
	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_load_file(&c, "/tmp", err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "/tmp: not a regular file"), "%s", err);
	cmn_config_free(&c);
	/* a line too long for inih's buffer is refused with its line number */
	memset(line, 'a', sizeof(line));
	memcpy(line, "url = s3://b/", 13);
	line[sizeof(line) - 1] = '\0';
	{
		char ini[600];
		snprintf(ini, sizeof(ini), "[source]\n%s\n", line);
		ck_assert_int_eq(load(&c, ini, err, sizeof(err)), -EINVAL);
		ck_assert_msg(strstr(err, ":2: line longer than"), "%s", err);
		cmn_config_free(&c);
	}
	/* CRLF line ends, a BOM, # comments, empty sections */
	ck_assert_msg(load(&c, "\xef\xbb\xbf[cache]\r\n# comment\r\nlimit = 3G\r\n[sampler]\r\n",
			   err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_uint_eq(c.limit, 3ull << 30);
	cmn_config_free(&c);
	/* an empty epoch section is recorded with its line */
	ck_assert_msg(load(&c, "[cache]\nlimit=1G\n\n[epoch 7]\n", err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_uint_eq(c.n_epochs, 1);
	ck_assert_int_eq(c.epochs[0].line, 4);
	ck_assert_uint_eq(c.epochs[0].first, 7);
	ck_assert(!c.epochs[0].has_limit);
	cmn_config_free(&c);
	/* the same epoch header twice gives two sections (the schedule rejects the overlap) */
	ck_assert_msg(load(&c, "[epoch 1]\nlimit=1G\n[epoch 1]\nadmit=1G\n", err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_uint_eq(c.n_epochs, 2);
	ck_assert(c.epochs[0].has_limit && !c.epochs[0].has_admit);
	ck_assert(!c.epochs[1].has_limit && c.epochs[1].has_admit);
	cmn_config_free(&c);
	/* user:password of a URL never appears in a message */
	ck_assert_int_eq(load(&c, "[source]\nurl = ftp://alice:s3cr3t@host/d/\n", err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "s3cr3t") == NULL && strstr(err, "ftp://***@host/d/"), "%s", err);
	cmn_config_free(&c);
}
END_TEST

/* Command line over file over default; flags and -o share names. */
START_TEST(test_precedence)
{
	struct cmn_config c;
	char err[512];

	ck_assert_int_eq(
	    load(&c, "[cache]\nlimit = 10G\ndir = /from/file\n[sampler]\nconnections = 4\n", err,
		 sizeof(err)),
	    0);
	ck_assert_uint_eq(c.connections, 4);
	ck_assert_int_eq(cmn_config_set(&c, "limit", "30G", "--limit", err, sizeof(err)), 0);
	ck_assert_int_eq(
	    cmn_config_set(&c, "cache-dir", "/from/flag", "--cache-dir", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_parse_o(&c, "connections=32,world-size=2,rank=1,timeout=500ms",
					    err, sizeof(err)),
			 0);
	ck_assert_uint_eq(c.limit, 30ull << 30);
	ck_assert_str_eq(c.cache_dir, "/from/flag");
	ck_assert_uint_eq(c.connections, 32);
	ck_assert_uint_eq(c.world_size, 2);
	ck_assert_uint_eq(c.rank, 1);
	ck_assert_uint_eq(c.timeout_ms, 500);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	cmn_config_free(&c);
}
END_TEST

START_TEST(test_set_errors)
{
	struct cmn_config c;
	char err[512];

	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_set(&c, "limit", "20G", "--limit", err, sizeof(err)), 0);
	/* bad value: message names the flag and leaves c unchanged */
	ck_assert_int_eq(cmn_config_set(&c, "limit", "20X", "--limit", err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "--limit 20X: unknown unit: expected a size"), "%s", err);
	ck_assert_uint_eq(c.limit, 20ull << 30);
	ck_assert_int_eq(cmn_config_parse_o(&c, "limit=5G,advance=never", err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "-o advance=never: expected manual or auto"), "%s", err);
	/* unknown key: one short line naming the nearest key (edit distance) */
	ck_assert_int_eq(cmn_config_set(&c, "limitt", "1G", "--limitt", err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unknown option --limitt: did you mean --limit?");
	ck_assert_int_eq(cmn_config_set(&c, "shard-szie", "1M", "--shard-szie", err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "unknown option --shard-szie: did you mean --shard-size?");
	ck_assert_int_eq(cmn_config_parse_o(&c, "limt=1G", err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unknown option -o limt: did you mean -o limit?");
	ck_assert_int_eq(cmn_config_set(&c, "xyzzy", "1", "--xyzzy", err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "unknown option --xyzzy: `rollcache mount --help` lists") == err,
		      "%s", err);
	/* [cache] dir is cache_dir on the command line */
	ck_assert_int_eq(cmn_config_set(&c, "dir", "/x", "--dir", err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unknown option --dir: did you mean --cache-dir?");
	/* -o item without '=' */
	ck_assert_int_eq(cmn_config_parse_o(&c, "limit", err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "-o limit: expected key=value"), "%s", err);
	ck_assert_int_eq(cmn_config_parse_o(&c, "", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_set(&c, "url", "s3://b/p/", NULL, err, sizeof(err)), 0);
	ck_assert_str_eq(c.url, "s3://b/p/");
	ck_assert_int_eq(cmn_config_set(&c, "url", "nope", "--url", err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(c.url, "s3://b/p/");
	cmn_config_free(&c);
}
END_TEST

/* cmn_config_finish: checks of the whole. */
START_TEST(test_finish)
{
	struct cmn_config c;
	char err[512];

#define FINISH_FAILS(setup, msg)                                                                   \
	do {                                                                                       \
		cmn_config_init(&c);                                                               \
		c.limit = 100ull << 30;                                                            \
		c.has_limit = true;                                                                \
		setup;                                                                             \
		ck_assert_int_eq(cmn_config_finish(&c, err, sizeof(err)), -EINVAL);                \
		ck_assert_msg(strstr(err, msg), "'%s' lacks '%s'", err, msg);                      \
		cmn_config_free(&c);                                                               \
	} while (0)

	FINISH_FAILS(c.has_limit = false, "limit is not set");
	FINISH_FAILS((c.rank = 2, c.world_size = 2), "rank = 2 with world_size = 2");
	FINISH_FAILS(c.world_size = 0, "world_size = 0");
	FINISH_FAILS(c.connections = 0, "connections = 0: expected 1 to 1024");
	FINISH_FAILS(c.connections = 5000, "connections = 5000: expected 1 to 1024");
	FINISH_FAILS(c.url = strdup("gs://bucket/"), "url = gs://bucket/: expected a URL starting");
	FINISH_FAILS(c.shard_size = 200ull << 30, "shard_size = 200.0 GiB is larger than limit");
	FINISH_FAILS((c.format = CMN_FORMAT_RAW, c.compression = CMN_COMPRESSION_GZIP),
		     "compression = gzip applies to format = tfrecord only");
	FINISH_FAILS(c.timeout_ms = 0, "timeout = 0");
	FINISH_FAILS(c.scrub_rate = 0, "scrub_rate = 0 turns off the re-verification");
	{
		static struct cmn_epoch_section e = {
		    .first = 0, .last = 0, .line = 9, .has_limit = true, .limit = 200ull << 30};
		FINISH_FAILS((c.epochs = malloc(sizeof(e)), c.epochs[0] = e, c.n_epochs = 1),
			     "config:9: [epoch] limit = 200.0 GiB is above the cache limit");
	}
	{
		static struct cmn_epoch_section e = {.first = 0,
						     .last = 0,
						     .line = 3,
						     .has_limit = true,
						     .limit = 10ull << 30,
						     .has_admit = true,
						     .admit = 11ull << 30};
		FINISH_FAILS((c.epochs = malloc(sizeof(e)), c.epochs[0] = e, c.n_epochs = 1),
			     "config:3: [epoch] admit = 11.0 GiB is above its limit = 10.0 GiB");
	}
#undef FINISH_FAILS
	/* and a good one passes */
	cmn_config_init(&c);
	ck_assert_int_eq(
	    cmn_config_parse_o(&c, "limit=1G,url=file:///data/,shard_size=64M", err, sizeof(err)),
	    0);
	ck_assert_msg(cmn_config_finish(&c, err, sizeof(err)) == 0, "%s", err);
	cmn_config_free(&c);
}
END_TEST

START_TEST(test_policy_names)
{
	static const char *const names[] = {"fifo", "lru", "uses", "random", "none"};
	enum cmn_policy p;

	for (int i = 0; i < 5; i++) {
		ck_assert_str_eq(cmn_policy_name((enum cmn_policy)i), names[i]);
		ck_assert_int_eq(cmn_policy_parse(names[i], &p), 0);
		ck_assert_int_eq(p, i);
	}
	ck_assert_int_eq(cmn_policy_parse("LRU", &p), -EINVAL);
	ck_assert_int_eq(cmn_policy_parse("", &p), -EINVAL);
	ck_assert_str_eq(cmn_policy_name((enum cmn_policy)99), "?");
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

	tc = tcase_create("config_defaults");
	tcase_add_test(tc, test_defaults);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_defaults_shown_are_the_values");
	tcase_add_test(tc, test_defaults_shown_are_the_values);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_epoch_defaults");
	tcase_add_test(tc, test_epoch_defaults);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_scrub_rate_0_needs_unverified_reads");
	tcase_add_test(tc, test_unverified_reads);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_shard_size_derived_never_refused");
	tcase_add_test(tc, shard_size_derived_never_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_full_file_and_epochs");
	tcase_add_test(tc, test_full_file);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_file_errors_name_file_line");
	tcase_add_loop_test(tc, test_bad_file, 0, sizeof(bad_files) / sizeof(bad_files[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("config_file_edge_cases");
	tcase_add_test(tc, test_file_edge_cases);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_precedence");
	tcase_add_test(tc, test_precedence);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_set_errors");
	tcase_add_test(tc, test_set_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_finish");
	tcase_add_test(tc, test_finish);
	suite_add_tcase(s, tc);
	tc = tcase_create("config_policy_names");
	tcase_add_test(tc, test_policy_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	/* one process: the temporary directory is made once and removed at the end */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
