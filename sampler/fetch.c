/*
 * fetch.c - the transfer engine: one curl multi handle, `connections`
 * parallel range GETs, retries with backoff.  A file:// source's
 * transfers do not go through curl: each is read with open/pread on the
 * engine's thread (run_local), what `cp` does, instead of an easy handle
 * per object (for 2 KiB objects curl's setup and multi loop cost more
 * than the read); its body, its end and its failures go through the same
 * callbacks and the same retry policy as a curl transfer's.
 *
 * Owns the queue of requests and their easy handles.  Does not parse bodies
 * (callers' callbacks do) and does not sleep: waiting for a retry is a
 * deadline the poll timeout respects, so other transfers keep running.
 *
 * States of a request: QUEUED (in f->queue, maybe with a not-before time,
 * or waiting for its consumer's grant) -> RUNNING (added to the multi) ->
 * done(), or back to QUEUED for a retry, or for its next range: RUNNING
 * again at once on the connection it freed when the consumer grants it
 * (completed()), else first in the queue until it does.
 * Bounds: attempts <= retries + 1; each attempt is bounded by the connect
 * timeout and the low-speed limit set in smp_source_easy_defaults(); waits by
 * SMP_BACKOFF_MAX_MS / SMP_RETRY_AFTER_MAX_MS.
 * Threads: everything but smp_fetch_wakeup() runs on the caller's thread.
 */
#include "sampler/fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "sampler/request_i.h"

#define ERRBODY_CAP	  512
#define SMP_GRANT_POLL_MS 20	      /* how often a request waiting for its grant asks again */
#define SMP_LOCAL_CHUNK	  (64 * 1024) /* bytes per pread of a file:// transfer */

struct xfer {
	struct smp_fetch *f;
	struct xfer *next; /* queue link */
	CURL *easy;	   /* NULL for a file:// transfer (local) */
	bool local;	   /* running as a file:// read (run_local), no easy handle */
	struct curl_slist *hdrs;
	char *key;
	uint64_t off, end; /* [off, end), end 0: to the object's end */
	uint64_t size;	   /* object size (0 unknown) */
	uint64_t cur;	   /* next object offset we expect (resume point) */
	uint64_t req_end;  /* end of the range this attempt asked for (0: to end) */
	bool whole;	   /* the server ignored a Range: no more granted ranges */
	uint64_t skip;	   /* bytes to drop: the server ignored our Range */
	uint32_t attempt;
	uint64_t not_before; /* ms, monotonic */
	uint64_t retry_after_ms;
	long status;
	bool status_seen;
	int cb_rc;	  /* a callback's non-zero return */
	bool paused;	  /* answered CURL_WRITEFUNC_PAUSE while the engine is held */
	uint64_t counted; /* body bytes of this attempt counted in bytes_fetched */
	char errbody[ERRBODY_CAP];
	size_t errbody_len;
	const struct smp_xfer_ops *ops;
	void *ctx;
};

struct smp_fetch {
	struct smp_source *source;
	struct smp_stats *stats;
	CURLM *multi;
	unsigned conns;
	uint32_t retries;
	uint64_t rng;
	struct xfer *queue, *queue_tail;
	unsigned queued, running;
	struct xfer **run;  /* [conns]: running transfers, NULL slots free */
	CURL **idle;	    /* easy handles kept for reuse */
	bool hold;	    /* smp_fetch_hold(): pause transfers at their next chunk */
	unsigned ungranted; /* queued requests the last step found without a grant */
	unsigned n_idle;
	bool local; /* a file:// source: transfers are read here (run_local) */
	char *buf;  /* [SMP_LOCAL_CHUNK] for run_local */
};

