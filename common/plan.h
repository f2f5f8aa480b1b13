/*
 * plan.h - the sampling plan (DESIGN "Sampling", invariant 8), pure: no
 * I/O, no SQL, no locks.  The sampler (sampler/) runs it against a real
 * store and persists its state in the catalog; `rollcache simulate` runs
 * the same planner over a model store.
 *
 * Terms.
 *   unit      what is fetched once per pass: a record (strategy=records),
 *             or an object (strategy=objects, format=raw).  Units are
 *             numbered 0..n-1 by the caller; numbers are stable (a relist
 *             appends new units, it never renumbers).
 *   pass      p = 0, 1, 2, ...: one walk over a permutation of the units,
 *             seeded by seed + p (and the relist generation, below).
 *   position  index in the pass's permutation; perm(position) = unit.
 *   walk      the next position the planner looks at.
 *   taken     a unit is taken in this pass once the walk returned it for
 *             fetching, or skipped it because it was resident or dropped,
 *             or cmn_plan_take() took it out of order.  A taken unit is
 *             never returned again in the same pass.
 *   in flight a unit returned for fetching and not yet cmn_plan_done().
 *   resident  set by the caller: the unit is in the cache.  A resident
 *             unit is never returned; the walk marks it taken (skipped).
 *   dropped   a unit that no longer exists (the relist did not see it):
 *             never returned again, in any pass.
 *   cursor    the first position whose unit is in flight, or the walk when
 *             nothing is: every position below it is settled.  This is what
 *             the caller persists together with the taken bits.
 *
 * State and memory: one bit per unit for `taken`, one for `resident`, a
 * third only once a unit was dropped, plus a hash set of the units in
 * flight (bounded by the caller's window).  The permutation is a keyed
 * Feistel network over the next power of two >= n with cycle walking,
 * so it is evaluated (and inverted) in O(1) without being stored.
 *
 * Pass roll-over: when the walk reaches n and nothing is in flight,
 * cmn_plan_next() answers CMN_PLAN_END; the caller persists what it has
 * and calls cmn_plan_roll(), which starts pass p + 1 with no unit taken.
 * When the walk reaches n while units are in flight it answers
 * CMN_PLAN_WAIT (the pass ends only once they are done, so a unit is never
 * in flight in two passes).
 *
 * Relist: cmn_plan_grow(p, n2) appends units n..n2-1.  The permutation is
 * re-keyed (generation + 1) over n2 units and the walk starts again at
 * position 0 skipping taken units, so the new units fall at uniformly
 * random places among the units not yet taken in this pass.
 *
 * Threads: a plan is used by one thread at a time.
 */
#ifndef RC_COMMON_PLAN_H
#define RC_COMMON_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMN_PLAN_MAX_UNITS ((uint64_t)1 << 40) /* hard cap on n */

/* ---- the permutation ---------------------------------------------------- */

/* A keyed bijection of [0, n).  Plain data: copy it freely. */
struct cmn_perm {
	uint64_t n;
	unsigned hi, lo; /* bits of the Feistel halves */
	uint64_t key[4]; /* round keys */
};

/* Keys a permutation of [0, n) with `seed`.  Same (n, seed), same permutation. */
void cmn_perm_init(struct cmn_perm *k, uint64_t n, uint64_t seed);
/* The unit at position i (i < n). */
uint64_t cmn_perm_at(const struct cmn_perm *k, uint64_t i);
/* The position of unit x (x < n): cmn_perm_at(k, cmn_perm_index(k, x)) == x. */
uint64_t cmn_perm_index(const struct cmn_perm *k, uint64_t x);

/* ---- the plan ----------------------------------------------------------- */

struct cmn_plan;

/* What a plan persists (cmn_plan_get_state / cmn_plan_restore). */
struct cmn_plan_state {
	uint64_t n;	 /* units */
	uint64_t seed;	 /* the plan's seed; pass p is keyed by seed + p */
	uint64_t pass;	 /* p */
	uint64_t gen;	 /* relists (cmn_plan_grow) since the pass began */
	uint64_t cursor; /* see the terms above */
};

/*
 * A fresh plan: n units, pass 0, nothing taken, nothing resident.
 * Returns 0 and *out, -EINVAL (n > CMN_PLAN_MAX_UNITS) or -ENOMEM.
 */
