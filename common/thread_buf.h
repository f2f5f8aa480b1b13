/*
 * thread_buf.h - a scratch buffer of each thread's own, for read paths that
 * must not allocate per call: allocated at the thread's first use, freed at
 * its exit (a pthread key with free() as destructor).
 */
#ifndef RC_COMMON_THREAD_BUF_H
#define RC_COMMON_THREAD_BUF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

struct cmn_thread_buf {
	pthread_mutex_t mu; /* guards making the key, once */
	atomic_int made;
	pthread_key_t key;
};

#define CMN_THREAD_BUF_INIT                                                                        \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, 0, 0                                                    \
	}

/*
 * The calling thread's buffer of b, `size` bytes at its first use (every
 * call for one b must pass the same size), or NULL when out of memory or
 * out of keys.  Any thread.
 */
void *cmn_thread_buf(struct cmn_thread_buf *b, size_t size);

#endif
