/*
 * thread_buf.c - per-thread scratch buffers (see thread_buf.h).
 */
#include "common/thread_buf.h"

#include <stdlib.h>

void *cmn_thread_buf(struct cmn_thread_buf *b, size_t size)
{
	if (!atomic_load_explicit(&b->made, memory_order_acquire)) {
		pthread_mutex_lock(&b->mu);
		int rc = atomic_load_explicit(&b->made, memory_order_relaxed)
			     ? 0
			     : pthread_key_create(&b->key, free);
		if (rc == 0)
			atomic_store_explicit(&b->made, 1, memory_order_release);
		pthread_mutex_unlock(&b->mu);
		if (rc != 0)
			return NULL;
	}
	void *p = pthread_getspecific(b->key);
	if (!p) {
		p = malloc(size);
		if (p && pthread_setspecific(b->key, p) != 0) {
			free(p);
			p = NULL;
		}
	}
	return p;
}
