/*
 * slot.c - one batch of the ring: its memory, decoding records into it, and
 * its copy to the device.
 *
 * Owns a slot's buffers: one block for the fixed features and the ragged
 * offsets (pinned when there is a CUDA device), ragged values that grow
 * only past the largest batch seen by any slot (f->ring.rag_hwm), the
 * device block and three CUDA events.  Does not choose records (window.c)
 * and does not decide when a slot is handed out (consumer.c).
 *
 * Invariants: steady state allocates nothing (every growth is counted in
 * f->st.allocs); a slot's device buffers are not overwritten before the
 * consumer's stream passed the point where it released the slot
 * (ev_release, waited for in slot_upload).
 *
 * Locking: a slot being decoded belongs to its decoder (state FILLING), so
 * nothing here takes f->mu.  f->copy_mu keeps one slot's [start, copies,
 * done] contiguous on the copy stream; it is never held with f->mu.
 * f->ring.rag_hwm and the statistics are atomics.
 */
#include "feeder/feeder_i.h"

#include "common/example.h"
#include "common/log.h"
#include "feeder/cuda_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)CMN_DT_FLOAT32 == (int)RC_DT_FLOAT32 && (int)CMN_DT_INT64 == (int)RC_DT_INT64 &&
		   (int)CMN_DT_UINT8 == (int)RC_DT_UINT8 && (int)CMN_DT_BYTES == (int)RC_DT_BYTES,
	       "public and schema dtypes must agree");

struct decode_ctx {
	struct rc_feeder *f;
	struct rc_batch *s;
	size_t row;
	int grow_rc;
};

