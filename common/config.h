/*
 * config.h - rollcache configuration: INI file, --key flags, -o k=v options.
 *
 * One key has one meaning in three spellings (DESIGN "Configuration"):
 *   INI:   `limit = 20G` in [cache]
 *   flag:  `--limit 20G`         (dashes and underscores are the same)
 *   -o:    `-o limit=20G,...`
 * The flag/-o name of a key is its INI name, except [cache] dir, which is
 * `cache_dir` (`--cache-dir`, `-o cache_dir=`), as fstab lines spell it.
 * Precedence: command line > config file > default.  Callers apply them in
 * that order: cmn_config_init(), cmn_config_load_file(), cmn_config_set()/
 * cmn_config_parse_o() for each command-line setting, cmn_config_finish().
 *
 * [epoch N], [epoch N-M] and [epoch N-] sections are parsed here into
 * cmn_epoch_section values (keys and value types checked, with file:line);
 * eviction/schedule.c turns them into a schedule and checks that ranges
 * neither overlap nor leave gaps.
 *
 * Errors are one line naming where (file:line or the flag), the key, the bad
 * value and what is expected, e.g.
 *   "train.ini:7: [cache] limit = 20X: expected a size such as 20G".
 */
#ifndef RC_COMMON_CONFIG_H
#define RC_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cmn_advance { CMN_ADVANCE_MANUAL = 0, CMN_ADVANCE_AUTO = 1 };
enum cmn_retire { CMN_RETIRE_BOUNDARY = 0, CMN_RETIRE_READ = 1 };
enum cmn_format { CMN_FORMAT_TFRECORD = 0, CMN_FORMAT_RAW = 1 };
/* The value is the index in config.c's names; auto: cmn_tfr_detect() per object. */
enum cmn_compression {
	CMN_COMPRESSION_NONE = 0,
	CMN_COMPRESSION_GZIP = 1,
	CMN_COMPRESSION_ZLIB = 2,
	CMN_COMPRESSION_AUTO = 3,
};
enum cmn_strategy { CMN_STRATEGY_OBJECTS = 0, CMN_STRATEGY_RECORDS = 1 };
/* fs-verity on sealed files (cachefs/verity.h): auto = where the file system has it */
enum cmn_verity { CMN_VERITY_AUTO = 0, CMN_VERITY_ON = 1, CMN_VERITY_OFF = 2 };
enum cmn_s3_addressing {
	CMN_S3_ADDRESSING_AUTO = 0,
	CMN_S3_ADDRESSING_PATH = 1,
	CMN_S3_ADDRESSING_VIRTUAL = 2,
};
enum cmn_policy {
	CMN_POLICY_FIFO = 0,
	CMN_POLICY_LRU = 1,
	CMN_POLICY_USES = 2,
	CMN_POLICY_RANDOM = 3,
	CMN_POLICY_NONE = 4,
};

#define CMN_EPOCH_OPEN UINT32_MAX /* `last` of an [epoch N-] section */

/*
 * `epoch next --wait` waits for the epoch's admit while less than this
 * share of `limit` (percent) is resident (daemon/epochs.c, filling();
 * the CLI's progress line says so).
 */
#define CMN_FILL_PERCENT 90u

/* One [epoch ...] section as written; has_* says which keys it set. */
struct cmn_epoch_section {
	uint32_t first, last; /* inclusive; last = CMN_EPOCH_OPEN for "N-" */
	int line;	      /* line of the section header */
	bool has_limit, has_admit, has_policy, has_min_uses, has_seed;
	uint64_t limit;
	uint64_t admit;
	enum cmn_policy policy;
	uint32_t min_uses;
	uint64_t seed;
};

/*
 * One field per key.  Each key's default, range and field are a row of
 * config.c's key table: cmn_config_init() writes the defaults from it and
 * `rollcache mount --help` shows them, so they are not repeated here.
 */
struct cmn_config {
	char *path; /* the config file loaded, or NULL */

	/* [cache] */
	char *cache_dir; /* NULL: $XDG_CACHE_HOME/rollcache/<hash(url)> */
	uint64_t limit;	 /* bytes; required */
	bool has_limit;
	enum cmn_advance advance;
	uint64_t min_records;
	enum cmn_retire retire;	  /* boundary: victims leave the view at the boundary; read: they
				     stay in it and leave once read (DESIGN "Epochs") */
	uint64_t wait_timeout_ms; /* bound of `epoch next --wait` */
	uint64_t scrub_rate;	  /* bytes/s the scrubber re-verifies (0: off; daemon/scrub.c) */
	bool unverified_reads;	  /* false: cmn_config_finish() refuses scrub_rate 0 */
	enum cmn_verity verity;	  /* seal files with fs-verity: auto, on (refuse without), off */
	uint64_t first_epoch;	  /* a new cache's first shard (at most this size) is its
				     first epoch as soon as it is sealed; 0: off */

