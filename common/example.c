/*
 * example.c - zero-copy tf.train.Example decoder and encoder.
 *
 * Owns the protobuf wire-format walking for the six messages of example.h.
 * Does not own framing (tfrecord.c) nor schemas (schema.c).  No globals, no
 * allocation, so any number of threads may decode at once.
 *
 * The idea.  An Example is three nested length-delimited levels before any
 * value: Example.features -> Features.feature (map entries) -> entry.value
 * (a Feature) -> XxxList.  The decoder walks the outer levels field by field
 * with bounds checks on every read (a tag, a varint, a length against the end
 * of its enclosing message), never trusting a length before comparing it to
 * what is left.  Values are not touched until the feature is wanted:
 * cmn_ex_decode() first finds, for each schema feature, the last map entry
 * with its name (pass 1, entry level only), then resolves that entry's Feature
 * (oneof rules, counting values and validating the lists) and copies the
 * values straight into the caller's row (pass 2).  A packed float_list is one
 * memcpy; a packed int64_list is one varint loop.  Entries in the layout
 * every serializer writes (key, value; one list; one packed field) are
 * recognized by resolve_canonical() with a few byte compares; any other
 * layout takes the general walk, with the same results (tests check both).
 *
 * Protobuf semantics reproduced (see example.h): unknown fields and known
 * fields with another wire type are skipped; repeated scalars may be packed or
 * not; a message field seen twice merges, so a map entry may carry several
 * `value` fields whose Feature fields read as one stream (struct fcur below);
 * the oneof keeps the last kind and merges consecutive same-kind lists.
 *
 * Bounds: every loop advances at least one byte of the input per iteration,
 * varints are at most 10 bytes, so work is O(len).
 */
