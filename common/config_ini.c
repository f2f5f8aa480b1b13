/*
 * config_ini.c - the INI config file: cmn_config_load_file(), through inih.
 *
 * Owns the reading of a file: its lines, its section headers (and the
 * [epoch ...] entries they open, with their line) and the messages that
 * name file:line.  Each key = value line goes to config.c's key table
 * (cmn__config_ini_key()), which owns the keys and their values.  The
 * only code that calls inih: built only where inih is found, which the
 * feeder-only build (-Dcatalog=disabled) is not.
 *
 * Line numbers: Debian's libinih is built without INI_HANDLER_LINENO, so the
 * handler is not told the line.  We parse with ini_parse_stream() and our own
 * reader, which hands inih one line per call and counts them; when inih calls
 * the handler, the reader's count is the line being handled.  The reader also
 * sees section headers first, so it checks section names itself (inih only
 * calls the handler for key = value lines, so an empty misspelt section
 * would otherwise pass) and records each [epoch ...] header with its line.
 * Leading blanks are stripped before inih sees a line, which turns off
 * inih's multi-line values (an indented line is just another key).
 *
 * Errors: the first one wins and parsing stops; c may hold values read
 * before it.  A file is read whole, at most CONFIG_FILE_MAX bytes.
 * No shared state, no locking: a config is built by one thread.
 */
#include "common/config.h"
#include "common/config_i.h"
#include "common/file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_FILE_MAX ((size_t)1 << 20)
#define MSG_MAX		512

struct ini_ctx {
	struct cmn_config *c;
	const char *path;
	const char *text;
	size_t pos, len;
	int line;	       /* lines handed to inih so far */
	enum cmn__section sec; /* section of the current line */
	char sec_text[64];     /* as written, for messages */
	size_t epoch_idx;      /* c->epochs index when sec == CMN__SEC_EPOCH */
	int rc;		       /* first error, 0 if none */
	int rc_line;
	char *err;
	size_t errlen;
};

