/*
 * passthrough.c - FUSE passthrough on libfuse 3.14's custom I/O hooks.
 *
 * See passthrough.h for what and why.  The layouts used are the kernel's
 * (include/uapi/linux/fuse.h, protocol 7.40): Debian 12's linux-libc-dev
 * (6.1) has the structures but not the passthrough fields, which sit in
 * what it calls padding:
 *   fuse_init_out.unused[0]    is max_stack_depth (7.40)
 *   fuse_open_out.padding      is backing_id      (7.40)
 *   FUSE_PASSTHROUGH           is bit 37 of the init flags, i.e. flags2 bit 5
 *   FOPEN_PASSTHROUGH          is open flag bit 7
 *   FUSE_DEV_IOC_BACKING_OPEN  _IOW(229, 1, struct fuse_backing_map)
 *   FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
 *
 * Replies are patched on a copy: libfuse's iovecs are left as they are.
 * Only two replies are ever candidates (the INIT reply, identified by the
 * unique of the INIT request, and an OPEN reply armed by the thread that
 * sends it), so the cost for every other message is one thread-local test
 * and one relaxed atomic load.
 */
#include "cachefs/passthrough.h"

#include "common/log.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define PT_IOC_BACKING_OPEN  _IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

_Static_assert(sizeof(struct fuse_in_header) == 40, "FUSE request header");
_Static_assert(sizeof(struct fuse_out_header) == 16, "FUSE reply header");
_Static_assert(sizeof(struct fuse_init_out) == 64, "FUSE INIT reply (7.36+)");
_Static_assert(sizeof(struct fuse_open_out) == 16, "FUSE OPEN reply");

struct cfs_pt {
	_Atomic uint64_t init_unique; /* the INIT request's unique while its reply is due; 0 else */
	_Atomic bool offered;	      /* the kernel's INIT offered passthrough */
	_Atomic bool enabled;	      /* our INIT reply accepted it */
};

/* This thread's armed OPEN reply (cfs_pt_arm). */
static _Thread_local struct {
	bool armed, patched;
	int backing_id;
	uint64_t fh;
} tl_open;

struct cfs_pt *cfs_pt_new(void)
{
	return calloc(1, sizeof(struct cfs_pt));
}

void cfs_pt_free(struct cfs_pt *pt)
{
	free(pt);
}

bool cfs_pt_enabled(const struct cfs_pt *pt)
{
	return pt && atomic_load_explicit(&pt->enabled, memory_order_acquire);
}

ssize_t cfs_pt_read(struct cfs_pt *pt, int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	struct fuse_in_header in;
	memcpy(&in, buf, sizeof(in));
	if (in.opcode != FUSE_INIT)
		return n;
	struct fuse_init_in init;
	memset(&init, 0, sizeof(init));
	size_t body = (size_t)n - sizeof(in);
	memcpy(&init, (const char *)buf + sizeof(in), body < sizeof(init) ? body : sizeof(init));
	bool offered = body >= offsetof(struct fuse_init_in, flags2) + sizeof(init.flags2) &&
		       (init.flags & CFS_PT_INIT_EXT) && (init.flags2 & CFS_PT_FLAGS2_PASSTHROUGH);
	atomic_store_explicit(&pt->offered, offered, memory_order_relaxed);
	atomic_store_explicit(&pt->init_unique, in.unique, memory_order_release);
	return n;
}

/* Gathers iov into buf (cap bytes).  Returns the length, or 0 if it does not fit. */
static size_t gather(const struct iovec *iov, int count, char *buf, size_t cap)
{
	size_t n = 0;
	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > cap - n)
			return 0;
		memcpy(buf + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	return n;
}

