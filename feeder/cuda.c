/*
 * cuda.c - CUDA runtime calls of the feeder, through dlopen("libcudart").
 *
 * Owns the process-wide table of cudart entry points.  Loading happens once
 * (pthread_once) on the first fdr__cuda_devices(); every other function may
 * be called only after that returned 0.  Why dlopen: librollcache.so and the
 * CLI then have no hard dependency on a CUDA installation; a machine without
 * a GPU (or without the toolkit) runs the same binary in host mode, and the
 * cudart a process already loaded (PyTorch's) is reused when its soname
 * matches.  Only this file speaks CUDA; it needs the toolkit headers at build
 * time for the types (RC_HAVE_CUDA), never the library.
 *
 * Locking: the table is written once under pthread_once and read-only after.
 * last_error is a best-effort diagnostic (a pointer to a static string).
 */
#include "feeder/cuda_i.h"

#include "rollcache/feeder.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#if RC_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>

#define CUDA_FNS(X)                                                                                \
	X(cudaGetDeviceCount)                                                                      \
	X(cudaSetDevice)                                                                           \
	X(cudaGetDevice)                                                                           \
	X(cudaHostAlloc)                                                                           \
	X(cudaFreeHost)                                                                            \
	X(cudaMalloc)                                                                              \
	X(cudaFree)                                                                                \
	X(cudaStreamCreateWithFlags)                                                               \
	X(cudaStreamDestroy)                                                                       \
	X(cudaStreamWaitEvent)                                                                     \
	X(cudaStreamSynchronize)                                                                   \
	X(cudaEventCreateWithFlags)                                                                \
	X(cudaEventDestroy)                                                                        \
	X(cudaEventRecord)                                                                         \
	X(cudaEventSynchronize)                                                                    \
	X(cudaEventElapsedTime)                                                                    \
	X(cudaMemcpyAsync)                                                                         \
	X(cudaMemcpy)                                                                              \
	X(cudaGetErrorName)

static struct {
#define X(fn) __typeof__(fn) *fn;
	CUDA_FNS(X)
#undef X
} cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc = -ENODEV;
static char load_msg[256] = "libcudart not loaded";
static const char *last_error = "";

static void load(void)
{
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0",
					    "/usr/local/cuda/lib64/libcudart.so"};
	const char *env = getenv("ROLLCACHE_CUDART");
	void *h = NULL;

	if (env && *env)
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(load_msg, sizeof load_msg,
			 "libcudart not found (set ROLLCACHE_CUDART to its path)");
		return;
	}
#define X(fn)                                                                                      \
	*(void **)&cu.fn = dlsym(h, #fn);                                                          \
	if (!cu.fn) {                                                                              \
		snprintf(load_msg, sizeof load_msg, "libcudart lacks %s", #fn);                    \
		return;                                                                            \
	}
	CUDA_FNS(X)
#undef X
	load_rc = 0;
}

/* Maps a CUDA status to 0 / -EIO and remembers its name. */
static int st(cudaError_t e)
{
	if (e == cudaSuccess)
		return 0;
	last_error = cu.cudaGetErrorName ? cu.cudaGetErrorName(e) : "cudaError";
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int fdr__cuda_devices(int *n, char *err, size_t errlen)
{
	int count = 0;

	pthread_once(&load_once, load);
	if (load_rc) {
		snprintf(err, errlen, "%s", load_msg);
		return load_rc;
	}
	cudaError_t e = cu.cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count <= 0) {
		snprintf(err, errlen, "no CUDA device (%s)",
			 e != cudaSuccess ? cu.cudaGetErrorName(e) : "count 0");
		return -ENODEV;
	}
	*n = count;
	return 0;
}

int fdr__cuda_set_device(int device, int *prev)
{
	if (prev) {
		int rc = st(cu.cudaGetDevice(prev));
		if (rc)
			return rc;
	}
	return st(cu.cudaSetDevice(device));
}

int fdr__cuda_host_alloc(void **p, size_t len)
{
	return st(cu.cudaHostAlloc(p, len ? len : 1, cudaHostAllocPortable));
}

void fdr__cuda_host_free(void *p)
{
	if (p)
		(void)st(cu.cudaFreeHost(p));
}

int fdr__cuda_malloc(void **p, size_t len)
{
	return st(cu.cudaMalloc(p, len ? len : 1));
}

void fdr__cuda_free(void *p)
{
	if (p)
		(void)st(cu.cudaFree(p));
}

int fdr__cuda_stream_create(void **stream)
{
	cudaStream_t s;
	int rc = st(cu.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	if (!rc)
		*stream = s;
	return rc;
}

void fdr__cuda_stream_destroy(void *stream)
{
	if (stream)
		(void)st(cu.cudaStreamDestroy((cudaStream_t)stream));
}

int fdr__cuda_event_create(void **ev, int timing)
{
	cudaEvent_t e;
	int rc =
	    st(cu.cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
	if (!rc)
		*ev = e;
	return rc;
}

void fdr__cuda_event_destroy(void *ev)
{
	if (ev)
		(void)st(cu.cudaEventDestroy((cudaEvent_t)ev));
}

int fdr__cuda_event_record(void *ev, void *stream)
{
	return st(cu.cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream));
}

int fdr__cuda_event_sync(void *ev)
{
	return st(cu.cudaEventSynchronize((cudaEvent_t)ev));
}

int fdr__cuda_event_elapsed_ms(void *start, void *end, float *ms)
{
	return st(cu.cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}

int fdr__cuda_stream_wait_event(void *stream, void *ev)
{
	return st(cu.cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0));
}

int fdr__cuda_stream_sync(void *stream)
{
	return st(cu.cudaStreamSynchronize((cudaStream_t)stream));
}

int fdr__cuda_h2d_async(void *dst, const void *src, size_t len, void *stream)
{
	return st(cu.cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, (cudaStream_t)stream));
}

int fdr__cuda_h2d(void *dst, const void *src, size_t len)
{
	return st(cu.cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice));
}

