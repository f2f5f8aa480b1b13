/*
 * plan.c - the sampler's side of the sampling plan (DESIGN "Sampling",
 * invariant 8): maps the pure planner's units (common/plan.h) to remote
 * bytes, keeps the planner's state in the catalog, and says when a unit
 * is done.
 *
 * Units: with strategy=records (uncompressed TFRecord) a unit is one
 * indexed record of an object; an object without a usable sidecar is one
 * unit read whole.  Otherwise (strategy=objects, format=raw) a unit is an
 * object.  The plan's objects are appended in listing order of their
 * first appearance and never renumbered (table plan_objects), so unit
 * numbers are stable across relists and restarts; a sidecar is fetched once
 * per object and kept in table plan_index.
 *
 * Indexes in memory: an object's index is read from plan_index when
 * a job on it is built (or a resident record without an ordinal is looked
 * up), and a few stay loaded (index_of: SMP_IDX_CACHE_OBJECTS objects,
 * SMP_IDX_CACHE_BYTES); a job copies the records of its run (job->run), so
 * the reader and the writer need no index.  Per object the plan keeps its
 * first unit, units, size and the bytes of its indexed records
 * (plan_objects.record_bytes); per unit, the planner's bits.  A sidecar
 * fetched for new objects is written to the catalog in batches of
 * SMP_SIDECAR_BATCH and freed.
 *
 * Persisting (the design note of docs/sampler.md "The sampling plan"):
 *   - a unit completes when its last record is appended to a shard (or its
 *     raw file is sealed): it is then marked in THAT file's commit
 *     (cfs_shard_writer_add_marks), so the mark and the records land in the
 *     same transaction.  A whole object whose last record went out before
 *     its transfer ended completes with no file open: its mark rides with
 *     the next file sealed (FIFO sealer, so after the files holding its
 *     records) or with the next checkpoint;
 *   - smp__plan_checkpoint(), at points where nothing completed is
 *     uncommitted (the shard sealed, the sealer idle, waiting marks
 *     committed), writes the cursor and the bitmap of settled units and
 *     clears the marks;
 *   - on load, taken = bitmap + marks of the pass: a unit in flight at a
 *     crash is in neither and is fetched again; one committed is in one.
 *
 * ingest's rounds: a whole object the transport gave up on faults that may
 * pass (job->exhausted) is not settled when its job ends but held
 * (job_hold), its unit still in flight, for the next round, which
 * sampler.c begins once the pass's transfers are over (step_round): the
 * object is handed out again (round_job) resuming at its good_end, its
 * resident records skipped - the path a restart takes (job_resume).  Held
 * objects left when the rounds are spent or the run ends are settled as
 * given up (smp__plan_settle_held: failed_objects, objects_partial), after
 * their lows are written (smp__plan_lows counts them in).
 *
 * Resident units come from the catalog (the samples and files not GONE),
 * re-read at load and at each epoch (evictions happen at boundaries);
 * between, a unit becomes resident when it completes.
 * Threads: the sampler's thread only.
 */
#include "sampler/sampler_i.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"
#include "common/log.h"
#include "common/tfrecord.h"

/* Sidecars fetched (in parallel) and written to the catalog together, at most. */
#define SMP_SIDECAR_BATCH 256

/* ---- objects and units ----------------------------------------------- */

/* A zeroed plan object in s->pobj_mem (it lives until smp__plan_unload), or NULL. */
static struct smp__pobj *pobj_new(struct smp_sampler *s)
{
	return cmn_arena_zalloc(&s->pobj_mem, sizeof(struct smp__pobj), _Alignof(struct smp__pobj));
}

/* What a plan object owns outside the arena: its index, while loaded. */
static void pobj_drop(struct smp__pobj *o)
{
	if (!o || !o->ix)
		return;
	free(o->ix->idx);
	o->ix->idx = NULL;
}

/* ---- indexes (the file comment) ------------------------------------------ */

/* Frees the index of entry i of the cache (least recently used first). */
static void cache_evict(struct smp_sampler *s, size_t i)
{
	struct smp__pobj *o = s->idx_cache[i];
	s->idx_cache_bytes -= (uint64_t)o->units * sizeof(struct smp__idx);
	pobj_drop(o);
	memmove(&s->idx_cache[i], &s->idx_cache[i + 1],
		(s->nidx_cache - i - 1) * sizeof(s->idx_cache[0]));
	s->nidx_cache--;
}

/*
 * The index of indexed object o (of s->pobj): the cache's, else read from
 * the catalog, and then the most recently used (the least recently used go
 * past SMP_IDX_CACHE_OBJECTS or SMP_IDX_CACHE_BYTES).  *out is valid until
 * the next call.  0, or -EIO (the row's index does not match its units),
 * -ENOMEM or the catalog's -errno.
 */
static int index_of(struct smp_sampler *s, struct smp__pobj *o, const struct smp__idx **out)
{
	size_t i = 0;
	if (o->ix->idx) {
		while (i < s->nidx_cache && s->idx_cache[i] != o)
			i++;
		if (i < s->nidx_cache) {
			memmove(&s->idx_cache[i], &s->idx_cache[i + 1],
				(s->nidx_cache - i - 1) * sizeof(s->idx_cache[0]));
			s->idx_cache[s->nidx_cache - 1] = o;
		}
		*out = o->ix->idx;
		return 0;
	}
	void *b;
	size_t len;
	int rc = cfs_catalog_plan_idx(s->cat, s->plan_id, o->object_id, &b, &len);
	if (rc)
		return rc;
	if (len != (size_t)o->units * sizeof(struct smp__idx)) {
		free(b);
		cmn_log(CMN_LOG_ERROR,
			"object %lld: its index in the catalog (%zu bytes) does not match its %u "
			"records",
			(long long)o->object_id, len, o->units);
		return -EIO;
	}
	while (s->nidx_cache && (s->nidx_cache == SMP_IDX_CACHE_OBJECTS ||
				 s->idx_cache_bytes + len > SMP_IDX_CACHE_BYTES))
		cache_evict(s, 0);
	o->ix->idx = b;
	s->idx_cache[s->nidx_cache++] = o;
	s->idx_cache_bytes += len;
	*out = o->ix->idx;
	return 0;
}

