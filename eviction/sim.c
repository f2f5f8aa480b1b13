/*
 * sim.c - the simulator of sim.h: a sampler, a uniform reader, and the
 * real boundary plan (plan.c over policy.c) between epochs.
 *
 * Owns all its state for the length of one evc_sim_run() call; nothing is
 * global, so runs may go in parallel on different threads.  Memory is
 * bounded by EVC_SIM_MAX_RECORDS (the sampling plan's two bits per record,
 * the `seen` bitmap) plus the resident shards.  Which records are resident
 * is the plan's state (cmn_plan_set_resident), kept nowhere else.
 */
#include "eviction/sim.h"

#include "common/plan.h"
#include "eviction/policy_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim {
	uint64_t rng;	       /* splitmix64 state */
	uint64_t tick;	       /* the clock of reads and admissions */
	uint32_t n_records;    /* R */
	uint32_t per_shard;    /* k */
	struct cmn_plan *plan; /* the samplers' plan over the records (common/plan.h) */
	uint8_t *seen;	       /* bitmap: record was read */
	uint64_t n_resident;   /* records resident */
	int64_t next_id;
	/* resident shards: st[i] and recs[i] go together */
	struct evc_shard *st;
	uint32_t **recs;
	size_t n, cap;
};

static uint64_t rnd(struct sim *m)
{
	m->rng += 0x9e3779b97f4a7c15ULL;
	return evc__mix64(m->rng);
}

static uint64_t rnd_below(struct sim *m, uint64_t n)
{
	return rnd(m) % n;
}

static int bit(const uint8_t *b, uint32_t i)
{
	return (b[i >> 3] >> (i & 7)) & 1;
}

static void set_bit(uint8_t *b, uint32_t i, int v)
{
	if (v)
		b[i >> 3] |= (uint8_t)(1u << (i & 7));
	else
		b[i >> 3] &= (uint8_t) ~(1u << (i & 7));
}

/*
 * Next record to download: the sampling plan of the real samplers
 * (common/plan.h, DESIGN "Sampling"), which skips resident records and
 * starts a new pass when the permutation is exhausted.  The simulated fetch
 * is instant, so the record is done at once.  Returns 0 and *r, or -ENOMEM.
 */
static int next_record(struct sim *m, uint32_t *r)
{
	for (int rolls = 0; rolls < 2; rolls++) {
		uint64_t u;
		enum cmn_plan_next_rc rc = cmn_plan_next(m->plan, &u);
		if (rc == CMN_PLAN_UNIT) {
			cmn_plan_done(m->plan, u);
			*r = (uint32_t)u;
			return 0;
		}
		if (rc == CMN_PLAN_NOMEM)
			return -ENOMEM;
		if (rc != CMN_PLAN_END || cmn_plan_roll(m->plan) != 0)
			break; /* WAIT cannot happen: nothing is ever in flight here */
	}
	/* a whole pass found nothing: the caller checked there is room */
	return -ENOMEM;
}

/* Admits one shard of up to k records created in `epoch`.  Returns its record count, or -ENOMEM. */
static int64_t admit_shard(struct sim *m, uint32_t epoch, uint64_t record_size)
{
	uint64_t free_recs = m->n_records - m->n_resident;
	uint32_t k = m->per_shard;
	if (free_recs == 0)
		return 0; /* the whole dataset is resident */
	if (k > free_recs)
		k = (uint32_t)free_recs;
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 64;
		struct evc_shard *st = realloc(m->st, nc * sizeof(*st));
		if (!st)
			return -ENOMEM;
		m->st = st;
		uint32_t **recs = realloc(m->recs, nc * sizeof(*recs));
		if (!recs)
			return -ENOMEM;
		m->recs = recs;
		m->cap = nc;
	}
	uint32_t *rv = malloc(((size_t)k + 1) * sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv[0] = k; /* rv[0] is the count, rv[1..k] the records */
	for (uint32_t i = 0; i < k; i++) {
		uint32_t r;
		if (next_record(m, &r) != 0) {
			free(rv);
			return -ENOMEM;
		}
		cmn_plan_set_resident(m->plan, r, true);
		rv[i + 1] = r;
	}
	m->n_resident += k;
	struct evc_shard *s = &m->st[m->n];
	memset(s, 0, sizeof(*s));
	s->id = m->next_id++;
	s->bytes = (uint64_t)k * record_size;
	s->created = epoch;
	s->fresh = true; /* until the next view fixes it in (evc_sim_run) */
	s->last_use = ++m->tick;
	m->recs[m->n] = rv;
	m->n++;
	return k;
}

