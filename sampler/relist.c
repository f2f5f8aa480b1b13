/*
 * relist.c - the sampler's listing: lists the source, sets the index
 * sidecars apart and records the objects in the catalog.
 *
 * The first listing of a sampler's life that names no object fails with
 * -ENODATA when the plan has none either, unless cfg->allow_empty (an
 * empty directory, an empty or mistyped prefix: mount and ingest say so
 * instead of starting on nothing); later ones, and those of a warm plan,
 * may be empty.
 *
 * The listing holds this node's share of the source (rank/world_size,
 * listing.h): a node of a many-node job records and plans its share only;
 * a share left empty by a listing that named objects is no error.
 *
 * Owns the listing's life: it is recorded in the catalog (objects_sync
 * marks changed objects so their old samples retire at the next epoch),
 * handed to the plan (plan.c merges new objects into the rest of the pass
 * and drops the ones gone), then freed.  Does not choose what is read.
 * Invariants: DESIGN 7 (keys go to the catalog as data, never into a path).
 * Threads: the sampler's thread only; no locks.
 */
#include "sampler/sampler_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachefs/catalog.h"
#include "common/clock.h"
#include "common/log.h"

static bool is_sidecar(const struct smp_listing *l, size_t i)
{
	return smp_key_is_sidecar(l->v[i].key, strlen(l->v[i].key));
}

/* cfs_listing_get_fn over a listing (ctx): its object k. */
static void listing_entry(void *ctx, size_t k, struct cfs_listing_entry *e)
{
	const struct smp_listing *l = ctx;
	*e = (struct cfs_listing_entry){l->v[k].key, l->v[k].size, smp_object_etag(&l->v[k])};
}

/* The listing is the one the catalog and the plan have: nothing to do. */
static void unchanged(struct smp_sampler *s, uint32_t epoch, uint64_t t0)
{
	cmn_log(CMN_LOG_DEBUG, "%s: listing unchanged (MANIFEST ETag %s)", s->cfg->url,
		s->list_validator);
	s->listed_epoch = epoch;
	s->listed_end_ms = cmn_mono_ms();
	s->list_cost_ms = s->listed_end_ms - t0;
}

int smp__relist(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	struct smp_listing l;
	uint64_t t0 = cmn_mono_ms();
	/*
	 * A listing applied in this process (s->listed) that the source can
	 * vouch for (a MANIFEST's ETag) is asked for again only if it changed:
	 * a static dataset costs one request per relist, not a listing.
	 */
	int rc = smp_source_list_changed(s->source, s->listed ? s->list_validator : NULL, &l, err,
					 errlen);
	s->list_failed = rc != 0 && rc != -EALREADY; /* a mount waits this out (sampler.c, heal) */
	if (rc == -EALREADY) {
		err[0] = '\0';
		unchanged(s, epoch, t0);
		return 0;
	}
	s->list_validator[0] = '\0'; /* kept again once this listing is applied */
	if (rc)
		return rc;
	/*
	 * Index sidecars are not objects (strategy=records reads them): note
	 * which objects have one, then drop them from the listing.  The listing
	 * is sorted, so "x.idx" is found by binary search for "x".
	 */
	bool *idx = calloc(l.n ? l.n : 1, sizeof(*idx));
	if (!idx) {
		smp_listing_free(&l);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!is_sidecar(&l, i))
			continue;
		size_t kl = strlen(l.v[i].key) - 4, lo = 0, hi = l.n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			int c = strncmp(l.v[mid].key, l.v[i].key, kl);
			if (c == 0 && l.v[mid].key[kl] != '\0')
				c = 1;
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < l.n && !strncmp(l.v[lo].key, l.v[i].key, kl) && l.v[lo].key[kl] == '\0')
			idx[lo] = true;
	}
	size_t w = 0;
	for (size_t i = 0; i < l.n; i++) {
		if (is_sidecar(&l, i))
			continue; /* its strings stay in l's blocks until smp_listing_free */
		idx[w] = idx[i];
		l.v[w++] = l.v[i];
	}
	l.n = w;
	atomic_store_explicit(&s->stats.listed_objects, l.seen, memory_order_relaxed);
	if (l.world_size > 1)
		cmn_log(CMN_LOG_INFO,
			"%s: %llu objects listed, %zu of them in this node's share "
			"(rank %u of world_size %u)",
			s->cfg->url, (unsigned long long)l.seen, l.n, l.rank, l.world_size);
	if (l.seen == 0 && !s->ever_listed && s->npobj == 0 && !s->cfg->allow_empty) {
		/* nothing silent at start: an empty or mistyped source is said, not mounted */
		free(idx);
		smp_listing_free(&l);
		snprintf(err, errlen,
			 "%s: 0 objects listed: check the URL (an empty directory or a mistyped "
			 "prefix lists nothing), or set allow_empty = true to start empty and "
			 "take data as it comes",
			 s->cfg->url);
		return -ENODATA;
	}
	int64_t *ids = calloc(l.n ? l.n : 1, sizeof(*ids));
	if (!ids) {
		free(idx);
		smp_listing_free(&l);
		snprintf(err, errlen, "out of memory for a listing of %zu objects", w);
		return -ENOMEM;
	}
	struct cfs_sync_result res = {0};
	/* the listing is in key order (smp_source_list): read in place, not copied */
	rc = cfs_catalog_objects_sync_sorted(s->cat, s->source_id, listing_entry, &l, l.n, epoch,
					     ids, &res);
	if (rc) {
		free(ids);
		free(idx);
		smp_listing_free(&l);
		snprintf(err, errlen, "recording the listing in the catalog: %s", strerror(-rc));
		return rc;
	}
	if (res.changed)
		cmn_log(CMN_LOG_INFO,
			"%s: %llu objects changed (old samples retire at the next epoch)",
			s->cfg->url, (unsigned long long)res.changed);
	rc = smp__plan_merge(s, &l, ids, idx, err, errlen);
	if (rc == 0)
		memcpy(s->list_validator, l.validator, sizeof(s->list_validator));
	free(ids);
	free(idx);
	smp_listing_free(&l);
	if (rc)
		return rc;
	s->listed = true;
	s->ever_listed = true;
	s->listed_epoch = epoch;
	s->listed_end_ms = cmn_mono_ms();
	s->list_cost_ms = s->listed_end_ms - t0;
	return 0;
}