static int pobj_push(struct smp_sampler *s, struct smp__pobj *o)
{
	if (s->npobj == s->pobj_cap) {
		size_t cap = s->pobj_cap ? s->pobj_cap * 2 : 256;
		struct smp__pobj **nv = realloc(s->pobj, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		s->pobj = nv;
		s->pobj_cap = cap;
	}
	s->pobj[s->npobj++] = o;
	return 0;
}

struct smp__pobj *smp__plan_obj(const struct smp_sampler *s, uint64_t u)
{
	size_t lo = 0, hi = s->npobj;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (s->pobj[mid]->first <= u)
			lo = mid;
		else
			hi = mid;
	}
	return s->npobj ? s->pobj[lo] : NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_pobj_id(const void *a, const void *b)
{
	const struct smp__pobj *x = *(struct smp__pobj *const *)a,
			       *y = *(struct smp__pobj *const *)b;
	return x->object_id < y->object_id ? -1 : x->object_id > y->object_id;
}

/* The plan's objects sorted by object id (for lookups); caller frees the array. */
static struct smp__pobj **by_id(const struct smp_sampler *s)
{
	struct smp__pobj **v = malloc((s->npobj ? s->npobj : 1) * sizeof(*v));
	if (!v)
		return NULL;
	if (s->npobj)
		memcpy(v, s->pobj, s->npobj * sizeof(*v));
	qsort(v, s->npobj, sizeof(*v), cmp_pobj_id);
	return v;
}

static struct smp__pobj *find_id(struct smp__pobj **v, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid]->object_id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo]->object_id == id ? v[lo] : NULL;
}

/* ---- load ----------------------------------------------------------------- */

/* rec_bytes of a plan object whose row has none (load_row, old_record_bytes) */
#define REC_BYTES_UNKNOWN UINT64_MAX

/*
 * The record bytes of the plan's indexed objects whose row has none (a
 * catalog before version 9): summed from the index and written to the
 * row, in one transaction.  0 or -errno.
 */
static int old_record_bytes(struct smp_sampler *s)
{
	int rc = cfs_catalog_begin(s->cat);
	for (size_t i = 0; rc == 0 && i < s->npobj; i++) {
		struct smp__pobj *o = s->pobj[i];
		const struct smp__idx *ix;
		if (!o->ix || o->ix->rec_bytes != REC_BYTES_UNKNOWN)
			continue;
		o->ix->rec_bytes = 0;
		rc = index_of(s, o, &ix);
		for (uint32_t k = 0; rc == 0 && k < o->units; k++)
			o->ix->rec_bytes += ix[k].size;
		if (rc == 0)
			rc = cfs_catalog_plan_set_record_bytes(s->cat, s->plan_id, o->object_id,
							       o->ix->rec_bytes);
	}
	if (rc == 0)
		return cfs_catalog_commit(s->cat);
	cfs_catalog_rollback(s->cat);
	return rc;
}

/* smp__plan_load's walk of the plan's rows (cfs_catalog_plan_objects_each). */
struct load_walk {
	struct smp_sampler *s;
	uint64_t n;  /* units: the end of the last object */
	size_t nold; /* indexed objects whose row has no record bytes (old_record_bytes) */
};

/* A plan object for one row, made as it is read (the rows are never all held). */
static int load_row(void *ctx, const struct cfs_plan_object *po)
{
	struct load_walk *w = ctx;
	struct smp_sampler *s = w->s;
	struct smp__pobj *o = pobj_new(s);
	if (!o || pobj_push(s, o))
		return -ENOMEM;
	o->object_id = po->object_id;
	o->first = po->first_unit;
	o->units = (uint32_t)po->units;
	if (po->idx_len > 0 && po->idx_len == o->units * sizeof(struct smp__idx)) {
		o->ix = cmn_arena_zalloc(&s->pobj_mem, sizeof(*o->ix), _Alignof(struct smp__pidx));
		if (!o->ix)
			return -ENOMEM;
		o->ix->rec_bytes =
		    po->record_bytes >= 0 ? (uint64_t)po->record_bytes : REC_BYTES_UNKNOWN;
		w->nold += po->record_bytes < 0;
	}
	w->n = o->first + o->units;
	return 0;
}

int smp__plan_load(struct smp_sampler *s, char *err, size_t errlen)
{
	const struct cmn_config *c = s->cfg;
	struct cfs_plan_row row;
	struct load_walk w = {.s = s};
	uint64_t *marks = NULL;
	size_t nmarks = 0;
	bool by_records =
	    c->strategy == CMN_STRATEGY_RECORDS && c->format == CMN_FORMAT_TFRECORD &&
	    (c->compression == CMN_COMPRESSION_NONE || c->compression == CMN_COMPRESSION_AUTO);
	if (c->strategy == CMN_STRATEGY_RECORDS && !by_records)
		cmn_log(
		    CMN_LOG_INFO,
		    "strategy=records needs uncompressed TFRecord objects: reading whole objects");
	s->unit_kind = by_records ? CFS_PLAN_RECORDS : CFS_PLAN_OBJECTS;
	int rc =
	    cfs_catalog_plan_get(s->cat, s->source_id, c->rank, c->world_size ? c->world_size : 1,
				 s->unit_kind, s->seed, &row);
	if (rc) {
		snprintf(err, errlen, "reading the sampling plan from the catalog: %s",
			 strerror(-rc));
		return rc;
	}
	s->plan_id = row.id;
	rc = cfs_catalog_plan_objects_each(s->cat, row.id, load_row, &w);
	if (rc == 0)
		rc = cfs_catalog_plan_marks_of(s->cat, row.id, row.pass, &marks, &nmarks);
	if (rc) {
		snprintf(err, errlen, "reading the sampling plan from the catalog: %s",
			 strerror(-rc));
		goto out;
	}
	uint64_t n = w.n;
	if (w.nold) /* rows written before record_bytes: summed once, from their index */
		rc = old_record_bytes(s);
	if (rc) {
		snprintf(err, errlen, "reading the sampling plan's indexes: %s", strerror(-rc));
		goto out;
	}
	struct cmn_plan_state st = {
	    .n = n, .seed = row.seed, .pass = row.pass, .gen = row.gen, .cursor = row.cursor};
	size_t need = (size_t)((n + 7) / 8);
	if (row.n_units != n || row.cursor > n || row.taken_len < need) {
		/*
		 * Objects were added after the last save (a crash right after a
		 * relist): the cursor belongs to another permutation.  Walking from
		 * 0 is always safe: the taken bits and marks still say which units
		 * this pass took.
		 */
		st.cursor = 0;
		if (row.taken && row.taken_len < need) {
			uint8_t *t = calloc(need, 1);
			if (!t) {
				rc = -ENOMEM;
				snprintf(err, errlen, "out of memory for the sampling plan");
				goto out;
			}
			memcpy(t, row.taken, row.taken_len);
			free(row.taken);
			row.taken = t;
			row.taken_len = need;
		}
	}
	size_t keep = 0; /* marks of units the plan has */
	for (size_t i = 0; i < nmarks; i++)
		if (marks[i] < n)
			marks[keep++] = marks[i];
	rc = cmn_plan_restore(&s->plan, &st, row.taken, row.taken_len, marks, keep);
	if (rc) {
		snprintf(err, errlen, "restoring the sampling plan: %s", strerror(-rc));
		goto out;
	}
	cmn_log(CMN_LOG_INFO, "sampling plan %lld: pass %llu, %llu units, resuming at %llu",
		(long long)row.id, (unsigned long long)row.pass, (unsigned long long)n,
		(unsigned long long)st.cursor);
out:
	cfs_plan_row_free(&row);
	free(marks);
	return rc;
}

