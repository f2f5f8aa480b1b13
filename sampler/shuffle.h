/*
 * shuffle.h - a bounded shuffle buffer of records (private to sampler/).
 *
 * Records from several objects read at once are copied in (or their blocks
 * taken over: smp_shuffle_add_block); once the buffer
 * holds more than its byte cap, records leave in uniformly random order
 * through a sink callback.  This interleaves objects inside each shard the
 * way tf.data's shuffle buffer would, with memory bounded by the cap plus one
 * record.
 */
#ifndef RC_SAMPLER_SHUFFLE_H
#define RC_SAMPLER_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

struct smp__job;

#define SMP_SHUFFLE_MAX_BYTES	((size_t)32 << 20)
#define SMP_SHUFFLE_MAX_RECORDS 65536u

struct smp_rec {
	const uint8_t *data;
	size_t len;
	uint32_t crc;
	int64_t object_id;
	uint64_t object_offset;
	struct smp__job *job; /* the request it came with (sampler_i.h); carried along */
	void *block;	      /* leaving the buffer: the block data lies in (else NULL) */
	size_t block_cap;
};

/* What a sink answers when it took r->block over (it gives it back with smp_shuffle_give_back). */
#define SMP_REC_KEPT 1

/*
 * Receives a record leaving the buffer; returns 0, SMP_REC_KEPT, or -errno
 * (stops the caller; the record stays in the buffer).
 */
typedef int (*smp_rec_sink)(const struct smp_rec *r, void *ctx);

struct smp_shuffle;

/*
 * Sets the byte cap (at least 1).  A higher cap holds records back until it
 * is reached; a lower one sheds at the next add.
 */
void smp_shuffle_set_cap(struct smp_shuffle *b, size_t cap_bytes);

int smp_shuffle_new(struct smp_shuffle **out, size_t cap_bytes, uint64_t seed);
void smp_shuffle_free(struct smp_shuffle *b);

/*
 * Copies r in, then hands random records to sink while the buffer is over
 * its caps.  Returns 0, -ENOMEM, or the sink's error (r is kept then).  A
 * sink answering -EWOULDBLOCK (no room yet) stops the popping and is not an
 * error: the buffer stays over its cap until smp_shuffle_shed().
 */
int smp_shuffle_add(struct smp_shuffle *b, const struct smp_rec *r, smp_rec_sink sink, void *ctx);

/*
 * Like smp_shuffle_add, but r->data lies inside `block` (malloc'd, cap
 * bytes), which the buffer takes over instead of copying the record: it is
 * reused for later records or freed.  The buffer owns block whatever the
 * return (on -ENOMEM it is freed).
 */
int smp_shuffle_add_block(struct smp_shuffle *b, const struct smp_rec *r, void *block, size_t cap,
			  smp_rec_sink sink, void *ctx);

/*
 * A free block of at least len bytes from the reuse pool, or NULL when none
 * fits; *cap gets its size.  The caller owns it (free() or hand it back
 * inside smp_shuffle_add_block).
 */
void *smp_shuffle_spare(struct smp_shuffle *b, size_t len, size_t *cap);

/* Gives back a block from smp_shuffle_spare() that was not used.  NULL is ignored. */
void smp_shuffle_unspare(struct smp_shuffle *b, void *block, size_t cap);

/*
 * Gives back a block a sink kept (SMP_REC_KEPT), from any thread; it is
 * reused for later records or freed.  Every block kept must come back
 * before smp_shuffle_free.
 */
void smp_shuffle_give_back(struct smp_shuffle *b, void *block, size_t cap);

/* Hands random records to sink until the buffer is within its caps again. */
int smp_shuffle_shed(struct smp_shuffle *b, smp_rec_sink sink, void *ctx);

/* Records held now. */
size_t smp_shuffle_count(const struct smp_shuffle *b);

/* Calls fn on every record the buffer holds (in no order); b unchanged. */
void smp_shuffle_each(const struct smp_shuffle *b, void (*fn)(const struct smp_rec *r, void *ctx),
		      void *ctx);

/* Hands every record to sink in random order; stops at the first error. */
int smp_shuffle_drain(struct smp_shuffle *b, smp_rec_sink sink, void *ctx);

#endif
