/*
 * config.c - rollcache configuration: the key table, --key flags, -o k=v.
 *
 * Owns the table of keys (section, INI name, flat name, value type, field,
 * range, default), the checks of single values, the defaults of a config
 * and of an [epoch] entry, and cmn_config_finish()'s checks of the whole.
 * Needs no library: the feeder-only build (no inih) has it too, and
 * eviction/ takes the [epoch] defaults from it.
 * Does not read INI files (config_ini.c does, through inih, and hands each
 * key = value line to cmn__config_ini_key()), does not decide what the
 * values mean at run time, and does not turn [epoch ...] sections into a
 * schedule (eviction/schedule.c does, including overlap and gap checks).
 *
 * Errors: a message names the key, the value and what is expected, never
 * a URL's user:password part.
 * No shared state, no locking: a config is built by one thread.
 */
#include "common/config.h"
#include "common/config_i.h"
#include "common/units.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_MAX 512

/* ---- key table ----------------------------------------------------------- */

enum vtype {
	V_STR,
	V_URL,
	V_ENDPOINT,
	V_SIZE,
	V_DURATION,
	V_U32,
	V_U64,
	V_ENUM,
	V_LISTEN,
	V_RATE, /* a size per second: "50M/s" or "50M"; 0 allowed */
};

/* by enum cmn__section (config_i.h) */
static const char *const section_names[] = {"",	     "cache",	"source", "sampler",
					    "mount", "epoch N", ""};
_Static_assert(sizeof(section_names) / sizeof(section_names[0]) == CMN__SEC_BAD + 1,
	       "one name per enum cmn__section");

static const char *const advance_names[] = {"manual", "auto", NULL};
static const char *const retire_names[] = {"boundary", "read", NULL};
static const char *const format_names[] = {"tfrecord", "raw", NULL};
static const char *const compression_names[] = {"none", "gzip", "zlib", "auto", NULL};
static const char *const strategy_names[] = {"objects", "records", NULL};
static const char *const policy_names[] = {"fifo", "lru", "uses", "random", "none", NULL};
static const char *const addressing_names[] = {"auto", "path", "virtual", NULL};
static const char *const bool_names[] = {"false", "true", NULL};
static const char *const verity_names[] = {"auto", "on", "off", NULL};

/*
 * The one table of keys: the INI parser, --flags, -o options, `mount
 * --help` and the man page (cmn_config_key()) all read it, so the three
 * spellings and their documentation cannot drift apart.  A row also owns
 * its key's field (by offset), type, range and default:
 * cmn_config_init() and cmn_epoch_defaults() write each default through
 * the offset, store() writes each parsed value the same way,
 * cmn_config_free() frees the string fields, and the default shown in
 * help is made from the value.
 *
 * Fields by type: V_STR, V_URL, V_ENDPOINT, V_LISTEN are a malloc'd
 * `char *` (default NULL: the value used then is computed elsewhere and
 * def_text says which); V_U32 is a uint32_t; V_U64, V_SIZE, V_DURATION
 * (milliseconds) and V_RATE (bytes/s) a uint64_t; V_ENUM is the index in
 * names, in an enum of 4 bytes, or a bool with bool_names.  check_table()
 * asserts these in debug builds.
 *
 * keys[] fields are in struct cmn_config; epoch_keys[] fields are in
 * struct cmn_epoch_section: an [epoch ...] entry of the file, or
 * cmn_config.cli_epoch for the same key given on the command line.
 */
struct key_def {
	enum cmn__section sec;
	const char *ini;  /* name in its section */
	const char *flat; /* --flag / -o name; NULL: INI only */
	enum vtype type;
	const char *const *names; /* V_ENUM */
	uint64_t min, max;	  /* V_U32, V_U64, V_SIZE range; V_DURATION: min */
	size_t off;		  /* offsetof the field */
	size_t width;		  /* sizeof the field */
	size_t given;		  /* offsetof a bool set when the key is given, + 1; 0: none */
	uint64_t def;		  /* the default of a number, or the index of an enum's */
	uint64_t def_limit_div;	  /* [epoch] sizes: the default is the entry's limit / this */
	const char *def_text;	  /* the default shown when it is not def (computed, or none) */
	const char *metavar;	  /* help's name of a string value (DIR, NAME, ...) */
	const char *example;	  /* what is expected, for messages */
	const char *help;	  /* one line for --help and the man page */
};

#define FIELD_OF(type, f) .off = offsetof(type, f), .width = sizeof(((type *)0)->f)
#define CFG(f)		  FIELD_OF(struct cmn_config, f)
#define EPOCH(f)	  FIELD_OF(struct cmn_epoch_section, f)
#define GIVEN(type, f)	  .given = offsetof(type, f) + 1