int cmn_plan_new(struct cmn_plan **out, uint64_t n, uint64_t seed);

/*
 * A plan as persisted: st, and the taken bits of its pass (bit u of byte
 * u / 8, (n + 7) / 8 bytes; NULL: none taken), plus `marks` units taken
 * since (both may be NULL/0).  The walk resumes at st->cursor; every unit
 * taken before a crash is in taken[] or marks[], so it is not taken again.
 * Nothing is resident or in flight.  Returns 0 and *out, -EINVAL (a unit
 * >= n, a cursor > n, a short bitmap) or -ENOMEM.
 */
int cmn_plan_restore(struct cmn_plan **out, const struct cmn_plan_state *st, const uint8_t *taken,
		     size_t taken_len, const uint64_t *marks, size_t nmarks);

/* Frees p.  NULL is ignored. */
void cmn_plan_free(struct cmn_plan *p);

/* The state to persist now: cursor is the first unsettled position. */
void cmn_plan_get_state(const struct cmn_plan *p, struct cmn_plan_state *st);

/*
 * Writes the taken bits of the units that are settled (taken and not in
 * flight) into buf, which has (n + 7) / 8 bytes.  With the state, this is
 * everything cmn_plan_restore needs.
 */
void cmn_plan_export_taken(const struct cmn_plan *p, uint8_t *buf);

/* Units, the pass number, units returned for fetching in this pass. */
uint64_t cmn_plan_units(const struct cmn_plan *p);
uint64_t cmn_plan_pass(const struct cmn_plan *p);
uint64_t cmn_plan_fetched_in_pass(const struct cmn_plan *p);

/* Resident bits (u < n; others ignored / false). */
void cmn_plan_set_resident(struct cmn_plan *p, uint64_t u, bool resident);
bool cmn_plan_is_resident(const struct cmn_plan *p, uint64_t u);
/* Clears every resident bit (before the caller re-reads the store). */
void cmn_plan_clear_resident(struct cmn_plan *p);

/* Answers of cmn_plan_next. */
enum cmn_plan_next_rc {
	CMN_PLAN_UNIT = 0,  /* *unit is the next unit to fetch (now in flight) */
	CMN_PLAN_WAIT = 1,  /* the walk is at the end; units are still in flight */
	CMN_PLAN_END = 2,   /* the pass is over: cmn_plan_roll() starts the next */
	CMN_PLAN_NOMEM = 3, /* out of memory for the in-flight set: nothing changed */
};

/*
 * The next unit of the permutation that is neither taken, resident nor
 * dropped; resident and dropped units passed on the way become taken
 * (skipped in this pass).  The returned unit is taken and in flight.
 */
enum cmn_plan_next_rc cmn_plan_next(struct cmn_plan *p, uint64_t *unit);

/*
 * Takes unit u out of order (the caller fetches it together with a unit
 * cmn_plan_next returned, e.g. its neighbour in the same object).  Returns
 * true when u was free (not taken, resident nor dropped): it is now taken
 * and in flight; false otherwise (nothing changes).
 */
bool cmn_plan_take(struct cmn_plan *p, uint64_t u);

/*
 * Unit u's fetch is over (admitted, or failed: either way it stays taken
 * for this pass).  Unknown units are ignored.
 */
void cmn_plan_done(struct cmn_plan *p, uint64_t u);

/*
 * Starts pass p + 1: nothing taken, the walk at 0, generation 0.  Resident
 * and dropped bits stay.  Returns 0, or -EBUSY while units are in flight.
 */
int cmn_plan_roll(struct cmn_plan *p);

/*
 * A relist found units n..n2-1 (n2 >= n): they join this pass at random
 * places among the units not yet taken (see the file comment).  Units in
 * flight stay in flight.  Returns 0, -EINVAL (n2 < n or over the cap) or
 * -ENOMEM (nothing changed).
 */
int cmn_plan_grow(struct cmn_plan *p, uint64_t n2);

/* Unit u no longer exists: never returned again.  Returns 0 or -ENOMEM. */
int cmn_plan_drop(struct cmn_plan *p, uint64_t u);

/* Heap bytes held by p (bitmaps and the in-flight set), for the bench. */
size_t cmn_plan_memory(const struct cmn_plan *p);

#endif