/* Accepts passthrough in a copy of the INIT reply; false to send it as it is. */
static bool patch_init(struct cfs_pt *pt, char *msg, size_t len)
{
	struct fuse_out_header out;
	struct fuse_init_out init;
	if (len != sizeof(out) + sizeof(init))
		return false;
	memcpy(&out, msg, sizeof(out));
	memcpy(&init, msg + sizeof(out), sizeof(init));
	if (out.error != 0 || !atomic_load_explicit(&pt->offered, memory_order_relaxed))
		return false;
	if (init.flags & FUSE_WRITEBACK_CACHE)
		return false; /* the kernel refuses the two together */
	init.flags |= CFS_PT_INIT_EXT;
	init.flags2 |= CFS_PT_FLAGS2_PASSTHROUGH;
	init.unused[0] = CFS_PT_MAX_STACK_DEPTH; /* max_stack_depth */
	memcpy(msg + sizeof(out), &init, sizeof(init));
	return true;
}

/* Puts FOPEN_PASSTHROUGH and the armed backing id in a copy of an OPEN reply. */
static bool patch_open(char *msg, size_t len)
{
	struct fuse_out_header out;
	struct fuse_open_out open;
	if (len != sizeof(out) + sizeof(open))
		return false;
	memcpy(&out, msg, sizeof(out));
	memcpy(&open, msg + sizeof(out), sizeof(open));
	if (out.error != 0 || open.fh != tl_open.fh)
		return false;
	open.open_flags |= CFS_PT_FOPEN_PASSTHROUGH;
	open.padding = (uint32_t)tl_open.backing_id; /* backing_id */
	memcpy(msg + sizeof(out), &open, sizeof(open));
	return true;
}

ssize_t cfs_pt_writev(struct cfs_pt *pt, int fd, const struct iovec *iov, int count)
{
	bool armed = tl_open.armed;
	uint64_t init_unique = atomic_load_explicit(&pt->init_unique, memory_order_acquire);
	if ((!armed && !init_unique) || count < 1 ||
	    iov[0].iov_len != sizeof(struct fuse_out_header))
		return writev(fd, iov, count);

	struct fuse_out_header out;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	char msg[sizeof(struct fuse_out_header) + sizeof(struct fuse_init_out)];
	size_t len = 0;
	bool patched = false;
	if (init_unique && out.unique == init_unique) {
		atomic_store_explicit(&pt->init_unique, 0, memory_order_relaxed);
		len = gather(iov, count, msg, sizeof(msg));
		patched = len && patch_init(pt, msg, len);
		if (patched) {
			ssize_t w = write(fd, msg, len);
			if (w >= 0)
				atomic_store_explicit(&pt->enabled, true, memory_order_release);
			return w;
		}
	} else if (armed) {
		tl_open.armed = false;
		len = gather(iov, count, msg, sizeof(msg));
		patched = len && patch_open(msg, len);
		if (patched) {
			ssize_t w = write(fd, msg, len);
			tl_open.patched = w >= 0;
			return w;
		}
	}
	return writev(fd, iov, count);
}

int cfs_pt_backing_open(struct cfs_pt *pt, int dev_fd, int backing_fd)
{
	if (!cfs_pt_enabled(pt))
		return -EOPNOTSUPP;
	struct pt_backing_map map = {.fd = backing_fd};
	int id = ioctl(dev_fd, PT_IOC_BACKING_OPEN, &map);
	if (id < 0)
		return -errno;
	return id > 0 ? id : -EINVAL; /* ids start at 1 */
}

void cfs_pt_backing_close(int dev_fd, int backing_id)
{
	uint32_t id = (uint32_t)backing_id;
	if (backing_id > 0 && ioctl(dev_fd, PT_IOC_BACKING_CLOSE, &id) != 0 && errno != ENODEV)
		cmn_log(CMN_LOG_WARN, "FUSE passthrough: closing backing id %d: %s", backing_id,
			strerror(errno));
}

void cfs_pt_arm(int backing_id, uint64_t fh)
{
	tl_open.armed = true;
	tl_open.patched = false;
	tl_open.backing_id = backing_id;
	tl_open.fh = fh;
}

bool cfs_pt_disarm(void)
{
	bool patched = tl_open.patched;
	tl_open.armed = false;
	tl_open.patched = false;
	return patched;
}
