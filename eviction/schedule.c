/*
 * schedule.c - [epoch ...] sections -> a checked, gap-free schedule.
 *
 * Owns the rules of schedule.h: coverage of every epoch exactly once,
 * inheritance of missing keys, the first entry started from the defaults.
 * Does not own the defaults' values (common/config.c's key table does:
 * cmn_epoch_defaults()) and does not parse INI text (common/config_ini.c
 * does, and gives each section its header line).
 * Pure; the built schedule is immutable, so readers need no lock.
 */
#include "eviction/schedule.h"
#include "eviction/policy_i.h"
#include "common/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static const char *where(const char *path)
{
	return path ? path : "config";
}

static char *range_str(uint32_t first, uint32_t last, char *buf, size_t len)
{
	if (last == CMN_EPOCH_OPEN)
		snprintf(buf, len, "[epoch %u-]", first);
	else if (first == last)
		snprintf(buf, len, "[epoch %u]", first);
	else
		snprintf(buf, len, "[epoch %u-%u]", first, last);
	return buf;
}

static char *span_str(uint32_t first, uint32_t last, char *buf, size_t len)
{
	if (first == last)
		snprintf(buf, len, "epoch %u has", first);
	else
		snprintf(buf, len, "epochs %u-%u have", first, last);
	return buf;
}

