/*
 * schema.h - feature schemas: which tf.Example features a reader wants, with
 * their element type, shape and optional default.
 *
 * Grammar (DESIGN "Feeder"; blanks around tokens are ignored):
 *
 *   spec    := feature ( ',' feature )*
 *   feature := [ place blank+ ] name ':' dtype [ shape ] [ '=' default ]
 *   place   := 'context' | 'sequence' | 'record'
 *   name    := 1..255 bytes, none of  : , [ ] = " blank or control
 *   dtype   := float32 | float (same) | int64 | uint8 | bytes
 *   shape   := '[' ']'                      ragged: any number of values
 *            | '[' dim ( ',' dim )* ']'     fixed, 1..8 dims, each >= 1
 *   default := NUMBER        fixed-shape numeric feature: every element
 *            | '[' ']'       ragged numeric feature: no values
 *            | '""'          bytes feature: no bytes
 *
 * Examples: "x:float32[4,1000000,3],y:int64[1],ids:int64[],img:bytes",
 *           "label:int64=0" (scalar), "mask:uint8[16]=255", "ids:int64[]=[]".
 *
 * What a record holds (the place keywords; a name is never a keyword, since
 * a name cannot hold a blank, so older specs read as before):
 *   - no place keyword: a tf.train.Example; each feature is one of its
 *     features.
 *   - `sequence NAME:dtype[step shape]`: the schema reads
 *     tf.train.SequenceExample records; the feature is the feature_list
 *     NAME, each of its Features one step of exactly the step shape's
 *     elements (a scalar: one per step).  dtype float32, int64 or uint8 (a
 *     step's bytes_list as bytes), never `[]` or `bytes`: ragged steps are
 *     not supported (docs/TODO.md (example)).  Such a feature is ragged over
 *     steps: per record, steps x step-count elements, step-major.  Its only
 *     default is `=[]` (a missing feature_list is zero steps, like TF's
 *     allow_missing); without it a missing feature_list is an error.
 *   - `context NAME:...`: a context feature of a SequenceExample; in a
 *     schema with a `sequence` or `context` feature, features without a
 *     place keyword are context features too.
 *   - `record NAME:bytes`: the whole record payload as one bytes value,
 *     whatever it holds (tfevents, magenta, any protobuf or none).  It must
 *     be the schema's only feature.
 * An Example schema fed a SequenceExample (a record with feature_lists) is
 * an error naming tf.SequenceExample, not a silent read of its context.
 *
 * A numeric feature without a shape is a scalar (one element, ndims 0).
 * `bytes` takes no shape and is always ragged: a record's value is the
 * concatenation of its BytesList strings (almost always exactly one).
 * `uint8` values come from a BytesList (the strings' bytes, concatenated) or
 * from an Int64List whose values are in 0..255.
 *
 * Defaults apply when a record has no entry for the feature, or an entry
 * whose Feature has no list set (kind unset).  Without a default, either is
 * an error naming the feature.  A float32 default is any strtod() number
 * ("0", "-1.5", "nan", "inf"); int64 a decimal in int64 range; uint8 0..255.
 *
 * Limits: at most CMN_SCHEMA_MAX_FEATURES features, names unique, the fixed
 * element count of one feature at most CMN_SCHEMA_MAX_ELEMS.
 *
 * A parsed schema is immutable: any number of threads may use it at once.
 */
#ifndef RC_COMMON_SCHEMA_H
#define RC_COMMON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMN_SCHEMA_MAX_FEATURES 256
#define CMN_SCHEMA_MAX_DIMS	8
#define CMN_SCHEMA_MAX_NAME	255
#define CMN_SCHEMA_MAX_ELEMS	((uint64_t)1 << 36) /* elements of one fixed feature */

/* Where a feature's values are in a record (the spec's place keyword). */
enum cmn_place {
	CMN_PLACE_FEATURE = 0,	/* Example feature, or SequenceExample context */
	CMN_PLACE_CONTEXT = 1,	/* `context`: SequenceExample context feature */
	CMN_PLACE_SEQUENCE = 2, /* `sequence`: SequenceExample feature_list */
	CMN_PLACE_RECORD = 3,	/* `record`: the whole record payload */
};

enum cmn_dtype {
	CMN_DT_FLOAT32 = 0, /* 4 bytes, IEEE-754, host (little-endian) order */
	CMN_DT_INT64 = 1,   /* 8 bytes */
	CMN_DT_UINT8 = 2,   /* 1 byte */
	CMN_DT_BYTES = 3,   /* 1 byte elements; always ragged */
};

/* One feature of a schema.  All fields are read-only after parsing. */
struct cmn_feature {
	char *name; /* NUL-terminated, owned by the schema */
	size_t name_len;
	enum cmn_dtype dtype;
	size_t elem_size; /* 4, 8, 1, 1 */
	enum cmn_place place;
	bool ragged;	     /* shape "[]", dtype bytes, or a sequence feature */
	unsigned ndims;	     /* 0 for scalars and ragged features; sequence: the step's */
	uint64_t step_count; /* sequence: elements per step (product of dims); else 0 */
	uint64_t dims[CMN_SCHEMA_MAX_DIMS];
	uint64_t count;	    /* elements per record: product of dims (1 for a scalar); 0 if ragged */
	uint64_t row_bytes; /* count * elem_size; 0 if ragged */
	bool has_default;
	union {
		float f;
		int64_t i;
		uint8_t u;
	} def; /* the default element (fixed features); ragged defaults are empty */
};

struct cmn_schema {
	size_t n;		     /* number of features, 1..CMN_SCHEMA_MAX_FEATURES */
	struct cmn_feature *feature; /* [n], in the order of the spec */
	uint64_t fixed_row_bytes;    /* sum of row_bytes over the fixed features */
	size_t n_ragged;	     /* how many features are ragged */
	bool sequence;		     /* reads tf.SequenceExample (a context or sequence feature) */
	bool record;		     /* one `record` feature: the whole payload */
	/* private: name lookup table */
	uint16_t *slots_;
	size_t nslots_;
};

/*
 * Parses `spec` into a new schema.  Returns 0 and *out (free with
 * cmn_schema_free), or -EINVAL with a one-line message that points at the
 * 1-based column of the problem, e.g.
 *   "schema column 9: unknown dtype 'float33' (expected float32, int64, uint8 or bytes)"
 * or -ENOMEM.  *out is untouched on failure.
 */
int cmn_schema_parse(const char *spec, struct cmn_schema **out, char *err, size_t errlen);

/* Frees a schema and everything it owns; NULL is fine. */
void cmn_schema_free(struct cmn_schema *s);

/*
 * Index of the feature named by the `len` bytes at `name` (need not be
 * NUL-terminated), or -1.  O(1) average; no allocation; thread-safe.
 */
int cmn_schema_find(const struct cmn_schema *s, const void *name, size_t len);

/*
 * Writes the canonical spec of s (parseable by cmn_schema_parse, giving an
 * equal schema) into buf, always NUL-terminated when buflen > 0.  Returns the
 * length the full string needs (snprintf-like, excluding the NUL).
 */
size_t cmn_schema_format(const struct cmn_schema *s, char *buf, size_t buflen);

/* "float32", "int64", "uint8", "bytes". */
const char *cmn_dtype_name(enum cmn_dtype t);

#endif
