/*
 * example.h - zero-copy tf.train.Example codec (no protobuf library).
 *
 * The messages, with TensorFlow's field numbers (example.proto, feature.proto):
 *
 *   Example   { Features features = 1; }
 *   Features  { map<string, Feature> feature = 1; }   entry: key = 1, value = 2
 *   Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
 *                            Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }
 *   FloatList { repeated float value = 1 [packed = true]; }
 *   Int64List { repeated int64 value = 1 [packed = true]; }
 *
 * Decoding follows protobuf's parse semantics, so that a record means here
 * what it means to python3-protobuf (tests/common checks this on random
 * Examples):
 *   - packed and unpacked repeated values are both accepted, mixed too, and
 *     several value fields of one list concatenate;
 *   - a known field with an unexpected wire type, and any unknown field, is
 *     skipped (varint, 64-bit, length-delimited, 32-bit);
 *   - a repeated map key: the last entry wins (as protobuf maps do); a
 *     `features` field given twice merges (its entries are simply more
 *     entries); an entry without a key has the name "";
 *   - a Feature whose oneof is set several times keeps the last kind; runs of
 *     the same kind merge (protobuf merges a repeated message field of the
 *     oneof case already set);
 *   - int64 values are two's complement 64-bit varints (negative = 10 bytes);
 *     bits past 64 in a 10th byte are dropped, as protobuf does.
 * Rejected with -EBADMSG: a varint longer than 10 bytes or cut short, a
 * length past the end of its enclosing message, a packed float payload whose
 * length is not a multiple of 4, a packed varint run cut short, field number
 * 0, a tag above 32 bits, wire types 3/4 (groups; protobuf would skip them,
 * we refuse) and 6/7.  Never reads outside [buf, buf + len).
 * Not checked: UTF-8 validity of keys (proto3 would refuse bad UTF-8).
 *
 * Host byte order must be little-endian (float32 values are copied as is).
 *
 * Everything here is reentrant: no global state, no allocation.
 */
#ifndef RC_COMMON_EXAMPLE_H
#define RC_COMMON_EXAMPLE_H

#include "common/schema.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The oneof `kind` of a Feature; the numbers are the field numbers. */
enum cmn_ex_kind {
	CMN_EX_NONE = 0, /* no list set (an empty Feature message) */
	CMN_EX_BYTES_LIST = 1,
	CMN_EX_FLOAT_LIST = 2,
	CMN_EX_INT64_LIST = 3,
};

/* "none", "bytes_list", "float_list", "int64_list". */
const char *cmn_ex_kind_name(enum cmn_ex_kind k);

/* ---- low level: iterate an Example's features ------------------------ */

/*
 * One map entry of an Example, as the iterator found it.  Pointers point
 * into the caller's buffer and live as long as it does.
 */
struct cmn_ex_feature {
	const uint8_t *name; /* key bytes (not NUL-terminated); "" if the entry had no key */
	size_t name_len;
	enum cmn_ex_kind kind; /* per the oneof rules above */
	size_t n_values;       /* floats, int64s or strings (0 for CMN_EX_NONE) */
	size_t n_bytes;	       /* bytes_list: total bytes of all strings; else 0 */
	/*
	 * When all values sit in one length-delimited field - the usual case -
	 * its contents: float_list: n_values * 4 bytes of LE floats; int64_list:
	 * n_values packed varints; bytes_list: the one string.  Else NULL, 0.
	 */
	const uint8_t *packed;
	size_t packed_len;
	/* private: the entry's bytes and where the last run of `kind` starts */
	const uint8_t *entry_, *entry_end_;
	const uint8_t *run_, *run_val_end_;
};

/* Iterator state; treat as opaque.  No cleanup needed. */
struct cmn_ex_iter {
	const uint8_t *buf_, *p_, *end_;      /* the Example */
	const uint8_t *feats_p_, *feats_end_; /* the current Features message */
	int state_;
};

/* Starts iterating the Example of `len` bytes at `buf`.  Never fails. */
void cmn_ex_iter_init(struct cmn_ex_iter *it, const void *buf, size_t len);

/*
 * Gives the next map entry in wire order (duplicates included: the caller
 * applies last-wins if it cares).  The entry is fully validated: its Feature
 * and lists are well-formed and n_values is exact.
 * Returns 1 and *f, 0 at the end of the Example, or -EBADMSG with a message
 * ("malformed Example at byte 123: length 500 past end of message (3 left)");
 * after an error every further call returns -EBADMSG again.
 */