/* Reads shard i to the end.  Returns the records seen for the first time. */
static uint64_t read_shard(struct sim *m, size_t i)
{
	uint64_t fresh = 0;
	uint32_t *rv = m->recs[i];
	for (uint32_t j = 1; j <= rv[0]; j++)
		if (!bit(m->seen, rv[j])) {
			set_bit(m->seen, rv[j], 1);
			fresh++;
		}
	m->st[i].reads++;
	m->st[i].full_reads++;
	m->st[i].last_use = ++m->tick;
	return fresh;
}

/* The records rv[1..rv[0]] of a shard that goes are no longer resident. */
static void leave(struct sim *m, const uint32_t *rv)
{
	for (uint32_t j = 1; j <= rv[0]; j++)
		cmn_plan_set_resident(m->plan, rv[j], false);
	m->n_resident -= rv[0];
}

/* Removes the victims (indices into st) and fills the row's eviction counts. */
static void evict(struct sim *m, const size_t *victims, size_t nv, struct evc_sim_row *row)
{
	char *gone = calloc(m->n ? m->n : 1, 1);
	for (size_t i = 0; i < nv; i++) {
		size_t v = victims[i];
		uint32_t *rv = m->recs[v];
		leave(m, rv);
		row->evicted_records += rv[0];
		if (m->st[v].full_reads == 0)
			row->evicted_unread += rv[0];
		free(rv);
		m->recs[v] = NULL;
		if (gone)
			gone[v] = 1;
	}
	size_t w = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (gone ? gone[i] : m->recs[i] == NULL)
			continue;
		m->st[w] = m->st[i];
		m->recs[w] = m->recs[i];
		w++;
	}
	m->n = w;
	free(gone);
}

static void sim_free(struct sim *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->recs[i]);
	free(m->recs);
	free(m->st);
	cmn_plan_free(m->plan);
	free(m->seen);
}

int evc_sim_run(const struct evc_sim_opts *o, const struct evc_schedule *s,
		struct evc_sim_row *rows, char *err, size_t errlen)
{
	struct sim m;
	size_t *victims = NULL, *events = NULL;
	char *retiring = NULL; /* retire_read: view index -> victim of this epoch */
	int rc = -EINVAL;

	memset(&m, 0, sizeof(m));
	if (o->record_size == 0 || o->dataset < o->record_size) {
		snprintf(err, errlen, "--dataset must hold at least one record of --record-size");
		return -EINVAL;
	}
	uint64_t nr = o->dataset / o->record_size;
	if (nr > EVC_SIM_MAX_RECORDS) {
		snprintf(err, errlen,
			 "--dataset / --record-size = %llu records; the simulator handles at most "
			 "%u: use a larger --record-size",
			 (unsigned long long)nr, EVC_SIM_MAX_RECORDS);
		return -EINVAL;
	}
	uint64_t k = o->shard_size / o->record_size;
	if (k == 0)
		k = 1;
	if (k > nr)
		k = nr;
	m.n_records = (uint32_t)nr;
	m.per_shard = (uint32_t)k;
	m.rng = o->seed;
	m.next_id = 1;

	rc = -ENOMEM;
	m.seen = calloc(nr / 8 + 1, 1);
	if (!m.seen || cmn_plan_new(&m.plan, nr, o->seed) != 0)
		goto nomem;