static void ini_fail(struct ini_ctx *x, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ini_fail(struct ini_ctx *x, int rc, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (x->rc)
		return;
	x->rc = rc;
	x->rc_line = x->line;
	n = snprintf(x->err, x->errlen, "%s:%d: ", x->path, x->line);
	if (n < 0 || (size_t)n >= x->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(x->err + n, x->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* "N", "N-M" or "N-" after "epoch"; returns 0 or -EINVAL. */
static int parse_epoch_range(const char *s, uint32_t *first, uint32_t *last)
{
	char a[24], b[24];
	const char *dash;
	uint64_t f, l;
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	dash = strchr(s, '-');
	n = dash ? (size_t)(dash - s) : strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == 0 || n >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, n);
	a[n] = '\0';
	if (cmn__config_parse_uint(a, &f) || f >= CMN_EPOCH_OPEN)
		return -EINVAL;
	*first = (uint32_t)f;
	if (!dash) {
		*last = (uint32_t)f;
		return 0;
	}
	s = dash + 1;
	while (isspace((unsigned char)*s))
		s++;
	if (!*s) {
		*last = CMN_EPOCH_OPEN;
		return 0;
	}
	n = strlen(s);
	if (n >= sizeof(b))
		return -EINVAL;
	memcpy(b, s, n + 1);
	if (cmn__config_parse_uint(b, &l) || l >= CMN_EPOCH_OPEN || l < f)
		return -EINVAL;
	*last = (uint32_t)l;
	return 0;
}

/* A "[...]" line: checks the name and makes it the current section. */
static void ini_section(struct ini_ctx *x, const char *line)
{
	const char *close = strchr(line, ']');
	char name[64];
	size_t n;

	x->sec = CMN__SEC_BAD; /* keys of a bad section are not checked again */
	if (!close)
		return; /* inih reports the syntax error */
	n = (size_t)(close - line - 1);
	while (n && isspace((unsigned char)line[1 + n - 1]))
		n--;
	line++;
	while (n && isspace((unsigned char)*line)) {
		line++;
		n--;
	}
	if (n >= sizeof(name)) {
		ini_fail(x, -EINVAL,
			 "unknown section [%.40s...]: expected [cache], [source], "
			 "[sampler], [mount] or [epoch N], [epoch N-M], [epoch N-]",
			 line);
		return;
	}
	memcpy(name, line, n);
	name[n] = '\0';
	snprintf(x->sec_text, sizeof(x->sec_text), "%s", name);
	if (strcmp(name, "cache") == 0) {
		x->sec = CMN__SEC_CACHE;
	} else if (strcmp(name, "source") == 0) {
		x->sec = CMN__SEC_SOURCE;
	} else if (strcmp(name, "sampler") == 0) {
		x->sec = CMN__SEC_SAMPLER;
	} else if (strcmp(name, "mount") == 0) {
		x->sec = CMN__SEC_MOUNT;
	} else if (strncmp(name, "epoch", 5) == 0 && (name[5] == ' ' || name[5] == '\t')) {
		struct cmn_epoch_section e = {0}, *grown;
		if (parse_epoch_range(name + 5, &e.first, &e.last)) {
			ini_fail(x, -EINVAL,
				 "[%s]: expected an epoch section such as [epoch 0], [epoch 1-4] "
				 "or [epoch 5-] (first <= last)",
				 name);
			return;
		}
		e.line = x->line;
		grown = realloc(x->c->epochs, (x->c->n_epochs + 1) * sizeof(*grown));
		if (!grown) {
			ini_fail(x, -ENOMEM, "out of memory");
			return;
		}
		x->c->epochs = grown;
		x->c->epochs[x->c->n_epochs] = e;
		x->epoch_idx = x->c->n_epochs++;
		x->sec = CMN__SEC_EPOCH;
	} else {
		ini_fail(x, -EINVAL,
			 "unknown section [%s]: expected [cache], [source], [sampler], "
			 "[mount] or [epoch N], [epoch N-M], [epoch N-]",
			 name);
	}
}

/*
 * inih's reader: copies the next line (without leading blanks) into str.
 * Returns NULL at the end, or to stop after the first error.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct ini_ctx *x = stream;
	const char *p, *nl;
	size_t n;

	if (x->rc || x->pos >= x->len)
		return NULL;
	p = x->text + x->pos;
	nl = memchr(p, '\n', x->len - x->pos);
	n = nl ? (size_t)(nl - p) + 1 : x->len - x->pos;
	x->pos += n;
	x->line++;
	if (x->line == 1 && n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) {
		p += 3;
		n -= 3;
	}
	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	if (memchr(p, '\0', n)) {
		ini_fail(x, -EINVAL, "NUL byte in line: not a text file?");
		return NULL;
	}
	/* inih needs room for "\r\n\0" after the longest line */
	if (num < 4 || n + 1 > (size_t)num) {
		ini_fail(x, -EINVAL, "line longer than %d characters: shorten it", num - 3);
		return NULL;
	}
	memcpy(str, p, n);
	str[n] = '\0';
	if (*p == '[')
		ini_section(x, str);
	return x->rc ? NULL : str;
}

static int handle_key(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *x = user;
	char msg[MSG_MAX];
	int rc;

	(void)section; /* the reader tracked it, with epoch instances told apart */
	if (x->rc || x->sec == CMN__SEC_BAD)
		return 1;
	if (x->sec == CMN__SEC_NONE) {
		ini_fail(x, -EINVAL,
			 "%s = %s: key outside a section: put it under [cache], [source], "
			 "[sampler] or [epoch N]",
			 name, value);
		return 0;
	}
	rc = cmn__config_ini_key(x->c, x->sec, x->epoch_idx, name, value, msg, sizeof(msg));
	if (rc) {
		ini_fail(x, rc, "[%s] %s", x->sec_text, msg);
		return 0;
	}
	return 1;
}

/* Reads a whole (small) config file.  Returns 0 and a malloc'd NUL-terminated text, or -errno. */
static int slurp(const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open the config file: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file: expected an INI config file", path);
		rc = -EINVAL;
		goto out;
	}
	rc = cmn_read_fd_capped(fd, CONFIG_FILE_MAX, out, outlen);
	if (rc == -EFBIG)
		snprintf(err, errlen, "%s: too big for a config file (max 1 MiB)", path);
	else if (rc != 0)
		snprintf(err, errlen, "%s: read failed: %s", path, strerror(-rc));
out:
	close(fd);
	return rc;
}

int cmn_config_load_file(struct cmn_config *c, const char *path, char *err, size_t errlen)
{
	struct ini_ctx x = {0};
	char *text = NULL;
	char *path_copy;
	size_t len = 0;
	int rc, bad_line;

	rc = slurp(path, &text, &len, err, errlen);
	if (rc)
		return rc;
	path_copy = strdup(path);
	if (!path_copy) {
		free(text);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	free(c->path);
	c->path = path_copy;

	x.c = c;
	x.path = path;
	x.text = text;
	x.len = len;
	x.err = err;
	x.errlen = errlen;
	bad_line = ini_parse_stream(read_line, &x, handle_key, &x);
	free(text);
	/* inih's own syntax errors do not reach the handler: the first one by line wins */
	if (bad_line > 0 && (!x.rc || bad_line < x.rc_line)) {
		snprintf(err, errlen,
			 "%s:%d: syntax error: expected `key = value`, `[section]` or a ; comment",
			 path, bad_line);
		return -EINVAL;
	}
	if (bad_line < 0 && !x.rc) {
		snprintf(err, errlen, "%s: inih failed (%d)", path, bad_line);
		return -ENOMEM;
	}
	return x.rc;
}