	/* [source] */
	char *url;	/* file:///abs/, http(s)://host/prefix/, s3://bucket/prefix/ */
	char *endpoint; /* S3-compatible endpoint URL; NULL: AWS_ENDPOINT_URL, ~/.aws/config, AWS */
	char *region;	/* NULL: AWS_REGION, AWS_DEFAULT_REGION, ~/.aws/config, us-east-1 */
	char *profile;	/* NULL: $AWS_PROFILE, else "default" */
	enum cmn_s3_addressing s3_addressing;
	enum cmn_format format;
	enum cmn_compression compression;
	uint32_t rank;
	uint32_t world_size;
	uint32_t relist;  /* re-list every N epochs; 0: never */
	bool allow_empty; /* false: a first listing of 0 objects fails mount and ingest */

	/* [sampler] */
	uint32_t connections;
	enum cmn_strategy strategy;
	uint64_t shard_size; /* unset (0): cmn_config_derived_shard_size(limit) */
	uint32_t retries;
	uint64_t timeout_ms;

	/* [mount] */
	char *metrics_listen; /* "ADDR:PORT" of the metrics HTTP endpoint, or NULL */
	char *log_file;	      /* the daemon's log, appended; NULL: syslog (stderr with -f) */

	/* [epoch ...], in file order */
	struct cmn_epoch_section *epochs;
	size_t n_epochs;
	/* [epoch] keys given on the command line (--policy, -o admit=, ...):
	 * cmn_config_finish() applies them to every entry (creating [epoch 0-]
	 * when there is none) and clears them */
	struct cmn_epoch_section cli_epoch;
};

/* Fills c with the defaults of config.c's key table.  Never fails. */
void cmn_config_init(struct cmn_config *c);

/*
 * Fills *s with the first [epoch] entry before its keys apply: [epoch 0-],
 * line 0, no has_* set, and every key at its default in config.c's
 * epoch_keys[] (what --help shows); limit and admit follow `limit`, the
 * cache's, or the entry's own when it sets one.  Never fails.
 */
void cmn_epoch_defaults(struct cmn_epoch_section *s, uint64_t limit);

/*
 * Loads an INI file over the values in c (inih).  Unknown sections or keys,
 * bad values, unreadable files: returns -EINVAL/-errno with a one-line message
 * naming file:line; c may hold the values read before the bad line.
 * Built only with inih (common/config_ini.c), which the feeder-only build
 * lacks; the rest of this header is built everywhere (common/config.c).
 */
int cmn_config_load_file(struct cmn_config *c, const char *path, char *err, size_t errlen);

/*
 * Sets one key by its flat name (cache_dir, limit, url, ...; '-' == '_').
 * `origin` names where it came from for messages ("--limit", "-o limit").
 * Returns 0, or -EINVAL with a message (unknown key, bad value); c unchanged.
 */
int cmn_config_set(struct cmn_config *c, const char *key, const char *value, const char *origin,
		   char *err, size_t errlen);

/* Applies "k=v,k2=v2" (mount -o syntax) through cmn_config_set(). */
int cmn_config_parse_o(struct cmn_config *c, const char *opts, char *err, size_t errlen);

/*
 * Checks the whole: limit given, rank < world_size, connections >= 1,
 * scrub_rate 0 only with unverified_reads, ...  Derives shard_size when
 * it is unset and applies cli_epoch to the schedule.  Returns 0 or -EINVAL
 * with a message saying what to set.
 */
int cmn_config_finish(struct cmn_config *c, char *err, size_t errlen);

/*
 * The shard size when none is set: limit/16 between 64K and 64M, never
 * above the limit (cmn_config_finish uses the smallest limit of the
 * schedule), so that no limit makes the default refused and a view is
 * made of at least 16 files once the cache is full.
 */
uint64_t cmn_config_derived_shard_size(uint64_t limit);

/* Frees what c owns (strings, epochs); c may be re-initialised after. */
void cmn_config_free(struct cmn_config *c);

/* One key of the table, for --help and the man page (the pointers are static strings). */
struct cmn_config_key_info {
	const char *section;	   /* "cache", "source", "sampler", "mount", "epoch N" */
	const char *ini;	   /* name in its section */
	const char *flat;	   /* --flag / -o name, or NULL (INI only) */
	char def[64];		   /* default, as text: the value, or what computes it */
	const char *help;	   /* one line */
	const char *const *values; /* allowed values (NULL-terminated), or NULL */
	const char *metavar;	   /* SIZE, TIME, N, URL, ... (NULL with values) */
};

/* Fills *out with key i (0, 1, ...) of the table; false past the end. */
bool cmn_config_key(size_t i, struct cmn_config_key_info *out);

/* The policy's name ("fifo", ...), and the reverse (0 or -EINVAL). */
const char *cmn_policy_name(enum cmn_policy p);
int cmn_policy_parse(const char *s, enum cmn_policy *out);

#endif
