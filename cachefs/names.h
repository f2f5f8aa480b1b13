/*
 * names.h - display names for raw objects (format=raw), DESIGN invariant 7.
 *
 * A remote key is data: no local path is ever built from it (files live at
 * objects/<id>).  The mount shows a raw object under a display name derived
 * from its key by cfs_sanitize_key(): a relative path whose components are
 * never "", "." or "..", hold no NUL, no control bytes, no bidi controls,
 * no ill-formed UTF-8 and no '%' except as escapes, and are at most
 * CFS_NAME_MAX bytes.  Percent-decoding a name gives its key back.  The escaping is reversible
 * for keys that need no truncation and have no empty components, so two
 * such keys never share a name; for the rest (lossy cases), and for any
 * remaining clash, cfs_display_name() appends a "~<id>" suffix that is
 * unique by construction; the catalog's unique index on names is the
 * final guard (cfs_catalog_shard_insert returns -EEXIST).
 */
#ifndef RC_CACHEFS_NAMES_H
#define RC_CACHEFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFS_NAME_MAX	255  /* bytes per path component */
#define CFS_DEPTH_MAX	32   /* components per display path; deeper keys are joined */
#define CFS_DISPLAY_MAX 2048 /* bytes of a whole display path, NUL included */

/*
 * Writes the sanitized display path of `key` into out (outlen >=
 * CFS_DISPLAY_MAX recommended):
 *   - the key is split on '/'; empty components (leading '/', "//", a
 *     trailing '/') are dropped;
 *   - bytes < 0x20, 0x7f and '%' are written as %XX (uppercase hex); so is
 *     '~' when it is the first byte of a suffix-like tail ("~<digits>" at
 *     the end of the last component), keeping suffixes unforgeable;
 *   - C1 controls (U+0080-U+009F) and bidi controls (U+061C, U+200E,
 *     U+200F, U+202A-U+202E, U+2066-U+2069) are written as the %XX of each
 *     of their UTF-8 bytes (U+202E -> "%E2%80%AE"), and so is every byte of
 *     ill-formed UTF-8 ("\xff" -> "%FF"): a name is valid UTF-8 and holds
 *     no control that reorders or hides text;
 *   - a component "." or ".." becomes "%2E" or "%2E%2E";
 *   - a component longer than CFS_NAME_MAX bytes after escaping is cut at
 *     CFS_NAME_MAX bytes (never inside an escape or a character);
 *   - components beyond CFS_DEPTH_MAX are joined into the last one with
 *     "%2F";
 *   - a key with no component left becomes "%" "00" ("%00").
 * Returns 0; *lossy (if not NULL) tells whether a drop or cut happened, in
 * which case the name may equal another key's.  -ENAMETOOLONG if the result
 * does not fit outlen (out then holds "").  Pure, thread-safe.
 */
int cfs_sanitize_key(const char *key, char *out, size_t outlen, bool *lossy);

/*
 * The display name of raw object `key` stored as file `id`:
 * cfs_sanitize_key(key), plus "~<id>" on its last component when `suffix`
 * is true (the caller asks for it after a lossy sanitize or after the
 * catalog answered -EEXIST).  The last component is shortened so that
 * name + suffix stays within CFS_NAME_MAX.  Returns 0 or -ENAMETOOLONG.
 */
int cfs_display_name(const char *key, int64_t id, bool suffix, char *out, size_t outlen);

#endif