int smp_fetch_new(struct smp_fetch **out, struct smp_source *source, unsigned connections,
		  uint32_t retries, uint64_t seed, char *err, size_t errlen)
{
	struct smp_fetch *f = calloc(1, sizeof(*f));
	if (!f)
		goto nomem;
	f->source = source;
	f->stats = smp_source_stats(source);
	f->conns = connections ? connections : 1;
	f->retries = retries;
	f->rng = seed ^ 0x5851f42d4c957f2dull;
	f->idle = calloc(f->conns, sizeof(*f->idle));
	f->run = calloc(f->conns, sizeof(*f->run));
	f->multi = curl_multi_init();
	f->local = smp_source_scheme(source) == SMP_SCHEME_FILE;
	if (f->local)
		f->buf = malloc(SMP_LOCAL_CHUNK);
	if (!f->idle || !f->run || !f->multi || (f->local && !f->buf))
		goto nomem;
	curl_multi_setopt(f->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)f->conns);
	curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, (long)f->conns * 2);
	curl_multi_setopt(f->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	*out = f;
	return 0;
nomem:
	if (f) {
		free(f->buf);
		free(f->idle);
		free(f->run);
		if (f->multi)
			curl_multi_cleanup(f->multi);
		free(f);
	}
	snprintf(err, errlen, "out of memory starting the transfer engine");
	return -ENOMEM;
}

/*
 * Counts what curl received for this attempt's body so far - delivered or
 * not: held in a paused chunk, or dropped when the transfer is cancelled -
 * so that bytes_fetched is what the server sent.
 */
static void count_received(struct xfer *x)
{
	curl_off_t dl = 0;
	if (!x->easy || curl_easy_getinfo(x->easy, CURLINFO_SIZE_DOWNLOAD_T, &dl) != CURLE_OK ||
	    dl < 0)
		return;
	if ((uint64_t)dl > x->counted) {
		SMP_STAT_ADD(x->f->stats, bytes_fetched, (uint64_t)dl - x->counted);
		x->counted = (uint64_t)dl;
	}
}

/*
 * The request is over, as `how` says (enum smp_xfer_end: ended, or given
 * up by the transport and why): its connection goes idle, done() is told.
 */
static void end_as(struct xfer *x, int rc, enum smp_xfer_end how, const char *msg)
{
	struct smp_fetch *f = x->f;
	count_received(x);
	if (x->easy) {
		if (f->n_idle < f->conns)
			f->idle[f->n_idle++] = x->easy;
		else
			curl_easy_cleanup(x->easy);
		x->easy = NULL;
	}
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	x->ops->done(x->ctx, rc, how, msg ? msg : "");
	free(x->key);
	free(x);
}

/* The request is over (done, cancelled, or failed for a reason of the caller's). */
static void finish(struct xfer *x, int rc, const char *msg)
{
	end_as(x, rc, SMP_XFER_ENDED, msg);
}

void smp_fetch_cancel_all(struct smp_fetch *f)
{
	struct xfer *q = f->queue;
	f->queue = f->queue_tail = NULL;
	f->queued = 0;
	while (q) {
		struct xfer *nx = q->next;
		finish(q, -ECANCELED, "cancelled");
		q = nx;
	}
	for (unsigned i = 0; i < f->conns; i++) {
		struct xfer *x = f->run[i];
		if (!x)
			continue;
		f->run[i] = NULL;
		if (x->easy)
			curl_multi_remove_handle(f->multi, x->easy);
		f->running--;
		finish(x, -ECANCELED, "cancelled");
	}
}

void smp_fetch_free(struct smp_fetch *f)
{
	if (!f)
		return;
	smp_fetch_cancel_all(f);
	for (unsigned i = 0; i < f->n_idle; i++)
		curl_easy_cleanup(f->idle[i]);
	free(f->idle);
	free(f->run);
	free(f->buf);
	curl_multi_cleanup(f->multi);
	free(f);
}

int smp_fetch_add(struct smp_fetch *f, const struct smp_fetch_req *r)
{
	struct xfer *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->key = strdup(r->key);
	if (!x->key) {
		free(x);
		return -ENOMEM;
	}
	x->f = f;
	x->off = x->cur = r->off;
	x->end = r->len ? r->off + r->len : 0;
	x->size = r->size;
	x->ops = r->ops;
	x->ctx = r->ctx;
	if (f->queue_tail)
		f->queue_tail->next = x;
	else
		f->queue = x;
	f->queue_tail = x;
	f->queued++;
	return 0;
}