/* Grows a slot's ragged values to hold `need` bytes, keeping `used`. */
static int ragged_grow(struct rc_feeder *f, struct fdr_ragged *rg, size_t need, size_t i)
{
	size_t ncap = rg->cap ? rg->cap : 256;
	while (ncap < need)
		ncap *= 2;
	void *nb;
	int rc = fdr__mem_alloc(f, &nb, ncap);
	if (rc)
		return rc;
	if (rg->used)
		memcpy(nb, rg->h, rg->used);
	fdr__mem_free(f, rg->h);
	rg->h = nb;
	rg->cap = ncap;
	__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
	cmn_log(CMN_LOG_DEBUG, "feeder: ragged values of '%s' grow to %zu bytes",
		f->cfg.schema->feature[i].name, ncap);
	size_t hwm = __atomic_load_n(&f->ring.rag_hwm[i], __ATOMIC_RELAXED);
	while (hwm < ncap && !__atomic_compare_exchange_n(&f->ring.rag_hwm[i], &hwm, ncap, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return 0;
}

static void *ragged_reserve(void *ctx, size_t feature, size_t n_values, size_t n_items)
{
	struct decode_ctx *d = ctx;
	struct rc_batch *s = d->s;
	const struct cmn_feature *ft = &d->f->cfg.schema->feature[feature];
	struct fdr_ragged *rg = &s->rag[feature];
	size_t bytes = n_values * ft->elem_size;
	int64_t *off = s->t[feature].offsets;

	if (rg->used + bytes > rg->cap) {
		d->grow_rc = ragged_grow(d->f, rg, rg->used + bytes, feature);
		if (d->grow_rc)
			return NULL;
	}
	void *dst = rg->h + rg->used;
	rg->used += bytes;
	/* a sequence feature's offsets count steps (rows of its [steps, step shape] values) */
	off[d->row + 1] =
	    off[d->row] + (int64_t)(ft->place == CMN_PLACE_SEQUENCE ? n_items : n_values);
	return dst;
}

/* Decodes raw record bytes: the fixed features, concatenated in schema order. */
static void decode_raw(const struct cmn_schema *sc, const uint8_t *p, void *const *fixed)
{
	for (size_t i = 0; i < sc->n; i++) {
		memcpy(fixed[i], p, sc->feature[i].row_bytes);
		p += sc->feature[i].row_bytes;
	}
}

/* Copies the slot's tensors to the device on the copy stream. */
static int slot_upload(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	int rc = 0;

	if (s->released_once)
		rc = fdr__cuda_stream_wait_event(f->cfg.stream, s->ev_release);
	if (!rc)
		rc = fdr__cuda_event_record(s->ev_start, f->cfg.stream);
	s->h2d_bytes = 0;
	for (size_t i = 0; !rc && i < sc->n; i++) {
		struct rc_tensor *t = &s->t[i];
		if (sc->feature[i].ragged) {
			struct fdr_ragged *rg = &s->rag[i];
			if (rg->dcap < rg->cap) {
				fdr__cuda_free(rg->d);
				rg->d = NULL;
				rg->dcap = 0;
				rc = fdr__cuda_malloc(&rg->d, rg->cap);
				if (rc)
					break;
				rg->dcap = rg->cap;
				__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
			}
			t->device_data = rg->d;
			size_t ob = (s->rows + 1) * sizeof(int64_t);
			rc = fdr__cuda_h2d_async(t->device_offsets, t->offsets, ob, f->cfg.stream);
			s->h2d_bytes += ob;
		}
		if (!rc && t->nbytes)
			rc = fdr__cuda_h2d_async(t->device_data, t->data, t->nbytes, f->cfg.stream);
		s->h2d_bytes += t->nbytes;
	}
	if (!rc)
		rc = fdr__cuda_event_record(s->ev_done, f->cfg.stream);
	return rc;
}

/*
 * Empties the slot's ragged values, first growing them to the largest
 * capacity any slot needed so far (f->ring.rag_hwm).  0 or -ENOMEM with a
 * message naming the feature.
 */
static int slot_ragged_begin(struct rc_feeder *f, struct rc_batch *s, char *err, size_t errlen)
{
	const struct cmn_schema *sc = f->cfg.schema;
	int rc;

	for (size_t i = 0; i < sc->n; i++) {
		if (!sc->feature[i].ragged)
			continue;
		struct fdr_ragged *rg = &s->rag[i];
		size_t hwm = __atomic_load_n(&f->ring.rag_hwm[i], __ATOMIC_RELAXED);
		rg->used = 0;
		if (rg->cap < hwm) { /* catch up with the largest batch seen by any slot */
			fdr__mem_free(f, rg->h);
			rg->h = NULL;
			rg->cap = 0;
			rc = ragged_grow(f, rg, hwm, i);
			if (rc) {
				snprintf(err, errlen, "out of memory growing feature '%s'",
					 sc->feature[i].name);
				return rc;
			}
		}
		s->t[i].offsets[0] = 0;
	}
	return 0;
}

/* Sets the tensors' shapes and sizes for s->rows decoded rows. */
static void slot_set_shapes(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;

	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *ft = &sc->feature[i];
		struct rc_tensor *t = &s->t[i];
		if (ft->ragged) {
			t->data = s->rag[i].h;
			t->shape[0] = t->offsets[s->rows];
			t->nbytes = s->rag[i].used;
		} else {
			t->shape[0] = (int64_t)s->rows;
			t->nbytes = s->rows * ft->row_bytes;
		}
	}
}

/*
 * Decodes the slot's picked records into it and starts the device copy.
 * Runs without f->mu.  Returns 0 or -errno with a message naming the file,
 * record and feature.
 */
int fdr__slot_decode(struct rc_feeder *f, struct rc_batch *s, char *err, size_t errlen)
{
	const struct cmn_schema *sc = f->cfg.schema;
	struct decode_ctx d = {.f = f, .s = s};
	struct cmn_ex_sink sink = {.fixed = s->fixed, .reserve = ragged_reserve, .ctx = &d};
	char msg[512];
	uint64_t bytes = 0;
	int rc;

	rc = slot_ragged_begin(f, s, err, errlen);
	if (rc)
		return rc;
	for (size_t row = 0; row < s->rows; row++) {
		const struct fdr_pick *p = &s->picks[row];
		const uint8_t *rec = p->c->buf + p->r.off;
		if (f->cfg.o.shuffle && row + 1 < s->rows) {
			/* shuffled records are scattered over the window: start the
			 * next record's first cache lines (its tags) on their way.
			 * (In order, records are contiguous and the hardware
			 * prefetcher does this; the loop only stalled on full fill
			 * buffers there.) */
			const struct fdr_pick *q = &s->picks[row + 1];
			const uint8_t *nx = q->c->buf + q->r.off;
			for (size_t k = 0; k < 4096 && k < q->r.len; k += 64)
				__builtin_prefetch(nx + k);
		}
		for (size_t i = 0; i < sc->n; i++)
			if (!sc->feature[i].ragged)
				s->fixed[i] =
				    (uint8_t *)s->t[i].data + row * sc->feature[i].row_bytes;
		if (f->cfg.o.format == RC_FORMAT_RAW) {
			decode_raw(sc, rec, s->fixed);
		} else {
			d.row = row;
			d.grow_rc = 0;
			rc = cmn_ex_decode(sc, rec, p->r.len, &sink, msg, sizeof msg);
			if (rc) {
				if (rc == -ENOBUFS && d.grow_rc)
					rc = d.grow_rc;
				snprintf(err, errlen, "%s: record %" PRIu64 ": %s",
					 s->files[p->c->file], p->r.index, msg);
				return rc;
			}
		}
		bytes += p->r.len;
	}
	slot_set_shapes(f, s);
	__atomic_add_fetch(&f->st.records, s->rows, __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->st.record_bytes, bytes, __ATOMIC_RELAXED);
	if (f->cfg.device >= 0) {
		/* one slot's [start, copies, done] stay contiguous on the stream,
		 * so its event interval times only its own copies */
		pthread_mutex_lock(&f->copy_mu);
		rc = slot_upload(f, s);
		pthread_mutex_unlock(&f->copy_mu);
		if (rc) {
			snprintf(err, errlen, "copy to cuda:%d failed: %s", f->cfg.device,
				 fdr__cuda_last_error());
			return rc;
		}
	}
	return 0;
}

void fdr__slot_free(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	if (s->rag)
		for (size_t i = 0; i < sc->n; i++) {
			fdr__mem_free(f, s->rag[i].h);
			fdr__cuda_free(s->rag[i].d);
		}
	fdr__mem_free(f, s->host);
	if (f->cfg.device >= 0) {
		fdr__cuda_free(s->dev);
		fdr__cuda_event_destroy(s->ev_done);
		fdr__cuda_event_destroy(s->ev_start);
		fdr__cuda_event_destroy(s->ev_release);
	}
	free(s->rag);
	free(s->t);
	free(s->fixed);
	free(s->picks);
}

int fdr__slot_init(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	int rc;

	s->f = f;
	s->picks = calloc(f->cfg.B, sizeof *s->picks);
	s->t = calloc(sc->n, sizeof *s->t);
	s->rag = calloc(sc->n, sizeof *s->rag);
	s->fixed = calloc(sc->n, sizeof *s->fixed);
	if (!s->picks || !s->t || !s->rag || !s->fixed)
		return -ENOMEM;
	rc = fdr__mem_alloc(f, (void **)&s->host, f->cfg.block_len);
	if (rc)
		return rc;
	if (f->cfg.device >= 0) {
		rc = fdr__cuda_malloc(&s->dev, f->cfg.block_len);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_done, 1);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_start, 1);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_release, 0);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *ft = &sc->feature[i];
		struct rc_tensor *t = &s->t[i];
		t->name = ft->name;
		t->dtype = (int32_t)ft->dtype; /* enum cmn_dtype and enum rc_dtype agree */
		t->device = f->cfg.device;
		if (ft->ragged) {
			t->ragged = 1;
			t->ndim = 1;
			if (ft->place == CMN_PLACE_SEQUENCE) { /* values: [steps, step shape] */
				t->ndim = (int32_t)ft->ndims + 1;
				for (unsigned k = 0; k < ft->ndims; k++)
					t->shape[k + 1] = (int64_t)ft->dims[k];
			}
			t->offsets = (int64_t *)(s->host + f->cfg.fixed_off[i]);
			if (f->cfg.device >= 0)
				t->device_offsets =
				    (int64_t *)((uint8_t *)s->dev + f->cfg.fixed_off[i]);
			rc = ragged_grow(
			    f, &s->rag[i],
			    f->cfg.B * (f->cfg.o.ragged_hint ? f->cfg.o.ragged_hint : 256), i);
			if (rc)
				return rc;
			t->data = s->rag[i].h;
		} else {
			t->ndim = (int32_t)ft->ndims + 1;
			for (unsigned k = 0; k < ft->ndims; k++)
				t->shape[k + 1] = (int64_t)ft->dims[k];
			t->data = s->host + f->cfg.fixed_off[i];
			if (f->cfg.device >= 0)
				t->device_data = (uint8_t *)s->dev + f->cfg.fixed_off[i];
		}
	}
	return 0;
}
