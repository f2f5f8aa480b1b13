/*
 * plan.c - the sampling plan (see plan.h for the terms and the contract).
 *
 * Owns the permutation (a 4-round keyed Feistel network with cycle
 * walking), the taken/resident/dropped bitmaps, the walk and the set of
 * units in flight.  Does no I/O and knows nothing of objects, records or
 * SQL: the sampler maps units to remote bytes and persists the state.
 *
 * Invariants (DESIGN 8, in the planner's terms):
 *   P1  a unit is returned (next or take) at most once per pass: returning
 *       it sets its taken bit, and only cmn_plan_roll() clears taken bits;
 *   P2  a resident or dropped unit is never returned;
 *   P3  a pass ends only when the walk has passed every position and
 *       nothing is in flight, so every unit not resident was returned once;
 *   P4  every position below the cursor holds a taken unit that is not in
 *       flight (what a restore may rely on).
 * Threads: none of its own; a plan is used by one thread at a time.
 */
#include "common/plan.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the permutation ---------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void cmn_perm_init(struct cmn_perm *k, uint64_t n, uint64_t seed)
{
	unsigned bits = 2;
	while (bits < 64 && ((uint64_t)1 << bits) < n)
		bits++;
	k->n = n;
	k->hi = bits / 2;
	k->lo = bits - k->hi;
	uint64_t s = seed;
	for (int r = 0; r < 4; r++) {
		s += 0x9e3779b97f4a7c15ull;
		k->key[r] = mix64(s);
	}
}

static uint64_t mask_of(unsigned bits)
{
	return ((uint64_t)1 << bits) - 1;
}

/*
 * An unbalanced Feistel network over hi + lo bits (hi <= lo <= hi + 1):
 * a round maps (l: hb bits, r: lb bits) to (r, l ^ F(r)), so the halves
 * swap sizes each round and come back after the 4 rounds.  The domain is
 * under 2n, so cycle walking takes fewer than 2 rounds of it on average.
 */
static uint64_t feistel(const struct cmn_perm *k, uint64_t x)
{
	unsigned hb = k->hi, lb = k->lo;
	uint64_t l = x >> lb, r = x & mask_of(lb);
	for (int i = 0; i < 4; i++) {
		uint64_t t = l ^ (mix64(r ^ k->key[i]) & mask_of(hb));
		l = r;
		r = t;
		unsigned b = hb;
		hb = lb;
		lb = b;
	}
	return (l << lb) | r;
}

static uint64_t feistel_inv(const struct cmn_perm *k, uint64_t x)
{
	unsigned hb = k->hi, lb = k->lo;
	uint64_t l = x >> lb, r = x & mask_of(lb);
	for (int i = 3; i >= 0; i--) {
		/* before round i: l0 had lb bits now, r0 == l */
		uint64_t l0 = r ^ (mix64(l ^ k->key[i]) & mask_of(lb));
		r = l;
		l = l0;
		unsigned b = hb;
		hb = lb;
		lb = b;
	}
	return (l << lb) | r;
}

/*
 * Cycle walking: the network permutes [0, 2^(hi+lo)), a domain under 2n; the
 * values >= n are walked through until one lands in [0, n).  The walk ends
 * because the cycle through i returns to i < n.
 */
uint64_t cmn_perm_at(const struct cmn_perm *k, uint64_t i)
{
	if (k->n <= 1)
		return 0;
	uint64_t x = feistel(k, i);
	while (x >= k->n)
		x = feistel(k, x);
	return x;
}

uint64_t cmn_perm_index(const struct cmn_perm *k, uint64_t x)
{
	if (k->n <= 1)
		return 0;
	uint64_t i = feistel_inv(k, x);
	while (i >= k->n)
		i = feistel_inv(k, i);
	return i;
}

/* ---- the plan ----------------------------------------------------------- */

#define EMPTY 0u
#define AHEAD 16 /* positions whose bits the walk prefetches */
#define GRAVE UINT64_MAX

struct cmn_plan {
	uint64_t n, seed, pass, gen;
	struct cmn_perm perm;
	uint64_t walk;					    /* next position to look at */
	uint64_t fetched;				    /* units returned in this pass */
	uint64_t ring_pos[AHEAD * 2], ring_unit[AHEAD * 2]; /* perm of positions ahead */
	uint64_t *bits;	   /* [2 * words]: taken word, resident word, ... */
	uint64_t *dropped; /* [words], NULL until a unit is dropped */
	size_t words;
	/* units in flight: open addressing, unit + 1 stored, GRAVE deleted */
	uint64_t *fl;
	size_t fl_cap, fl_used, fl_n;
};

