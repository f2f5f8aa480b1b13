/*
 * stats_read.h - reading a mount's MOUNTPOINT/.rollcache/stats, the JSON
 * that daemon/stats.c writes from its table of figures (docs/mount.md,
 * docs/counters.md).
 *
 * The commands look a figure up by its path in that table, "disk.draining"
 * or "epoch", so they restate no list of fields.  A figure the JSON lacks
 * (an older daemon) reads as 0, false or "".  Links jansson and common/,
 * nothing of the daemon: the header only shares its cap.
 */
#ifndef RC_CLI_STATS_READ_H
#define RC_CLI_STATS_READ_H

#include "daemon/stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Cap on .rollcache/stats: the daemon's own cap on the text it serves. */
#define STATS_MAX DMN_STATS_TEXT_MAX

/*
 * Reads and parses MP/.rollcache/stats.  On success *root is its top-level
 * object (json_decref() by the caller) and, when text is not NULL, *text the
 * text as read (free() by the caller).  Returns 0, the read's -errno
 * (-ENOENT: not a mount, -ENOTCONN: a dead daemon, -EFBIG: over STATS_MAX),
 * or -EBADMSG when the text is not a JSON object, with jansson's reason in
 * err[errlen]; on failure *root and *text are unchanged.
 */
int cli_stats_read(const char *mp, json_t **root, char **text, char *err, size_t errlen);

/* The value at path ("key" or "object.key") in root, or NULL. Borrowed from root. */
const json_t *cli_stats_get(const json_t *root, const char *path);

/* The figure at path as a count: 0 when missing, negative or not an integer. */
uint64_t cli_stats_count(const json_t *root, const char *path);

/* The figure at path as a number (true is 1); 0 when missing or not a number. */
double cli_stats_num(const json_t *root, const char *path);

/* Whether the figure at path is JSON true. */
bool cli_stats_true(const json_t *root, const char *path);

/* The string at path, borrowed from root; "" when missing or not a string. */
const char *cli_stats_str(const json_t *root, const char *path);

/* The sum of the positive integers of the "errors" object: every kind of error. */
uint64_t cli_stats_errors(const json_t *root);

/* The current epoch's row of "epochs", or NULL (none, or "epoch": null). Borrowed. */
const json_t *cli_stats_epoch_row(const json_t *root);

#endif