#include "common/example.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "example.c copies float32 values as stored: little-endian hosts only"
#endif
_Static_assert(sizeof(float) == 4, "float32 is 4 bytes");

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* Error context: the start of the Example (for byte offsets) and the message buffer. */
struct ctx {
	const uint8_t *base;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int bad(struct ctx *c, const uint8_t *at,
						     const char *fmt, ...)
{
	if (c->err && c->errlen) {
		int n = snprintf(c->err, c->errlen,
				 "malformed Example at byte %zu: ", (size_t)(at - c->base));
		if (n >= 0 && (size_t)n < c->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EBADMSG;
}

const char *cmn_ex_kind_name(enum cmn_ex_kind k)
{
	switch (k) {
	case CMN_EX_NONE:
		return "none";
	case CMN_EX_BYTES_LIST:
		return "bytes_list";
	case CMN_EX_FLOAT_LIST:
		return "float_list";
	case CMN_EX_INT64_LIST:
		return "int64_list";
	}
	return "?";
}

/* ---- wire primitives ---------------------------------------------------- */

/*
 * Reads a varint at *pp (before end).  Returns 0 and advances *pp, or
 * -EBADMSG (cut short, or more than 10 bytes).  Bits past 64 are dropped.
 */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	if (p < end && *p < 0x80) {
		*out = *p;
		*pp = p + 1;
		return 0;
	}
	uint64_t v = 0;
	for (unsigned i = 0; i < 10; i++) {
		if (p + i >= end)
			return -EBADMSG;
		uint64_t b = p[i];
		v |= (b & 0x7f) << (7 * i);
		if (b < 0x80) {
			*out = v;
			*pp = p + i + 1;
			return 0;
		}
	}
	return -EBADMSG;
}

static int varint_error(struct ctx *c, const uint8_t *at, const uint8_t *end)
{
	size_t left = (size_t)(end - at);
	if (left >= 10)
		return bad(c, at, "varint longer than 10 bytes");
	return bad(c, at, "varint cut short by the end of its message (%zu bytes left)", left);
}

/* One field of a message: its number, wire type, and payload. */
struct field {
	const uint8_t *start; /* the tag */
	uint32_t num;
	unsigned wt;
	uint64_t v;	     /* WT_VARINT: the value */
	const uint8_t *data; /* WT_LEN: payload; WT_I32/WT_I64: the fixed bytes */
	size_t len;	     /* WT_LEN: payload length */
};

/*
 * Reads the field at *pp (before end) and steps past it.  Returns 0, or
 * -EBADMSG with a message.  Groups and wire types 6/7 are rejected.
 */
static int next_field(struct ctx *c, const uint8_t **pp, const uint8_t *end, struct field *f)
{
	const uint8_t *p = *pp;
	uint64_t tag;
	f->start = p;
	if (get_varint(&p, end, &tag))
		return varint_error(c, *pp, end);
	if (tag > UINT32_MAX)
		return bad(c, f->start, "tag 0x%llx above 32 bits", (unsigned long long)tag);
	f->num = (uint32_t)(tag >> 3);
	f->wt = (unsigned)(tag & 7);
	if (f->num == 0)
		return bad(c, f->start, "field number 0");
	switch (f->wt) {
	case WT_VARINT: {
		const uint8_t *q = p;
		if (get_varint(&p, end, &f->v))
			return varint_error(c, q, end);
		break;
	}
	case WT_I64:
		if ((size_t)(end - p) < 8)
			return bad(c, p, "64-bit field cut short (%zu bytes left)",
				   (size_t)(end - p));
		f->data = p;
		p += 8;
		break;
	case WT_LEN: {
		const uint8_t *q = p;
		uint64_t len;
		if (get_varint(&p, end, &len))
			return varint_error(c, q, end);
		if (len > (uint64_t)(end - p))
			return bad(c, q, "length %llu past end of message (%zu left)",
				   (unsigned long long)len, (size_t)(end - p));
		f->data = p;
		f->len = (size_t)len;
		p += len;
		break;
	}
	case WT_I32:
		if ((size_t)(end - p) < 4)
			return bad(c, p, "32-bit field cut short (%zu bytes left)",
				   (size_t)(end - p));
		f->data = p;
		p += 4;
		break;
	case WT_SGROUP:
	case WT_EGROUP:
		return bad(c, f->start, "field %u is a group (wire type %u): not supported", f->num,
			   f->wt);
	default:
		return bad(c, f->start, "field %u has invalid wire type %u", f->num, f->wt);
	}
	*pp = p;
	return 0;
}

/* ---- Feature-level cursor over a map entry ------------------------------- */

/*
 * Walks the fields of the Feature held by a map entry.  An entry may carry
 * its `value` (field 2) several times; protobuf merges them, which reads
 * exactly like their contents one after the other.  The cursor therefore
 * goes through the Feature fields of each value field in turn, skipping the
 * key and unknown entry fields.
 */
struct fcur {
	const uint8_t *p, *end;	  /* inside the current value field */
	const uint8_t *ep, *eend; /* entry position after the current value field */
};

/* Returns 1 and the next Feature field, 0 at the end, or -EBADMSG. */
static int fcur_next(struct ctx *c, struct fcur *fc, struct field *f)
{
	while (fc->p == fc->end) {
		if (fc->ep == fc->eend)
			return 0;
		struct field ef;
		int rc = next_field(c, &fc->ep, fc->eend, &ef);
		if (rc)
			return rc;
		if (ef.num == 2 && ef.wt == WT_LEN) {
			fc->p = ef.data;
			fc->end = ef.data + ef.len;
		}
	}
	int rc = next_field(c, &fc->p, fc->end, f);
	return rc ? rc : 1;
}

/* ---- lists -------------------------------------------------------------- */

/* What a run of one kind holds. */
struct run {
	size_t n_values, n_bytes;
	size_t n_fields; /* value fields seen (packed, single, or string) */
	const uint8_t *packed;
	size_t packed_len;
	bool single; /* the one value field was length-delimited (usable as `packed`) */
};

/* Counts the varints of a packed int64 payload; -EBADMSG if one is bad. */
static int count_varints(struct ctx *c, const uint8_t *p, const uint8_t *end, size_t *n)
{
	size_t k = 0;
	while (p < end) {
		/* Fast path over 8 one-byte varints at once. */
		if (end - p >= 8) {
			uint64_t w;
			memcpy(&w, p, 8);
			if ((w & 0x8080808080808080ull) == 0) {
				p += 8;
				k += 8;
				continue;
			}
		}
		const uint8_t *q = p;
		uint64_t v;
		if (get_varint(&p, end, &v))
			return varint_error(c, q, end);
		k++;
	}
	*n += k;
	return 0;
}

/* Validates one XxxList message of `kind` and adds its values to r. */
static int scan_list(struct ctx *c, enum cmn_ex_kind kind, const uint8_t *p, const uint8_t *end,
		     struct run *r)
{
	while (p < end) {
		struct field f;
		int rc = next_field(c, &p, end, &f);
		if (rc)
			return rc;
		if (f.num != 1)
			continue;
		switch (kind) {
		case CMN_EX_FLOAT_LIST:
			if (f.wt == WT_LEN) {
				if (f.len % 4)
					return bad(c, f.start,
						   "packed float payload of %zu bytes is not a "
						   "multiple of 4",
						   f.len);
				r->n_values += f.len / 4;
			} else if (f.wt == WT_I32) {
				r->n_values++;
			} else {
				continue;
			}
			break;
		case CMN_EX_INT64_LIST:
			if (f.wt == WT_LEN) {
				rc = count_varints(c, f.data, f.data + f.len, &r->n_values);
				if (rc)
					return rc;
			} else if (f.wt == WT_VARINT) {
				r->n_values++;
			} else {
				continue;
			}
			break;
		case CMN_EX_BYTES_LIST:
			if (f.wt != WT_LEN)
				continue;
			r->n_values++;
			r->n_bytes += f.len;
			break;
		case CMN_EX_NONE:
			continue;
		}
		r->n_fields++;
		r->single = f.wt == WT_LEN;
		r->packed = f.data;
		r->packed_len = f.len;
	}
	return 0;
}

/*
 * Reads a length (a varint of at most 3 bytes here) at p and checks that the
 * payload ends exactly at end.  Returns the payload start or NULL.
 */
static inline const uint8_t *exact_ld(const uint8_t *p, const uint8_t *end)
{
	uint64_t len = 0;
	for (unsigned i = 0; i < 3 && p + i < end; i++) {
		len |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (p[i] < 0x80)
			return (uint64_t)(end - (p + i + 1)) == len ? p + i + 1 : NULL;
	}
	return NULL;
}

/*
 * The layout every serializer writes: the entry is `key` then one `value`,
 * the Feature one list field, the list one packed field (or one string).
 * Recognizes it without the general walk; returns 1 and fills *out, 0 when
 * the entry has another shape (the caller takes the general path), or
 * -EBADMSG for a bad packed payload.
 */
static int resolve_canonical(struct ctx *c, const uint8_t *entry, const uint8_t *eend,
			     struct cmn_ex_feature *out)
{
	const uint8_t *p = entry;
	if (eend - p < 2 || p[0] != 0x0a || p[1] >= 0x80 || eend - p - 2 < p[1] + 2)
		return 0;
	p += 2 + p[1];
	if (p[0] != 0x12 || !(p = exact_ld(p + 1, eend)) || p == eend)
		return 0;
	const uint8_t *feat = p;
	if (p[0] != 0x0a && p[0] != 0x12 && p[0] != 0x1a)
		return 0;
	enum cmn_ex_kind kind = (enum cmn_ex_kind)(p[0] >> 3);
	if (!(p = exact_ld(p + 1, eend)) || p == eend || p[0] != 0x0a)
		return 0;
	const uint8_t *tag = p;
	if (!(p = exact_ld(p + 1, eend)))
		return 0;
	size_t len = (size_t)(eend - p), n = 0;
	switch (kind) {
	case CMN_EX_FLOAT_LIST:
		if (len % 4)
			return bad(c, tag,
				   "packed float payload of %zu bytes is not a multiple of 4", len);
		n = len / 4;
		break;
	case CMN_EX_INT64_LIST: {
		int rc = count_varints(c, p, eend, &n);
		if (rc)
			return rc;
		break;
	}
	case CMN_EX_BYTES_LIST:
		n = 1;
		break;
	case CMN_EX_NONE:
		return 0;
	}
	out->kind = kind;
	out->n_values = n;
	out->n_bytes = kind == CMN_EX_BYTES_LIST ? len : 0;
	out->packed = p;
	out->packed_len = len;
	out->entry_ = eend;
	out->entry_end_ = eend;
	out->run_ = feat;
	out->run_val_end_ = eend;
	return 1;
}

/*
 * Resolves the Feature of the map entry [entry, eend) into *out (kind,
 * counts, views; the name is set by the caller).  Validates every list of
 * the Feature, as protobuf parses them all.
 */
static int resolve_walk(struct ctx *c, struct fcur fc, const uint8_t *eend,
			struct cmn_ex_feature *out);

static int resolve_feature(struct ctx *c, const uint8_t *entry, const uint8_t *eend,
			   struct cmn_ex_feature *out)
{
	int fast = resolve_canonical(c, entry, eend, out);
	if (fast)
		return fast < 0 ? fast : 0;
	struct fcur fc = {.p = NULL, .end = NULL, .ep = entry, .eend = eend};
	return resolve_walk(c, fc, eend, out);
}

/*
 * Resolves a bare Feature message [p, end) - a step of a FeatureList - the
 * same way: the cursor starts inside it and has no entry around it.
 */
static int resolve_bare(struct ctx *c, const uint8_t *p, const uint8_t *end,
			struct cmn_ex_feature *out)
{
	struct fcur fc = {.p = p, .end = end, .ep = end, .eend = end};
	return resolve_walk(c, fc, end, out);
}

/* The general walk of resolve_feature() from cursor fc; eend ends the entry. */
static int resolve_walk(struct ctx *c, struct fcur fc, const uint8_t *eend,
			struct cmn_ex_feature *out)
{
	struct run r = {0};
	enum cmn_ex_kind kind = CMN_EX_NONE;
	const uint8_t *run = NULL, *run_val_end = NULL, *run_ep = NULL;
	for (;;) {
		const uint8_t *here = fc.p, *here_end = fc.end, *here_ep = fc.ep;
		struct field f;
		int rc = fcur_next(c, &fc, &f);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		if (f.num < 1 || f.num > 3 || f.wt != WT_LEN)
			continue;
		if ((enum cmn_ex_kind)f.num != kind) {
			/* A new oneof case clears the old one. */
			kind = (enum cmn_ex_kind)f.num;
			memset(&r, 0, sizeof(r));
			/* The run starts at this field; remember the cursor before it. */
			if (here == here_end) {
				/* fcur_next moved to a new value field: the run starts at its
				 * start. */
				run = f.start;
				run_val_end = fc.end;
				run_ep = fc.ep;
			} else {
				run = here;
				run_val_end = here_end;
				run_ep = here_ep;
			}
		}
		rc = scan_list(c, kind, f.data, f.data + f.len, &r);
		if (rc)
			return rc;
	}
	out->kind = kind;
	out->n_values = r.n_values;
	out->n_bytes = r.n_bytes;
	if (kind != CMN_EX_NONE && r.n_fields == 1 && r.single) {
		out->packed = r.packed;
		out->packed_len = r.packed_len;
	} else if (kind != CMN_EX_NONE && r.n_fields == 0) {
		out->packed = (const uint8_t *)"";
		out->packed_len = 0;
	} else {
		out->packed = NULL;
		out->packed_len = 0;
	}
	out->entry_ = run_ep;
	out->entry_end_ = eend;
	out->run_ = run;
	out->run_val_end_ = run_val_end;
	return 0;
}

/* Reads an entry's key (last one wins) into name/len; validates entry-level fields. */
static int entry_key(struct ctx *c, const uint8_t *p, const uint8_t *end, const uint8_t **name,
		     size_t *len)
{
	*name = (const uint8_t *)"";
	*len = 0;
	while (p < end) {
		struct field f;
		int rc = next_field(c, &p, end, &f);
		if (rc)
			return rc;
		if (f.num == 1 && f.wt == WT_LEN) {
			*name = f.data;
			*len = f.len;
		}
	}
	return 0;
}

/* ---- value copying ------------------------------------------------------ */

/*
 * Copying walks the resolved run of a feature again, field by field, and
 * appends each value at s->dst.  The run was validated by resolve_feature(),
 * so errors cannot happen here; the bounds checks stay (cheap) so that a
 * misuse cannot read out of bounds.
 */
struct sink_state {
	uint8_t *dst;	   /* where the next value goes */
	size_t *lens;	   /* bytes_list string lengths, or NULL */
	int as_uint8;	   /* int64 -> uint8 with range check */
	int64_t bad_value; /* uint8 range failure */
	int range_error;
};

static void put_varints(struct sink_state *s, const uint8_t *p, const uint8_t *end)
{
	uint8_t *d = s->dst;
	while (p < end) {
		uint64_t v;
		if (get_varint(&p, end, &v))
			break;
		if (s->as_uint8) {
			if (v > 255 && !s->range_error) {
				s->range_error = 1;
				s->bad_value = (int64_t)v;
			}
			*d++ = (uint8_t)v;
		} else {
			memcpy(d, &v, 8);
			d += 8;
		}
	}
	s->dst = d;
}

static void copy_list(struct sink_state *s, enum cmn_ex_kind kind, const uint8_t *p,
		      const uint8_t *end)
{
	while (p < end) {
		struct field f;
		struct ctx c = {p, NULL, 0};
		if (next_field(&c, &p, end, &f))
			return;
		if (f.num != 1)
			continue;
		if (kind == CMN_EX_FLOAT_LIST) {
			if (f.wt == WT_LEN) {
				memcpy(s->dst, f.data, f.len);
				s->dst += f.len;
			} else if (f.wt == WT_I32) {
				memcpy(s->dst, f.data, 4);
				s->dst += 4;
			}
		} else if (kind == CMN_EX_INT64_LIST) {
			if (f.wt == WT_LEN) {
				put_varints(s, f.data, f.data + f.len);
			} else if (f.wt == WT_VARINT) {
				if (s->as_uint8) {
					if (f.v > 255 && !s->range_error) {
						s->range_error = 1;
						s->bad_value = (int64_t)f.v;
					}
					*s->dst++ = (uint8_t)f.v;
				} else {
					memcpy(s->dst, &f.v, 8);
					s->dst += 8;
				}
			}
		} else if (kind == CMN_EX_BYTES_LIST && f.wt == WT_LEN) {
			memcpy(s->dst, f.data, f.len);
			s->dst += f.len;
			if (s->lens)
				*s->lens++ = f.len;
		}
	}
}

static void copy_values(const struct cmn_ex_feature *f, struct sink_state *s)
{
	if (f->kind == CMN_EX_NONE)
		return;
	if (f->packed) {
		if (f->kind == CMN_EX_INT64_LIST) {
			put_varints(s, f->packed, f->packed + f->packed_len);
		} else {
			memcpy(s->dst, f->packed, f->packed_len);
			s->dst += f->packed_len;
			if (s->lens && f->kind == CMN_EX_BYTES_LIST && f->n_values == 1)
				*s->lens++ = f->packed_len;
		}
		return;
	}
	struct fcur fc = {
	    .p = f->run_, .end = f->run_val_end_, .ep = f->entry_, .eend = f->entry_end_};
	struct ctx c = {f->run_, NULL, 0};
	for (;;) {
		struct field fld;
		if (fcur_next(&c, &fc, &fld) <= 0)
			return;
		if (fld.num == (uint32_t)f->kind && fld.wt == WT_LEN)
			copy_list(s, f->kind, fld.data, fld.data + fld.len);
	}
}

int cmn_ex_feature_read(const struct cmn_ex_feature *f, void *dst, size_t *lens)
{
	struct sink_state s = {.dst = dst, .lens = lens};
	copy_values(f, &s);
	return 0;
}

/* ---- iterator ----------------------------------------------------------- */

enum { IT_OK = 0, IT_FAILED = 1 };

void cmn_ex_iter_init(struct cmn_ex_iter *it, const void *buf, size_t len)
{
	it->buf_ = buf;
	it->p_ = buf;
	it->end_ = it->p_ + len;
	it->feats_p_ = it->feats_end_ = NULL;
	it->state_ = IT_OK;
}

/*
 * Steps to the next map entry of the Example: returns 1 with [*entry, *eend),
 * 0 at the end, -EBADMSG.  Shared by the iterator and the decoder.
 */
static int next_entry(struct ctx *c, const uint8_t **p, const uint8_t *end, const uint8_t **fp,
		      const uint8_t **fend, const uint8_t **entry, const uint8_t **eend,
		      struct field *lists)
{
	for (;;) {
		while (*fp < *fend) {
			struct field f;
			int rc = next_field(c, fp, *fend, &f);
			if (rc)
				return rc;
			if (f.num == 1 && f.wt == WT_LEN) {
				*entry = f.data;
				*eend = f.data + f.len;
				return 1;
			}
		}
		if (*p >= end)
			return 0;
		struct field f;
		int rc = next_field(c, p, end, &f);
		if (rc)
			return rc;
		if (f.num == 1 && f.wt == WT_LEN) {
			*fp = f.data;
			*fend = f.data + f.len;
		} else if (f.num == 2 && f.wt == WT_LEN && lists && !lists->start) {
			*lists = f; /* SequenceExample.feature_lists, or an unknown field */
		}
	}
}

int cmn_ex_iter_next(struct cmn_ex_iter *it, struct cmn_ex_feature *f, char *err, size_t errlen)
{
	struct ctx c = {it->buf_, err, errlen};
	if (it->state_ == IT_FAILED)
		return bad(&c, it->p_, "iteration already failed");
	const uint8_t *entry = NULL, *eend = NULL;
	int rc =
	    next_entry(&c, &it->p_, it->end_, &it->feats_p_, &it->feats_end_, &entry, &eend, NULL);
	if (rc == 1) {
		rc = entry_key(&c, entry, eend, &f->name, &f->name_len);
		if (rc == 0)
			rc = resolve_feature(&c, entry, eend, f);
		if (rc == 0)
			return 1;
	}
	if (rc < 0)
		it->state_ = IT_FAILED;
	return rc;
}

/* ---- schema decoder ----------------------------------------------------- */

/* Quotes a feature name for messages: printable ASCII kept, others \xNN, cut at 64. */
static const char *quote_name(const char *name, size_t len, char *buf, size_t buflen)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 5 < buflen; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (i == 64) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
			buf[o++] = (char)ch;
		else
			o += (size_t)snprintf(buf + o, buflen - o, "\\x%02x", ch);
	}
	buf[o] = '\0';
	return buf;
}