static size_t words_for(uint64_t n)
{
	return (size_t)((n + 63) / 64);
}

/*
 * The taken and resident words of 64 units sit side by side, so that the
 * walk's two tests of a random unit cost one cache miss.
 */
#define TAKEN	 0
#define RESIDENT 1

static bool bit2(const struct cmn_plan *p, int which, uint64_t u)
{
	return (p->bits[2 * (u >> 6) + which] >> (u & 63)) & 1;
}

static void set2(struct cmn_plan *p, int which, uint64_t u)
{
	p->bits[2 * (u >> 6) + which] |= (uint64_t)1 << (u & 63);
}

static void clear2(struct cmn_plan *p, int which, uint64_t u)
{
	p->bits[2 * (u >> 6) + which] &= ~((uint64_t)1 << (u & 63));
}

static bool dropped(const struct cmn_plan *p, uint64_t u)
{
	return p->dropped && (p->dropped[u >> 6] >> (u & 63)) & 1;
}

static void rekey(struct cmn_plan *p)
{
	memset(p->ring_pos, 0, sizeof(p->ring_pos)); /* positions of the old key */
	cmn_perm_init(&p->perm, p->n, mix64(p->seed + p->pass) ^ mix64(~p->gen));
}

static size_t fl_slot(uint64_t u, size_t cap)
{
	return (size_t)(mix64(u) & (cap - 1));
}