int cmn_ex_iter_next(struct cmn_ex_iter *it, struct cmn_ex_feature *f, char *err, size_t errlen);

/*
 * Copies the values of a feature the iterator returned into dst, by its kind:
 *   float_list: n_values floats; int64_list: n_values int64_t;
 *   bytes_list: n_bytes bytes (strings concatenated) and, when lens is not
 *               NULL, the n_values string lengths into lens.
 * CMN_EX_NONE copies nothing.  Always returns 0: the iterator validated the
 * data.  No allocation.
 */
int cmn_ex_feature_read(const struct cmn_ex_feature *f, void *dst, size_t *lens);

/* ---- schema decoder -------------------------------------------------- */

/*
 * Ragged sink: called once per ragged feature of the schema per record, in
 * schema order, with the number of elements the record holds (n_values:
 * elements of elem_size bytes; for bytes features the total bytes, with
 * n_items the number of strings they came from; n_values may be 0).  Returns
 * where to write n_values * elem_size bytes (may be NULL when n_values is 0),
 * or NULL to fail the decode with -ENOBUFS.  The decoder writes exactly that
 * many bytes there before it returns.
 */
typedef void *(*cmn_ex_reserve_fn)(void *ctx, size_t feature, size_t n_values, size_t n_items);

struct cmn_ex_sink {
	/*
	 * [schema->n] destinations, by feature index: for fixed features a row
	 * of row_bytes bytes (e.g. row i of a [batch, ...] tensor); NULL skips
	 * the feature (not looked at, not validated).  Entries for ragged
	 * features are ignored.  The array itself may be NULL: skip all fixed.
	 */
	void *const *fixed;
	cmn_ex_reserve_fn reserve; /* NULL: ragged features are skipped */
	void *ctx;		   /* passed to reserve */
};

/*
 * Decodes one serialized Example for schema s.  Finds each schema feature
 * (last entry wins), checks its kind and element count, and writes
 *   - fixed features into sink->fixed[i]: float32 copied, int64 from varints,
 *     uint8 from a bytes_list (or an int64_list with values 0..255); a
 *     missing feature (or a Feature with no list) takes the schema default;
 *   - ragged features through sink->reserve.
 * Entries the schema does not name are skipped by length; their insides are
 * not validated.  No allocation; O(len) time; reentrant.
 *
 * Returns 0, or on error a message naming the feature and the problem:
 *   -EBADMSG  malformed wire data ("malformed Example at byte 40: ...")
 *   -ENOENT   "feature 'y': missing and the schema gives no default"
 *   -EINVAL   "feature 'x': expected float_list, found int64_list" or
 *             "feature 'x': 3999 values, schema float32[4000] needs 4000"
 *   -ERANGE   "feature 'm': int64 value 300 out of uint8 range"
 *   -ENOBUFS  the reserve callback returned NULL
 * On error, destinations may be partly written and reserve may have been
 * called for some features; the caller drops the record.
 */
int cmn_ex_decode(const struct cmn_schema *s, const void *buf, size_t len,
		  const struct cmn_ex_sink *sink, char *err, size_t errlen);

/* ---- encoder --------------------------------------------------------- */

/* One feature's values for the encoder. */
struct cmn_ex_values {
	const void *data; /* float32 / int64 elements, or the bytes (uint8, bytes) */
	size_t n;	  /* elements (bytes for uint8 and bytes features) */
	/*
	 * bytes features only: split data into n_items strings with these
	 * lengths (summing to n).  lens NULL: one string of n bytes.
	 */
	const size_t *lens;
	size_t n_items;
};

/*
 * Exact size of the Example cmn_ex_encode() writes for these values, or 0
 * when they do not fit the schema (cmn_ex_encode() would return -EINVAL).
 */
size_t cmn_ex_encoded_size(const struct cmn_schema *s, const struct cmn_ex_values *v);

/*
 * Writes a tf.Example holding v[i] for each feature i of s, in schema order:
 * float_list and int64_list packed, uint8 and bytes as a bytes_list (uint8:
 * one string of all n bytes).  Output is deterministic (same input, same
 * bytes), entries in schema order.
 * Returns 0 and *out_len, -EINVAL if a fixed feature's n differs from its
 * count or lens do not sum to n, -ENOSPC if cap is too small (nothing
 * useful in buf then).  Reentrant, no allocation.
 */
int cmn_ex_encode(const struct cmn_schema *s, const struct cmn_ex_values *v, void *buf, size_t cap,
		  size_t *out_len, char *err, size_t errlen);

#endif
