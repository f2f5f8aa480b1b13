/*
 * metrics_http.c - `metrics_listen = ADDR:PORT`: the mount's Prometheus
 * metrics over HTTP, for a scraper that cannot read the mount.
 *
 * One thread, a plain blocking accept loop: each connection sends one
 * request (read with a 4 KiB cap and a 5 s timeout), gets one answer and is
 * closed.  GET /metrics (or /) answers the text of .rollcache/metrics
 * (dmn__render(), control.c) with every sample labelled
 * {source="...",mountpoint="..."}, so one Prometheus can scrape the mounts
 * of many nodes.  GET /healthz answers 200 "ok" while the mount serves and
 * its samplers work, else 503 and one line saying why: the daemon is
 * shutting down, the samplers stopped (their error), or the source fails
 * (dmn_stats_health(), stats.c).  Anything else is 404, a method other
 * than GET/HEAD 405.
 * Does not parse HTTP beyond the request line, keeps no connection alive,
 * serves no TLS: bind it to localhost or a private network.
 *
 * Stop: dmn__metrics_stop() shuts the listening socket down, which wakes
 * accept(), then joins.  Locking: none of its own; dmn__render() takes
 * what it needs.
 */
#include "daemon/metrics_http.h"

#include "common/clock.h"
#include "common/log.h"
#include "daemon/samplers.h"
#include "daemon/stats.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQUEST_MAX   4096
#define IO_TIMEOUT_MS 5000

struct dmn_metrics_http {
	struct dmn *d;
	int fd;
	pthread_t thread;
	char labels[2048];	  /* source="...",mountpoint="..." escaped */
	struct dmn_health health; /* touched by the serving thread only */
};

/* Appends v escaped for a Prometheus label value (\\, \", \n). */
static size_t put_label(char *out, size_t used, size_t cap, const char *name, const char *v)
{
	int n = snprintf(out + used, cap - used, "%s%s=\"", used ? "," : "", name);
	if (n < 0 || (size_t)n >= cap - used)
		return used;
	used += (size_t)n;
	for (; v && *v && used + 3 < cap; v++) {
		if (*v == '\\' || *v == '"') {
			out[used++] = '\\';
			out[used++] = *v;
		} else if (*v == '\n') {
			out[used++] = '\\';
			out[used++] = 'n';
		} else {
			out[used++] = *v;
		}
	}
	if (used + 1 < cap)
		out[used++] = '"';
	out[used] = '\0';
	return used;
}

int dmn__metrics_label(const char *text, size_t len, const char *labels, char **out, size_t *outlen)
{
	size_t cap = len + 64, used = 0, ll = strlen(labels);
	char *o;
	for (size_t i = 0; i < len; i++)
		if (text[i] == '\n')
			cap += ll + 2;
	o = malloc(cap + 1);
	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		const char *line = text + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;
		i += n + (nl ? 1 : 0);
		if (n == 0 || line[0] == '#') {
			memcpy(o + used, line, n);
			used += n;
		} else {
			/* "name value" or "name{a="b"} value" */
			size_t name_end = strcspn(line, " {");
			if (name_end > n)
				name_end = n;
			memcpy(o + used, line, name_end);
			used += name_end;
			if (name_end < n && line[name_end] == '{') {
				o[used++] = '{';
				memcpy(o + used, labels, ll);
				used += ll;
				o[used++] = ',';
				memcpy(o + used, line + name_end + 1, n - name_end - 1);
				used += n - name_end - 1;
			} else {
				o[used++] = '{';
				memcpy(o + used, labels, ll);
				used += ll;
				o[used++] = '}';
				memcpy(o + used, line + name_end, n - name_end);
				used += n - name_end;
			}
		}
		if (nl)
			o[used++] = '\n';
	}
	o[used] = '\0';
	*out = o;
	*outlen = used;
	return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void reply(int fd, const char *status, const char *ctype, const char *body, size_t len,
		  bool head)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, ctype, len);
	if (send_all(fd, hdr, (size_t)n) == 0 && !head)
		send_all(fd, body, len);
}

