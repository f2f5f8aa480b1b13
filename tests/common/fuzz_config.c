/*
 * fuzz_config.c - libFuzzer target for the configuration parsers:
 * common/config_ini.c (INI files through inih), common/config.c (`-o
 * k=v,...` strings, one --key value) and, when FUZZ_MOUNT_OPTS is
 * defined, cli/mount_opts.c (mount(8)'s -o string through fuse_opt, the
 * fstab path).
 *
 * The first input byte picks the parser; the rest is its text:
 *   0..95     an INI file (written to a memfd, loaded by path as
 *             `--config` does), then cmn_config_finish();
 *   96..159   a cmn_config_parse_o() string, then cmn_config_finish();
 *   160..207  cmn_config_set(key, value) with the text split at its first
 *             '=' (the --key value form);
 *   208..255  cli_mount_parse_o() (or cmn_config_parse_o() without it).
 * Each parser must return 0 or a negative errno, and say why in a
 * NUL-terminated message when it fails; every config is freed (LeakSanitizer
 * checks that nothing a rejected value allocated is left behind).
 */
#include "common/config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef FUZZ_MOUNT_OPTS
#include "cli/mount_opts.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(int rc, const char *err)
{
	if (rc > 0 || rc < -4095)
		abort();
	if (rc < 0 && (!memchr(err, '\0', 1024) || !err[0]))
		abort(); /* a failure says why */
}

static void finish(struct cmn_config *c, char *err)
{
	err[0] = '\0';
	check_rc(cmn_config_finish(c, err, 1024), err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cmn_config c;
	char err[1024] = "";
	char *text;
	int rc;

	if (size == 0)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0'; /* the parsers take C strings: stop at a NUL */
	cmn_config_init(&c);
	if (data[0] < 96) {
		char path[64];
		int fd = memfd_create("fuzz.ini", 0);
		if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
			if (fd >= 0)
				close(fd);
			goto out;
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rc = cmn_config_load_file(&c, path, err, sizeof(err));
		close(fd);
		check_rc(rc, err);
		if (rc == 0)
			finish(&c, err);
	} else if (data[0] < 160) {
		rc = cmn_config_parse_o(&c, text, err, sizeof(err));
		check_rc(rc, err);
		if (rc == 0)
			finish(&c, err);
	} else if (data[0] < 208) {
		char *eq = strchr(text, '=');
		if (eq) {
			*eq = '\0';
			check_rc(cmn_config_set(&c, text, eq + 1, "--fuzz", err, sizeof(err)), err);
		}
	} else {
#ifdef FUZZ_MOUNT_OPTS
		struct mount_args ma;
		memset(&ma, 0, sizeof(ma));
		ma.cfg = &c;
		rc = cli_mount_parse_o(&ma, text);
		if (rc > 0 || (rc < 0 && !ma.err[0]) ||
		    !memchr(ma.fuse_opts, '\0', sizeof(ma.fuse_opts)))
			abort();
#else
		check_rc(cmn_config_parse_o(&c, text, err, sizeof(err)), err);
#endif
	}
out:
	cmn_config_free(&c);
	free(text);
	return 0;
}