__attribute__((format(printf, 5, 6))) static int
feat_err(int rc, const struct cmn_feature *sf, char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		char q[300];
		int n =
		    snprintf(err, errlen,
			     "feature '%s': ", quote_name(sf->name, sf->name_len, q, sizeof(q)));
		if (n >= 0 && (size_t)n < errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return rc;
}

static void shape_str(const struct cmn_feature *sf, char *buf, size_t buflen)
{
	size_t o = (size_t)snprintf(buf, buflen, "%s", cmn_dtype_name(sf->dtype));
	for (unsigned d = 0; d < sf->ndims && o < buflen; d++)
		o += (size_t)snprintf(buf + o, buflen - o, "%s%llu", d ? "," : "[",
				      (unsigned long long)sf->dims[d]);
	if (sf->ndims && o < buflen)
		snprintf(buf + o, buflen - o, "]");
}

static void fill_default(const struct cmn_feature *sf, void *dst)
{
	switch (sf->dtype) {
	case CMN_DT_FLOAT32:
		if (sf->def.f == 0.0f && !signbit(sf->def.f)) {
			memset(dst, 0, sf->row_bytes);
		} else {
			uint8_t *d = dst;
			for (uint64_t i = 0; i < sf->count; i++)
				memcpy(d + 4 * i, &sf->def.f, 4);
		}
		break;
	case CMN_DT_INT64:
		if (sf->def.i == 0) {
			memset(dst, 0, sf->row_bytes);
		} else {
			uint8_t *d = dst;
			for (uint64_t i = 0; i < sf->count; i++)
				memcpy(d + 8 * i, &sf->def.i, 8);
		}
		break;
	case CMN_DT_UINT8:
		memset(dst, sf->def.u, sf->row_bytes);
		break;
	case CMN_DT_BYTES:
		break;
	}
}

/* The list kind a dtype reads from (uint8 also accepts int64_list). */
static enum cmn_ex_kind want_kind(enum cmn_dtype t)
{
	switch (t) {
	case CMN_DT_FLOAT32:
		return CMN_EX_FLOAT_LIST;
	case CMN_DT_INT64:
		return CMN_EX_INT64_LIST;
	case CMN_DT_UINT8:
	case CMN_DT_BYTES:
		return CMN_EX_BYTES_LIST;
	}
	return CMN_EX_NONE;
}

static int decode_one(struct ctx *c, const struct cmn_feature *sf, size_t idx, const uint8_t *entry,
		      const uint8_t *eend, const struct cmn_ex_sink *sink)
{
	struct cmn_ex_feature f;
	void *dst = sf->ragged ? NULL : sink->fixed[idx];

	if (entry) {
		int rc = resolve_feature(c, entry, eend, &f);
		if (rc)
			return rc;
	} else {
		f.kind = CMN_EX_NONE;
	}
	if (f.kind == CMN_EX_NONE) {
		if (!sf->has_default)
			return feat_err(-ENOENT, sf, c->err, c->errlen,
					"%s and the schema gives no default",
					entry ? "has no value list (empty Feature)" : "missing");
		if (sf->ragged) {
			(void)sink->reserve(sink->ctx, idx, 0, 0); /* NULL is fine for 0 values */
			return 0;
		}
		fill_default(sf, dst);
		return 0;
	}

	enum cmn_ex_kind want = want_kind(sf->dtype);
	int as_uint8 = 0;
	size_t n = f.n_values;
	if (f.kind == CMN_EX_BYTES_LIST)
		n = f.n_bytes;
	if (f.kind != want) {
		if (sf->dtype == CMN_DT_UINT8 && f.kind == CMN_EX_INT64_LIST)
			as_uint8 = 1;
		else
			return feat_err(-EINVAL, sf, c->err, c->errlen, "expected %s%s, found %s",
					cmn_ex_kind_name(want),
					sf->dtype == CMN_DT_UINT8 ? " (or int64_list)" : "",
					cmn_ex_kind_name(f.kind));
	}

	if (sf->ragged) {
		dst = sink->reserve(sink->ctx, idx, n, f.n_values);
		if (!dst && n)
			return feat_err(-ENOBUFS, sf, c->err, c->errlen,
					"no room for %zu values (the sink refused)", n);
	} else if (n != sf->count) {
		char shape[160];
		shape_str(sf, shape, sizeof(shape));
		return feat_err(-EINVAL, sf, c->err, c->errlen, "%zu %s, schema %s needs %llu", n,
				f.kind == CMN_EX_BYTES_LIST ? "bytes" : "values", shape,
				(unsigned long long)sf->count);
	}
	if (n == 0)
		return 0;

	struct sink_state s = {.dst = dst, .as_uint8 = as_uint8};
	copy_values(&f, &s);
	if (s.range_error)
		return feat_err(-ERANGE, sf, c->err, c->errlen,
				"int64 value %lld out of uint8 range 0..255",
				(long long)s.bad_value);
	return 0;
}

/* ---- SequenceExample and whole records --------------------------------- */

/* The error for a SequenceExample fed to an Example schema. */
static int bad_kind(struct ctx *c, const uint8_t *at)
{
	if (c->err && c->errlen)
		snprintf(
		    c->err, c->errlen,
		    "record is a tf.SequenceExample (feature_lists at byte %zu), but the schema "
		    "reads tf.Example: name per-step features as 'sequence NAME:dtype[shape]' "
		    "(context features as usual), or mark a feature 'context NAME:...' to read "
		    "the context alone",
		    (size_t)(at - c->base));
	return -EINVAL;
}

/*
 * Whether a top-level field 2 is a SequenceExample's feature_lists: a
 * well-formed message holding at least one map entry (field 1, length-
 * delimited).  An unknown field 2 of an Example (junk bytes) is not.
 */
static bool is_feature_lists(const struct field *f)
{
	const uint8_t *p = f->data, *end = f->data + f->len;
	struct ctx quiet = {f->data, NULL, 0};
	bool entry = false;
	while (p < end) {
		struct field e;
		if (next_field(&quiet, &p, end, &e))
			return false;
		entry |= e.num == 1 && e.wt == WT_LEN;
	}
	return entry;
}

/*
 * Records, for each `sequence` feature of s, the last FeatureLists map entry
 * with its name (entry: key = 1, value = 2, as Features' entries).  Every
 * top-level field 2 is a FeatureLists; several merge.
 */
static int find_lists(struct ctx *c, const struct cmn_schema *s, const uint8_t *p,
		      const uint8_t *end, const uint8_t **ep, const uint8_t **eend)
{
	while (p < end) {
		struct field f;
		int rc = next_field(c, &p, end, &f);
		if (rc)
			return rc;
		if (f.num != 2 || f.wt != WT_LEN)
			continue;
		const uint8_t *q = f.data, *qend = f.data + f.len;
		while (q < qend) {
			struct field e;
			const uint8_t *name;
			size_t name_len;
			rc = next_field(c, &q, qend, &e);
			if (rc)
				return rc;
			if (e.num != 1 || e.wt != WT_LEN)
				continue;
			rc = entry_key(c, e.data, e.data + e.len, &name, &name_len);
			if (rc)
				return rc;
			int i = cmn_schema_find(s, name, name_len);
			if (i >= 0 && s->feature[i].place == CMN_PLACE_SEQUENCE) {
				ep[i] = e.data;
				eend[i] = e.data + e.len;
			}
		}
	}
	return 0;
}

/*
 * Steps to the next step (Feature) of a FeatureLists entry: the Features
 * (field 1) of its FeatureList values (field 2; several merge, so their
 * steps follow each other).  Returns 1 and [*fp, *fend), 0 at the end, or
 * -EBADMSG.
 */
static int next_step(struct ctx *c, struct fcur *sc, const uint8_t **fp, const uint8_t **fend)
{
	for (;;) {
		while (sc->p < sc->end) {
			struct field f;
			int rc = next_field(c, &sc->p, sc->end, &f);
			if (rc)
				return rc;
			if (f.num == 1 && f.wt == WT_LEN) {
				*fp = f.data;
				*fend = f.data + f.len;
				return 1;
			}
		}
		if (sc->ep >= sc->eend)
			return 0;
		struct field v;
		int rc = next_field(c, &sc->ep, sc->eend, &v);
		if (rc)
			return rc;
		if (v.num == 2 && v.wt == WT_LEN) {
			sc->p = v.data;
			sc->end = v.data + v.len;
		}
	}
}

/* Checks one step's Feature against the sequence feature sf. */
static int check_step(struct ctx *c, const struct cmn_feature *sf, size_t step,
		      const struct cmn_ex_feature *f, int *as_uint8)
{
	enum cmn_ex_kind want = want_kind(sf->dtype);
	size_t n = f->kind == CMN_EX_BYTES_LIST ? f->n_bytes : f->n_values;
	*as_uint8 = 0;
	if (f->kind != want) {
		if (sf->dtype == CMN_DT_UINT8 && f->kind == CMN_EX_INT64_LIST)
			*as_uint8 = 1;
		else
			return feat_err(-EINVAL, sf, c->err, c->errlen,
					"step %zu: expected %s%s, found %s", step,
					cmn_ex_kind_name(want),
					sf->dtype == CMN_DT_UINT8 ? " (or int64_list)" : "",
					cmn_ex_kind_name(f->kind));
	}
	if (n != sf->step_count) {
		char shape[160];
		shape_str(sf, shape, sizeof(shape));
		return feat_err(-EINVAL, sf, c->err, c->errlen,
				"step %zu: %zu %s, schema sequence %s needs %llu a step", step, n,
				f->kind == CMN_EX_BYTES_LIST ? "bytes" : "values", shape,
				(unsigned long long)sf->step_count);
	}
	return 0;
}

/*
 * Decodes the FeatureLists entry [entry, eend) (NULL: missing) of sequence
 * feature sf: validates and counts its steps, reserves steps x step_count
 * elements, copies them step after step.
 */
static int decode_sequence(struct ctx *c, const struct cmn_feature *sf, size_t idx,
			   const uint8_t *entry, const uint8_t *eend,
			   const struct cmn_ex_sink *sink)
{
	struct fcur sc = {.p = NULL, .end = NULL, .ep = entry, .eend = eend};
	struct cmn_ex_feature f;
	const uint8_t *fp, *fend;
	size_t steps = 0;
	int as_uint8, rc;

	if (!entry) {
		if (!sf->has_default)
			return feat_err(-ENOENT, sf, c->err, c->errlen,
					"no such feature_list in the SequenceExample and the "
					"schema gives no default (=[] for zero steps)");
		(void)sink->reserve(sink->ctx, idx, 0, 0);
		return 0;
	}
	while ((rc = next_step(c, &sc, &fp, &fend)) == 1) {
		rc = resolve_bare(c, fp, fend, &f);
		if (rc == 0)
			rc = check_step(c, sf, steps, &f, &as_uint8);
		if (rc)
			return rc;
		steps++;
	}
	if (rc < 0)
		return rc;
	size_t n = steps * (size_t)sf->step_count;
	uint8_t *dst = sink->reserve(sink->ctx, idx, n, steps);
	if (!dst && n)
		return feat_err(-ENOBUFS, sf, c->err, c->errlen,
				"no room for %zu values (the sink refused)", n);
	sc = (struct fcur){.p = NULL, .end = NULL, .ep = entry, .eend = eend};
	for (size_t k = 0; k < steps; k++) {
		(void)next_step(c, &sc, &fp, &fend); /* validated above */
		(void)resolve_bare(c, fp, fend, &f);
		(void)check_step(c, sf, k, &f, &as_uint8);
		struct sink_state st = {.dst = dst + k * sf->step_count * sf->elem_size,
					.as_uint8 = as_uint8};
		copy_values(&f, &st);
		if (st.range_error)
			return feat_err(-ERANGE, sf, c->err, c->errlen,
					"step %zu: int64 value %lld out of uint8 range 0..255", k,
					(long long)st.bad_value);
	}
	return 0;
}

int cmn_ex_decode(const struct cmn_schema *s, const void *buf, size_t len,
		  const struct cmn_ex_sink *sink, char *err, size_t errlen)
{
	struct ctx c = {buf, err, errlen};
	struct {
		const uint8_t *p, *end;
	} ent[CMN_SCHEMA_MAX_FEATURES];
	struct field lists = {0};

	if (err && errlen)
		err[0] = '\0';
	if (s->record) {
		/* the whole payload is the one bytes feature */
		if (!sink->reserve)
			return 0;
		void *dst = sink->reserve(sink->ctx, 0, len, 1);
		if (!dst && len)
			return feat_err(-ENOBUFS, &s->feature[0], err, errlen,
					"no room for %zu bytes (the sink refused)", len);
		if (len)
			memcpy(dst, buf, len);
		return 0;
	}
	memset(ent, 0, sizeof(ent[0]) * s->n);

	/* Pass 1: the last entry of each schema feature. */
	const uint8_t *p = buf, *end = p + len, *fp = NULL, *fend = NULL;
	for (;;) {
		const uint8_t *entry = NULL, *eend = NULL, *name;
		size_t name_len;
		int rc = next_entry(&c, &p, end, &fp, &fend, &entry, &eend, &lists);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		rc = entry_key(&c, entry, eend, &name, &name_len);
		if (rc)
			return rc;
		int i = cmn_schema_find(s, name, name_len);
		if (i >= 0 && s->feature[i].place != CMN_PLACE_SEQUENCE) {
			ent[i].p = entry;
			ent[i].end = eend;
		}
	}
	if (!s->sequence && lists.start && is_feature_lists(&lists))
		return bad_kind(&c, lists.start);
	if (s->sequence) {
		const uint8_t *sp[CMN_SCHEMA_MAX_FEATURES] = {0}, *se[CMN_SCHEMA_MAX_FEATURES];
		int rc = find_lists(&c, s, buf, end, sp, se);
		if (rc)
			return rc;
		for (size_t i = 0; i < s->n; i++)
			if (s->feature[i].place == CMN_PLACE_SEQUENCE) {
				ent[i].p = sp[i];
				ent[i].end = sp[i] ? se[i] : NULL;
			}
	}

	/* Pass 2: resolve and copy. */
	for (size_t i = 0; i < s->n; i++) {
		const struct cmn_feature *sf = &s->feature[i];
		if (sf->ragged ? !sink->reserve : (!sink->fixed || !sink->fixed[i]))
			continue;
		int rc = sf->place == CMN_PLACE_SEQUENCE
			     ? decode_sequence(&c, sf, i, ent[i].p, ent[i].end, sink)
			     : decode_one(&c, sf, i, ent[i].p, ent[i].end, sink);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- encoder ------------------------------------------------------------ */

static inline size_t varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Size of a length-delimited field with a one-byte tag and `len` payload bytes. */
static inline size_t ld_size(size_t len)
{
	return 1 + varint_size(len) + len;
}

/* Checks v against feature sf; returns 0 or -EINVAL with a message. */
static int check_values(const struct cmn_feature *sf, const struct cmn_ex_values *v, char *err,
			size_t errlen)
{
	if (v->n && !v->data)
		return feat_err(-EINVAL, sf, err, errlen, "%zu values but no data", v->n);
	if (!sf->ragged && v->n != sf->count)
		return feat_err(-EINVAL, sf, err, errlen, "%zu values given, the schema needs %llu",
				v->n, (unsigned long long)sf->count);
	if (sf->dtype == CMN_DT_BYTES && v->lens) {
		size_t sum = 0;
		for (size_t k = 0; k < v->n_items; k++)
			sum += v->lens[k];
		if (sum != v->n)
			return feat_err(-EINVAL, sf, err, errlen,
					"string lengths sum to %zu, not %zu bytes", sum, v->n);
	}
	return 0;
}

/*
 * Size of the XxxList message of one feature; *payload gets the size of its
 * one value field's payload (packed values, or the uint8 string).
 */
static size_t list_size(const struct cmn_feature *sf, const struct cmn_ex_values *v,
			size_t *payload)
{
	size_t pl = 0, sz = 0;
	switch (sf->dtype) {
	case CMN_DT_FLOAT32:
		pl = 4 * v->n;
		sz = v->n ? ld_size(pl) : 0;
		break;
	case CMN_DT_INT64: {
		const uint8_t *d = v->data;
		for (size_t k = 0; k < v->n; k++) {
			uint64_t x;
			memcpy(&x, d + 8 * k, 8);
			pl += varint_size(x);
		}
		sz = v->n ? ld_size(pl) : 0;
		break;
	}
	case CMN_DT_UINT8:
		pl = v->n;
		sz = ld_size(pl);
		break;
	case CMN_DT_BYTES:
		if (!v->lens) {
			pl = v->n;
			sz = ld_size(pl);
		} else {
			for (size_t k = 0; k < v->n_items; k++)
				sz += ld_size(v->lens[k]);
		}
		break;
	}
	if (payload)
		*payload = pl;
	return sz;
}

static size_t entry_size(const struct cmn_feature *sf, size_t list_len)
{
	size_t feat = ld_size(list_len);
	return ld_size(sf->name_len) + ld_size(feat);
}

size_t cmn_ex_encoded_size(const struct cmn_schema *s, const struct cmn_ex_values *v)
{
	size_t feats = 0;
	if (s->sequence || s->record)
		return 0; /* the encoder writes tf.Example only */
	for (size_t i = 0; i < s->n; i++) {
		if (check_values(&s->feature[i], &v[i], NULL, 0))
			return 0;
		feats +=
		    ld_size(entry_size(&s->feature[i], list_size(&s->feature[i], &v[i], NULL)));
	}
	return ld_size(feats);
}

static uint8_t *put_ld_header(uint8_t *p, uint32_t num, size_t len)
{
	*p++ = (uint8_t)((num << 3) | WT_LEN);
	return put_varint(p, len);
}

int cmn_ex_encode(const struct cmn_schema *s, const struct cmn_ex_values *v, void *buf, size_t cap,
		  size_t *out_len, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (s->sequence || s->record) {
		if (err && errlen)
			snprintf(err, errlen,
				 "the encoder writes tf.Example only: the schema has "
				 "sequence, context or record features");
		return -EINVAL;
	}
	for (size_t i = 0; i < s->n; i++) {
		int rc = check_values(&s->feature[i], &v[i], err, errlen);
		if (rc)
			return rc;
	}
	size_t total = cmn_ex_encoded_size(s, v);
	if (total > cap) {
		if (err && errlen)
			snprintf(err, errlen, "Example needs %zu bytes, buffer holds %zu", total,
				 cap);
		return -ENOSPC;
	}
	uint8_t *p = buf;
	size_t feats = 0;
	for (size_t i = 0; i < s->n; i++)
		feats +=
		    ld_size(entry_size(&s->feature[i], list_size(&s->feature[i], &v[i], NULL)));
	p = put_ld_header(p, 1, feats);
	for (size_t i = 0; i < s->n; i++) {
		const struct cmn_feature *sf = &s->feature[i];
		const struct cmn_ex_values *fv = &v[i];
		size_t pl;
		size_t list_len = list_size(sf, fv, &pl);
		size_t feat_len = ld_size(list_len);
		p = put_ld_header(p, 1, entry_size(sf, list_len));
		p = put_ld_header(p, 1, sf->name_len);
		memcpy(p, sf->name, sf->name_len);
		p += sf->name_len;
		p = put_ld_header(p, 2, feat_len);
		switch (sf->dtype) {
		case CMN_DT_FLOAT32:
			p = put_ld_header(p, CMN_EX_FLOAT_LIST, list_len);
			if (fv->n) {
				p = put_ld_header(p, 1, 4 * fv->n);
				memcpy(p, fv->data, 4 * fv->n);
				p += 4 * fv->n;
			}
			break;
		case CMN_DT_INT64:
			p = put_ld_header(p, CMN_EX_INT64_LIST, list_len);
			if (fv->n) {
				p = put_ld_header(p, 1, pl);
				const uint8_t *d = fv->data;
				for (size_t k = 0; k < fv->n; k++) {
					uint64_t x;
					memcpy(&x, d + 8 * k, 8);
					p = put_varint(p, x);
				}
			}
			break;
		case CMN_DT_UINT8:
		case CMN_DT_BYTES:
			p = put_ld_header(p, CMN_EX_BYTES_LIST, list_len);
			if (sf->dtype == CMN_DT_BYTES && fv->lens) {
				const uint8_t *d = fv->data;
				for (size_t k = 0; k < fv->n_items; k++) {
					p = put_ld_header(p, 1, fv->lens[k]);
					if (fv->lens[k])
						memcpy(p, d, fv->lens[k]);
					p += fv->lens[k];
					d += fv->lens[k];
				}
			} else {
				p = put_ld_header(p, 1, fv->n);
				if (fv->n)
					memcpy(p, fv->data, fv->n);
				p += fv->n;
			}
			break;
		}
	}
	*out_len = (size_t)(p - (uint8_t *)buf);
	return 0;
}
