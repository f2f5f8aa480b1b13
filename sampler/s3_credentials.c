/*
 * s3_credentials.c - where an s3:// source's identity comes from, resolved
 * the way the AWS CLI resolves it, and read with inih.
 *
 *   profile     [source] profile (like --profile), else $AWS_PROFILE, else
 *               $AWS_DEFAULT_PROFILE, else "default"
 *   credentials $AWS_ACCESS_KEY_ID + $AWS_SECRET_ACCESS_KEY (+ $AWS_SESSION_TOKEN),
 *               unless a profile was named in our config (the AWS CLI's
 *               --profile also skips the environment); else [profile] of
 *               the credentials file ($AWS_SHARED_CREDENTIALS_FILE or
 *               ~/.aws/credentials); else the profile's section of the
 *               config file ($AWS_CONFIG_FILE or ~/.aws/config: [default]
 *               or [profile NAME]); none: anonymous requests
 *   region      [source] region, $AWS_REGION, $AWS_DEFAULT_REGION, the
 *               profile's `region`, us-east-1
 *   endpoint    [source] endpoint, $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL,
 *               the profile's nested `s3 = endpoint_url = ...`, its
 *               `endpoint_url`, AWS
 *   addressing  [source] s3_addressing when not auto, else the profile's
 *               nested `s3 = addressing_style = ...`, else auto
 *
 * Owns the secrets it copies into struct smp_s3 until smp__s3_clear() wipes
 * them, and the text of the files it reads (wiped before it is freed).
 * Does not sign anything (s3.c, sigv4.c).  Secrets never reach a message or
 * the log.  A file that holds a secret and that group or others may read is
 * refused (-EACCES), as ssh refuses a readable key.  Bounds: 1 MiB per file,
 * inih's line length.  No locking: called once while the source is opened.
 */
#include "sampler/s3_i.h"

#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AWS_FILE_MAX ((size_t)1 << 20)

/* What one profile of one file says; every string owned. */
struct aws_profile {
	char *access_key, *secret_key, *session_token;
	char *region, *endpoint_url, *s3_endpoint_url, *addressing_style;
};

struct aws_parse {
	const char *profile;
	bool config_file; /* sections are [default] / [profile NAME] */
	bool in;	  /* the current section is the profile */
	bool found;	  /* the profile's section exists */
	int rc;
	struct aws_profile *p;
};

static void free_secret(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

static void profile_clear(struct aws_profile *p)
{
	free_secret(&p->access_key);
	free_secret(&p->secret_key);
	free_secret(&p->session_token);
	free(p->region);
	free(p->endpoint_url);
	free(p->s3_endpoint_url);
	free(p->addressing_style);
	memset(p, 0, sizeof(*p));
}

static bool section_is(const struct aws_parse *x, const char *section)
{
	if (!x->config_file)
		return strcmp(section, x->profile) == 0;
	if (strncmp(section, "profile ", 8) == 0) {
		const char *n = section + 8;
		while (*n == ' ')
			n++;
		return strcmp(n, x->profile) == 0;
	}
	/* the config file names the default profile [default] */
	return strcmp(x->profile, "default") == 0 && strcmp(section, "default") == 0;
}

static int set_str(char **slot, const char *v, bool secret)
{
	char *d = strdup(v);
	if (!d)
		return -ENOMEM;
	if (secret)
		free_secret(slot);
	else
		free(*slot);
	*slot = d;
	return 0;
}

/*
 * inih handler.  A nested block (`s3 =` followed by indented `k = v` lines)
 * reaches us as repeated name "s3" with values "k = v" (inih's multi-line
 * values), which is how the AWS CLI's files spell service settings.
 */
static int on_kv(void *user, const char *section, const char *name, const char *value)
{
	struct aws_parse *x = user;
	struct aws_profile *p = x->p;
	int rc = 0;

	x->in = section_is(x, section);
	if (!x->in || x->rc)
		return 1;
	x->found = true;
	if (!name) /* a section header (INI_CALL_HANDLER_ON_NEW_SECTION) */
		return 1;
	if (!strcmp(name, "aws_access_key_id"))
		rc = set_str(&p->access_key, value, true);
	else if (!strcmp(name, "aws_secret_access_key"))
		rc = set_str(&p->secret_key, value, true);
	else if (!strcmp(name, "aws_session_token"))
		rc = set_str(&p->session_token, value, true);
	else if (!strcmp(name, "region") && *value)
		rc = set_str(&p->region, value, false);
	else if (!strcmp(name, "endpoint_url") && *value)
		rc = set_str(&p->endpoint_url, value, false);
	else if (!strcmp(name, "s3") && strchr(value, '=')) {
		char k[64], v[1024];
		const char *eq = strchr(value, '=');
		size_t kl = (size_t)(eq - value);
		while (kl && (value[kl - 1] == ' ' || value[kl - 1] == '\t'))
			kl--;
		const char *vs = eq + 1;
		while (*vs == ' ' || *vs == '\t')
			vs++;
		if (kl < sizeof(k) && strlen(vs) < sizeof(v)) {
			memcpy(k, value, kl);
			k[kl] = '\0';
			snprintf(v, sizeof(v), "%s", vs);
			if (!strcmp(k, "endpoint_url"))
				rc = set_str(&p->s3_endpoint_url, v, false);
			else if (!strcmp(k, "addressing_style"))
				rc = set_str(&p->addressing_style, v, false);
		}
	}
	if (rc)
		x->rc = rc;
	return 1;
}

/*
 * Reads `profile` of one AWS file into *p.  A missing file is 0 with nothing
 * set.  -EACCES when the file gives a secret and group or others may read
 * it; -EINVAL on a syntax error (line named); the message never holds a
 * value of the file.
 */
static int read_aws_file(const char *path, bool config_file, const char *profile,
			 struct aws_profile *p, char *err, size_t errlen)
{
	struct aws_parse x = {.profile = profile, .config_file = config_file, .p = p};
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	rc = cmn_read_fd_capped(fd, AWS_FILE_MAX, &text, &len);
	close(fd);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path,
			 rc == -EFBIG ? "larger than 1 MiB" : strerror(-rc));
		return rc;
	}
	int line = ini_parse_string(text, on_kv, &x);
	explicit_bzero(text, len);
	free(text);
	if (x.rc) {
		snprintf(err, errlen, "%s: %s", path, strerror(-x.rc));
		return x.rc;
	}
	if (line > 0) {
		snprintf(err, errlen, "%s:%d: syntax error: expected `key = value` or `[section]`",
			 path, line);
		return -EINVAL;
	}
	if ((p->secret_key || p->session_token) && (st.st_mode & 077)) {
		snprintf(err, errlen,
			 "%s: holds credentials and is readable by group or others (mode %03o): "
			 "run chmod 600 %s",
			 path, (unsigned)(st.st_mode & 0777), path);
		return -EACCES;
	}
	return 0;
}