static const struct key_def keys[] = {
    {.sec = CMN__SEC_CACHE,
     .ini = "dir",
     .flat = "cache_dir",
     .type = V_STR,
     CFG(cache_dir),
     .def_text = "$XDG_CACHE_HOME/rollcache/<hash>",
     .metavar = "DIR",
     .example = "a directory path",
     .help = "the cache directory"},
    {.sec = CMN__SEC_CACHE,
     .ini = "limit",
     .flat = "limit",
     .type = V_SIZE,
     .min = 1,
     .max = UINT64_MAX,
     CFG(limit),
     GIVEN(struct cmn_config, has_limit),
     .def_text = "(required)",
     .example = "a size such as 200G",
     .help = "hard bound on bytes on disk"},
    {.sec = CMN__SEC_CACHE,
     .ini = "advance",
     .flat = "advance",
     .type = V_ENUM,
     .names = advance_names,
     CFG(advance),
     .def = CMN_ADVANCE_MANUAL,
     .help = "advance on request, or once every file was read"},
    {.sec = CMN__SEC_CACHE,
     .ini = "min_records",
     .flat = "min_records",
     .type = V_U64,
     .max = UINT64_MAX,
     CFG(min_records),
     .def = 1000,
     .example = "a record count such as 1000",
     .help = "records `epoch next --wait` waits for"},
    {.sec = CMN__SEC_CACHE,
     .ini = "retire",
     .flat = "retire",
     .type = V_ENUM,
     .names = retire_names,
     CFG(retire),
     .def = CMN_RETIRE_READ,
     .help = "victims leave at the boundary, or stay in the view until read"},
    {.sec = CMN__SEC_CACHE,
     .ini = "wait_timeout",
     .flat = "wait_timeout",
     .type = V_DURATION,
     .min = 1,
     .max = UINT64_MAX,
     CFG(wait_timeout_ms),
     .def = 10 * 60 * 1000,
     .example = "a duration such as 10m",
     .help = "bound of `epoch next --wait`"},
    {.sec = CMN__SEC_CACHE,
     .ini = "first_epoch",
     .flat = "first_epoch",
     .type = V_SIZE,
     .max = UINT64_MAX,
     CFG(first_epoch),
     .def = (uint64_t)1 << 20,
     .example = "a size such as 1M (0: off)",
     .help = "a new cache's first shard, at most this size, is its first epoch at once"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "url",
     .flat = "url",
     .type = V_URL,
     CFG(url),
     .def_text = "(the SOURCE argument)",
     .help = "file:///dir/, http(s)://host/prefix/ or s3://bucket/prefix/"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "endpoint",
     .flat = "endpoint",
     .type = V_ENDPOINT,
     CFG(endpoint),
     .def_text = "AWS_ENDPOINT_URL, ~/.aws/config, AWS",
     .help = "URL of an S3-compatible store"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "region",
     .flat = "region",
     .type = V_STR,
     CFG(region),
     .def_text = "AWS_REGION, ~/.aws/config, us-east-1",
     .metavar = "NAME",
     .example = "a region such as us-east-1",
     .help = "SigV4 signing region"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "profile",
     .flat = "profile",
     .type = V_STR,
     CFG(profile),
     .def_text = "AWS_PROFILE, default",
     .metavar = "NAME",
     .example = "a profile name of ~/.aws/config",
     .help = "profile of ~/.aws/credentials and ~/.aws/config"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "s3_addressing",
     .flat = "s3_addressing",
     .type = V_ENUM,
     .names = addressing_names,
     CFG(s3_addressing),
     .def = CMN_S3_ADDRESSING_AUTO,
     .help = "bucket in the host name (virtual) or in the path"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "format",
     .flat = "format",
     .type = V_ENUM,
     .names = format_names,
     CFG(format),
     .def = CMN_FORMAT_TFRECORD,
     .help = "records sampled into shards, or one object = one sample"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "compression",
     .flat = "compression",
     .type = V_ENUM,
     .names = compression_names,
     CFG(compression),
     .def = CMN_COMPRESSION_AUTO,
     .help = "TFRecord compression (auto: told by the first bytes of each object)"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "rank",
     .flat = "rank",
     .type = V_U32,
     .max = UINT32_MAX - 1,
     CFG(rank),
     .def = 0,
     .example = "a node index such as 0",
     .help = "this node's part of the dataset"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "world_size",
     .flat = "world_size",
     .type = V_U32,
     .min = 1,
     .max = UINT32_MAX,
     CFG(world_size),
     .def = 1,
     .example = "a node count of at least 1",
     .help = "objects are split by hash(key) % world_size"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "relist",
     .flat = "relist",
     .type = V_U32,
     .max = UINT32_MAX,
     CFG(relist),
     .def = 1,
     .example = "an epoch count such as 1 (0: list only when the mount starts)",
     .help = "re-list the source every N epochs"},
    {.sec = CMN__SEC_SOURCE,
     .ini = "allow_empty",
     .flat = "allow_empty",
     .type = V_ENUM,
     .names = bool_names,
     CFG(allow_empty),
     .def = false,
     .help = "start when the first listing holds no object (else mount and ingest exit 1)"},
    {.sec = CMN__SEC_SAMPLER,
     .ini = "connections",
     .flat = "connections",
     .type = V_U32,
     .min = 1,
     .max = 1024,
     CFG(connections),
     .def = 8,
     .example = "a number of parallel transfers from 1 to 1024",
     .help = "parallel transfers"},
    {.sec = CMN__SEC_SAMPLER,
     .ini = "strategy",
     .flat = "strategy",
     .type = V_ENUM,
     .names = strategy_names,
     CFG(strategy),
     .def = CMN_STRATEGY_OBJECTS,
     .help = "whole objects, or random records via .idx sidecars"},
    {.sec = CMN__SEC_SAMPLER,
     .ini = "shard_size",
     .flat = "shard_size",
     .type = V_SIZE,
     .min = 1,
     .max = UINT64_MAX,
     CFG(shard_size),
     .def = 0, /* unset: cmn_config_finish() derives it from the limit */
     .def_text = "limit/16, 64K to 64M",
     .example = "a size such as 64M",
     .help = "target size of local shards"},
    {.sec = CMN__SEC_SAMPLER,
     .ini = "retries",
     .flat = "retries",
     .type = V_U32,
     .max = 1000,
     CFG(retries),
     .def = 5,
     .example = "a retry count from 0 to 1000",
     .help = "retries of a failed transfer"},
    {.sec = CMN__SEC_SAMPLER,
     .ini = "timeout",
     .flat = "timeout",
     .type = V_DURATION,
     .min = 1,
     .max = UINT64_MAX,
     CFG(timeout_ms),
     .def = 30 * 1000,
     .example = "a duration such as 30s",
     .help = "per-transfer stall timeout"},
    {.sec = CMN__SEC_MOUNT,
     .ini = "metrics_listen",
     .flat = "metrics_listen",
     .type = V_LISTEN,
     CFG(metrics_listen),
     .def_text = "(off)",
     .help = "serve Prometheus metrics over HTTP on ADDR:PORT"},
    {.sec = CMN__SEC_MOUNT,
     .ini = "log_file",
     .flat = "log_file",
     .type = V_STR,
     CFG(log_file),
     .def_text = "(syslog once detached; stderr with -f)",
     .metavar = "PATH",
     .example = "a file path",
     .help = "append the daemon's log to this file"},
    {.sec = CMN__SEC_CACHE,
     .ini = "scrub_rate",
     .flat = "scrub_rate",
     .type = V_RATE,
     .max = UINT64_MAX,
     CFG(scrub_rate),
     .def = (uint64_t)50 << 20,
     .example = "a rate such as 50M/s (0: off)",
     .help = "re-verify resident files' record CRCs at this many bytes/s (0: off, "
	     "with unverified_reads = true)"},
    {.sec = CMN__SEC_CACHE,
     .ini = "unverified_reads",
     .flat = "unverified_reads",
     .type = V_ENUM,
     .names = bool_names,
     CFG(unverified_reads),
     .def = false,
     .help = "accept scrub_rate = 0 (resident files are never re-verified)"},
    {.sec = CMN__SEC_CACHE,
     .ini = "verity",
     .flat = "verity",
     .type = V_ENUM,
     .names = verity_names,
     CFG(verity),
     .def = CMN_VERITY_AUTO,
     .help = "seal files with fs-verity: auto (where the cache's file system has it), on "
	     "(refuse to start without it), off"},
};