unsigned smp_fetch_pending(const struct smp_fetch *f)
{
	return f->queued + f->running;
}

unsigned smp_fetch_running(const struct smp_fetch *f)
{
	return f->running;
}

unsigned smp_fetch_ungranted(const struct smp_fetch *f)
{
	return f->ungranted;
}

void smp_fetch_hold(struct smp_fetch *f, bool hold)
{
	f->hold = hold;
	if (hold)
		return;
	for (unsigned i = 0; i < f->conns; i++) {
		struct xfer *x = f->run[i];
		if (x && x->paused) {
			x->paused = false;
			/* may call on_body at once with the held chunk: hold is off now */
			curl_easy_pause(x->easy, CURLPAUSE_CONT);
		}
	}
}

void smp_fetch_wakeup(struct smp_fetch *f)
{
	curl_multi_wakeup(f->multi);
}

/* ---- callbacks ------------------------------------------------------------ */

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = sz * n;
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		x->retry_after_ms = 0; /* a new response (after 100-continue, ...) */
		x->status_seen = false;
	}
	uint64_t ra = smp__retry_after_header(p, len);
	if (ra)
		x->retry_after_ms = ra;
	return len;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = sz * n;
	if (!x->status_seen) {
		x->status_seen = true;
		x->status = 0;
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
		if (x->status == 0)
			x->status = 206; /* file:// honours ranges and has no status */
		/* asked for a range from cur but got the whole object: drop the head */
		if (x->status == 200 && x->cur > 0)
			x->skip = x->cur;
		if (x->status == 200 && x->req_end) { /* and the tail: take it all now */
			x->req_end = 0;
			x->whole = true;
		}
	}
	count_received(x);
	if (x->f->hold && x->status >= 200 && x->status < 300) {
		x->paused = true;
		return CURL_WRITEFUNC_PAUSE; /* curl delivers this chunk again on release */
	}
	if (x->status < 200 || x->status >= 300) {
		size_t room = ERRBODY_CAP - 1 - x->errbody_len;
		size_t c = len < room ? len : room;
		memcpy(x->errbody + x->errbody_len, p, c);
		x->errbody_len += c;
		x->errbody[x->errbody_len] = '\0';
		return len;
	}
	size_t used = 0;
	if (x->skip) {
		size_t d = x->skip < len ? (size_t)x->skip : len;
		x->skip -= d;
		used = d;
	}
	size_t give = len - used;
	uint64_t stop_at = x->req_end ? x->req_end : x->end;
	if (stop_at && x->cur + give > stop_at)
		give = stop_at > x->cur ? (size_t)(stop_at - x->cur)
					: 0; /* over-long body: ignore the tail */
	if (give) {
		int rc = x->ops->data(x->ctx, p + used, give);
		if (rc) {
			x->cb_rc = rc;
			return 0; /* aborts with CURLE_WRITE_ERROR */
		}
		x->cur += give;
	}
	return len;
}

/* ---- running ------------------------------------------------------------- */

/* Puts x on a free connection slot (one is free: the caller checked). */
static void take_slot(struct smp_fetch *f, struct xfer *x)
{
	for (unsigned i = 0; i < f->conns; i++)
		if (!f->run[i]) {
			f->run[i] = x;
			break;
		}
	f->running++;
}