/* $VAR when set and not empty, else NULL. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* $VAR, else ~/.aws/NAME, into buf; false when neither is known. */
static bool aws_path(const char *var, const char *name, char *buf, size_t len)
{
	const char *v = env(var), *home = env("HOME");
	int n;
	if (v)
		n = snprintf(buf, len, "%s", v);
	else if (home)
		n = snprintf(buf, len, "%s/.aws/%s", home, name);
	else
		return false;
	return n > 0 && (size_t)n < len;
}

static int take(char **dst, char **src)
{
	*dst = *src;
	*src = NULL;
	return 0;
}

/* The profile: the config's, AWS_PROFILE, AWS_DEFAULT_PROFILE, "default". */
static void pick_profile(struct smp_s3_identity *id, const struct smp_s3_opts *o)
{
	const char *v;
	if (o->profile && *o->profile) {
		snprintf(id->profile, sizeof(id->profile), "%s", o->profile);
		id->profile_from = "config";
	} else if ((v = env("AWS_PROFILE"))) {
		snprintf(id->profile, sizeof(id->profile), "%s", v);
		id->profile_from = "AWS_PROFILE";
	} else if ((v = env("AWS_DEFAULT_PROFILE"))) { /* the AWS CLI's older name */
		snprintf(id->profile, sizeof(id->profile), "%s", v);
		id->profile_from = "AWS_DEFAULT_PROFILE";
	} else {
		snprintf(id->profile, sizeof(id->profile), "default");
		id->profile_from = "default";
	}
}

/*
 * Credentials: the environment's pair (unless a profile was configured),
 * else the profile's in the credentials file, else in the config file.
 */
static int pick_credentials(struct smp_s3_identity *id, const struct smp_s3_opts *o,
			    struct aws_profile *cred, struct aws_profile *conf,
			    const char *cred_path, const char *conf_path, char *err, size_t errlen)
{
	if (!o->profile && env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		id->access_key = strdup(env("AWS_ACCESS_KEY_ID"));
		id->secret_key = strdup(env("AWS_SECRET_ACCESS_KEY"));
		if (env("AWS_SESSION_TOKEN"))
			id->session_token = strdup(env("AWS_SESSION_TOKEN"));
		id->credentials_from = "environment";
		return 0;
	}
	struct aws_profile *src = cred->access_key || cred->secret_key	 ? cred
				  : conf->access_key || conf->secret_key ? conf
									 : NULL;
	if (!src)
		return 0;
	if (!src->access_key || !src->secret_key) {
		snprintf(err, errlen,
			 "%s: profile %s has only one of aws_access_key_id and "
			 "aws_secret_access_key: set both",
			 src == cred ? cred_path : conf_path, id->profile);
		return -EINVAL;
	}
	take(&id->access_key, &src->access_key);
	take(&id->secret_key, &src->secret_key);
	take(&id->session_token, &src->session_token);
	id->credentials_from = src == cred ? "shared credentials file" : "config file";
	return 0;
}

