/*
 * s3_credentials.c - AWS credentials for an s3:// source: the environment,
 * else one profile of the shared credentials file.
 *
 * Owns the secrets it copies into struct smp_s3 until smp__s3_clear() wipes
 * them.  Does not sign anything (s3.c, sigv4.c).  Secrets never reach a
 * message or the log; the line buffer is wiped after reading.  Bounds: lines
 * of 4 KiB, 100000 lines.  A file that group or others may read is refused.
 * No locking: called once while the source is opened.
 */
#include "sampler/s3_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/*
 * Reads [profile] from an AWS credentials file.  Refuses a file that group
 * or others can read (-EACCES).  A missing file is 0 with nothing set.
 */
static int read_credentials_file(struct smp_s3 *s, const char *path, const char *profile, char *err,
				 size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
			   ? 0
			   : (snprintf(err, errlen, "%s: %s", path, strerror(errno)), -errno);
	struct stat st;
	if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
		close(fd);
		snprintf(err, errlen,
			 "%s: credentials file is readable by group or others (mode %03o): run "
			 "chmod 600 %s",
			 path, (unsigned)(st.st_mode & 0777), path);
		return -EACCES;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	char line[4096];
	bool in = false;
	int lines = 0;
	while (fgets(line, sizeof(line), f) && lines++ < 100000) {
		char *t = trim(line);
		if (*t == '#' || *t == ';' || !*t)
			continue;
		if (*t == '[') {
			char *e = strchr(t, ']');
			if (e)
				*e = '\0';
			char *name = trim(t + 1);
			if (!strncmp(name, "profile ", 8))
				name = trim(name + 8);
			in = !strcmp(name, profile);
			continue;
		}
		if (!in)
			continue;
		char *eq = strchr(t, '=');
		if (!eq)
			continue;
		*eq = '\0';
		char *k = trim(t), *v = trim(eq + 1);
		char **dst = !strcmp(k, "aws_access_key_id")	   ? &s->access_key
			     : !strcmp(k, "aws_secret_access_key") ? &s->secret_key
			     : !strcmp(k, "aws_session_token")	   ? &s->session_token
								   : NULL;
		if (dst) {
			free(*dst);
			*dst = strdup(v);
		}
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	return 0;
}

int smp__s3_credentials(struct smp_s3 *s, const char *file, const char *profile, char *err,
			size_t errlen)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	if (ak && *ak && sk && *sk) {
		const char *tok = getenv("AWS_SESSION_TOKEN");
		s->access_key = strdup(ak);
		s->secret_key = strdup(sk);
		s->session_token = tok && *tok ? strdup(tok) : NULL;
		return 0;
	}
	char path[4096];
	const char *p = file ? file : getenv("AWS_SHARED_CREDENTIALS_FILE");
	if (!p || !*p) {
		const char *home = getenv("HOME");
		if (!home)
			return 0;
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
		p = path;
	}
	const char *prof = profile && *profile ? profile : getenv("AWS_PROFILE");
	int rc = read_credentials_file(s, p, prof && *prof ? prof : "default", err, errlen);
	if (rc)
		return rc;
	if (!s->access_key != !s->secret_key) {
		snprintf(err, errlen,
			 "%s: profile has only one of aws_access_key_id and "
			 "aws_secret_access_key: set both",
			 p);
		return -EINVAL;
	}
	return 0;
}