int fdr__cuda_d2h(void *dst, const void *src, size_t len)
{
	return st(cu.cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost));
}

const char *fdr__cuda_last_error(void)
{
	return last_error;
}

int rc_feeder_h2d_peak(int device, size_t len, int iters, double *gbps, char *err, size_t errlen)
{
	void *h = NULL, *d = NULL;
	double t0, secs;
	int n, prev, rc;

	rc = fdr__cuda_devices(&n, err, errlen);
	if (rc)
		return rc;
	rc = fdr__cuda_set_device(device, &prev);
	if (rc)
		goto fail;
	rc = fdr__cuda_host_alloc(&h, len);
	if (rc)
		goto fail;
	rc = fdr__cuda_malloc(&d, len);
	if (rc)
		goto fail;
	rc = fdr__cuda_h2d(d, h, len); /* warm-up */
	if (rc)
		goto fail;
	t0 = cmn_mono_s();
	for (int i = 0; i < iters && !rc; i++)
		rc = fdr__cuda_h2d(d, h, len);
	secs = cmn_mono_s() - t0;
	if (rc)
		goto fail;
	*gbps = secs > 0 ? (double)len * iters / secs / 1e9 : 0;
	fdr__cuda_free(d);
	fdr__cuda_host_free(h);
	(void)fdr__cuda_set_device(prev, NULL);
	return 0;
fail:
	snprintf(err, errlen, "pinned cudaMemcpy peak: %s", fdr__cuda_last_error());
	fdr__cuda_free(d);
	fdr__cuda_host_free(h);
	return rc;
}

#else /* !RC_HAVE_CUDA */

int fdr__cuda_devices(int *n, char *err, size_t errlen)
{
	(void)n;
	snprintf(err, errlen, "built without CUDA (meson -Dcuda found no cuda_runtime_api.h)");
	return -ENODEV;
}

#define NODEV(...) return -ENODEV
int fdr__cuda_set_device(int device, int *prev)
{
	NODEV();
}
int fdr__cuda_host_alloc(void **p, size_t len)
{
	NODEV();
}
void fdr__cuda_host_free(void *p)
{
}
int fdr__cuda_malloc(void **p, size_t len)
{
	NODEV();
}
void fdr__cuda_free(void *p)
{
}
int fdr__cuda_stream_create(void **stream)
{
	NODEV();
}
void fdr__cuda_stream_destroy(void *stream)
{
}
int fdr__cuda_event_create(void **ev, int timing)
{
	NODEV();
}
void fdr__cuda_event_destroy(void *ev)
{
}
int fdr__cuda_event_record(void *ev, void *stream)
{
	NODEV();
}
int fdr__cuda_event_sync(void *ev)
{
	NODEV();
}
int fdr__cuda_event_elapsed_ms(void *start, void *end, float *ms)
{
	NODEV();
}
int fdr__cuda_stream_wait_event(void *stream, void *ev)
{
	NODEV();
}
int fdr__cuda_stream_sync(void *stream)
{
	NODEV();
}
int fdr__cuda_h2d_async(void *dst, const void *src, size_t len, void *stream)
{
	NODEV();
}
int fdr__cuda_h2d(void *dst, const void *src, size_t len)
{
	NODEV();
}
int fdr__cuda_d2h(void *dst, const void *src, size_t len)
{
	NODEV();
}
const char *fdr__cuda_last_error(void)
{
	return "built without CUDA";
}
int rc_feeder_h2d_peak(int device, size_t len, int iters, double *gbps, char *err, size_t errlen)
{
	snprintf(err, errlen, "built without CUDA");
	return -ENODEV;
}

#endif
