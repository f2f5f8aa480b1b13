/*
 * detach.c - daemonizing: fork before any thread, the child reports "ok"
 * or its one-line error through a pipe once the mount is up or has failed,
 * then detaches (stdio to /dev/null, log to `log_file` or syslog, cwd /).
 *
 * The parent's exit status and message are thus the daemon's: `rollcache
 * mount` without -f fails with the daemon's own reason.  The report is
 * "ok\n", or "E<errno> <message>\n" (the errno tells a usage error, exit
 * 2, from a runtime one, exit 1).
 */
#include "daemon/daemon_i.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

static void syslog_sink(enum cmn_log_level level, const char *line, void *ctx)
{
	(void)ctx;
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	syslog(prio[level], "%s", line);
}

/* Parent side: waits for the child's report.  0 (up) or -EIO with its message. */
static int wait_report(int fd, pid_t child, char *err, size_t errlen)
{
	char buf[1200];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) == 0)
		return 0;
	int status = 0;
	waitpid(child, &status, 0);
	if (got) {
		size_t n = strlen(buf);
		while (n && buf[n - 1] == '\n')
			buf[--n] = '\0';
		char *msg = buf, *end;
		long e = 0;
		if (buf[0] == 'E' && (e = strtol(buf + 1, &end, 10)) > 0 && e < 4096 && *end == ' ')
			msg = end + 1;
		snprintf(err, errlen, "%s", msg);
		return e > 0 && e < 4096 ? -(int)e : -EIO;
	} else {
		snprintf(err, errlen,
			 "the daemon exited during start-up (status %d); run with -f to see why",
			 status);
	}
	return -EIO;
}

int dmn__fork(bool *is_child, int *report_fd, char *err, size_t errlen)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		int rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return rc;
	}
	fflush(NULL);
	pid_t child = fork();
	if (child < 0) {
		int rc = -errno;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (child > 0) {
		close(p[1]);
		*is_child = false;
		return wait_report(p[0], child, err, errlen);
	}
	close(p[0]);
	setsid();
	*is_child = true;
	*report_fd = p[1];
	return 0;
}

void dmn__report_ready(int *report_fd, const char *log_file)
{
	if (*report_fd < 0)
		return;
	int lrc = log_file ? cmn_log_open_file(log_file, false) : -ENOENT;
	if (lrc != 0) {
		openlog("rollcache", LOG_PID, LOG_DAEMON);
		cmn_log_set_sink(syslog_sink, NULL);
		if (log_file)
			cmn_log(CMN_LOG_ERROR, "log_file %s: %s: logging to syslog", log_file,
				strerror(-lrc));
	}
	ssize_t w = write(*report_fd, "ok\n", 3);
	(void)w;
	close(*report_fd);
	*report_fd = -1;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
	if (chdir("/") != 0)
		cmn_log(CMN_LOG_WARN, "chdir /: %s", strerror(errno));
}

void dmn__report_error(int *report_fd, int rc, const char *msg)
{
	if (*report_fd < 0)
		return;
	dprintf(*report_fd, "E%d %s\n", rc < 0 ? -rc : EIO, msg);
	close(*report_fd);
	*report_fd = -1;
}