static void whole_end(struct smp_sampler *s, struct smp__job *j);

/*
 * Frees ingest's held objects (s->again, s->ready); with settle, each is
 * first ended as given up (whole_end: failed_objects, objects_partial, its
 * unit settled).
 */
static void free_held(struct smp_sampler *s, bool settle)
{
	struct smp__job **lists[] = {&s->again, &s->ready};
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
		while (*lists[l]) {
			struct smp__job *j = *lists[l];
			*lists[l] = j->next;
			j->next = NULL;
			if (settle && s->plan)
				whole_end(s, j);
			smp__job_free(s, j);
		}
}

void smp__plan_unload(struct smp_sampler *s)
{
	for (size_t i = 0; i < s->npobj; i++)
		pobj_drop(s->pobj[i]);
	s->nidx_cache = 0;
	s->idx_cache_bytes = 0;
	cmn_arena_free(&s->pobj_mem);
	free(s->pobj);
	s->pobj = NULL;
	s->npobj = s->pobj_cap = 0;
	free(s->failed);
	s->failed = NULL;
	s->failed_words = 0;
	s->failed_at = 0;
	cmn_plan_free(s->plan);
	s->plan = NULL;
	atomic_store(&s->wanted, UINT64_MAX); /* unknown until the plan is loaded again */
	free(s->pend);
	s->pend = NULL;
	s->npend = s->pend_cap = 0;
	free(s->partial);
	s->partial = NULL;
	s->npartial = 0;
	free(s->cut);
	s->cut = NULL;
	s->ncut = 0;
	free_held(s, false); /* ingest's held objects (a failed start) */
}

/* ---- sidecars ------------------------------------------------------------- */

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

/* A sidecar given up is no object given up: its object is read whole (a warning says why). */
static void idx_done(void *ctx, int rc, enum smp_xfer_end how, const char *msg)
{
	struct idx_fetch *x = ctx;
	x->rc = rc;
	x->done = true;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
}

static const struct smp_xfer_ops idx_ops = {idx_data, idx_end, idx_restart, idx_done};

/*
 * Sets the units, record bytes and index (o->ix; the index until written to
 * the catalog) of the object of one fetched sidecar (of key).  0 or -ENOMEM.
 */
static int set_index(struct smp_sampler *s, struct smp__pobj *o, const char *key,
		     const struct idx_fetch *x)
{
	struct smp_idx_entry *ents = NULL;
	size_t ne = 0, cap = 0;
	char err[512];
	int rc = 0, prc = x->rc == 0 ? smp__parse_index(x->buf ? x->buf : "", x->len, 0, o->size,
							&ents, &ne, &cap, err, sizeof(err))
				     : -EIO;
	if (prc == 0 && ne > UINT32_MAX) {
		cmn_log(CMN_LOG_WARN,
			"%s.idx: %zu records, more than a plan object holds: "
			"reading the whole object instead",
			key, ne);
	} else if (prc == 0 && ne > 0) {
		struct smp__pidx *ix =
		    cmn_arena_zalloc(&s->pobj_mem, sizeof(*ix), _Alignof(struct smp__pidx));
		if (ix)
			ix->idx = malloc(ne * sizeof(*ix->idx));
		if (!ix || !ix->idx) {
			rc = -ENOMEM;
		} else {
			for (size_t i = 0; i < ne; i++) {
				ix->idx[i] = (struct smp__idx){ents[i].off, ents[i].size, 0};
				ix->rec_bytes += ents[i].size;
			}
			o->units = (uint32_t)ne;
			o->ix = ix;
		}
	} else if (prc == -ENOMEM) {
		rc = prc;
	} else {
		cmn_log(CMN_LOG_WARN, "%s.idx: %s: reading the whole object instead", key,
			prc == 0 ? "no record indexed"
			: x->rc	 ? x->msg
				 : err);
	}
	free(ents);
	return rc;
}

/*
 * Fetches the sidecars of the n new objects whose key is in want[k] (NULL:
 * no sidecar wanted), in parallel while other transfers go on, and sets
 * their units and index.  Objects whose sidecar fails are read whole (one
 * unit), with a warning.  Returns 0 or -errno (local failures only:
 * memory, the engine; stopped).
 */
