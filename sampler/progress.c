/*
 * progress.c - progress reports for people: the pass's summary
 * (struct smp_progress) and the caller's callback about twice a second.
 *
 * Owns s->prog, s->t0, s->last_progress and the stats baseline of the pass
 * (records0, bytes0).  Does not count anything itself: figures come from
 * the atomic stats that the other files update.
 * Threads: the sampler's thread; smp_sampler_progress() copies the last
 * summary and is meant for the same thread once a pass has returned.
 */
#include "sampler/sampler_i.h"

#include <string.h>

#include "common/clock.h"

void smp__progress_begin(struct smp_sampler *s)
{
	memset(&s->prog, 0, sizeof(s->prog));
	s->t0 = s->last_progress = cmn_mono_ms();
	s->records0 = SMP_STAT_GET(&s->stats, records_admitted);
	s->bytes0 = SMP_STAT_GET(&s->stats, bytes_admitted);
}

/* Calls the progress callback when one is set and 500 ms passed (or force). */
void smp__report(struct smp_sampler *s, bool force)
{
	uint64_t now = cmn_mono_ms();
	if (!s->progress || (!force && now - s->last_progress < 500))
		return;
	s->last_progress = now;
	s->prog.elapsed_ms = now - s->t0;
	s->prog.fetched = SMP_STAT_GET(&s->stats, bytes_fetched);
	s->prog.records = SMP_STAT_GET(&s->stats, records_admitted) - s->records0;
	s->prog.bytes = SMP_STAT_GET(&s->stats, bytes_admitted) - s->bytes0;
	s->prog.full = s->full;
	s->progress(&s->prog, &s->stats, s->progress_ctx);
}

void smp_sampler_progress(const struct smp_sampler *s, struct smp_progress *p)
{
	*p = s->prog;
}
