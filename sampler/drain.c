/*
 * drain.c - the shuffle drain: records leaving the shuffle buffer go into
 * the shard being filled, under the byte budget.
 *
 * Owns the path of a record from the shuffle buffer's sink to
 * cfs_shard_writer_append(), and the waiting for room in the budget.  Does
 * not seal shards (seal.c), decode objects (reader.c) or run transfers
 * (fetch.c, dispatch.c).
 *
 * Invariants: DESIGN 4 (every byte is reserved before it is written: room
 * comes from cfs_shard_writer_reserve/try_reserve), DESIGN 5 (only records
 * that passed their CRC reach the shuffle buffer, so only they are written).
 * Threads: the sampler's thread only; smp__write_record() may run inside a
 * transfer callback (may_block false: it must not sleep, see smp__get_room).
 */
#include "sampler/sampler_i.h"

#include <errno.h>

#include "cachefs/shard_writer.h"
#include "common/log.h"

/* Bytes the budget would grant now (under both limit and admit). */
uint64_t smp__budget_avail(struct cfs_budget *b)
{
	struct cfs_budget_stat st;
	cfs_budget_get(b, &st);
	uint64_t used = st.reserved + st.sealed + st.draining;
	uint64_t room = st.limit > used ? st.limit - used : 0;
	if (st.admit != CFS_BUDGET_UNLIMITED) {
		uint64_t a = st.admit > st.admit_used ? st.admit - st.admit_used : 0;
		room = a < room ? a : room;
	}
	return room;
}

/*
 * Gets `need` bytes of room in writer w: a chunk ahead when possible, else
 * exactly what is needed; waits for room unless stop_when_full.  Before it
 * sleeps it seals the sampler's partial shard, so w may then be replaced
 * by a new writer: callers go on with s->w.  Returns 0, -ENOSPC (full,
 * stop_when_full), -EFBIG (can never fit), -ECANCELED.
 */
int smp__get_room(struct smp_sampler *s, struct cfs_shard_writer *w, uint64_t need, uint64_t ahead,
		  bool may_block)
{
	uint64_t room = cfs_shard_writer_room(w);
	if (room >= need)
		return 0;
	if (ahead > need && cfs_shard_writer_try_reserve(w, ahead - room) == 0)
		return 0;
	int rc = cfs_shard_writer_try_reserve(w, need - room);
	if (rc != -EAGAIN)
		return rc;
	if (s->stop_when_full) {
		s->full = true;
		return -ENOSPC;
	}
	if (smp__pause_wanted(s))
		return -EWOULDBLOCK; /* a boundary: the run loop pauses first, this waits after */
	if (!may_block && smp_source_scheme(s->source) != SMP_SCHEME_FILE) {
		/*
		 * Inside a transfer callback: do not sleep here (every transfer
		 * would stall).  Hold the transfers (they pause, keeping their
		 * data) and let the fetch loop wait for room (smp__wait_for_room, from dispatch.c).
		 * file:// transfers (read on this thread: fetch.c, run_local)
		 * stall no server: they wait right here.
		 */
		s->need_room = true;
		s->room_need = need;
		smp_fetch_hold(s->fetch, true);
		return -EWOULDBLOCK;
	}
	/*
	 * About to sleep for room, perhaps until the next epoch boundary: seal
	 * what the current shard holds first, so that its records are in the
	 * next snapshot instead of waiting, unsealed, with the sampler.
	 */
	if (w == s->w && cfs_shard_writer_records(w) > 0) {
		rc = smp__seal_current(s);
		if (rc == 0)
			rc = smp__open_shard(s);
		if (rc)
			return rc;
		w = s->w;
		room = cfs_shard_writer_room(w);
		if (room >= need)
			return 0;
	}
	SMP_STAT_ADD(&s->stats, budget_waits, 1);
	/* sleeps on the budget's condition variable; re-waits until stopped or paused */
	while (!atomic_load(&s->stop)) {
		rc = cfs_shard_writer_reserve(w, need - room, s->room_wait_ms);
		if (rc != -ETIMEDOUT)
			return rc;
		if (smp__pause_wanted(s))
			return -EWOULDBLOCK; /* the run loop pauses, then waits again */
	}
	return -ECANCELED;
}

/* The unit of a run that record r is (by its offset in the object). */
static uint64_t run_unit(const struct smp__job *j, const struct smp_rec *r)
{
	for (uint32_t i = 0; i < j->nunits; i++)
		if (j->run[i].off == r->object_offset)
			return i;
	return UINT64_MAX;
}

/*
 * Writes one shuffled record into the current shard (opening/sealing
 * shards), with room its job reserved before it was fetched, and tells the
 * plan when a unit is complete: a record of a run at once (its mark goes
 * into this shard's commit), a whole object with its last record.
 */