static int load_sidecars(struct smp_sampler *s, struct smp__pobj **objs, const char *const *want,
			 size_t n)
{
	/* a fetch state for each object that has a sidecar, not for each object */
	size_t m = 0;
	for (size_t k = 0; k < n; k++)
		m += want[k] != NULL;
	if (m == 0)
		return 0;
	struct idx_fetch *fx = calloc(m, sizeof(*fx));
	struct smp__pobj **of = malloc(m * sizeof(*of));
	const char **ok = malloc(m * sizeof(*ok));
	int rc = 0;
	if (!fx || !of || !ok) {
		free(fx);
		free(of);
		free(ok);
		return -ENOMEM;
	}
	for (size_t k = 0, i = 0; k < n; k++)
		if (want[k]) {
			ok[i] = want[k];
			of[i++] = objs[k];
		}
	for (size_t i = 0; i < m; i++) {
		char key[SMP_KEY_MAX + 8];
		snprintf(key, sizeof(key), "%s.idx", ok[i]);
		struct smp_fetch_req r = {.key = key, .ops = &idx_ops, .ctx = &fx[i]};
		rc = smp_fetch_add(s->fetch, &r);
		if (rc) {
			for (size_t j = i; j < m; j++)
				fx[j].done = true;
			goto out;
		}
	}
	for (size_t i = 0;
	     i < m && rc == 0;) { /* bounded: each request ends (retries are bounded) */
		if (fx[i].done) {
			i++;
			continue;
		}
		if (atomic_load(&s->stop)) {
			rc = -ECANCELED;
			break;
		}
		rc = smp_fetch_step(s->fetch, 250);
	}
out:
	if (rc) /* requests still queued point into fx: end them all */
		smp_fetch_cancel_all(s->fetch);
	for (size_t i = 0; i < m && rc == 0; i++)
		rc = set_index(s, of[i], ok[i], &fx[i]);
	for (size_t i = 0; i < m; i++)
		free(fx[i].buf);
	free(fx);
	free(of);
	free(ok);
	return rc;
}

/* ---- merging a listing ---------------------------------------------------- */

/* The catalog row of new object i (cfs_catalog_plan_objects_add_each). */
static void fresh_row(void *ctx, size_t i, struct cfs_plan_object *out)
{
	const struct smp__pobj *o = ((struct smp__pobj *const *)ctx)[i];
	*out = (struct cfs_plan_object){o->object_id,
					o->first,
					o->units,
					o->ix ? o->ix->idx : NULL,
					o->ix ? o->units * sizeof(struct smp__idx) : 0,
					o->ix ? (int64_t)o->ix->rec_bytes : 0};
}

int smp__plan_merge(struct smp_sampler *s, const struct smp_listing *l, const int64_t *ids,
		    const bool *has_idx, char *err, size_t errlen)
{
	struct smp__pobj **sorted = by_id(s), **fresh = NULL;
	const char **want = NULL; /* the keys of fresh objects with a sidecar to fetch */
	size_t nfresh = 0, nsorted = s->npobj;
	int rc = 0;
	if (!sorted)
		goto nomem;
	fresh = calloc(l->n ? l->n : 1, sizeof(*fresh));
	want = calloc(l->n ? l->n : 1, sizeof(*want));
	if (!fresh || !want)
		goto nomem;
	for (size_t i = 0; i < s->npobj; i++)
		s->pobj[i]->live = false;
	for (size_t i = 0; i < l->n; i++) {
		/* the listing holds this node's share only (smp__listing_add) */
		assert(smp_listing_in_share(s->cfg->rank, s->cfg->world_size, l->v[i].key,
					    strlen(l->v[i].key)));
		struct smp__pobj *o = find_id(sorted, nsorted, ids[i]);
		if (!o) {
			o = pobj_new(s);
			if (!o)
				goto nomem;
			o->object_id = ids[i];
			o->units = 1;
			if (s->unit_kind == CFS_PLAN_RECORDS && has_idx[i])
				want[nfresh] = l->v[i].key;
			fresh[nfresh++] = o;
		}
		o->size = l->v[i].size;
		o->live = true;
	}
	/*
	 * New objects in batches of SMP_SIDECAR_BATCH sidecars: fetched, written
	 * to the catalog with their units (one transaction a batch), their
	 * indexes freed.  The planner grows once, by the objects written (also
	 * when a later batch fails: those are in the catalog).
	 */
	uint64_t n = cmn_plan_units(s->plan);
	for (size_t done = 0; done < nfresh && rc == 0;) {
		size_t end = done, nwant = 0;
		while (end < nfresh && nwant < SMP_SIDECAR_BATCH)
			nwant += want[end++] != NULL;
		rc = load_sidecars(s, fresh + done, want + done, end - done);
		if (rc) {
			snprintf(err, errlen, "fetching index sidecars: %s", strerror(-rc));
			break;
		}
		uint64_t n2 = n;
		for (size_t k = done; k < end; k++) {
			fresh[k]->first = n2;
			n2 += fresh[k]->units;
		}
		rc = cfs_catalog_plan_objects_add_each(s->cat, s->plan_id, fresh_row, fresh + done,
						       end - done, n2);
		if (rc) {
			snprintf(err, errlen, "recording the sampling plan's objects: %s",
				 strerror(-rc));
			break;
		}
		n = n2;
		for (size_t k = done; k < end; k++) {
			pobj_drop(fresh[k]); /* its index is the catalog's now */
			if (pobj_push(s, fresh[k])) {
				rc = -ENOMEM; /* the catalog has them: the next load finds them */
				snprintf(err, errlen, "out of memory for the sampling plan");
				break;
			}
			fresh[k] = NULL;
		}
		done = end;
	}
	if (n > cmn_plan_units(s->plan)) {
		int grc = cmn_plan_grow(s->plan, n);
		if (grc && rc == 0)
			goto nomem;
		cmn_log(CMN_LOG_INFO, "sampling plan: %zu new objects, %llu units in all", nfresh,
			(unsigned long long)n);
	}
	if (rc)
		goto out;
	/* objects gone from the listing (deleted, or replaced by a new version) */
	for (size_t i = 0; i < s->npobj; i++)
		if (!s->pobj[i]->live)
			for (uint64_t u = 0; u < s->pobj[i]->units; u++)
				if (cmn_plan_drop(s->plan, s->pobj[i]->first + u))
					goto nomem;
	goto out;
nomem:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory for the sampling plan");
out:
	for (size_t k = 0; fresh && k < nfresh; k++)
		pobj_drop(fresh[k]); /* not pushed: its struct stays in the arena, unused */
	free(fresh);
	free(want);
	free(sorted);
	return rc;
}

/* ---- resident units ------------------------------------------------------- */

