/*
 * cuda_i.h - the few CUDA runtime calls the feeder makes, behind dlopen.
 *
 * librollcache never links libcudart: cuda.c (load()) dlopens it the first
 * time a feeder asks for a device or pinned memory, so the library and the
 * `rollcache` command run on machines without CUDA, and a CUDA build needs
 * only the toolkit headers (meson option cuda=auto).  Without the headers
 * (RC_HAVE_CUDA 0) every call fails with -ENODEV.
 *
 * Streams and events are opaque pointers here so that no other file includes
 * CUDA headers.  All functions return 0 or -errno (-ENODEV: no CUDA, -EIO: a
 * CUDA error, whose name is in the message where one is taken).
 */
#ifndef RC_FEEDER_CUDA_I_H
#define RC_FEEDER_CUDA_I_H

#include <stddef.h>
#include <stdint.h>

/*
 * Loads libcudart (once per process; thread-safe) and returns the number of
 * devices in *n.  -ENODEV with a reason ("no CUDA device", "libcudart not
 * found") when none can be used.
 */
int fdr__cuda_devices(int *n, char *err, size_t errlen);

/* Makes `device` current for the calling thread; returns the previous one in *prev (may be NULL).
 */
int fdr__cuda_set_device(int device, int *prev);

int fdr__cuda_host_alloc(void **p, size_t len); /* pinned, portable */
void fdr__cuda_host_free(void *p);
int fdr__cuda_malloc(void **p, size_t len);
void fdr__cuda_free(void *p);

int fdr__cuda_stream_create(void **stream); /* non-blocking stream */
void fdr__cuda_stream_destroy(void *stream);
int fdr__cuda_event_create(void **ev, int timing);
void fdr__cuda_event_destroy(void *ev);
int fdr__cuda_event_record(void *ev, void *stream);
int fdr__cuda_event_sync(void *ev);
int fdr__cuda_event_elapsed_ms(void *start, void *end, float *ms);
int fdr__cuda_stream_wait_event(void *stream, void *ev);
int fdr__cuda_stream_sync(void *stream);
int fdr__cuda_h2d_async(void *dst, const void *src, size_t len, void *stream);
int fdr__cuda_h2d(void *dst, const void *src, size_t len);
int fdr__cuda_d2h(void *dst, const void *src, size_t len);

/* The name of the last CUDA error seen by this process ("" if none). */
const char *fdr__cuda_last_error(void);

/* rc_feeder_h2d_peak (rollcache/feeder.h) is implemented in cuda.c too. */

#endif