/* Reads the request head (up to the blank line, REQUEST_MAX, IO_TIMEOUT_MS). */
static ssize_t read_request(int fd, char *buf, size_t cap)
{
	size_t used = 0;
	while (used + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, IO_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		ssize_t k = recv(fd, buf + used, cap - 1 - used, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		used += (size_t)k;
		buf[used] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return (ssize_t)used;
	}
	buf[used] = '\0';
	return used ? (ssize_t)used : -EPROTO;
}

/* GET /healthz: 200 "ok", or 503 with one line saying why. */
static void healthz(struct dmn_metrics_http *m, int fd, bool head)
{
	char why[700], body[720];
	bool ok = false;
	if (dmn__exiting(m->d)) {
		snprintf(why, sizeof(why), "the daemon is shutting down");
	} else {
		struct dmn_sampler_stats ws;
		dmn__samplers_stats(m->d->smp, &ws);
		ok = dmn_stats_health(&m->health, &ws, cmn_mono_ms(), why, sizeof(why));
	}
	int n = snprintf(body, sizeof(body), "%s\n", ok ? "ok" : why);
	size_t len = n < 0 ? 0 : (size_t)n < sizeof(body) ? (size_t)n : sizeof(body) - 1;
	reply(fd, ok ? "200 OK" : "503 Service Unavailable", "text/plain; charset=utf-8", body, len,
	      head);
}

static void serve(struct dmn_metrics_http *m, int fd)
{
	char req[REQUEST_MAX], method[16], path[256];
	if (read_request(fd, req, sizeof(req)) < 0 ||
	    sscanf(req, "%15s %255s", method, path) != 2) {
		reply(fd, "400 Bad Request", "text/plain", "bad request\n", 12, false);
		return;
	}
	bool head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		reply(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9, false);
		return;
	}
	path[strcspn(path, "?")] = '\0';
	if (strcmp(path, "/healthz") == 0) {
		healthz(m, fd, head);
		return;
	}
	if (strcmp(path, "/metrics") != 0 && strcmp(path, "/") != 0) {
		reply(fd, "404 Not Found", "text/plain", "try /metrics or /healthz\n", 25, head);
		return;
	}
	char *text = NULL, *labelled = NULL;
	size_t len = 0, llen = 0;
	int rc = dmn__render(m->d, CFS_REQ_METRICS, &text, &len);
	if (rc == 0)
		rc = dmn__metrics_label(text, len, m->labels, &labelled, &llen);
	if (rc == 0)
		reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", labelled, llen,
		      head);
	else
		reply(fd, "500 Internal Server Error", "text/plain", "cannot render\n", 14, head);
	free(text);
	free(labelled);
}

static void *metrics_main(void *arg)
{
	struct dmn_metrics_http *m = arg;
	for (;;) {
		int fd = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shut down by dmn__metrics_stop(), or a fatal error */
		}
		serve(m, fd);
		close(fd);
	}
	return NULL;
}

int dmn__metrics_start(struct dmn_metrics_http **out, struct dmn *d, const char *listen_on,
		       char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai = NULL;
	char host[256], port[8];
	const char *colon = strrchr(listen_on, ':');
	int rc, one = 1;
	struct dmn_metrics_http *m;

	*out = NULL;
	if (!colon || (size_t)(colon - listen_on) >= sizeof(host) || strlen(colon + 1) >= 8) {
		snprintf(err, errlen, "metrics_listen = %s: expected ADDRESS:PORT", listen_on);
		return -EINVAL;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen_on), listen_on);
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [::1] */
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "metrics_listen = %s: %s", listen_on, gai_strerror(rc));
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->d = d;
	m->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0)
		goto sys_fail;
	setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(m->fd, 16) != 0)
		goto sys_fail;
	freeaddrinfo(ai);
	ai = NULL;
	size_t used = put_label(m->labels, 0, sizeof(m->labels), "source", d->o->source);
	put_label(m->labels, used, sizeof(m->labels), "mountpoint", d->o->mountpoint);
	rc = pthread_create(&m->thread, NULL, metrics_main, m);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the metrics thread: %s", strerror(rc));
		close(m->fd);
		free(m);
		return -rc;
	}
	cmn_log(CMN_LOG_INFO, "metrics on http://%s/metrics", listen_on);
	*out = m;
	return 0;
sys_fail:
	rc = -errno;
	snprintf(err, errlen, "metrics_listen = %s: %s", listen_on, strerror(errno));
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	if (ai)
		freeaddrinfo(ai);
	return rc;
}

void dmn__metrics_stop(struct dmn_metrics_http *m)
{
	if (!m)
		return;
	shutdown(m->fd, SHUT_RDWR); /* wakes accept() */
	pthread_join(m->thread, NULL);
	close(m->fd);
	free(m);
}