/* The line of index ix (units records) whose record is at off, or units. */
static uint32_t line_of_offset(const struct smp__idx *ix, uint32_t units, uint64_t off)
{
	uint32_t lo = 0, hi = units;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ix[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < units && ix[lo].off == off ? lo : units;
}

/*
 * s->wanted: the bytes of the units the plan would still fetch (live, not
 * resident), in the source's bytes, and of the cut objects (catalog.h):
 * resident in part, they are fetched again once they left whole, so room
 * is made for them.  One walk over the objects: an indexed one counts its
 * record bytes less its resident ones (res_bytes); units completed later
 * subtract theirs (smp__unit_complete).
 */
static void count_wanted(struct smp_sampler *s)
{
	uint64_t want = 0, live = 0;
	for (size_t i = 0; i < s->npobj; i++) {
		const struct smp__pobj *o = s->pobj[i];
		if (!o->live)
			continue;
		live++;
		if (o->ix) {
			want += o->ix->rec_bytes > o->ix->res_bytes
				    ? o->ix->rec_bytes - o->ix->res_bytes
				    : 0;
			continue;
		}
		for (uint64_t u = o->first; u < o->first + o->units; u++)
			if (!cmn_plan_is_resident(s->plan, u))
				want += o->size;
		if (s->ncut && cmn_plan_is_resident(s->plan, o->first) &&
		    bsearch(&o->object_id, s->cut, s->ncut, sizeof(int64_t), cmp_i64))
			want += o->size;
	}
	/*
	 * An empty listing says nothing of the cache's files (a cache filled
	 * from another source, or a source emptied for now): the schedule's
	 * admit stands, as before the plan knew anything (docs/TODO.md).
	 */
	atomic_store(&s->wanted, live ? want : UINT64_MAX);
}

static int cmp_partial(const void *a, const void *b)
{
	int64_t x = ((const struct cfs_partial *)a)->object_id,
		y = ((const struct cfs_partial *)b)->object_id;
	return x < y ? -1 : x > y;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct cfs_sample_ref *x = a, *y = b;
	if (x->object_id != y->object_id)
		return x->object_id < y->object_id ? -1 : 1;
	return x->object_offset < y->object_offset ? -1 : x->object_offset > y->object_offset;
}

/* Record k of indexed object o, of `bytes` in the source, is resident. */
static void record_resident(struct smp_sampler *s, struct smp__pobj *o, uint32_t k, uint64_t bytes)
{
	if (cmn_plan_is_resident(s->plan, o->first + k))
		return; /* one unit, two samples (a file being evicted, and its copy) */
	cmn_plan_set_resident(s->plan, o->first + k, true);
	o->ix->res_bytes += bytes;
}

/* The walk of the resident samples (resident_records). */
struct res_walk {
	struct smp_sampler *s;
	struct smp__pobj **sorted;
	struct cfs_sample_ref *old; /* rows of indexed objects without an ordinal */
	size_t nold, cap;
};

static int res_row(void *ctx, const struct cfs_sample_ref *r)
{
	struct res_walk *w = ctx;
	struct smp__pobj *o = find_id(w->sorted, w->s->npobj, r->object_id);
	if (!o)
		return 0; /* another plan's */
	if (!o->ix) {
		cmn_plan_set_resident(w->s->plan, o->first, true);
	} else if (r->ordinal >= 0) {
		if (r->ordinal < o->units)
			record_resident(w->s, o, (uint32_t)r->ordinal,
					r->length + CMN_TFR_OVERHEAD);
	} else {
		if (w->nold == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 256;
			struct cfs_sample_ref *nv = realloc(w->old, cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			w->old = nv;
			w->cap = cap;
		}
		w->old[w->nold++] = *r;
	}
	return 0;
}

/*
 * The resident samples of strategy=records, walked row by row: a row's
 * ordinal is its record's line in its object's index, so its unit is first
 * + ordinal and its bytes its framed length.  Rows without one (written
 * before version 9, or copied by a withdrawal) are looked up in their
 * object's index by offset, object by object, and their ordinals written
 * back, so that the next refresh reads no index for them.
 */
static int resident_records(struct smp_sampler *s, struct smp__pobj **sorted)
{
	struct res_walk w = {.s = s, .sorted = sorted};
	int rc = cfs_catalog_resident_samples(s->cat, res_row, &w);
	if (rc == 0 && w.nold)
		qsort(w.old, w.nold, sizeof(*w.old), cmp_ref);
	size_t nfound = 0;
	for (size_t i = 0; rc == 0 && i < w.nold;) {
		struct smp__pobj *o = find_id(sorted, s->npobj, w.old[i].object_id);
		const struct smp__idx *ix;
		rc = index_of(s, o, &ix);
		for (; rc == 0 && i < w.nold && w.old[i].object_id == o->object_id; i++) {
			uint32_t k = line_of_offset(ix, o->units, w.old[i].object_offset);
			if (k == o->units)
				continue; /* not a record of its index */
			record_resident(s, o, k, ix[k].size);
			w.old[nfound] = w.old[i]; /* nfound <= i */
			w.old[nfound++].ordinal = k;
		}
	}
	if (rc == 0 && nfound) {
		int wrc = cfs_catalog_samples_set_ordinals(s->cat, w.old, nfound);
		if (wrc)
			cmn_log(
			    CMN_LOG_WARN,
			    "writing the index lines of %zu resident records to the catalog: %s "
			    "(they are looked up again at the next reading of the resident set)",
			    nfound, strerror(-wrc));
	}
	free(w.old);
	return rc;
}

int smp__plan_refresh_resident(struct smp_sampler *s)
{
	struct smp__pobj **sorted = by_id(s);
	int rc = 0;
	if (!sorted)
		return -ENOMEM;
	cmn_plan_clear_resident(s->plan);
	for (size_t i = 0; i < s->npobj; i++)
		if (s->pobj[i]->ix)
			s->pobj[i]->ix->res_bytes = 0;
	if (s->unit_kind == CFS_PLAN_RECORDS) {
		rc = resident_records(s, sorted);
	} else {
		int64_t *v = NULL;
		size_t n = 0;
		rc = cfs_catalog_plan_resident_objects(s->cat, s->plan_id, &v, &n);
		for (size_t i = 0; rc == 0 && i < n; i++) {
			struct smp__pobj *o = find_id(sorted, s->npobj, v[i]);
			if (o)
				cmn_plan_set_resident(s->plan, o->first, true);
		}
		free(v);
	}
	/*
	 * Whole objects: a partial one is not resident (fetched again, its
	 * resident records skipped); a cut one is, and counts as wanted.
	 */
	free(s->partial);
	s->partial = NULL;
	s->npartial = 0;
	if (rc == 0)
		rc =
		    cfs_catalog_plan_partial_objects(s->cat, s->plan_id, &s->partial, &s->npartial);
	if (rc == 0 && s->npartial)
		qsort(s->partial, s->npartial, sizeof(*s->partial), cmp_partial);
	free(s->cut);
	s->cut = NULL;
	s->ncut = 0;
	if (rc == 0)
		rc = cfs_catalog_plan_cut_objects(s->cat, s->plan_id, &s->cut, &s->ncut);
	if (rc == 0 && s->ncut)
		qsort(s->cut, s->ncut, sizeof(*s->cut), cmp_i64);
	for (size_t i = 0; rc == 0 && i < s->npartial; i++) {
		struct smp__pobj *o = find_id(sorted, s->npobj, s->partial[i].object_id);
		if (o && !o->ix)
			cmn_plan_set_resident(s->plan, o->first, false);
	}
	free(sorted);
	if (rc == 0)
		count_wanted(s);
	return rc;
}

/*
 * A whole TFRecord object's transfer begins: recorded before any of its
 * bytes are fetched, so that a crash or a stop before the commit of its
 * last record leaves it partial, never resident (catalog.h, plan_partial).
 * A partial object resumes at its low (every record below was committed)
 * and gets the offsets of its resident records in j->skip.  Raw objects are
 * one file each, sealed whole or not at all: not recorded.
 */
static int job_resume(struct smp_sampler *s, struct smp__job *j, uint64_t low);

static int job_begin_whole(struct smp_sampler *s, struct smp__job *j)
{
	if (s->cfg->format == CMN_FORMAT_RAW)
		return 0;
	int rc = cfs_catalog_plan_partial_begin(s->cat, s->plan_id, j->unit, j->obj->object_id);
	if (rc)
		return rc;
	struct cfs_partial key = {.object_id = j->obj->object_id};
	const struct cfs_partial *p =
	    s->npartial ? bsearch(&key, s->partial, s->npartial, sizeof(key), cmp_partial) : NULL;
	return p ? job_resume(s, j, p->low) : 0;
}

/*
 * A new transfer of a partial whole object: from low (0: from its first
 * byte; else to the object's end, uncompressed from there), the offsets of
 * its resident records in j->skip.  0 or -errno (j->skip unset).
 */
static int job_resume(struct smp_sampler *s, struct smp__job *j, uint64_t low)
{
	if (low > 0 && low < j->obj->size) {
		j->off = low;
		j->bytes = j->obj->size - low;
		j->good_end = low;
		j->plain = true;
		SMP_STAT_ADD(&s->stats, resumed_bytes, low);
	}
	return cfs_catalog_object_offsets(s->cat, j->obj->object_id, &j->skip, &j->nskip);
}

static void buffer_low(const struct smp_rec *r, void *ctx)
{
	(void)ctx;
	struct smp__job *j = r->job;
	if (j && !j->obj->ix && r->object_offset < j->low)
		j->low = r->object_offset;
}

size_t smp__plan_lows(struct smp_sampler *s, uint64_t **units, uint64_t **lows)
{
	size_t n = 0, cap = 0;
	*units = *lows = NULL;
	if (s->cfg->format == CMN_FORMAT_RAW)
		return 0;
	/* the jobs in flight, and ingest's held objects (their records are all out) */
	struct smp__job *const lists[] = {s->jobs, s->again, s->ready};
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
		for (struct smp__job *j = lists[l]; j; j = j->next) {
			j->low = j->good_end;
			cap++;
		}
	if (!cap)
		return 0;
	smp_shuffle_each(s->shuf, buffer_low, NULL);
	*units = malloc(cap * sizeof(**units));
	*lows = malloc(cap * sizeof(**lows));
	if (!*units || !*lows) {
		free(*units);
		free(*lows);
		*units = *lows = NULL;
		return 0;
	}
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
		for (const struct smp__job *j = lists[l]; j; j = j->next)
			if (!j->obj->ix && j->plain && j->low > 0 && !j->cancelled) {
				(*units)[n] = j->unit;
				(*lows)[n++] = j->low;
			}
	if (n == 0) {
		free(*units);
		free(*lows);
		*units = *lows = NULL;
	}
	return n;
}

int smp__plan_partial_low(struct smp_sampler *s)
{
	uint64_t *units, *lows;
	size_t n = smp__plan_lows(s, &units, &lows);
	int rc = n ? cfs_catalog_plan_partial_low(s->cat, s->plan_id, units, lows, n) : 0;
	free(units);
	free(lows);
	return rc;
}

bool smp__job_skips(const struct smp__job *j, uint64_t object_offset)
{
	size_t lo = 0, hi = j->nskip;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (j->skip[mid] < object_offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < j->nskip && j->skip[lo] == object_offset;
}

/* ---- jobs ----------------------------------------------------------------- */

static int round_job(struct smp_sampler *s, struct smp__job **out);

/*
 * The job's key, from the catalog on the sampler's read-only connection
 * (s->keys, which a seal's transaction does not hold up): the plan holds
 * no key (memory O(the cache), not O(the listing)).  An id keeps its key,
 * and its row was committed with the listing that made the plan object.
 * The keys of one fill of the window are read in one read snapshot
 * (smp__plan_keys_end closes it): one WAL read lock for them all, not one
 * a key.  A key missing from the snapshot is looked for again after it
 * (a row committed since).  0 or -errno (failed locally).
 */
static int job_key(struct smp_sampler *s, struct smp__job *j)
{
	char key[SMP_KEY_MAX + 1];
	if (!s->keys_snap)
		s->keys_snap = cfs_catalog_read_begin(s->keys) == 0; /* else one read a key */
	int rc = cfs_catalog_object_key(s->keys, j->obj->object_id, key, sizeof(key));
	if (rc == -ENOENT && s->keys_snap) {
		smp__plan_keys_end(s);
		rc = cfs_catalog_object_key(s->keys, j->obj->object_id, key, sizeof(key));
	}
	if (rc == 0) {
		j->key = strdup(key);
		if (!j->key)
			rc = -ENOMEM;
	}
	if (rc)
		smp__fail_local(s, rc, "reading an object's key from the catalog");
	return rc;
}

void smp__plan_keys_end(struct smp_sampler *s)
{
	if (s->keys_snap)
		cfs_catalog_read_end(s->keys);
	s->keys_snap = false;
}

int smp__plan_next_job(struct smp_sampler *s, struct smp__job **out)
{
	if (s->ready)
		return round_job(s, out);
	uint64_t u;
	enum cmn_plan_next_rc nr = cmn_plan_next(s->plan, &u);
	if (nr == CMN_PLAN_NOMEM)
		return -ENOMEM;
	if (nr != CMN_PLAN_UNIT)
		return (int)nr;
	struct smp__pobj *o = smp__plan_obj(s, u);
	struct smp__job *j = calloc(1, sizeof(*j));
	if (!j) {
		cmn_plan_done(s->plan, u); /* settled without a fetch: only under OOM */
		return -ENOMEM;
	}
	j->obj = o;
	j->unit = u;
	j->nunits = 1;
	int rc = job_key(s, j);
	if (rc) {
		cmn_plan_done(s->plan, u); /* not fetched: taken again next pass */
		smp__job_free(s, j);
		return rc;
	}
	if (o->ix) {
		const struct smp__idx *ix = NULL;
		rc = index_of(s, o, &ix);
		j->run = rc ? NULL : malloc(SMP_RUN_MAX_UNITS * sizeof(*j->run));
		if (!j->run) {
			cmn_plan_done(s->plan, u); /* not fetched: taken again next pass */
			smp__job_free(s, j);
			return rc ? rc : -ENOMEM;
		}
		uint64_t k = u - o->first;
		j->run[0] = ix[k];
		j->off = ix[k].off;
		j->len = ix[k].size;
		/* the run: following records that are free in this pass, contiguous in the object
		 */
		while (j->nunits < SMP_RUN_MAX_UNITS && k + j->nunits < o->units) {
			const struct smp__idx *x = &ix[k + j->nunits];
			if (x->off != j->off + j->len || j->len + x->size > SMP_RUN_MAX_BYTES ||
			    !cmn_plan_take(s->plan, u + j->nunits))
				break;
			j->run[j->nunits++] = *x;
			j->len += x->size;
		}
		j->bytes = j->len;
	} else {
		j->bytes = o->size;
		rc = job_begin_whole(s, j);
		if (rc) {
			cmn_plan_done(s->plan, u); /* not fetched: taken again next pass */
			smp__job_free(s, j);
			return rc;
		}
	}
	s->rolled = false;
	*out = j;
	return CMN_PLAN_UNIT;
}

uint64_t smp__job_room_end(const struct smp__job *j, uint64_t from, uint64_t upto)
{
	if (!j->run)
		return upto;
	uint64_t end = from;
	for (uint32_t i = 0; i < j->nunits; i++) {
		const struct smp__idx *x = &j->run[i];
		uint64_t e = x->off + x->size;
		if (e <= from)
			continue;
		if (e > upto)
			return end > from ? end : e; /* not even the first fits: all of it */
		end = e;
	}
	return end > from ? end : upto;
}

static void pend_push(struct smp_sampler *s, uint64_t u)
{
	if (s->npend == s->pend_cap) {
		size_t cap = s->pend_cap ? s->pend_cap * 2 : 64;
		uint64_t *nv = realloc(s->pend, cap * sizeof(*nv));
		if (!nv) {
			/* unmarked: its records are resident, so a restart skips it anyway */
			cmn_log(CMN_LOG_WARN, "sampling plan: out of memory for a mark");
			return;
		}
		s->pend = nv;
		s->pend_cap = cap;
	}
	s->pend[s->npend++] = u;
}

void smp__unit_complete(struct smp_sampler *s, uint64_t u, uint64_t bytes, bool ok)
{
	if (ok) {
		uint64_t pass = cmn_plan_pass(s->plan);
		if (!s->w || cfs_shard_writer_records(s->w) == 0 ||
		    cfs_shard_writer_add_marks(s->w, s->plan_id, pass, &u, 1) != 0)
			pend_push(s, u);
		if (!cmn_plan_is_resident(s->plan, u)) {
			struct smp__pobj *o = smp__plan_obj(s, u);
			uint64_t w = atomic_load(&s->wanted);
			if (o && o->ix)
				o->ix->res_bytes += bytes;
			if (w != UINT64_MAX)
				atomic_store(&s->wanted, w > bytes ? w - bytes : 0);
		}
		cmn_plan_set_resident(s->plan, u, true);
		s->marks_since_save++;
		s->prog.objects_done++;
	}
	cmn_plan_done(s->plan, u);
}

bool smp__count_failed(struct smp_sampler *s, struct smp__pobj *o)
{
	uint64_t at = (cmn_plan_pass(s->plan) << 32 | s->epoch) + 1;
	size_t i = 0, hi = s->npobj; /* o's place in s->pobj (ordered by first) */
	while (hi - i > 1) {
		size_t mid = (i + hi) / 2;
		if (s->pobj[mid]->first <= o->first)
			i = mid;
		else
			hi = mid;
	}
	if (s->failed_at != at) {
		s->failed_at = at;
		if (s->failed)
			memset(s->failed, 0, s->failed_words * sizeof(*s->failed));
	}
	if (i / 64 >= s->failed_words) {
		size_t words = (s->npobj + 63) / 64;
		uint64_t *nv = realloc(s->failed, words * sizeof(*nv));
		if (nv) {
			memset(nv + s->failed_words, 0, (words - s->failed_words) * sizeof(*nv));
			s->failed = nv;
			s->failed_words = words;
		}
	}
	if (i / 64 < s->failed_words) { /* else (no memory) it may count again */
		uint64_t bit = UINT64_C(1) << (i % 64);
		if (s->failed[i / 64] & bit)
			return false;
		s->failed[i / 64] |= bit;
	}
	SMP_STAT_ADD(&s->stats, failed_objects, 1);
	return true;
}

/*
 * A whole object's job ends (not cancelled): its unit is settled.  Given
 * up on faults that may pass (exhausted), it is partial: counted in
 * failed_objects and objects_partial, none of its unread records in
 * records_lost - a later transfer resumes it where it stopped (a mount's
 * next epoch, a new run).
 */
static void whole_end(struct smp_sampler *s, struct smp__job *j)
{
	bool partial = !j->ok && j->exhausted;
	SMP_STAT_ADD(&s->stats, records_lost, j->nlost); /* what its readers gave up */
	/* once per object, whoever lost the record (docs/counters.md) */
	if ((j->lost || j->nlost || partial) && smp__count_failed(s, j->obj) && partial)
		SMP_STAT_ADD(&s->stats, objects_partial, 1);
	if (!j->ok && j->written)
		cmn_plan_set_resident(s->plan, j->unit, true); /* partly in */
	smp__unit_complete(s, j->unit, j->obj->size, j->ok);
	if (j->ok) {
		SMP_STAT_ADD(&s->stats, objects_done, 1);
		cfs_catalog_object_fetched(s->cat, j->obj->object_id, s->epoch);
	}
}

/* A run's job ends (not cancelled): its units are settled. */
static void run_end(struct smp_sampler *s, struct smp__job *j)
{
	if (j->lost) /* once per object, whoever lost the record (docs/counters.md) */
		smp__count_failed(s, j->obj);
	uint64_t missing = 0;
	for (uint32_t i = 0; i < j->nunits; i++)
		if (!(j->done_mask >> i & 1)) {
			smp__unit_complete(s, j->unit + i, j->run[i].size, false);
			missing++;
		}
	/*
	 * What its readers gave up; a run given up part-way (retries exhausted,
	 * a 4xx, a full disk): its records not delivered, lost for this pass
	 * (those the readers gave up are among them).
	 */
	SMP_STAT_ADD(&s->stats, records_lost, !j->ok && missing > j->nlost ? missing : j->nlost);
}

static void job_unlink(struct smp_sampler *s, struct smp__job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else if (s->jobs == j)
		s->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	j->next = j->prev = NULL;
}

/*
 * ingest (one pass, stop_when_full): an exhausted whole object is held for
 * the next round (s->again) instead of settled; its unit stays in flight,
 * the room it still holds goes back.  Returns whether j was held.
 */
static bool job_hold(struct smp_sampler *s, struct smp__job *j)
{
	if (s->follow || !s->stop_when_full || !j->exhausted || j->ok || j->cancelled)
		return false;
	job_unlink(s, j);
	if (j->reserve)
		cfs_budget_release(cfs_store_budget(s->cstore), j->reserve);
	j->reserve = 0;
	free(j->skip);
	j->skip = NULL;
	j->nskip = 0;
	j->next = s->again;
	s->again = j;
	return true;
}

void smp__job_maybe_end(struct smp_sampler *s, struct smp__job *j)
{
	if (!j->over || j->refs)
		return;
	if (!j->cancelled && job_hold(s, j))
		return;
	if (!j->cancelled && !j->obj->ix)
		whole_end(s, j);
	else if (!j->cancelled)
		run_end(s, j);
	job_unlink(s, j);
	smp__job_free(s, j);
}

/* ---- ingest's rounds (sampler.c, step_round) ------------------------------ */

/*
 * The next object of ingest's round (s->ready): a new transfer of its unit,
 * still in flight in the plan, where the last one stopped - good_end when
 * the object is plain, else its first byte - its resident records skipped
 * (all it delivered is committed: the round began at a checkpoint).
 * Returns CMN_PLAN_UNIT and *out, or -errno (the object is given up).
 */
static int round_job(struct smp_sampler *s, struct smp__job **out)
{
	struct smp__job *j = s->ready;
	s->ready = j->next;
	j->next = j->prev = NULL;
	j->over = j->ok = j->exhausted = false;
	j->off = j->len = 0;
	j->bytes = j->obj->size;
	j->rounds++;
	int rc =
	    s->cfg->format == CMN_FORMAT_RAW ? 0 : job_resume(s, j, j->plain ? j->good_end : 0);
	if (rc) {
		j->over = j->exhausted = true;
		whole_end(s, j);
		smp__job_free(s, j);
		return rc;
	}
	*out = j;
	return CMN_PLAN_UNIT;
}

size_t smp__plan_held(const struct smp_sampler *s)
{
	size_t n = 0;
	for (const struct smp__job *j = s->again; j; j = j->next)
		n++;
	return n;
}

void smp__plan_round_begin(struct smp_sampler *s)
{
	s->round++;
	while (s->again) {
		struct smp__job *j = s->again;
		s->again = j->next;
		j->next = s->ready;
		s->ready = j;
	}
}

void smp__plan_settle_held(struct smp_sampler *s)
{
	struct smp__job *w = s->waiting;
	if (w && w->rounds) { /* a round's object that found no room */
		s->waiting = NULL;
		w->over = w->exhausted = true;
		w->next = s->again;
		s->again = w;
	}
	free_held(s, true);
}

void smp__job_free(struct smp_sampler *s, struct smp__job *j)
{
	if (!j)
		return;
	if (j->reserve)
		cfs_budget_release(cfs_store_budget(s->cstore), j->reserve);
	free(j->skip);
	free(j->key);
	free(j->run);
	free(j);
}

/* ---- checkpoints ---------------------------------------------------------- */

int smp__plan_checkpoint(struct smp_sampler *s)
{
	int rc = 0;
	if (s->w && cfs_shard_writer_records(s->w) == 0) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	if (s->w)
		rc = smp__seal_current(s);
	int frc = smp__seal_flush(s);
	if (rc || frc || s->fatal)
		return rc ? rc : frc ? frc : s->fatal;
	if (s->npend) {
		struct cfs_plan_marks m = {s->plan_id, cmn_plan_pass(s->plan), s->pend, s->npend};
		rc = cfs_catalog_plan_mark(s->cat, &m);
		if (rc)
			return smp__fail_local(s, rc, "recording the sampling plan");
		s->npend = 0;
	}
	struct cmn_plan_state st;
	cmn_plan_get_state(s->plan, &st);
	size_t len = (size_t)((st.n + 7) / 8);
	uint8_t *bits = malloc(len ? len : 1);
	if (!bits)
		return smp__fail_local(s, -ENOMEM, "saving the sampling plan");
	cmn_plan_export_taken(s->plan, bits);
	struct cfs_plan_row row = {s->plan_id, st.seed,	  st.pass, st.gen,
				   st.n,       st.cursor, bits,	   len};
	rc = cfs_catalog_plan_save(s->cat, &row);
	free(bits);
	if (rc)
		return smp__fail_local(s, rc, "saving the sampling plan");
	s->marks_since_save = 0;
	return 0;
}

int smp__plan_roll(struct smp_sampler *s)
{
	int rc = cmn_plan_roll(s->plan);
	if (rc)
		return rc;
	s->rolled = true;
	cmn_log(CMN_LOG_INFO, "sampling plan: pass %llu begins",
		(unsigned long long)cmn_plan_pass(s->plan));
	return smp__plan_checkpoint(s);
}