int smp__write_record(const struct smp_rec *r, void *ctx)
{
	struct smp_sampler *s = ctx;
	struct smp__job *j = r->job;
	uint64_t need = cfs_shard_writer_record_bytes(r->len);
	int rc;

	if (s->fatal)
		return -ENOSPC;
	if (s->w && cfs_shard_writer_records(s->w) > 0 &&
	    cfs_shard_writer_bytes(s->w) + need > s->shard_cap) {
		rc = smp__seal_current(s);
		if (rc)
			return rc;
	}
	if (!s->w && s->first_shard && s->first_opened) {
		/* the first shard went to the sealer (above, at a pause or a wait for room) */
		s->first_shard = false;
		s->shard_cap = s->cfg->shard_size;
		smp_shuffle_set_cap(s->shuf, s->shard_cap < SMP_SHUFFLE_MAX_BYTES
						 ? (size_t)s->shard_cap
						 : SMP_SHUFFLE_MAX_BYTES);
	}
	if (!s->w && s->first_shard)
		s->first_opened = true;
	rc = smp__open_shard(s);
	if (rc)
		return rc;
	/*
	 * The record's room was reserved by its job before its bytes were
	 * fetched (first room, grants): it moves to the writer with the record,
	 * whatever room the writer has, so that no byte is reserved twice - a
	 * job's reserve left over while the writer spends room of its own would
	 * hold the budget until the job ends, and at a full cache the samplers
	 * would wait with records unsealed (the next epoch's admit then goes to
	 * this one's data).  Room ahead is reserved only for records without
	 * a job reserve (ingest's whole units are reserved up front; compressed
	 * objects).
	 */
	uint64_t take = 0;
	if (j && j->reserve) {
		take = need < j->reserve ? need : j->reserve;
		cfs_shard_writer_adopt(s->w, take);
		j->reserve -= take;
	}
	uint64_t left = s->shard_cap > cfs_shard_writer_bytes(s->w)
			    ? s->shard_cap - cfs_shard_writer_bytes(s->w)
			    : 0;
	uint64_t ahead = take ? 0 : left < SMP_RESERVE_CHUNK ? left : SMP_RESERVE_CHUNK;
	rc = smp__get_room(s, s->w, need, ahead, s->may_block);
	if (rc == -EFBIG) {
		cmn_log(CMN_LOG_WARN,
			"a record of %zu bytes can never fit the cache limit: skipped", r->len);
		SMP_STAT_ADD(&s->stats, records_lost, 1);
		if (j) {
			j->lost = true;
			j->refs--;
			smp__job_maybe_end(s, j);
		}
		return 0;
	}
	if (rc)
		return rc;
	/* the writer may write the record from its block on its own thread (kept) */
	int kept = cfs_shard_writer_append_lent(s->w, r->data, r->len, r->crc, r->object_id,
						r->object_offset, r->block, r->block_cap);
	if (kept < 0)
		return smp__fail_local(s, kept, "writing a shard");
	if (j) {
		j->refs--;
		j->written++;
		uint64_t i = j->run ? run_unit(j, r) : UINT64_MAX;
		if (i < j->nunits) /* its line in the object's index: samples.ordinal */
			cfs_shard_writer_set_ordinal(s->w, (uint32_t)(j->unit + i - j->obj->first));
		if (i < j->nunits && !(j->done_mask >> i & 1)) {
			j->done_mask |= (uint64_t)1 << i;
			smp__unit_complete(s, j->unit + i, j->run[i].size, true);
		}
		smp__job_maybe_end(s, j);
	}
	return kept ? SMP_REC_KEPT : 0;
}

/*
 * Waits (on the budget's condition, in room_wait_ms slices so a stop is
 * seen) for the room a held record needs, then lets the shuffle buffer shed
 * what it took in meanwhile and releases the transfers.  Runs in the fetch
 * loop, never inside a callback.  Returns 0, -ECANCELED (stopped) or a
 * budget error.
 */
int smp__wait_for_room(struct smp_sampler *s)
{
	int rc = 0;
	if (s->w) {
		s->may_block = true;
		rc = smp__get_room(s, s->w, s->room_need, 0, true);
		if (rc == -EFBIG)
			rc = 0; /* the limit shrank below the record: smp__write_record skips it */
		if (rc == 0)
			rc = smp_shuffle_shed(s->shuf, smp__write_record, s);
		s->may_block = false;
	}
	if (rc == 0) {
		s->need_room = false;
		smp_fetch_hold(s->fetch, false);
	}
	return rc;
}

/*
 * At the end of a pass or of the run: what the shuffle buffer still holds
 * goes out in random order (unless a local write failed; its room was
 * reserved with its job), then the transfers are released.
 */
void smp__drain(struct smp_sampler *s)
{
	s->may_block = true;
	if (!s->fatal)
		smp_shuffle_drain(s->shuf, smp__write_record, s);
	s->may_block = false;
	s->need_room = false;
	smp_fetch_hold(s->fetch, false);
}
