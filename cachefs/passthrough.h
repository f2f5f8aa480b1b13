/*
 * passthrough.h - FUSE passthrough (kernel >= 6.9) with libfuse 3.14.
 *
 * With passthrough the kernel serves a file's reads, splices and mmaps from
 * a backing file the daemon registered, through that file's own page cache
 * (ext4's, with its large folios): no round trip per uncached MiB, and no
 * second copy of the data in the FUSE inode's page cache.
 *
 * libfuse 3.14 has no API for it (3.16 added one), so this module does the
 * three protocol steps itself, on the session's custom I/O hooks
 * (fuse_session_custom_io, which 3.14 has):
 *   1. it reads the INIT request to learn whether the kernel offers
 *      FUSE_PASSTHROUGH, and patches libfuse's INIT reply to accept it
 *      (flags2 bit, max_stack_depth);
 *   2. cfs_pt_backing_open() registers a backing fd with the
 *      FUSE_DEV_IOC_BACKING_OPEN ioctl (needs CAP_SYS_ADMIN) and returns its
 *      backing id;
 *   3. an OPEN reply armed with cfs_pt_arm() by the thread that sends it
 *      leaves with FOPEN_PASSTHROUGH and that backing id.
 * Every other message passes through untouched.  Nothing here knows about
 * epochs or files; fs_read.c decides which opens pass through.
 *
 * The kernel's rules the caller must keep (fs/fuse/iomode.c): all open
 * handles of an inode are either passthrough, with one backing id, or not;
 * a mismatch fails the open with EIO.
 */
#ifndef RC_CACHEFS_PASSTHROUGH_H
#define RC_CACHEFS_PASSTHROUGH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct cfs_pt;

/*
 * A new passthrough state, to be installed as the session's custom I/O
 * (-o no_passthrough installs none).  NULL when out of memory.
 */
struct cfs_pt *cfs_pt_new(void);

/* Frees it (backing ids die with the FUSE connection).  NULL is ignored. */
void cfs_pt_free(struct cfs_pt *pt);

/*
 * The custom I/O hooks, with read(2) and writev(2) semantics (-1 and errno
 * on failure).  cfs_pt_read() notes the INIT request; cfs_pt_writev()
 * patches the INIT reply and an armed OPEN reply.
 */
ssize_t cfs_pt_read(struct cfs_pt *pt, int fd, void *buf, size_t len);
ssize_t cfs_pt_writev(struct cfs_pt *pt, int fd, const struct iovec *iov, int count);

/* Whether the kernel accepted passthrough at INIT (false before INIT). */
bool cfs_pt_enabled(const struct cfs_pt *pt);

/*
 * Registers `backing_fd` (an open regular file) on the FUSE device fd
 * `dev_fd`.  Returns the backing id (> 0) or -errno: -EPERM without
 * CAP_SYS_ADMIN, -ELOOP when the backing file system is stacked too deep,
 * -EOPNOTSUPP when passthrough is not enabled.
 */
int cfs_pt_backing_open(struct cfs_pt *pt, int dev_fd, int backing_fd);

/* Drops a backing id (the kernel keeps the file while handles use it). */
void cfs_pt_backing_close(int dev_fd, int backing_id);

/*
 * Arms this thread's next OPEN reply: if it answers success with file handle
 * `fh`, it leaves with FOPEN_PASSTHROUGH and `backing_id`.  Call right before
 * fuse_reply_open(); cfs_pt_disarm() right after returns whether the reply
 * was patched (false: the kernel opened the file without passthrough).
 */
void cfs_pt_arm(int backing_id, uint64_t fh);
bool cfs_pt_disarm(void);

/*
 * Test hooks: the offsets and bits used, so tests can build protocol
 * messages without the kernel headers of 6.9+.
 */
#define CFS_PT_FLAGS2_PASSTHROUGH (1u << 5) /* FUSE_PASSTHROUGH is bit 37: flags2 bit 5 */
#define CFS_PT_FOPEN_PASSTHROUGH  (1u << 7)
#define CFS_PT_INIT_EXT		  (1u << 30)
#define CFS_PT_MAX_STACK_DEPTH	  2

#endif
