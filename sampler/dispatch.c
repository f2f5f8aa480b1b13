/*
 * dispatch.c - handing a pass's work to the fetcher: keeps up to
 * 2 x connections requests queued, drives the transfer engine, and holds
 * the transfers while a record waits for room.
 *
 * Owns the pass's fetch loop and s->inflight.  Does not decide what to read
 * (plan.c), decode bodies (reader.c) or write records (drain.c); it only
 * calls smp__wait_for_room() outside every callback, where sleeping stalls
 * no transfer.
 * Bounds: the loop ends when every item is done, the budget is full
 * (stop_when_full), a local write failed, or stop was set; each engine step
 * waits at most 250 ms, so a stop is seen within that.
 * Threads: the sampler's thread only.
 */
#include "sampler/sampler_i.h"

#include <errno.h>

/* Starts reading work item w.  Returns 0, or -ENOSPC when the cache is full. */
static int dispatch(struct smp_sampler *s, const struct smp__work *w)
{
	struct smp__reader *o;
	int rc = smp__reader_new(s, w, &o);
	if (rc || !o)
		return rc; /* !o: an object that can never fit, skipped */
	const struct smp_object *obj = &s->listing.v[w->obj];
	struct smp_fetch_req r = {
	    .key = obj->key,
	    .off = w->off,
	    .len = w->len,
	    .size = obj->size,
	    .ops = &smp__reader_ops,
	    .ctx = o,
	};
	rc = smp_fetch_add(s->fetch, &r);
	if (rc) {
		smp__reader_free(o);
		return smp__fail_local(s, rc, "queueing an object");
	}
	s->inflight++;
	return 0;
}

void smp__dispatch_pass(struct smp_sampler *s, const struct smp__pass *p)
{
	const struct cmn_config *c = s->cfg;
	int rc;
	/* keep up to 2 x connections requests queued so the engine never idles */
	size_t next = 0, n = p->n, window = 2 * (size_t)(c->connections ? c->connections : 1);
	while (!atomic_load(&s->stop) && !s->full && !s->fatal) {
		while (next < n && s->inflight < window && !s->full && !s->fatal) {
			rc = dispatch(s, &p->items[next]);
			if (rc && rc != -ENOSPC)
				break;
			next++;
		}
		if (s->full || s->fatal)
			break;
		if (s->need_room) {
			rc = smp__wait_for_room(s);
			if (rc == -ECANCELED)
				break;
			if (rc && rc != -EWOULDBLOCK) {
				smp__fail_local(s, rc, "waiting for room in the cache");
				break;
			}
			continue;
		}
		if (next >= n && smp_fetch_pending(s->fetch) == 0)
			break;
		rc = smp_fetch_step(s->fetch, 250);
		if (rc) {
			smp__fail_local(s, rc, "transfer engine");
			break;
		}
		smp__report(s, false);
	}
}
