/*
 * metrics_http.h - the metrics HTTP endpoint (metrics_http.c).  Private to
 * daemon/.
 */
#ifndef RC_DAEMON_METRICS_HTTP_H
#define RC_DAEMON_METRICS_HTTP_H

#include "daemon/daemon_i.h"

#include <stddef.h>

struct dmn_metrics_http;

/*
 * Binds ADDR:PORT and starts the serving thread.  Returns 0 and *out, or
 * -errno with a message (bad address, port in use); nothing is left then.
 * Call with the mount up (it renders through d's control state).
 */
int dmn__metrics_start(struct dmn_metrics_http **out, struct dmn *d, const char *listen_on,
		       char *err, size_t errlen);

/* Stops the thread and closes the socket; NULL is ignored. */
void dmn__metrics_stop(struct dmn_metrics_http *m);

/*
 * Copies a Prometheus text with `labels` (a="b",c="d") added to every
 * sample line.  Returns 0 and a malloc'd *out, or -ENOMEM.
 */
int dmn__metrics_label(const char *text, size_t len, const char *labels, char **out,
		       size_t *outlen);

#endif
