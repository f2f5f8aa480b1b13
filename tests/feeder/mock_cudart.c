/*
 * mock_cudart.c - a stand-in libcudart for machines without a GPU, so the
 * feeder's device path (pinned ring, device buffers, copy stream, events,
 * release waits) runs in tests: "device" memory is host memory, copies are
 * memcpy, streams and events only count what is done with them.  Loaded by
 * feeder/cuda.c through $ROLLCACHE_CUDART (test 'feeder-cuda-mock').  It
 * checks the feeder's use of the API, not CUDA itself: the real path is
 * tested by feeder-gpu on a machine with a GPU.
 */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mock_counts {
	long host_allocs, host_frees, dev_allocs, dev_frees;
	long h2d_async, h2d_async_bytes, events_recorded, stream_waits, event_syncs;
	long streams, streams_destroyed, events, events_destroyed, bad_calls;
};

static struct mock_counts mc;

/* Counters for the test (dlsym). */
struct mock_counts *mock_cudart_counts(void);
struct mock_counts *mock_cudart_counts(void)
{
	return &mc;
}

#define ADD(x) __atomic_add_fetch(&mc.x, 1, __ATOMIC_RELAXED)

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		ADD(bad_calls);
	return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDevice(int *device)
{
	*device = 0;
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	(void)flags;
	*p = malloc(size);
	ADD(host_allocs);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	ADD(host_frees);
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
	*p = malloc(size);
	if (*p)
		memset(*p, 0xa5, size); /* a missing copy shows as garbage */
	ADD(dev_allocs);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	ADD(dev_frees);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = (cudaStream_t)malloc(16);
	ADD(streams);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	ADD(streams_destroyed);
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	(void)flags;
	if (!s || !e)
		ADD(bad_calls);
	ADD(stream_waits);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	(void)flags;
	*e = (cudaEvent_t)malloc(16);
	ADD(events);
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	ADD(events_destroyed);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	if (!e)
		ADD(bad_calls);
	ADD(events_recorded);
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (!e)
		ADD(bad_calls);
	ADD(event_syncs);
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	(void)a;
	(void)b;
	*ms = 0.01f;
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)s;
	if (kind != cudaMemcpyHostToDevice)
		ADD(bad_calls);
	memcpy(dst, src, n);
	ADD(h2d_async);
	__atomic_add_fetch(&mc.h2d_async_bytes, (long)n, __ATOMIC_RELAXED);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	memcpy(dst, src, n);
	return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaSuccess ? "cudaSuccess" : "mockError";
}
