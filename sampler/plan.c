/*
 * plan.c - planning a pass: which objects, or which records of them, this
 * rank takes, and in which order.
 *
 * Owns the pass's work list (struct smp__pass).  For strategy=objects it is
 * this rank's objects (key hash modulo world_size) in a seeded random order;
 * for strategy=records it fetches the index sidecars, draws their records
 * (records.c) and mixes whole objects without a sidecar in among the
 * ranges.  Does not start the reads (dispatch.c) and does not list the
 * source (relist.c).
 * The order depends only on (seed, epoch, listing): the rng stream is drawn
 * in the same order every pass.  Threads: the sampler's thread only.
 */
#include "sampler/sampler_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct idx_fetch {
	char *buf;
	size_t len, cap;
	int rc;
	bool done;
	char msg[512];
};

static int idx_data(void *ctx, const void *p, size_t n)
{
	struct idx_fetch *x = ctx;
	if (x->len + n > SMP_INDEX_CAP)
		return -EFBIG;
	if (x->len + n > x->cap) {
		size_t nc = x->cap ? x->cap : 65536;
		while (nc < x->len + n)
			nc *= 2;
		char *nb = realloc(x->buf, nc);
		if (!nb)
			return -ENOMEM;
		x->buf = nb;
		x->cap = nc;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	return 0;
}

static int idx_end(void *ctx)
{
	return 0;
}

static uint64_t idx_restart(void *ctx, bool final)
{
	struct idx_fetch *x = ctx;
	x->len = 0;
	return 0;
}

static void idx_done(void *ctx, int rc, const char *msg)
{
	struct idx_fetch *x = ctx;
	x->rc = rc;
	x->done = true;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
}

static const struct smp_xfer_ops idx_ops = {idx_data, idx_end, idx_restart, idx_done};

/*
 * Fetches the sidecars of the n objects in order[] that have one (in
 * parallel), parses them and plans the ranges.  use_idx[k] tells whether
 * order[k] is covered by the plan; objects whose sidecar failed are read
 * whole.  Returns 0 or -errno (only for local failures: memory, engine).
 */
static int load_plan(struct smp_sampler *s, const size_t *order, size_t n, uint64_t seed,
		     bool *use_idx, struct smp_plan *plan)
{
	struct idx_fetch *fx = calloc(n ? n : 1, sizeof(*fx));
	struct smp_idx_entry *ents = NULL;
	size_t ne = 0, cap = 0;
	int rc = 0;
	if (!fx)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		use_idx[k] = false;
		if (!s->has_idx[order[k]])
			continue;
		char key[SMP_KEY_MAX + 8];
		snprintf(key, sizeof(key), "%s.idx", s->listing.v[order[k]].key);
		struct smp_fetch_req r = {.key = key, .ops = &idx_ops, .ctx = &fx[k]};
		rc = smp_fetch_add(s->fetch, &r);
		if (rc)
			goto out;
		use_idx[k] = true;
	}
	while (smp_fetch_pending(s->fetch) && !atomic_load(&s->stop)) {
		rc = smp_fetch_step(s->fetch, 250);
		if (rc)
			goto out;
	}
	smp_fetch_cancel_all(s->fetch);
	for (size_t k = 0; k < n; k++) {
		if (!use_idx[k])
			continue;
		const struct smp_object *o = &s->listing.v[order[k]];
		char err[512];
		size_t before = ne;
		int prc = fx[k].done && fx[k].rc == 0
			      ? smp__parse_index(fx[k].buf ? fx[k].buf : "", fx[k].len,
						 (uint32_t)order[k], o->size, &ents, &ne, &cap, err,
						 sizeof(err))
			      : -EIO;
		if (prc == -ENOMEM) {
			rc = prc;
			goto out;
		}
		if (prc) {
			cmn_log(CMN_LOG_WARN, "%s.idx: %s: reading the whole object instead",
				o->key, fx[k].done && fx[k].rc == 0 ? err : fx[k].msg);
			ne = before;
			use_idx[k] = false;
		}
	}
	rc = smp__plan_ranges(ents, ne, seed, plan);
out:
	for (size_t k = 0; k < n; k++)
		free(fx[k].buf);
	free(fx);
	free(ents);
	return rc;
}

/*
 * The idea: this rank's objects are shuffled (Fisher-Yates over *rng); with
 * strategy=records the objects that have a sidecar become ranges of drawn
 * records and the rest stay whole, and the two are shuffled together.
 * Returns 0 and *out (free with smp__pass_free), or -errno with a message;
 * *out holds nothing on failure.  *rng advances as the original pass did.
 */
int smp__plan_pass(struct smp_sampler *s, uint64_t *rng, struct smp__pass *out, char *err,
		   size_t errlen)
{
	const struct cmn_config *c = s->cfg;
	int rc;
	memset(out, 0, sizeof(*out));
	/* this rank's objects, in a seeded random order (Fisher-Yates) */
	size_t *order = malloc((s->listing.n ? s->listing.n : 1) * sizeof(*order)), n = 0;
	if (!order) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	uint32_t ws = c->world_size ? c->world_size : 1;
	for (size_t i = 0; i < s->listing.n; i++)
		if (smp_key_hash(s->listing.v[i].key) % ws == c->rank)
			order[n++] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(smp__splitmix(rng) % i);
		size_t t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	/* the work of this pass: ranges of drawn records, and whole objects */
	bool by_records = c->strategy == CMN_STRATEGY_RECORDS;
	if (by_records &&
	    (c->format != CMN_FORMAT_TFRECORD || c->compression != CMN_COMPRESSION_NONE)) {
		cmn_log(
		    CMN_LOG_INFO,
		    "strategy=records needs uncompressed TFRecord objects: reading whole objects");
		by_records = false;
	}
	bool *use_idx = calloc(n ? n : 1, sizeof(*use_idx));
	if (!use_idx) {
		free(order);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (by_records) {
		rc = load_plan(s, order, n, smp__splitmix(rng), use_idx, &out->plan);
		if (rc) {
			free(order);
			free(use_idx);
			snprintf(err, errlen, "planning records from index sidecars: %s",
				 strerror(-rc));
			return rc;
		}
	}
	const struct smp_plan *plan = &out->plan;
	struct smp__work *items = malloc((n + plan->n + 1) * sizeof(*items));
	size_t nitems = 0;
	if (!items) {
		free(order);
		free(use_idx);
		smp__plan_free(&out->plan);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < plan->n; i++)
		items[nitems++] = (struct smp__work){plan->r[i].obj, plan->r[i].off, plan->r[i].len,
						     plan->r[i].wanted, plan->r[i].nwanted};
	for (size_t k = 0; k < n; k++)
		if (!use_idx[k])
			items[nitems++] = (struct smp__work){(uint32_t)order[k], 0, 0, NULL, 0};
	if (by_records) /* whole objects (no sidecar) mixed in among the ranges */
		for (size_t i = nitems; i > 1; i--) {
			size_t j = (size_t)(smp__splitmix(rng) % i);
			struct smp__work t = items[i - 1];
			items[i - 1] = items[j];
			items[j] = t;
		}
	free(use_idx);
	free(order);
	out->items = items;
	out->n = nitems;
	return 0;
}

void smp__pass_free(struct smp__pass *p)
{
	free(p->items);
	smp__plan_free(&p->plan);
	memset(p, 0, sizeof(*p));
}
