/*
 * sampler.c - the sampler: its life (new, stop, free) and one pass
 * (smp_sampler_run), which it runs by calling the other files in turn:
 * relist.c (when due), plan.c, dispatch.c, drain.c, seal.c, progress.c.
 *
 * Owns struct smp_sampler and the order of a pass.  Does not speak HTTP
 * (fetch.c, source.c) and does not touch SQL or the disk directly
 * (cachefs/shard_writer.h, catalog.h).
 *
 * Invariants: DESIGN 4 (every byte reserved before it is written: drain.c
 * and reader.c reserve, seal.c keeps queued reservations counted), DESIGN 5
 * (only records whose CRC passed reach the shard writer: reader.c),
 * DESIGN 7 (keys go to the catalog and the display-name sanitizer, never
 * into a path).
 * Threads and locks: see sampler_i.h.  smp_sampler_stop() and
 * smp_sampler_stats() may be called from any thread; the rest from the
 * thread that runs the sampler.
 */
#include "sampler/sampler_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachefs/catalog.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"

int smp__fail_local(struct smp_sampler *s, int rc, const char *what)
{
	if (!s->fatal) {
		s->fatal = rc;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s: %s", what, strerror(-rc));
	}
	return rc;
}

int smp_sampler_new(struct smp_sampler **out, const struct smp_sampler_opts *o, char *err,
		    size_t errlen)
{
	struct smp_sampler *s = calloc(1, sizeof(*s));
	int rc;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->cfg = o->cfg;
	s->cstore = o->store;
	s->cat = cfs_store_catalog(o->store);
	s->seed = o->seed;
	s->stop_when_full = o->stop_when_full;
	s->room_wait_ms = o->room_wait_ms ? o->room_wait_ms : 60000;
	s->progress = o->progress;
	s->progress_ctx = o->progress_ctx;
	struct smp_source_opts so = {
	    .url = o->cfg->url,
	    .endpoint = o->cfg->endpoint,
	    .region = o->cfg->region,
	    .profile = o->cfg->profile,
	    .s3_addressing = (int)o->cfg->s3_addressing,
	    .credentials_file = o->credentials_file,
	    .timeout_ms = o->cfg->timeout_ms,
	    .retries = o->cfg->retries,
	    .stats = &s->stats,
	};
	rc = smp_source_open(&s->source, &so, err, errlen);
	if (rc)
		goto fail;
	rc = smp_fetch_new(&s->fetch, s->source, o->cfg->connections, o->cfg->retries, o->seed, err,
			   errlen);
	if (rc)
		goto fail;
	rc = cfs_catalog_source(s->cat, o->cfg->url, &s->source_id);
	if (rc) {
		snprintf(err, errlen, "recording the source in the catalog: %s", strerror(-rc));
		goto fail;
	}
	rc = smp__sealer_start(s, err, errlen);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	smp_fetch_free(s->fetch);
	smp_source_free(s->source);
	free(s);
	return rc;
}

void smp_sampler_free(struct smp_sampler *s)
{
	if (!s)
		return;
	smp__sealer_stop(s);
	smp_fetch_free(s->fetch);
	smp_source_free(s->source);
	smp_listing_free(&s->listing);
	free(s->object_ids);
	free(s->has_idx);
	free(s);
}

void smp_sampler_stop(struct smp_sampler *s)
{
	atomic_store(&s->stop, true);
	smp_fetch_wakeup(s->fetch);
}

const struct smp_stats *smp_sampler_stats(const struct smp_sampler *s)
{
	return &s->stats;
}

/*
 * One pass: relist when due, plan, read everything through the shuffle
 * buffer into shards, drain the buffer, seal the last shard and wait for
 * the sealer.  The rng stream is drawn in a fixed order (plan, then the
 * shuffle buffer's seed), so a seed gives the same pass every time.
 */
int smp_sampler_run(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	const struct cmn_config *c = s->cfg;
	int rc = 0;
	s->epoch = epoch;
	s->full = false;
	s->fatal = 0;
	s->fatal_msg[0] = '\0';
	smp__progress_begin(s);

	uint32_t every = c->relist ? c->relist : 1;
	if (!s->listed || epoch >= s->listed_epoch + every) {
		rc = smp__relist(s, epoch, err, errlen);
		if (rc)
			return rc;
	}
	uint64_t rng = s->seed ^ ((uint64_t)epoch << 32) ^ 0x2545f4914f6cdd1dull;
	struct smp__pass pass;
	rc = smp__plan_pass(s, &rng, &pass, err, errlen);
	if (rc)
		return rc;
	s->prog.objects_total = pass.n;

	size_t shuf_cap =
	    c->shard_size < SMP_SHUFFLE_MAX_BYTES ? (size_t)c->shard_size : SMP_SHUFFLE_MAX_BYTES;
	rc = smp_shuffle_new(&s->shuf, shuf_cap, smp__splitmix(&rng));
	if (rc) {
		smp__pass_free(&pass);
		snprintf(err, errlen, "out of memory for the shuffle buffer");
		return rc;
	}
	smp__dispatch_pass(s, &pass);
	smp_fetch_cancel_all(s->fetch);
	smp__drain(s);
	smp_shuffle_free(s->shuf);
	s->shuf = NULL;
	if (!s->fatal)
		smp__seal_current(s);
	if (s->w) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	smp__seal_flush(s);
	s->prog.records = SMP_STAT_GET(&s->stats, records_admitted) - s->records0;
	s->prog.bytes = SMP_STAT_GET(&s->stats, bytes_admitted) - s->bytes0;
	smp__pass_free(&pass);
	smp__report(s, true);
	if (s->fatal) {
		snprintf(err, errlen, "%s", s->fatal_msg);
		return s->fatal;
	}
	return 0;
}