/* Region and endpoint, each from the first of its chain that has one. */
static void pick_region_endpoint(struct smp_s3_identity *id, const struct smp_s3_opts *o,
				 const struct aws_profile *conf, bool *want_endpoint)
{
	const char *v;
	if (o->region && *o->region)
		v = o->region, id->region_from = "config";
	else if ((v = env("AWS_REGION")))
		id->region_from = "AWS_REGION";
	else if ((v = env("AWS_DEFAULT_REGION")))
		id->region_from = "AWS_DEFAULT_REGION";
	else if ((v = conf->region))
		id->region_from = "config file";
	else
		v = "us-east-1", id->region_from = "default";
	id->region = strdup(v);

	if (o->endpoint && *o->endpoint)
		v = o->endpoint, id->endpoint_from = "config";
	else if ((v = env("AWS_ENDPOINT_URL_S3")))
		id->endpoint_from = "AWS_ENDPOINT_URL_S3";
	else if ((v = env("AWS_ENDPOINT_URL")))
		id->endpoint_from = "AWS_ENDPOINT_URL";
	else if ((v = conf->s3_endpoint_url) || (v = conf->endpoint_url))
		id->endpoint_from = "config file";
	else
		v = NULL, id->endpoint_from = "AWS";
	*want_endpoint = v != NULL;
	if (v)
		id->endpoint = strdup(v);
}

/* Addressing: the config's, else the profile's s3 addressing_style. */
static int pick_addressing(struct smp_s3_identity *id, const struct smp_s3_opts *o,
			   const struct aws_profile *conf, const char *conf_path, char *err,
			   size_t errlen)
{
	id->addressing = o->addressing;
	if (id->addressing != SMP_S3_AUTO || !conf->addressing_style)
		return 0;
	if (!strcmp(conf->addressing_style, "path"))
		id->addressing = SMP_S3_PATH;
	else if (!strcmp(conf->addressing_style, "virtual"))
		id->addressing = SMP_S3_VIRTUAL;
	else if (strcmp(conf->addressing_style, "auto") != 0) {
		snprintf(err, errlen,
			 "%s: profile %s: s3 addressing_style = %s: expected auto, path or "
			 "virtual",
			 conf_path, id->profile, conf->addressing_style);
		return -EINVAL;
	}
	return 0;
}

int smp__s3_resolve(struct smp_s3_identity *id, const struct smp_s3_opts *o, char *err,
		    size_t errlen)
{
	struct aws_profile cred = {0}, conf = {0};
	char cred_path[4096], conf_path[4096];
	bool have_cred_path, have_conf_path, want_endpoint = false;
	int rc = 0;

	memset(id, 0, sizeof(*id));
	pick_profile(id, o);
	have_cred_path =
	    o->credentials_file
		? (snprintf(cred_path, sizeof(cred_path), "%s", o->credentials_file) > 0)
		: aws_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", cred_path,
			   sizeof(cred_path));
	have_conf_path = o->config_file
			     ? (snprintf(conf_path, sizeof(conf_path), "%s", o->config_file) > 0)
			     : aws_path("AWS_CONFIG_FILE", "config", conf_path, sizeof(conf_path));
	if (have_cred_path)
		rc = read_aws_file(cred_path, false, id->profile, &cred, err, errlen);
	if (rc == 0 && have_conf_path)
		rc = read_aws_file(conf_path, true, id->profile, &conf, err, errlen);
	if (rc == 0)
		rc = pick_credentials(id, o, &cred, &conf, cred_path, conf_path, err, errlen);
	if (rc == 0) {
		pick_region_endpoint(id, o, &conf, &want_endpoint);
		rc = pick_addressing(id, o, &conf, conf_path, err, errlen);
	}
	if (rc == 0 && (!id->region || (want_endpoint && !id->endpoint) ||
			(id->credentials_from && (!id->access_key || !id->secret_key)))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory reading credentials");
	}
	profile_clear(&cred);
	profile_clear(&conf);
	if (rc)
		smp__s3_identity_clear(id);
	return rc;
}

void smp__s3_identity_clear(struct smp_s3_identity *id)
{
	free_secret(&id->access_key);
	free_secret(&id->secret_key);
	free_secret(&id->session_token);
	free(id->region);
	free(id->endpoint);
	memset(id, 0, sizeof(*id));
}
