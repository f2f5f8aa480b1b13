/*
 * stats.c - the boundary plan as JSON for `.rollcache/stats` (evictor.h).
 *
 * Pure formatting into a caller's buffer: no allocation, no locks.  Strings
 * are escaped for JSON (quotes, backslashes, control characters), so a
 * reason line can never break the stats document.
 */
#include "eviction/evictor.h"
#include "eviction/policy_i.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

struct out {
	char *buf;
	size_t len, pos;
	int full;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	if (o->full)
		return;
	size_t room = o->len - o->pos;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->pos, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		o->full = 1;
		o->pos = o->len;
	} else {
		o->pos += (size_t)n;
	}
}

static void put_string(struct out *o, const char *s)
{
	put(o, "\"");
	for (; *s && !o->full; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20)
			put(o, "\\u%04x", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

int evc_plan_json(uint32_t epoch, const struct evc_entry *s, const struct evc_plan *p, char *buf,
		  size_t len)
{
	struct out o = {buf, len, 0, 0};

	if (len == 0)
		return -ENOSPC;
	buf[0] = '\0';
	put(&o, "{\"epoch\":%u,\"entry\":{\"first\":%u,\"last\":", epoch, s->first);
	if (s->last == CMN_EPOCH_OPEN)
		put(&o, "null");
	else
		put(&o, "%u", s->last);
	put(&o, ",\"limit\":%llu,\"admit\":%llu,\"policy\":", (unsigned long long)s->limit,
	    (unsigned long long)s->admit);
	put_string(&o, evc__policy_name(s->policy));
	put(&o, ",\"min_uses\":%u,\"seed\":%llu},", s->min_uses, (unsigned long long)s->seed);
	put(&o,
	    "\"evicted_shards\":%zu,\"evicted_bytes\":%llu,\"used\":%llu,\"admit_budget\":%llu,",
	    p->n_victims, (unsigned long long)p->evict_bytes, (unsigned long long)p->used_after,
	    (unsigned long long)p->admit);
	put(&o, "\"reason\":");
	put_string(&o, evc_reason_name(p->reason));
	put(&o, ",\"why\":");
	put_string(&o, p->why);
	put(&o, "}");
	if (o.full) {
		buf[len - 1] = '\0';
		return -ENOSPC;
	}
	return (int)o.pos;
}