/*
 * flat: the command-line name, which applies the key to every [epoch]
 * entry.  The defaults are those of the first entry (eviction/schedule.c
 * starts it from cmn_epoch_defaults(); a later entry inherits from the one
 * before).  limit and admit follow the entry's limit, the cache's unless
 * the entry sets its own: def_limit_div divides it, and def_text says so.
 */
static const struct key_def epoch_keys[] = {
    {.sec = CMN__SEC_EPOCH,
     .ini = "limit",
     .type = V_SIZE,
     .min = 1,
     .max = UINT64_MAX,
     EPOCH(limit),
     GIVEN(struct cmn_epoch_section, has_limit),
     .def_limit_div = 1,
     .def_text = "the cache limit",
     .example = "a size such as 20G",
     .help = "bytes the cache may hold during these epochs"},
    {.sec = CMN__SEC_EPOCH,
     .ini = "admit",
     .flat = "admit",
     .type = V_SIZE,
     .max = UINT64_MAX,
     EPOCH(admit),
     GIVEN(struct cmn_epoch_section, has_admit),
     .def_limit_div = 2,
     .def_text = "limit/2 (first entry)",
     .example = "a size such as 5G",
     .help = "fresh bytes admitted per epoch"},
    {.sec = CMN__SEC_EPOCH,
     .ini = "policy",
     .flat = "policy",
     .type = V_ENUM,
     .names = policy_names,
     EPOCH(policy),
     GIVEN(struct cmn_epoch_section, has_policy),
     .def = CMN_POLICY_FIFO,
     .help = "eviction policy"},
    {.sec = CMN__SEC_EPOCH,
     .ini = "min_uses",
     .flat = "min_uses",
     .type = V_U32,
     .max = UINT32_MAX,
     EPOCH(min_uses),
     GIVEN(struct cmn_epoch_section, has_min_uses),
     .def = 0,
     .example = "a read count such as 2",
     .help = "never evict a shard read fewer times than this"},
    {.sec = CMN__SEC_EPOCH,
     .ini = "seed",
     .flat = "seed",
     .type = V_U64,
     .max = UINT64_MAX,
     EPOCH(seed),
     GIVEN(struct cmn_epoch_section, has_seed),
     .def = 0,
     .example = "an integer such as 42",
     .help = "seed of the random policy"},
};

#define N_KEYS	     (sizeof(keys) / sizeof(keys[0]))
#define N_EPOCH_KEYS (sizeof(epoch_keys) / sizeof(epoch_keys[0]))