static int fl_grow(struct cmn_plan *p)
{
	size_t cap = p->fl_cap ? p->fl_cap * 2 : 64;
	if (p->fl_n * 4 < p->fl_cap)
		cap = p->fl_cap; /* many graves: rehash in place */
	uint64_t *nv = calloc(cap, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	for (size_t i = 0; i < p->fl_cap; i++) {
		uint64_t v = p->fl[i];
		if (v == EMPTY || v == GRAVE)
			continue;
		size_t j = fl_slot(v, cap);
		while (nv[j] != EMPTY)
			j = (j + 1) & (cap - 1);
		nv[j] = v;
	}
	free(p->fl);
	p->fl = nv;
	p->fl_cap = cap;
	p->fl_used = p->fl_n;
	return 0;
}

/* Adds u to the in-flight set.  0 or -ENOMEM (set unchanged). */
static int fl_add(struct cmn_plan *p, uint64_t u)
{
	if ((p->fl_used + 1) * 4 > p->fl_cap * 3) {
		int rc = fl_grow(p);
		if (rc)
			return rc;
	}
	size_t j = fl_slot(u + 1, p->fl_cap);
	while (p->fl[j] != EMPTY && p->fl[j] != GRAVE)
		j = (j + 1) & (p->fl_cap - 1);
	if (p->fl[j] == EMPTY)
		p->fl_used++;
	p->fl[j] = u + 1;
	p->fl_n++;
	return 0;
}

static bool fl_del(struct cmn_plan *p, uint64_t u)
{
	if (!p->fl_cap)
		return false;
	size_t j = fl_slot(u + 1, p->fl_cap);
	while (p->fl[j] != EMPTY) {
		if (p->fl[j] == u + 1) {
			p->fl[j] = GRAVE;
			p->fl_n--;
			return true;
		}
		j = (j + 1) & (p->fl_cap - 1);
	}
	return false;
}

#ifndef NDEBUG
static bool fl_has(const struct cmn_plan *p, uint64_t u)
{
	if (!p->fl_cap)
		return false;
	size_t j = fl_slot(u + 1, p->fl_cap);
	while (p->fl[j] != EMPTY) {
		if (p->fl[j] == u + 1)
			return true;
		j = (j + 1) & (p->fl_cap - 1);
	}
	return false;
}

/*
 * The invariants of the file comment, checked at every move in debug
 * builds (as SQLite's assert_pager_state): P1 and P2 for the unit a move
 * returns, P4 for the positions below the cursor (up to PLAN_CHECK_MAX of
 * them, the ones nearest the cursor: a check that walked 10^9 positions at
 * every move would be no check anyone runs).  P3 is checked where a pass
 * ends (cmn_plan_next's END).
 */
#define PLAN_CHECK_MAX 4096

static bool plan_returnable(const struct cmn_plan *p, uint64_t u)
{
	/* P1: not taken yet in this pass; P2: neither resident nor dropped */
	return !bit2(p, TAKEN, u) && !bit2(p, RESIDENT, u) && !dropped(p, u);
}

static bool plan_settled_below(const struct cmn_plan *p, uint64_t cursor)
{
	uint64_t from = cursor > PLAN_CHECK_MAX ? cursor - PLAN_CHECK_MAX : 0;
	for (uint64_t i = from; i < cursor; i++) { /* P4 */
		uint64_t u = cmn_perm_at(&p->perm, i);
		if (!bit2(p, TAKEN, u) || fl_has(p, u))
			return false;
	}
	return true;
}
#endif

int cmn_plan_new(struct cmn_plan **out, uint64_t n, uint64_t seed)
{
	if (n > CMN_PLAN_MAX_UNITS)
		return -EINVAL;
	struct cmn_plan *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->n = n;
	p->seed = seed;
	p->words = words_for(n);
	p->bits = calloc(2 * (p->words ? p->words : 1), sizeof(uint64_t));
	if (!p->bits) {
		cmn_plan_free(p);
		return -ENOMEM;
	}
	rekey(p);
	*out = p;
	return 0;
}

int cmn_plan_restore(struct cmn_plan **out, const struct cmn_plan_state *st, const uint8_t *taken,
		     size_t taken_len, const uint64_t *marks, size_t nmarks)
{
	if (st->cursor > st->n || (taken && taken_len < (st->n + 7) / 8))
		return -EINVAL;
	for (size_t i = 0; i < nmarks; i++)
		if (marks[i] >= st->n)
			return -EINVAL;
	struct cmn_plan *p;
	int rc = cmn_plan_new(&p, st->n, st->seed);
	if (rc)
		return rc;
	p->pass = st->pass;
	p->gen = st->gen;
	p->walk = st->cursor;
	rekey(p);
	if (taken)
		for (uint64_t u = 0; u < st->n; u++)
			if ((taken[u >> 3] >> (u & 7)) & 1)
				set2(p, TAKEN, u);
	for (size_t i = 0; i < nmarks; i++)
		set2(p, TAKEN, marks[i]);
	*out = p;
	return 0;
}

void cmn_plan_free(struct cmn_plan *p)
{
	if (!p)
		return;
	free(p->bits);
	free(p->dropped);
	free(p->fl);
	free(p);
}

void cmn_plan_get_state(const struct cmn_plan *p, struct cmn_plan_state *st)
{
	uint64_t cursor = p->walk;
	for (size_t i = 0; i < p->fl_cap && p->fl_n; i++) {
		uint64_t v = p->fl[i];
		if (v == EMPTY || v == GRAVE)
			continue;
		uint64_t pos = cmn_perm_index(&p->perm, v - 1);
		if (pos < cursor)
			cursor = pos;
	}
	assert(cursor <= p->n && plan_settled_below(p, cursor)); /* P4 */
	*st = (struct cmn_plan_state){p->n, p->seed, p->pass, p->gen, cursor};
}

void cmn_plan_export_taken(const struct cmn_plan *p, uint8_t *buf)
{
	size_t len = (size_t)((p->n + 7) / 8);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(p->bits[2 * (i / 8) + TAKEN] >> (8 * (i % 8)));
	for (size_t i = 0; i < p->fl_cap && p->fl_n; i++) {
		uint64_t v = p->fl[i];
		if (v != EMPTY && v != GRAVE)
			buf[(v - 1) >> 3] &= (uint8_t) ~(1u << ((v - 1) & 7));
	}
}

uint64_t cmn_plan_units(const struct cmn_plan *p)
{
	return p->n;
}

uint64_t cmn_plan_pass(const struct cmn_plan *p)
{
	return p->pass;
}

uint64_t cmn_plan_fetched_in_pass(const struct cmn_plan *p)
{
	return p->fetched;
}

void cmn_plan_set_resident(struct cmn_plan *p, uint64_t u, bool resident)
{
	if (u >= p->n)
		return;
	if (resident)
		set2(p, RESIDENT, u);
	else
		clear2(p, RESIDENT, u);
}

bool cmn_plan_is_resident(const struct cmn_plan *p, uint64_t u)
{
	return u < p->n && bit2(p, RESIDENT, u);
}

void cmn_plan_clear_resident(struct cmn_plan *p)
{
	for (size_t w = 0; w < p->words; w++)
		p->bits[2 * w + RESIDENT] = 0;
}

static bool unavailable(const struct cmn_plan *p, uint64_t u)
{
	return bit2(p, TAKEN, u) || bit2(p, RESIDENT, u) || dropped(p, u);
}

/*
 * perm(i), from the ring when computed ahead; computes perm(i + AHEAD) and
 * prefetches its bits, so the walk's random accesses overlap.
 */
static uint64_t walk_unit(struct cmn_plan *p, uint64_t i)
{
	size_t k = (size_t)(i % (AHEAD * 2));
	uint64_t u = p->ring_pos[k] == i + 1 ? p->ring_unit[k] : cmn_perm_at(&p->perm, i);
	uint64_t j = i + AHEAD;
	if (j < p->n) {
		size_t kj = (size_t)(j % (AHEAD * 2));
		if (p->ring_pos[kj] != j + 1) {
			uint64_t v = cmn_perm_at(&p->perm, j);
			p->ring_pos[kj] = j + 1;
			p->ring_unit[kj] = v;
			__builtin_prefetch(&p->bits[2 * (v >> 6)]);
		}
	}
	return u;
}

enum cmn_plan_next_rc cmn_plan_next(struct cmn_plan *p, uint64_t *unit)
{
	while (p->walk < p->n) {
		uint64_t u = walk_unit(p, p->walk);
		if (bit2(p, TAKEN, u)) {
			p->walk++;
			continue;
		}
		if (bit2(p, RESIDENT, u) || dropped(p, u)) {
			set2(p, TAKEN, u); /* skipped in this pass (P2) */
			p->walk++;
			continue;
		}
		if (fl_add(p, u))
			return CMN_PLAN_NOMEM; /* nothing changed: the unit is not taken */
		assert(plan_returnable(p, u)); /* P1, P2 */
		set2(p, TAKEN, u);
		p->walk++;
		p->fetched++;
		*unit = u;
		return CMN_PLAN_UNIT;
	}
	/* P3: the pass ends with the walk past every position, nothing in flight */
	assert(p->walk == p->n && (p->fl_n || plan_settled_below(p, p->n)));
	return p->fl_n ? CMN_PLAN_WAIT : CMN_PLAN_END;
}

bool cmn_plan_take(struct cmn_plan *p, uint64_t u)
{
	if (u >= p->n || unavailable(p, u))
		return false;
	if (fl_add(p, u))
		return false;
	assert(plan_returnable(p, u)); /* P1, P2 */
	set2(p, TAKEN, u);
	p->fetched++;
	return true;
}

void cmn_plan_done(struct cmn_plan *p, uint64_t u)
{
	fl_del(p, u);
}

int cmn_plan_roll(struct cmn_plan *p)
{
	if (p->fl_n)
		return -EBUSY;
	for (size_t w = 0; w < p->words; w++)
		p->bits[2 * w + TAKEN] = 0;
	p->pass++;
	p->gen = 0;
	p->walk = 0;
	p->fetched = 0;
	rekey(p);
	return 0;
}

static int grow_words(uint64_t **v, size_t old, size_t nw)
{
	if (!*v)
		return 0;
	uint64_t *nv = realloc(*v, nw * sizeof(uint64_t));
	if (!nv)
		return -ENOMEM;
	memset(nv + old, 0, (nw - old) * sizeof(uint64_t));
	*v = nv;
	return 0;
}

int cmn_plan_grow(struct cmn_plan *p, uint64_t n2)
{
	if (n2 < p->n || n2 > CMN_PLAN_MAX_UNITS)
		return -EINVAL;
	if (n2 == p->n)
		return 0;
	size_t nw = words_for(n2);
	if (nw > p->words) {
		if (grow_words(&p->bits, 2 * p->words, 2 * nw) ||
		    grow_words(&p->dropped, p->words, nw))
			return -ENOMEM; /* the grown ones are only longer: nothing changed */
		p->words = nw;
	}
	p->n = n2;
	p->gen++;
	p->walk = 0; /* the taken bits keep what this pass already took */
	rekey(p);
	return 0;
}

int cmn_plan_drop(struct cmn_plan *p, uint64_t u)
{
	if (u >= p->n)
		return 0;
	if (!p->dropped) {
		p->dropped = calloc(p->words ? p->words : 1, sizeof(uint64_t));
		if (!p->dropped)
			return -ENOMEM;
	}
	p->dropped[u >> 6] |= (uint64_t)1 << (u & 63);
	return 0;
}

size_t cmn_plan_memory(const struct cmn_plan *p)
{
	size_t w = p->words * sizeof(uint64_t);
	return sizeof(*p) + 2 * w + (p->dropped ? w : 0) + p->fl_cap * sizeof(uint64_t);
}