static int start(struct smp_fetch *f, struct xfer *x)
{
	char err[256];
	x->status = 0;
	x->status_seen = false;
	x->cb_rc = 0;
	x->skip = 0;
	x->errbody_len = 0;
	x->errbody[0] = '\0';
	x->retry_after_ms = 0;
	x->counted = 0; /* a new attempt: curl counts from 0 again */
	if (f->local) { /* read by run_local at this step's end */
		x->local = true;
		SMP_STAT_ADD(f->stats, requests, 1);
		take_slot(f, x);
		return 0;
	}
	CURL *e = f->n_idle ? f->idle[--f->n_idle] : curl_easy_init();
	if (!e) {
		finish(x, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	curl_easy_reset(e);
	x->easy = e;
	smp_source_easy_defaults(f->source, e);
	uint64_t to = x->req_end ? x->req_end : x->end;
	uint64_t len = to ? to - x->cur : 0;
	int rc = smp_source_prepare(f->source, e, x->key, x->cur, len, &x->hdrs, err, sizeof(err));
	if (rc) {
		finish(x, rc, err);
		return rc;
	}
	if (x->hdrs)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	if (curl_multi_add_handle(f->multi, e) != CURLM_OK) {
		finish(x, -EIO, "curl_multi_add_handle failed");
		return -EIO;
	}
	SMP_STAT_ADD(f->stats, requests, 1);
	take_slot(f, x);
	return 0;
}

/*
 * Whether x may start now, and how far it asks: with a grant() callback,
 * up to the consumer's grant (x->req_end), else to its end.
 */
static bool may_start(struct xfer *x)
{
	uint64_t want_end = x->end ? x->end : x->size;
	x->req_end = 0;
	if (!x->ops->grant || x->whole || !want_end || x->cur >= want_end)
		return true;
	uint64_t g = x->ops->grant(x->ctx, x->cur, want_end);
	if (g <= x->cur)
		return false;
	if (g < want_end)
		x->req_end = g;
	return true;
}

/* Schedules another attempt, or gives up with the reason in `why`. */
static void retry_or_fail(struct smp_fetch *f, struct xfer *x, int rc, const char *why)
{
	char msg[768];
	if (x->attempt >= f->retries) {
		snprintf(msg, sizeof(msg), "%s: gave up after %u attempts: %s", x->key,
			 x->attempt + 1, why);
		end_as(x, rc, SMP_XFER_EXHAUSTED, msg);
		return;
	}
	x->attempt++;
	uint64_t wait = smp__backoff_ms(x->attempt - 1, x->retry_after_ms, &f->rng);
	SMP_STAT_ADD(f->stats, retries, 1);
	SMP_STAT_ADD(f->stats, retry_wait_ms, wait);
	cmn_log(CMN_LOG_INFO, "%s: %s; attempt %u in %llu ms", x->key, why, x->attempt + 1,
		(unsigned long long)wait);
	uint64_t resume = x->ops->restart(x->ctx, x->attempt >= f->retries);
	x->cur = resume < x->off ? x->off : resume;
	x->not_before = cmn_mono_ms() + wait;
	/* waiting requests go to the back so ready ones are not held up */
	x->next = NULL;
	if (f->queue_tail)
		f->queue_tail->next = x;
	else
		f->queue = x;
	f->queue_tail = x;
	f->queued++;
}

/* Takes the finished transfer x off its connection; its easy handle goes idle or away. */
static void detach_easy(struct smp_fetch *f, struct xfer *x, CURL *e)
{
	count_received(x);
	curl_multi_remove_handle(f->multi, e);
	for (unsigned i = 0; i < f->conns; i++)
		if (f->run[i] == x)
			f->run[i] = NULL;
	f->running--;
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	if (f->n_idle < f->conns)
		f->idle[f->n_idle++] = e;
	else
		curl_easy_cleanup(e);
	x->easy = NULL;
}

/* A transfer answered with a status outside 2xx: retried, or the object fails. */
static void failed_status(struct smp_fetch *f, struct xfer *x, long status)
{
	char why[640];
	smp__count_failure(f->stats, CURLE_OK, status);
	snprintf(why, sizeof(why), "HTTP %ld%s%.200s", status, x->errbody_len ? ": " : "",
		 x->errbody);
	for (char *c = why; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	if (smp__status_retryable(status)) {
		retry_or_fail(f, x, -EIO, why);
		return;
	}
	char msg[768];
	snprintf(msg, sizeof(msg), "%s: %s (not retried)", x->key, why);
	end_as(x,
	       status == 404			  ? -ENOENT
	       : (status == 401 || status == 403) ? -EACCES
						  : -EIO,
	       SMP_XFER_REFUSED, msg);
}

/*
 * The attempt of x is over (off its connection), with curl's result cc
 * and the response status: done, retried, the next granted range, or
 * failed.
 */
static void attempt_over(struct smp_fetch *f, struct xfer *x, CURLcode cc, long status)
{
	char why[640];
	if (cc == CURLE_FILE_COULDNT_READ_FILE)
		status = 404, cc = CURLE_OK;
	if (x->cb_rc && x->cb_rc != -EAGAIN) {
		snprintf(why, sizeof(why), "%s: %s", x->key, strerror(-x->cb_rc));
		finish(x, x->cb_rc, why);
		return;
	}
	if (x->cb_rc == -EAGAIN) {
		retry_or_fail(f, x, -EBADMSG, "bad data in the body (CRC or framing)");
		return;
	}
	if (cc != CURLE_OK) {
		smp__count_failure(f->stats, cc, 0);
		snprintf(why, sizeof(why), "%s", curl_easy_strerror(cc));
		if (smp__curl_retryable(cc)) {
			retry_or_fail(f, x, cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO,
				      why);
		} else {
			char msg[768];
			snprintf(msg, sizeof(msg), "%s: %s (not retried)", x->key, why);
			end_as(x, -EIO, SMP_XFER_REFUSED, msg);
		}
		return;
	}
	if (status < 200 || status >= 300) {
		failed_status(f, x, status);
		return;
	}
	uint64_t want_end = x->end ? x->end : x->size;
	uint64_t asked_end = x->req_end ? x->req_end : want_end;
	if (asked_end && x->cur < asked_end) {
		SMP_STAT_ADD(f->stats, truncated, 1);
		snprintf(why, sizeof(why), "short body: %llu of %llu bytes",
			 (unsigned long long)x->cur, (unsigned long long)asked_end);
		retry_or_fail(f, x, -EPROTO, why);
		return;
	}
	if (want_end && x->cur < want_end) { /* a granted range is done: the next one */
		x->req_end = 0;
		x->not_before = 0;
		if (may_start(x)) { /* its room is granted: on the connection just freed */
			start(f, x);
			return;
		}
		x->next = f->queue; /* first in line: the object goes on */
		f->queue = x;
		if (!f->queue_tail)
			f->queue_tail = x;
		f->queued++;
		return;
	}
	int rc = x->ops->end(x->ctx);
	if (rc == -EAGAIN) {
		SMP_STAT_ADD(f->stats, truncated, 1);
		retry_or_fail(f, x, -EPROTO, "body ends inside a record");
		return;
	}
	finish(x, rc, rc ? "rejected by the record reader" : NULL);
}

static void completed(struct smp_fetch *f, CURL *e, CURLcode cc)
{
	struct xfer *x = NULL;
	curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
	detach_easy(f, x, e);

	long status = x->status;
	if (!x->status_seen) {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		if (status == 0 && cc == CURLE_OK)
			status = 200;
	}
	attempt_over(f, x, cc, status);
}

/*
 * One attempt of the file:// transfer x, read here: its range [cur,
 * req_end or end, or the file's end) in SMP_LOCAL_CHUNK preads, each
 * handed to data().  The file's absence or a failed open ends it as curl's
 * file:// does (CURLE_FILE_COULDNT_READ_FILE: not found, not retried), a
 * failed read as CURLE_READ_ERROR, a short file as a short body.  While
 * the engine is held (smp_fetch_hold) it stays on its connection where it
 * stopped, read on from there once released.  Returns whether it ended.
 */
static bool run_local(struct smp_fetch *f, struct xfer *x)
{
	char path[8192];
	CURLcode cc = CURLE_OK;
	long status = 206; /* file:// honours ranges and has no status */
	uint64_t stop = x->req_end ? x->req_end : x->end;
	if (f->hold)
		return false;
	int rc = smp_source_local_path(f->source, x->key, path, sizeof(path));
	/* as the listing's walk, no symbolic link at the end: nothing it did not list */
	int fd = rc ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (rc) {
		cc = CURLE_URL_MALFORMAT;
		status = 0;
	} else if (fd < 0) {
		cc = CURLE_FILE_COULDNT_READ_FILE;
		status = 0;
	}
	while (fd >= 0 && (!stop || x->cur < stop)) {
		if (f->hold) { /* a callback asked for it: on from x->cur when released */
			close(fd);
			return false;
		}
		size_t want = SMP_LOCAL_CHUNK;
		if (stop && stop - x->cur < want)
			want = (size_t)(stop - x->cur);
		ssize_t n = pread(fd, f->buf, want, (off_t)x->cur);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cc = CURLE_READ_ERROR;
			break;
		}
		if (n == 0)
			break;
		SMP_STAT_ADD(f->stats, bytes_fetched, (uint64_t)n);
		int drc = x->ops->data(x->ctx, f->buf, (size_t)n);
		if (drc) {
			x->cb_rc = drc;
			cc = CURLE_WRITE_ERROR;
			break;
		}
		x->cur += (uint64_t)n;
	}
	if (fd >= 0)
		close(fd);
	for (unsigned i = 0; i < f->conns; i++)
		if (f->run[i] == x)
			f->run[i] = NULL;
	f->running--;
	x->local = false;
	if (rc) {
		finish(x, rc, "key too long for a path");
		return true;
	}
	attempt_over(f, x, cc, status);
	return true;
}

/* Runs every file:// transfer on a connection; returns how many ended. */
static int run_locals(struct smp_fetch *f)
{
	int n = 0;
	for (unsigned i = 0; i < f->conns; i++) {
		struct xfer *x = f->run[i];
		if (x && x->local && run_local(f, x))
			n++;
	}
	return n;
}

/* Handles finished transfers; returns how many. */
static int drain_done(struct smp_fetch *f)
{
	CURLMsg *m;
	int left, n = 0;
	while ((m = curl_multi_info_read(f->multi, &left))) {
		if (m->msg == CURLMSG_DONE) {
			completed(f, m->easy_handle, m->data.result);
			n++;
		}
	}
	return n;
}

/*
 * One turn: start what may start, let curl work, and only when nothing
 * finished wait for activity (at most max_wait_ms, less when a retry is
 * due).  Returning right after a completion lets the caller queue the next
 * object before the engine sleeps, so a connection never idles for a poll
 * timeout between two objects.
 */
int smp_fetch_step(struct smp_fetch *f, int max_wait_ms)
{
	uint64_t now = cmn_mono_ms(), next_ready = UINT64_MAX;
	struct xfer **pp = &f->queue, *prev = NULL;
	bool ungranted = false;
	f->ungranted = 0;
	while (*pp) {
		struct xfer *x = *pp;
		bool ready = x->not_before <= now && f->running < f->conns;
		if (ready && !may_start(x)) {
			ungranted = true;
			f->ungranted++;
			ready = false;
		}
		if (!ready) {
			if (x->not_before > now && x->not_before < next_ready)
				next_ready = x->not_before;
			prev = x;
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		if (f->queue_tail == x)
			f->queue_tail = prev;
		f->queued--;
		x->next = NULL;
		start(f, x);
	}
	if (f->local) {
		/* nothing runs in curl: read, and wait only for what is not ready */
		if (run_locals(f) > 0 || (f->running > 0 && !f->hold))
			return 0;
	}
	int still = 0;
	CURLMcode mc = curl_multi_perform(f->multi, &still);
	if (mc == CURLM_OK && drain_done(f) > 0)
		return 0;
	int wait = max_wait_ms;
	if (ungranted && wait > SMP_GRANT_POLL_MS)
		wait = SMP_GRANT_POLL_MS; /* room may come back any moment: ask again soon */
	if (next_ready != UINT64_MAX) {
		uint64_t d = next_ready > now ? next_ready - now : 0;
		if (d < (uint64_t)wait)
			wait = (int)d;
	}
	if (mc == CURLM_OK && (still > 0 || f->queued || f->running) && wait > 0)
		mc = curl_multi_poll(f->multi, NULL, 0, wait, NULL);
	if (mc == CURLM_OK)
		mc = curl_multi_perform(f->multi, &still);
	if (mc != CURLM_OK) {
		cmn_log(CMN_LOG_ERROR, "curl multi: %s", curl_multi_strerror(mc));
		return -EIO;
	}
	drain_done(f);
	return 0;
}