/* Row i of keys[] followed by epoch_keys[] (i < N_KEYS + N_EPOCH_KEYS). */
static const struct key_def *row(size_t i)
{
	return i < N_KEYS ? &keys[i] : &epoch_keys[i - N_KEYS];
}

static bool is_string(enum vtype t)
{
	return t == V_STR || t == V_URL || t == V_ENDPOINT || t == V_LISTEN;
}

/* The row of [sec] ini, or NULL. */
static const struct key_def *find_key(enum cmn__section sec, const char *ini)
{
	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++)
		if (row(i)->sec == sec && strcmp(row(i)->ini, ini) == 0)
			return row(i);
	return NULL;
}

/*
 * Asserts (debug builds) that every row names a field of its type, as the
 * table's comment lists them, an enum default among its names, and one
 * kind of default: def, or def_limit_div (an [epoch] size) shown by its
 * def_text; every other [epoch] key has a typed def.
 */
static void check_table(void)
{
	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++) {
		const struct key_def *d = row(i);
		size_t n = 0, size = d->sec == CMN__SEC_EPOCH ? sizeof(struct cmn_epoch_section)
							      : sizeof(struct cmn_config);

		assert(d->off + d->width <= size && d->given <= size);
		assert(!d->def_limit_div || (d->sec == CMN__SEC_EPOCH && d->type == V_SIZE &&
					     d->def == 0 && d->def_text));
		assert(d->sec != CMN__SEC_EPOCH || d->def_limit_div || !d->def_text);
		switch (d->type) {
		case V_STR:
		case V_URL:
		case V_ENDPOINT:
		case V_LISTEN:
			assert(d->width == sizeof(char *) && d->def == 0 && d->def_text);
			break;
		case V_U32:
			assert(d->width == sizeof(uint32_t) && d->max <= UINT32_MAX);
			break;
		case V_U64:
		case V_SIZE:
		case V_DURATION:
		case V_RATE:
			assert(d->width == sizeof(uint64_t));
			break;
		case V_ENUM:
			while (d->names[n])
				n++;
			assert(d->def < n);
			assert(d->width ==
			       (d->names == bool_names ? sizeof(bool) : sizeof(uint32_t)));
			break;
		}
		(void)n;
		(void)size;
	}
}

/*
 * Writes u into the number, enum or bool field at p, of d's type (see the
 * table's comment).
 */
static void put_number(const struct key_def *d, unsigned char *p, uint64_t u)
{
	if (d->type == V_ENUM && d->names == bool_names)
		*(bool *)(void *)p = u != 0;
	else if (d->width == sizeof(uint32_t))
		*(uint32_t *)(void *)p = (uint32_t)u;
	else
		*(uint64_t *)(void *)p = u;
}

/* ---- values ------------------------------------------------------------- */

/* A parsed value before it is stored. */
struct value {
	uint64_t u; /* a number, or an enum's index in names */
	char *s;    /* a string, owned until stored */
};

