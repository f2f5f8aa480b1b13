/*
 * stats_read.c - reads a mount's .rollcache/stats for `status`, `epoch`,
 * `umount` and `report`, and looks figures up in it by path.
 *
 * Owns only the reading (capped at STATS_MAX) and the lookups; what the
 * commands print is theirs.  Holds no state.
 */
#include "cli/stats_read.h"

#include "common/file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_stats_read(const char *mp, json_t **root, char **text, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.rollcache/stats", mp) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	char *buf = NULL;
	size_t len = 0;
	int rc = cmn_read_file_capped(path, STATS_MAX, &buf, &len);
	if (rc != 0)
		return rc;
	json_error_t jerr;
	json_t *js = json_loadb(buf, len, 0, &jerr);
	if (!json_is_object(js)) {
		if (js)
			snprintf(err, errlen, "not a JSON object");
		else
			snprintf(err, errlen, "line %d: %s", jerr.line, jerr.text);
		json_decref(js);
		free(buf);
		return -EBADMSG;
	}
	*root = js;
	if (text)
		*text = buf;
	else
		free(buf);
	return 0;
}

const json_t *cli_stats_get(const json_t *root, const char *path)
{
	const char *dot = strchr(path, '.');
	if (!dot)
		return json_object_get(root, path);
	char name[64];
	if ((size_t)(dot - path) >= sizeof(name))
		return NULL;
	memcpy(name, path, (size_t)(dot - path));
	name[dot - path] = '\0';
	return json_object_get(json_object_get(root, name), dot + 1);
}

uint64_t cli_stats_count(const json_t *root, const char *path)
{
	const json_t *v = cli_stats_get(root, path);
	json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
	return i > 0 ? (uint64_t)i : 0;
}

double cli_stats_num(const json_t *root, const char *path)
{
	const json_t *v = cli_stats_get(root, path);
	return json_is_true(v) ? 1.0 : json_number_value(v);
}

bool cli_stats_true(const json_t *root, const char *path)
{
	return json_is_true(cli_stats_get(root, path));
}

const char *cli_stats_str(const json_t *root, const char *path)
{
	const char *s = json_string_value(cli_stats_get(root, path));
	return s ? s : "";
}

uint64_t cli_stats_errors(const json_t *root)
{
	uint64_t sum = 0;
	const char *key;
	json_t *n;
	json_object_foreach((json_t *)json_object_get(root, "errors"), key, n)
	{
		if (json_is_integer(n) && json_integer_value(n) > 0)
			sum += (uint64_t)json_integer_value(n);
	}
	return sum;
}

const json_t *cli_stats_epoch_row(const json_t *root)
{
	const json_t *epoch = json_object_get(root, "epoch");
	const json_t *rows = json_object_get(root, "epochs");
	if (!json_is_integer(epoch))
		return NULL;
	for (size_t i = 0; i < json_array_size(rows); i++) {
		const json_t *row = json_array_get(rows, i);
		if (json_is_integer(json_object_get(row, "epoch")) &&
		    json_integer_value(json_object_get(row, "epoch")) == json_integer_value(epoch))
			return row;
	}
	return NULL;
}
