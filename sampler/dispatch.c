/*
 * dispatch.c - handing a job to the fetcher: its reader, its request.
 *
 * Owns s->inflight and the list of jobs in flight (s->jobs).  Does not
 * decide what to read (plan.c), reserve the job's room (sampler.c's run
 * loop did), decode bodies (reader.c) or write records (drain.c).
 * Threads: the sampler's thread only.
 */
#include "sampler/sampler_i.h"

#include <errno.h>

/*
 * Starts job j (its room already reserved: j->reserve).  On success j is
 * in s->jobs and ends through its reader's done callback; on failure (a
 * local failure, recorded) j is ended at once with its units unsettled.
 * Returns 0 or -errno.
 */
int smp__dispatch_job(struct smp_sampler *s, struct smp__job *j)
{
	struct smp__reader *o;
	j->next = s->jobs;
	j->prev = NULL;
	if (s->jobs)
		s->jobs->prev = j;
	s->jobs = j;
	int rc = smp__reader_new(s, j, &o);
	if (rc == 0) {
		struct smp_fetch_req r = {
		    .key = j->key,
		    .off = j->off,
		    .len = j->len,
		    .size = j->obj->size,
		    .ops = &smp__reader_ops,
		    .ctx = o,
		};
		rc = smp_fetch_add(s->fetch, &r);
		if (rc) {
			smp__reader_free(o);
			smp__fail_local(s, rc, "queueing an object");
		}
	}
	if (rc) {
		j->over = true;
		j->cancelled = true;
		smp__job_maybe_end(s, j);
		return rc;
	}
	s->inflight++;
	if (j->rounds) /* ingest's round: an attempt after the first at this object */
		SMP_STAT_ADD(&s->stats, retries, 1);
	return 0;
}
