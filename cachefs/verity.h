/*
 * verity.h - fs-verity on sealed files, where the cache's file system has it.
 *
 * A file sealed with fs-verity can no longer be written (open for writing
 * fails with EPERM), and the kernel checks every page read from the disk
 * against the file's Merkle tree, so a byte changed under the file (on the
 * device) reads as EIO - in passthrough too, where the daemon sees no read.
 * This is the only protection of a file after its first pass that does not
 * wait for the scrubber (docs/reliability.md, "Integrity").
 *
 * Needs Linux with CONFIG_FS_VERITY and a file system that has it turned
 * on (ext4 and f2fs with the `verity` feature, btrfs).  Where it is
 * missing, the ioctl fails with EOPNOTSUPP (ext4 without the feature or
 * the kernel option) or ENOTTY (a file system without the ioctl, tmpfs).
 */
#ifndef RC_CACHEFS_VERITY_H
#define RC_CACHEFS_VERITY_H

#include <stddef.h>

/*
 * Seals the file `name` in directory `dir_fd` with fs-verity (SHA-256,
 * 4 KiB blocks).  No file descriptor open for writing may remain on it
 * (ETXTBSY).  Returns an O_RDONLY descriptor of the sealed file (the
 * caller closes it), or -errno.
 */
int cfs_verity_enable(int dir_fd, const char *name);

/*
 * Whether files created in `dir_fd` can be sealed with fs-verity: seals a
 * one-byte file `name` there and removes it.  Returns 0, or -errno with
 * `why` set to a one-line reason ("the kernel or the file system has no
 * fs-verity (Operation not supported)").
 */
int cfs_verity_probe(int dir_fd, const char *name, char *why, size_t whylen);

#endif