/* Hides a URL's user:password part in messages (user:pw@ becomes ***@). */
static void redact_url(const char *in, char *out, size_t outlen)
{
	const char *scheme = strstr(in, "://");
	const char *auth = scheme ? scheme + 3 : in;
	const char *end = auth + strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', (size_t)(end - auth));

	if (!scheme || !at) {
		snprintf(out, outlen, "%s", in);
		return;
	}
	snprintf(out, outlen, "%.*s***%s", (int)(auth - in), in, at);
}

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int cmn__config_parse_uint(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

static void names_list(const char *const *names, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; names[i]; i++) {
		int n = snprintf(buf + used, len - used, "%s%s",
				 i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

/*
 * Checks one value of key d; on success fills *v (v->s owned by the caller).
 * On failure writes "<value>: expected ..." to msg and returns -EINVAL.
 */
static int parse_value(const struct key_def *d, const char *s, struct value *v, char *msg,
		       size_t msglen)
{
	char tmp[MSG_MAX];
	int rc;

	memset(v, 0, sizeof(*v));
	switch (d->type) {
	case V_STR:
		if (!*s) {
			snprintf(msg, msglen, "(empty): expected %s", d->example);
			return -EINVAL;
		}
		break;
	case V_URL:
		redact_url(s, tmp, sizeof(tmp));
		if (!has_prefix(s, "file://") && !has_prefix(s, "http://") &&
		    !has_prefix(s, "https://") && !has_prefix(s, "s3://")) {
			snprintf(
			    msg, msglen,
			    "%s: expected a URL starting with file://, http://, https:// or s3://",
			    *s ? tmp : "(empty)");
			return -EINVAL;
		}
		if (has_prefix(s, "file://") && s[7] != '/') {
			snprintf(msg, msglen,
				 "%s: expected an absolute file URL such as file:///data/train/",
				 tmp);
			return -EINVAL;
		}
		if (strchr(s, '/') && s[strcspn(s, ":") + 3] == '\0') {
			snprintf(msg, msglen, "%s: the URL names no %s", tmp,
				 has_prefix(s, "s3://") ? "bucket (expected s3://bucket/prefix/)"
							: "host or path");
			return -EINVAL;
		}
		if (has_prefix(s, "s3://") && s[5] == '/') {
			snprintf(msg, msglen,
				 "%s: the URL names no bucket (expected s3://bucket/prefix/)", tmp);
			return -EINVAL;
		}
		break;
	case V_ENDPOINT:
		redact_url(s, tmp, sizeof(tmp));
		if ((!has_prefix(s, "http://") && !has_prefix(s, "https://")) ||
		    s[strcspn(s, ":") + 3] == '\0') {
			snprintf(msg, msglen,
				 "%s: expected an http:// or https:// URL such as "
				 "http://127.0.0.1:9000",
				 *s ? tmp : "(empty)");
			return -EINVAL;
		}
		break;
	case V_LISTEN: {
		const char *colon = strrchr(s, ':');
		uint64_t port = 0;
		if (!colon || colon == s || cmn__config_parse_uint(colon + 1, &port) || port < 1 ||
		    port > 65535 || (size_t)(colon - s) > 255) {
			snprintf(msg, msglen,
				 "%s: expected ADDRESS:PORT such as 127.0.0.1:9109 or [::1]:9109",
				 *s ? s : "(empty)");
			return -EINVAL;
		}
		break;
	}
	case V_RATE: {
		/* "50M/s" or "50M": the size part is a size as everywhere */
		size_t n = strlen(s);
		if (n > 2 && strcmp(s + n - 2, "/s") == 0 && n - 2 < sizeof(tmp)) {
			memcpy(tmp, s, n - 2);
			tmp[n - 2] = '\0';
		} else {
			snprintf(tmp, sizeof(tmp), "%s", s);
		}
		if (cmn_parse_size(tmp, &v->u, msg, msglen) != 0) {
			snprintf(msg, msglen, "%s: expected %s", *s ? s : "(empty)", d->example);
			return -EINVAL;
		}
		return 0;
	}
	case V_SIZE:
		rc = cmn_parse_size(s, &v->u, msg, msglen);
		if (rc)
			return -EINVAL;
		if (v->u < d->min || v->u > d->max) {
			snprintf(msg, msglen, "%s: expected %s (at least %" PRIu64 " bytes)", s,
				 d->example, d->min);
			return -EINVAL;
		}
		return 0;
	case V_DURATION:
		rc = cmn_parse_duration(s, &v->u, msg, msglen);
		if (rc)
			return -EINVAL;
		if (v->u < d->min) {
			snprintf(msg, msglen, "%s: expected %s (more than zero)", s, d->example);
			return -EINVAL;
		}
		return 0;
	case V_U32:
	case V_U64:
		rc = cmn__config_parse_uint(s, &v->u);
		if (rc || v->u < d->min || v->u > d->max) {
			snprintf(msg, msglen, "%s: expected %s", *s ? s : "(empty)", d->example);
			return -EINVAL;
		}
		return 0;
	case V_ENUM:
		for (int i = 0; d->names[i]; i++) {
			if (strcmp(s, d->names[i]) == 0) {
				v->u = (uint64_t)i;
				return 0;
			}
		}
		names_list(d->names, tmp, sizeof(tmp));
		snprintf(msg, msglen, "%s: expected %s", *s ? s : "(empty)", tmp);
		return -EINVAL;
	}
	v->s = strdup(s);
	if (!v->s) {
		snprintf(msg, msglen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/*
 * Writes v into d's field of base (a struct cmn_config for keys[], a
 * struct cmn_epoch_section for epoch_keys[]) and sets the field's "given"
 * flag.  A string field takes v->s (freeing the value it held).
 */
static void store(void *base, const struct key_def *d, struct value *v)
{
	unsigned char *p = (unsigned char *)base + d->off;

	if (is_string(d->type)) {
		char **slot = (char **)(void *)p;
		free(*slot);
		*slot = v->s;
		v->s = NULL;
	} else {
		put_number(d, p, v->u);
	}
	if (d->given)
		*(bool *)(void *)((unsigned char *)base + d->given - 1) = true;
}

/* Copies a key with '-' turned into '_'; returns false if it does not fit. */
static bool normalize_key(const char *key, char *out, size_t outlen)
{
	size_t i;

	for (i = 0; key[i]; i++) {
		if (i + 1 >= outlen)
			return false;
		out[i] = key[i] == '-' ? '_' : key[i];
	}
	out[i] = '\0';
	return true;
}

static void key_list(enum cmn__section sec, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++) {
		const struct key_def *d = row(i);
		const char *name = sec == CMN__SEC_NONE ? d->flat : d->ini;
		int k;
		if ((sec != CMN__SEC_NONE && d->sec != sec) || !name)
			continue;
		k = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
		if (k < 0 || (size_t)k >= len - used)
			break;
		used += (size_t)k;
	}
}

/*
 * Edit distance between a and b (optimal string alignment: insertions,
 * deletions, substitutions and swaps of two neighbours cost 1), for the
 * "did you mean" of an unknown key.  Names longer than 63 bytes count as
 * far from everything.
 */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[64][64];

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/*
 * The key of section sec (CMN__SEC_NONE: the flat names of the command line)
 * nearest to the unknown, normalized name, or NULL when none is near: at
 * most 1 edit for names of up to 5 characters, 2 up to 9, else 3.  On the
 * command line an INI-only spelling of a key with a flag (dir for
 * cache_dir) names that flag.  Returns a name of the table.
 */
static const char *nearest_key(enum cmn__section sec, const char *name)
{
	size_t len = strlen(name), best_d = len <= 5 ? 1 : len <= 9 ? 2 : 3;
	const char *best = NULL;

	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++) {
		const struct key_def *d = row(i);
		const char *cand = sec == CMN__SEC_NONE ? d->flat : d->ini;
		if (!cand || (sec != CMN__SEC_NONE && d->sec != sec))
			continue;
		if (sec == CMN__SEC_NONE && strcmp(d->ini, name) == 0)
			return cand;
		size_t dist = edit_distance(name, cand);
		if (dist < best_d || (dist == best_d && !best)) {
			best_d = dist;
			best = cand;
		}
	}
	return best;
}

/* The section other than sec that has an INI key of this name, or CMN__SEC_NONE. */
static enum cmn__section key_section(enum cmn__section sec, const char *name)
{
	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++) {
		const struct key_def *d = row(i);
		if (d->sec != sec && strcmp(d->ini, name) == 0)
			return d->sec;
	}
	return CMN__SEC_NONE;
}

/* ---- a key of an INI file (config_ini.c reads the file) ------------------- */

int cmn__config_ini_key(struct cmn_config *c, enum cmn__section sec, size_t epoch_idx,
			const char *name, const char *value, char *msg, size_t msglen)
{
	const struct key_def *tab = sec == CMN__SEC_EPOCH ? epoch_keys : keys;
	size_t n = sec == CMN__SEC_EPOCH ? N_EPOCH_KEYS : N_KEYS;
	char key[64], tmp[MSG_MAX], list[MSG_MAX];
	struct value v;
	int rc;

	if (!normalize_key(name, key, sizeof(key)))
		key[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (tab[i].sec != sec || strcmp(tab[i].ini, key) != 0)
			continue;
		rc = parse_value(&tab[i], value, &v, tmp, sizeof(tmp));
		if (rc) {
			snprintf(msg, msglen, "%s = %s", name, tmp);
			return rc;
		}
		store(sec == CMN__SEC_EPOCH ? (void *)&c->epochs[epoch_idx] : (void *)c, &tab[i],
		      &v);
		free(v.s);
		return 0;
	}
	const char *near = key[0] ? nearest_key(sec, key) : NULL;
	enum cmn__section other = key[0] ? key_section(sec, key) : CMN__SEC_NONE;
	if (other != CMN__SEC_NONE) {
		snprintf(msg, msglen, "unknown key '%s': it belongs in [%s]", name,
			 section_names[other]);
	} else if (near) {
		snprintf(msg, msglen, "unknown key '%s': did you mean '%s'?", name, near);
	} else {
		key_list(sec, list, sizeof(list));
		snprintf(msg, msglen, "unknown key '%s': expected one of %s", name, list);
	}
	return -EINVAL;
}

/* ---- defaults, set, -o ---------------------------------------------------- */

void cmn_config_init(struct cmn_config *c)
{
	check_table();
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < N_KEYS; i++)
		if (!is_string(keys[i].type))
			put_number(&keys[i], (unsigned char *)c + keys[i].off, keys[i].def);
}

void cmn_epoch_defaults(struct cmn_epoch_section *s, uint64_t limit)
{
	check_table();
	memset(s, 0, sizeof(*s));
	s->last = CMN_EPOCH_OPEN;
	for (size_t i = 0; i < N_EPOCH_KEYS; i++) {
		const struct key_def *d = &epoch_keys[i];
		put_number(d, (unsigned char *)s + d->off,
			   d->def_limit_div ? limit / d->def_limit_div : d->def);
	}
}

void cmn_config_free(struct cmn_config *c)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (is_string(keys[i].type))
			free(*(char **)(void *)((unsigned char *)c + keys[i].off));
	free(c->path);
	free(c->epochs);
	memset(c, 0, sizeof(*c));
}

int cmn_config_set(struct cmn_config *c, const char *key, const char *value, const char *origin,
		   char *err, size_t errlen)
{
	char name[64], msg[MSG_MAX];
	const char *sep = origin && has_prefix(origin, "-o") ? "=" : " ";
	struct value v;
	int rc;

	if (!origin)
		origin = key;
	if (!normalize_key(key, name, sizeof(name)))
		name[0] = '\0';
	for (size_t i = 0; i < N_KEYS + N_EPOCH_KEYS; i++) {
		const struct key_def *d = row(i);
		if (!d->flat || strcmp(d->flat, name) != 0)
			continue;
		rc = parse_value(d, value ? value : "", &v, msg, sizeof(msg));
		if (rc) {
			snprintf(err, errlen, "%s%s%s", origin, sep, msg);
			return rc;
		}
		/* an [epoch] key is stored as a command-line override */
		store(d->sec == CMN__SEC_EPOCH ? (void *)&c->cli_epoch : (void *)c, d, &v);
		free(v.s);
		return 0;
	}
	/* one short line: the nearest key, or where the keys are listed */
	const char *near = name[0] ? nearest_key(CMN__SEC_NONE, name) : NULL;
	if (near && has_prefix(origin, "--")) {
		char flag[64];
		snprintf(flag, sizeof(flag), "%s", near);
		for (char *p = flag; *p; p++)
			*p = *p == '_' ? '-' : *p;
		snprintf(err, errlen, "unknown option %s: did you mean --%s?", origin, flag);
	} else if (near) {
		snprintf(err, errlen, "unknown option %s: did you mean %s%s?", origin,
			 has_prefix(origin, "-o") ? "-o " : "", near);
	} else {
		snprintf(err, errlen,
			 "unknown option %s: `rollcache mount --help` lists the configuration keys",
			 origin);
	}
	return -EINVAL;
}

int cmn_config_parse_o(struct cmn_config *c, const char *opts, char *err, size_t errlen)
{
	char *copy = strdup(opts ? opts : "");
	char *save = NULL, *item;
	int rc = 0;

	if (!copy) {
		snprintf(err, errlen, "-o: out of memory");
		return -ENOMEM;
	}
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char origin[80];
		char *eq = strchr(item, '=');
		if (!eq) {
			snprintf(err, errlen, "-o %s: expected key=value, such as -o limit=20G",
				 item);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		snprintf(origin, sizeof(origin), "-o %s", item);
		rc = cmn_config_set(c, item, eq + 1, origin, err, errlen);
		if (rc)
			break;
	}
	free(copy);
	return rc;
}

/* ---- the whole ------------------------------------------------------------ */

/*
 * [epoch] keys given as flags or -o (command line > config file) override
 * that key in every entry; without a schedule they make one, [epoch 0-].
 */
static int apply_cli_epoch(struct cmn_config *c, char *err, size_t errlen)
{
	const struct cmn_epoch_section *o = &c->cli_epoch;

	if (!o->has_admit && !o->has_policy && !o->has_min_uses && !o->has_seed)
		return 0;
	if (c->n_epochs == 0) {
		c->epochs = calloc(1, sizeof(*c->epochs));
		if (!c->epochs) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		c->epochs[0].first = 0;
		c->epochs[0].last = CMN_EPOCH_OPEN;
		c->n_epochs = 1;
	}
	for (size_t i = 0; i < c->n_epochs; i++) {
		struct cmn_epoch_section *e = &c->epochs[i];
		uint64_t lim = e->has_limit ? e->limit : c->limit;
		if (o->has_admit) {
			if (o->admit > lim) {
				char a[32], b[32];
				snprintf(err, errlen,
					 "admit = %s is above the limit = %s of [epoch %" PRIu32
					 "...]: lower admit",
					 cmn_format_size(o->admit, a, sizeof(a)),
					 cmn_format_size(lim, b, sizeof(b)), e->first);
				return -EINVAL;
			}
			e->admit = o->admit;
			e->has_admit = true;
		}
		if (o->has_policy) {
			e->policy = o->policy;
			e->has_policy = true;
		}
		if (o->has_min_uses) {
			e->min_uses = o->min_uses;
			e->has_min_uses = true;
		}
		if (o->has_seed) {
			e->seed = o->seed;
			e->has_seed = true;
		}
	}
	c->cli_epoch = (struct cmn_epoch_section){0};
	return 0;
}

uint64_t cmn_config_derived_shard_size(uint64_t limit)
{
	uint64_t s = limit / 16, lo = (uint64_t)64 << 10, hi = (uint64_t)64 << 20;
	s = s < lo ? lo : s > hi ? hi : s;
	return s < limit ? s : limit ? limit : lo;
}

int cmn_config_finish(struct cmn_config *c, char *err, size_t errlen)
{
	char a[32], b[32], tmp[MSG_MAX];
	struct value v;

	if (!c->has_limit || c->limit == 0) {
		snprintf(err, errlen,
			 "limit is not set: add `limit = 200G` under [cache] in the "
			 "config file, or pass --limit SIZE (-o limit=SIZE)");
		return -EINVAL;
	}
	if (c->world_size < 1) {
		snprintf(err, errlen, "world_size = 0: expected a node count of at least 1");
		return -EINVAL;
	}
	if (c->rank >= c->world_size) {
		snprintf(err, errlen,
			 "rank = %" PRIu32 " with world_size = %" PRIu32
			 ": expected rank from 0 to world_size - 1",
			 c->rank, c->world_size);
		return -EINVAL;
	}
	if (c->connections < 1 || c->connections > 1024) {
		snprintf(err, errlen, "connections = %" PRIu32 ": expected 1 to 1024",
			 c->connections);
		return -EINVAL;
	}
	if (c->url) {
		if (parse_value(find_key(CMN__SEC_SOURCE, "url"), c->url, &v, tmp, sizeof(tmp)) !=
		    0) {
			snprintf(err, errlen, "url = %s", tmp);
			return -EINVAL;
		}
		free(v.s);
	}
	uint64_t least = c->limit; /* the smallest limit of the schedule */
	for (size_t i = 0; i < c->n_epochs; i++)
		if (c->epochs[i].has_limit && c->epochs[i].limit && c->epochs[i].limit < least)
			least = c->epochs[i].limit;
	if (c->shard_size == 0)
		c->shard_size = cmn_config_derived_shard_size(least);
	if (c->shard_size > c->limit) {
		snprintf(err, errlen,
			 "shard_size = %s is larger than limit = %s: lower shard_size or "
			 "raise limit",
			 cmn_format_size(c->shard_size, a, sizeof(a)),
			 cmn_format_size(c->limit, b, sizeof(b)));
		return -EINVAL;
	}
	if (c->timeout_ms == 0) {
		snprintf(err, errlen, "timeout = 0: expected a duration such as 30s");
		return -EINVAL;
	}
	if (c->scrub_rate == 0 && !c->unverified_reads) {
		snprintf(err, errlen,
			 "scrub_rate = 0 turns off the re-verification of resident files: set "
			 "unverified_reads = true to accept unverified reads, or give a rate such "
			 "as 50M/s");
		return -EINVAL;
	}
	if (c->format == CMN_FORMAT_RAW &&
	    (c->compression == CMN_COMPRESSION_GZIP || c->compression == CMN_COMPRESSION_ZLIB)) {
		snprintf(err, errlen,
			 "compression = %s applies to format = tfrecord only: "
			 "set compression = none (or auto) for raw objects",
			 c->compression == CMN_COMPRESSION_GZIP ? "gzip" : "zlib");
		return -EINVAL;
	}
	for (size_t i = 0; i < c->n_epochs; i++) {
		const struct cmn_epoch_section *e = &c->epochs[i];
		const char *where = c->path ? c->path : "config";
		uint64_t lim = e->has_limit ? e->limit : c->limit;
		if (e->has_limit && e->limit > c->limit) {
			snprintf(
			    err, errlen,
			    "%s:%d: [epoch] limit = %s is above the cache limit = %s: an epoch "
			    "may not hold more than the cache",
			    where, e->line, cmn_format_size(e->limit, a, sizeof(a)),
			    cmn_format_size(c->limit, b, sizeof(b)));
			return -EINVAL;
		}
		if (e->has_admit && e->admit > lim) {
			snprintf(err, errlen,
				 "%s:%d: [epoch] admit = %s is above its limit = %s: lower admit",
				 where, e->line, cmn_format_size(e->admit, a, sizeof(a)),
				 cmn_format_size(lim, b, sizeof(b)));
			return -EINVAL;
		}
	}
	return apply_cli_epoch(c, err, errlen);
}

const char *cmn_policy_name(enum cmn_policy p)
{
	if ((unsigned)p < sizeof(policy_names) / sizeof(policy_names[0]) - 1)
		return policy_names[p];
	return "?";
}

int cmn_policy_parse(const char *s, enum cmn_policy *out)
{
	for (int i = 0; policy_names[i]; i++) {
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum cmn_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * A size as the parser reads it, with the largest binary suffix that
 * divides it: 1048576 -> "1M", 4096 -> "4K", 1000 -> "1000".
 */
static void format_size_exact(uint64_t b, char *out, size_t len)
{
	static const char suffix[] = "KMGTPE";
	int i = -1;

	while (b && b % 1024 == 0 && suffix[i + 1]) {
		b /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(out, len, "%" PRIu64, b);
	else
		snprintf(out, len, "%" PRIu64 "%c", b, suffix[i]);
}

/* Milliseconds as the parser reads them, in the largest unit that divides them: "10m", "30s". */
static void format_duration_exact(uint64_t ms, char *out, size_t len)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};

	for (size_t i = 0; ms && i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].ms == 0) {
			snprintf(out, len, "%" PRIu64 "%s", ms / units[i].ms, units[i].unit);
			return;
		}
	}
	snprintf(out, len, "0");
}