static int sec_cmp(const void *a, const void *b)
{
	const struct cmn_epoch_section *x = *(const struct cmn_epoch_section *const *)a;
	const struct cmn_epoch_section *y = *(const struct cmn_epoch_section *const *)b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/* Checks that the sorted sections cover 0.. exactly once.  0 or -EINVAL. */
static int check_ranges(const struct cmn_epoch_section *const *v, size_t n, const char *path,
			char *err, size_t errlen)
{
	char r1[48], r2[48], sp[48];

	for (size_t i = 0; i < n; i++)
		if (v[i]->last != CMN_EPOCH_OPEN && v[i]->first > v[i]->last) {
			snprintf(err, errlen,
				 "%s:%d: [epoch %u-%u]: the range ends before it starts; write "
				 "[epoch %u-%u]",
				 where(path), v[i]->line, v[i]->first, v[i]->last, v[i]->last,
				 v[i]->first);
			return -EINVAL;
		}
	if (v[0]->first != 0) {
		snprintf(err, errlen,
			 "%s:%d: %s is the first epoch section, so %s no entry; start the "
			 "schedule at [epoch 0...]",
			 where(path), v[0]->line,
			 range_str(v[0]->first, v[0]->last, r1, sizeof(r1)),
			 span_str(0, v[0]->first - 1, sp, sizeof(sp)));
		return -EINVAL;
	}
	for (size_t i = 1; i < n; i++) {
		const struct cmn_epoch_section *a = v[i - 1], *b = v[i];
		range_str(a->first, a->last, r1, sizeof(r1));
		range_str(b->first, b->last, r2, sizeof(r2));
		if (a->last == CMN_EPOCH_OPEN || b->first <= a->last) {
			snprintf(err, errlen,
				 "%s:%d: %s overlaps %s at line %d; make each epoch belong to one "
				 "section",
				 where(path), b->line, r2, r1, a->line);
			return -EINVAL;
		}
		if (b->first > a->last + 1) {
			snprintf(err, errlen,
				 "%s:%d: %s leaves a gap after %s at line %d: %s no entry; "
				 "extend one of them or add a section",
				 where(path), b->line, r2, r1, a->line,
				 span_str(a->last + 1, b->first - 1, sp, sizeof(sp)));
			return -EINVAL;
		}
	}
	const struct cmn_epoch_section *z = v[n - 1];
	if (z->last != CMN_EPOCH_OPEN) {
		snprintf(err, errlen,
			 "%s:%d: %s is the last epoch section, so epochs after %u have no entry; "
			 "make it open-ended: [epoch %u-]",
			 where(path), z->line, range_str(z->first, z->last, r1, sizeof(r1)),
			 z->last, z->first);
		return -EINVAL;
	}
	return 0;
}

/*
 * The first entry before its section's keys apply: [epoch 0-] with the
 * defaults of common/config.c's key table for an entry of this limit.
 */
static void default_entry(struct evc_entry *e, uint64_t limit)
{
	struct cmn_epoch_section d;

	cmn_epoch_defaults(&d, limit);
	e->first = d.first;
	e->last = d.last;
	e->line = d.line;
	e->limit = d.limit;
	e->admit = d.admit;
	e->policy = d.policy;
	e->min_uses = d.min_uses;
	e->seed = d.seed;
}

int evc_schedule_build(const struct cmn_epoch_section *secs, size_t n, uint64_t cache_limit,
		       const char *path, struct evc_schedule *out, char *err, size_t errlen)
{
	char r[48], b1[32], b2[32];
	const struct cmn_epoch_section **v = NULL;
	struct evc_entry *e = NULL;
	int rc = -ENOMEM;

	if (cache_limit == 0) {
		snprintf(err, errlen, "%s: [cache] limit = 0: expected a size such as 20G",
			 where(path));
		return -EINVAL;
	}
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		goto fail;
	if (n == 0) {
		default_entry(&e[0], cache_limit);
		out->entries = e;
		out->n = 1;
		return 0;
	}
	v = malloc(n * sizeof(*v));
	if (!v)
		goto fail;
	for (size_t i = 0; i < n; i++)
		v[i] = &secs[i];
	qsort(v, n, sizeof(*v), sec_cmp);
	rc = check_ranges(v, n, path, err, errlen);
	if (rc < 0)
		goto fail;

	for (size_t i = 0; i < n; i++) {
		const struct cmn_epoch_section *s = v[i];
		struct evc_entry *x = &e[i];
		/* the first entry's defaults follow its own limit (admit, unless given) */
		if (i == 0)
			default_entry(x, s->has_limit ? s->limit : cache_limit);
		else
			*x = e[i - 1];
		x->first = s->first;
		x->last = s->last;
		x->line = s->line;
		if (s->has_limit)
			x->limit = s->limit;
		if (s->has_admit)
			x->admit = s->admit;
		if (s->has_policy)
			x->policy = s->policy;
		if (s->has_min_uses)
			x->min_uses = s->min_uses;
		if (s->has_seed)
			x->seed = s->seed;
		range_str(x->first, x->last, r, sizeof(r));
		if (x->limit == 0) {
			snprintf(err, errlen, "%s:%d: %s limit = 0: expected a size such as 20G",
				 where(path), x->line, r);
			rc = -EINVAL;
			goto fail;
		}
		if (x->limit > cache_limit) {
			snprintf(err, errlen,
				 "%s:%d: %s limit %s is above the [cache] limit %s (the bound on "
				 "disk); lower it or raise [cache] limit",
				 where(path), x->line, r, cmn_format_size(x->limit, b1, sizeof(b1)),
				 cmn_format_size(cache_limit, b2, sizeof(b2)));
			rc = -EINVAL;
			goto fail;
		}
		if (x->admit > x->limit) {
			snprintf(err, errlen,
				 "%s:%d: %s admit %s%s is above its limit %s; lower it",
				 where(path), x->line, r, cmn_format_size(x->admit, b1, sizeof(b1)),
				 s->has_admit ? "" : " (inherited)",
				 cmn_format_size(x->limit, b2, sizeof(b2)));
			rc = -EINVAL;
			goto fail;
		}
	}
	free(v);
	out->entries = e;
	out->n = n;
	return 0;
fail:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory building the epoch schedule", where(path));
	free(v);
	free(e);
	return rc;
}

const struct evc_entry *evc_schedule_at(const struct evc_schedule *s, uint32_t epoch)
{
	/* Binary search: entries are sorted, contiguous and the last is open. */
	size_t lo = 0, hi = s->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->entries[mid].first <= epoch)
			lo = mid;
		else
			hi = mid;
	}
	return &s->entries[lo];
}

char *evc_entry_describe(const struct evc_entry *e, char *buf, size_t len)
{
	char r[48], b1[32], b2[32];

	snprintf(buf, len, "%s limit %s, admit %s, policy %s, min_uses %u, seed %llu",
		 range_str(e->first, e->last, r, sizeof(r)),
		 cmn_format_size(e->limit, b1, sizeof(b1)),
		 cmn_format_size(e->admit, b2, sizeof(b2)), cmn_policy_name(e->policy), e->min_uses,
		 (unsigned long long)e->seed);
	return buf;
}

void evc_schedule_free(struct evc_schedule *s)
{
	free(s->entries);
	s->entries = NULL;
	s->n = 0;
}
