/*
 * http_list_i.h - listing an http(s):// source (http_list.c), for source.c
 * and its unit test.
 */
#ifndef RC_SAMPLER_HTTP_LIST_I_H
#define RC_SAMPLER_HTTP_LIST_I_H

#include <stdbool.h>
#include <stddef.h>

#include "sampler/listing.h"
#include "sampler/request_i.h"

/* One autoindex entry (a JSON object) may take at most this many bytes. */
#define SMP_AUTOINDEX_ENTRY_CAP ((size_t)16 << 10)
/* Entries of one autoindex page (one directory). */
#define SMP_AUTOINDEX_MAX_ENTRIES 2000000u

/*
 * Lists base ("http(s)://host/prefix/") through c: its MANIFEST when the
 * server has one (404/401/403 mean none), else the nginx JSON autoindex,
 * walking subdirectories breadth-first.  With `since` (the validator of an
 * earlier listing, non-empty), the MANIFEST is asked for only if its ETag
 * is another: -EALREADY when it is the same.  A listing from a MANIFEST
 * gets its ETag as l->validator.  Returns 0, or -errno with a one-line
 * message; l may hold a part of the listing then (caller frees).
 */
int smp__http_list(struct smp_conn *c, const char *base, const char *since, struct smp_listing *l,
		   char *err, size_t errlen);

/*
 * Parses a MANIFEST body (`name size` lines) into l.  Returns 0, -EINVAL
 * with a message naming the line, or an error of smp__listing_add().
 */
int smp__parse_manifest(const char *body, size_t len, struct smp_listing *l, char *err,
			size_t errlen);

/*
 * Parses one autoindex page of the directory `rel` ("" or "a/b/").  Files
 * are added to l with key prefix rel; subdirectories ("rel/name/") are
 * appended to dirs, NUL-separated, for the caller to walk (dirs->max caps
 * them).  Returns 0, or -EPROTO (not an autoindex, malformed JSON, a field
 * of the wrong type or range), -EFBIG (body over SMP_LIST_BODY_CAP or an
 * entry over SMP_AUTOINDEX_ENTRY_CAP), -E2BIG (too many entries or
 * directories), -ENOMEM, with a one-line message.
 */
int smp__parse_autoindex(const char *body, size_t len, const char *rel, struct smp_listing *l,
			 struct smp_buf *dirs, char *err, size_t errlen);

/*
 * Whether smp__parse_autoindex() decodes entries of nginx's own shape
 * itself (http_list.c, "THE FAST PATH"); true, and left so but by the
 * tests and the fuzz target that hold it to jansson's decoding.
 */
extern bool smp__autoindex_fast;

/* The bytes of entry[0..len) the fast path decodes as one entry, 0 if not its (tests). */
size_t smp__autoindex_scan(const char *entry, size_t len);

#endif