/* The default of d as help shows it: def_text, else def in the key's own syntax. */
static void format_default(const struct key_def *d, char *out, size_t len)
{
	if (d->def_text) {
		snprintf(out, len, "%s", d->def_text);
		return;
	}
	switch (d->type) {
	case V_SIZE:
		format_size_exact(d->def, out, len);
		break;
	case V_RATE: {
		char size[32];
		format_size_exact(d->def, size, sizeof(size));
		snprintf(out, len, "%s/s", size);
		break;
	}
	case V_DURATION:
		format_duration_exact(d->def, out, len);
		break;
	case V_ENUM:
		snprintf(out, len, "%s", d->names[d->def]);
		break;
	case V_U32:
	case V_U64:
	case V_STR:
	case V_URL:
	case V_ENDPOINT:
	case V_LISTEN: /* strings have a def_text (check_table()) */
		snprintf(out, len, "%" PRIu64, d->def);
		break;
	}
}

bool cmn_config_key(size_t i, struct cmn_config_key_info *out)
{
	const struct key_def *d;

	if (i >= N_KEYS + N_EPOCH_KEYS)
		return false;
	d = row(i);
	out->section = section_names[d->sec];
	out->ini = d->ini;
	out->flat = d->flat;
	format_default(d, out->def, sizeof(out->def));
	out->help = d->help;
	out->values = d->type == V_ENUM ? d->names : NULL;
	switch (d->type) {
	case V_SIZE:
		out->metavar = "SIZE";
		break;
	case V_DURATION:
		out->metavar = "TIME";
		break;
	case V_U32:
	case V_U64:
		out->metavar = "N";
		break;
	case V_URL:
	case V_ENDPOINT:
		out->metavar = "URL";
		break;
	case V_LISTEN:
		out->metavar = "ADDR:PORT";
		break;
	case V_RATE:
		out->metavar = "RATE";
		break;
	case V_ENUM:
		out->metavar = NULL;
		break;
	case V_STR:
		out->metavar = d->metavar ? d->metavar : "NAME";
		break;
	}
	return true;
}