	uint64_t shard_bytes = k * o->record_size;
	uint64_t distinct = 0, downloaded = 0, wasted = 0;
	for (uint32_t e = 0; e < o->epochs; e++) {
		struct evc_sim_row *row = &rows[e];
		const struct evc_entry *ent = evc_schedule_at(s, o->first + e);
		memset(row, 0, sizeof(*row));
		row->epoch = o->first + e;
		row->entry = *ent;
		row->dataset_records = nr;

		uint64_t budget;
		if (e == 0) {
			/* Pre-warm: entry(0).admit, then epoch 0 may admit up to the limit. */
			uint64_t pre = ent->admit < ent->limit ? ent->admit : ent->limit;
			for (uint64_t b = 0; b + shard_bytes <= pre; b += shard_bytes) {
				int64_t got = admit_shard(&m, 0, o->record_size);
				if (got < 0)
					goto nomem;
				if (got == 0)
					break;
				downloaded += (uint64_t)got;
			}
			uint64_t used = m.n_resident * o->record_size;
			uint64_t room = ent->limit > used ? ent->limit - used : 0;
			budget = room < ent->admit ? room : ent->admit;
		} else {
			struct evc_plan plan;
			free(victims);
			victims = malloc((m.n ? m.n : 1) * sizeof(*victims));
			if (!victims)
				goto nomem;
			/* room only for what the plan will fetch (DESIGN "Epochs" step 2) */
			struct evc_entry capped = *ent;
			uint64_t want = (m.n_records - m.n_resident) * o->record_size;
			if (want < capped.admit)
				capped.admit = want;
			rc = evc_plan_boundary(&capped, e, m.st, m.n, 0, victims, &plan);
			if (rc < 0)
				goto nomem;
			if (o->retire_read) { /* they leave once read, during the epoch */
				free(retiring);
				retiring = calloc(m.n ? m.n : 1, 1);
				if (!retiring)
					goto nomem;
				for (size_t i = 0; i < plan.n_victims; i++)
					retiring[victims[i]] = 1;
			} else {
				evict(&m, victims, plan.n_victims, row);
			}
			budget = plan.admit;
			row->reason = plan.reason;
			memcpy(row->why, plan.why, sizeof(row->why));
		}
		row->bound = downloaded < nr ? downloaded : nr;
		row->budget = budget;
		for (size_t i = 0; i < m.n; i++) /* the view of e: every resident shard */
			m.st[i].fresh = false;

		/* The epoch: n_view reads and n_fresh admissions, interleaved. */
		size_t n_view = m.n;
		uint64_t n_fresh = budget / shard_bytes;
		row->resident_records = m.n_resident;
		row->resident_bytes = m.n_resident * o->record_size;
		free(events);
		events = malloc((n_view + n_fresh + 1) * sizeof(*events));
		if (!events)
			goto nomem;
		size_t ne = 0;
		for (size_t i = 0; i < n_view; i++)
			events[ne++] = i;
		for (uint64_t i = 0; i < n_fresh; i++)
			events[ne++] = SIZE_MAX;
		for (size_t i = ne; i > 1; i--) {
			size_t j = (size_t)rnd_below(&m, i);
			size_t t = events[i - 1];
			events[i - 1] = events[j];
			events[j] = t;
		}
		/*
		 * View shards keep their indices: admissions only append.  With
		 * retire_read, a victim leaves after its read (marked in `gone`,
		 * removed at the end of the epoch) and an admission without room
		 * waits for the next one to leave.
		 */
		uint64_t pending = 0, limit_recs = ent->limit / o->record_size;
		char *gone = o->retire_read ? calloc(n_view ? n_view : 1, 1) : NULL;
		if (o->retire_read && !gone)
			goto nomem;
		for (size_t i = 0; i <= ne; i++) {
			if (i < ne && events[i] != SIZE_MAX) {
				size_t v = events[i];
				distinct += read_shard(&m, v);
				if (retiring && retiring[v]) {
					uint32_t *rv = m.recs[v];
					leave(&m, rv);
					row->evicted_records += rv[0];
					gone[v] = 1;
				}
			} else if (i < ne) {
				pending++;
			}
			while (pending &&
			       (!o->retire_read || m.n_resident + m.per_shard <= limit_recs)) {
				int64_t got = admit_shard(&m, e, o->record_size);
				if (got < 0) {
					free(gone);
					goto nomem;
				}
				pending--;
				row->fresh_records += (uint64_t)got;
				downloaded += (uint64_t)got;
			}
		}
		if (gone) { /* the retired victims leave the shard list */
			size_t w = 0;
			for (size_t i = 0; i < m.n; i++) {
				if (i < n_view && gone[i]) {
					free(m.recs[i]);
					continue;
				}
				m.st[w] = m.st[i];
				m.recs[w] = m.recs[i];
				w++;
			}
			m.n = w;
			free(gone);
		}
		free(retiring);
		retiring = NULL;
		wasted += row->evicted_unread;
		row->distinct = distinct;
		row->downloaded_records = downloaded;
		row->downloaded_bytes = downloaded * o->record_size;
		row->wasted_records = wasted;
	}
	free(victims);
	free(events);
	free(retiring);
	sim_free(&m);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory simulating %llu records", (unsigned long long)nr);
	free(victims);
	free(events);
	free(retiring);
	sim_free(&m);
	return -ENOMEM;
}
