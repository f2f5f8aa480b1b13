/*
 * test_stats.c - Check suite of daemon/stats.c: the stats JSON parses
 * (jansson, an independent reader of what jansson wrote is Python's json
 * in the integration tests), escapes what it must, keeps its caps; the
 * Prometheus text carries the figures; every row of the table is in the
 * texts it names; the recent warnings and errors keep their order and
 * drop the oldest (common/log.c's ring, shown as the JSON's "recent").
 */
#include "daemon/stats.h"

#include "common/log.h"

#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(struct dmn_stats_view *v)
{
	memset(v, 0, sizeof(*v));
	v->source = "file:///a \"b\"\n";
	v->cache_dir = "/c";
	v->mountpoint = "/m";
	v->advance = "manual";
	v->schedule = v->policy = v->last_reason = v->last_why = v->last_wait = "";
	v->have_epoch = true;
	v->epoch = 7;
	v->limit = 1000;
	v->sealed = 400;
	v->draining = 100;
	v->passthrough = true;
	v->passthrough_opens = 3;
	v->uptime_s = 12.34;
}

START_TEST(json_fields_and_escapes)
{
	struct dmn_stats_view v;
	fill(&v);
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_int_eq(text[len - 1], '\n');
	ck_assert_ptr_nonnull(strstr(text, "\"source\": \"file:///a \\\"b\\\"\\n\""));
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	ck_assert_msg(root != NULL, "stats JSON does not parse: %s", je.text);
	ck_assert_int_eq(json_integer_value(json_object_get(root, "epoch")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(root, "used")), 500);
	ck_assert_str_eq(json_string_value(json_object_get(root, "source")), "file:///a \"b\"\n");
	json_t *view = json_object_get(root, "view");
	ck_assert(json_is_true(json_object_get(view, "passthrough")));
	ck_assert_int_eq(json_integer_value(json_object_get(view, "passthrough_opens")), 3);
	ck_assert(json_real_value(json_object_get(root, "uptime_s")) == 12.3);
	json_decref(root);
	free(text);

	/* no epoch yet: null, not 0 */
	v.have_epoch = false;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	root = json_loads(text, 0, &je);
	ck_assert(json_is_null(json_object_get(root, "epoch")));
	json_decref(root);
	free(text);
}
END_TEST

START_TEST(json_invalid_utf8_stays_valid)
{
	struct dmn_stats_view v;
	fill(&v);
	v.mountpoint = "/m/\xff\xfe";
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	ck_assert_msg(root != NULL, "%s", je.text);
	ck_assert_str_eq(json_string_value(json_object_get(root, "mountpoint")), "/m/\\xff\\xfe");
	json_decref(root);
	free(text);
}
END_TEST

START_TEST(metrics_text)
{
	struct dmn_stats_view v;
	fill(&v);
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_metrics(&v, 1 << 20, &text, &len), 0);
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_used_bytes 500\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE rollcache_epoch gauge\nrollcache_epoch 7\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_passthrough 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_passthrough_opens_total 3\n"));
	free(text);
}
END_TEST

START_TEST(caps_hold)
{
	struct dmn_stats_view v;
	fill(&v);
	char *text = (char *)"untouched";
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 64, &text, &len), -EFBIG);
	ck_assert_str_eq(text, "untouched");
	ck_assert_int_eq(dmn_stats_metrics(&v, 64, &text, &len), -EFBIG);
	ck_assert_str_eq(text, "untouched");
}
END_TEST

/* docs/counters.md: each counter once, in its place; recovered is not an error */
START_TEST(counters_in_their_places)
{
	struct dmn_stats_view v;
	fill(&v);
	v.sampler.records_recovered = 5;
	v.sampler.records_lost = 2;
	v.sampler.failed_objects = 1;
	v.sampler.enospc = 1;
	v.sampler.stopped = true;
	snprintf(v.sampler.error, sizeof(v.sampler.error), "writing a shard: No space left");
	struct cmn_log_entry logged = {.level = CMN_LOG_ERROR,
				       .unix_ms = 1764099600123ull,
				       .count = 1,
				       .line = "samplers stopped: writing a shard: No space left"};
	v.recent = &logged;
	v.n_recent = 1;
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	free(text);
	ck_assert_msg(root != NULL, "%s", je.text);
	json_t *e = json_object_get(root, "errors"), *smp = json_object_get(root, "sampler");
	ck_assert_int_eq(json_integer_value(json_object_get(e, "records_lost")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(e, "failed_objects")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(e, "enospc")), 1);
	ck_assert_ptr_null(json_object_get(e, "records_recovered"));
	ck_assert_ptr_null(json_object_get(e, "bad_records"));
	ck_assert_int_eq(json_integer_value(json_object_get(smp, "records_recovered")), 5);
	ck_assert(json_is_true(json_object_get(smp, "stopped")));
	ck_assert_str_eq(json_string_value(json_object_get(smp, "error")),
			 "writing a shard: No space left");
	json_t *last = json_object_get(root, "last_error");
	ck_assert_str_eq(json_string_value(json_object_get(last, "message")), logged.line);
	ck_assert_str_eq(json_string_value(json_object_get(last, "level")), "error");
	ck_assert_int_eq(json_integer_value(json_object_get(last, "unix_ms")), 1764099600123ll);
	json_decref(root);

	ck_assert_int_eq(dmn_stats_metrics(&v, 1 << 20, &text, &len), 0);
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_errors_total{kind=\"records_lost\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_errors_total{kind=\"enospc\"} 1\n"));
	ck_assert_ptr_null(strstr(text, "\nrollcache_errors_total "));
	/* one series per key of the JSON's errors, with its value, and no other */
	{
		char *js = NULL;
		size_t jl = 0;
		ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &js, &jl), 0);
		json_t *r = json_loads(js, 0, &je);
		free(js);
		const char *key;
		json_t *n;
		size_t kinds = 0;
		json_object_foreach(json_object_get(r, "errors"), key, n)
		{
			char want[128];
			snprintf(want, sizeof(want), "\nrollcache_errors_total{kind=\"%s\"} %lld\n",
				 key, (long long)json_integer_value(n));
			ck_assert_msg(strstr(text, want), "missing: %s", want + 1);
			kinds++;
		}
		size_t series = 0;
		for (const char *p = text; (p = strstr(p, "\nrollcache_errors_total{")); p++)
			series++;
		ck_assert_uint_eq(series, kinds);
		json_decref(r);
	}
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_records_recovered_total 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_records_lost_total 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_enospc_total 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_stopped 1\n"));
	free(text);

	fill(&v); /* nothing logged yet: null */
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	root = json_loads(text, 0, &je);
	free(text);
	ck_assert(json_is_null(json_object_get(root, "last_error")));
	json_decref(root);
}
END_TEST

/* The log keeps the last CMN_LOG_RECENT warnings and errors, oldest first; the JSON shows them. */
START_TEST(recent_ring)
{
	struct cmn_log_entry got[CMN_LOG_RECENT];
	char want[64];
	cmn_log_set_level(CMN_LOG_ERROR); /* warnings are kept, not printed */
	ck_assert_uint_eq(cmn_log_recent(got, CMN_LOG_RECENT), 0);
	for (int i = 0; i < CMN_LOG_RECENT + 2; i++)
		cmn_log(CMN_LOG_WARN, "warning %d", i);
	cmn_log(CMN_LOG_INFO, "not a problem"); /* not kept */
	ck_assert_uint_eq(cmn_log_recent(got, CMN_LOG_RECENT), CMN_LOG_RECENT);
	for (int i = 0; i < CMN_LOG_RECENT; i++) { /* the two oldest dropped, the order kept */
		snprintf(want, sizeof(want), "warning %d", i + 2);
		ck_assert_str_eq(got[i].line, want);
		ck_assert_int_eq(got[i].level, CMN_LOG_WARN);
		ck_assert_uint_eq(got[i].count, 1);
		ck_assert_uint_ge(got[i].unix_ms, i ? got[i - 1].unix_ms : 1);
	}
	/* the newest again: counted, nothing dropped; an error after it drops the oldest */
	snprintf(want, sizeof(want), "warning %d", CMN_LOG_RECENT + 1);
	cmn_log(CMN_LOG_WARN, "%s", want);
	ck_assert_uint_eq(cmn_log_recent(got, CMN_LOG_RECENT), CMN_LOG_RECENT);
	ck_assert_str_eq(got[0].line, "warning 2");
	ck_assert_str_eq(got[CMN_LOG_RECENT - 1].line, want);
	ck_assert_uint_eq(got[CMN_LOG_RECENT - 1].count, 2);
	cmn_log(CMN_LOG_ERROR, "the disk is full");
	ck_assert_uint_eq(cmn_log_recent(got, 2), 2); /* the newest two */
	ck_assert_str_eq(got[0].line, want);
	ck_assert_str_eq(got[1].line, "the disk is full");
	ck_assert_int_eq(got[1].level, CMN_LOG_ERROR);

	struct dmn_stats_view v;
	fill(&v);
	v.n_recent = cmn_log_recent(got, CMN_LOG_RECENT);
	v.recent = got;
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	free(text);
	ck_assert_msg(root != NULL, "%s", je.text);
	json_t *recent = json_object_get(root, "recent");
	ck_assert_uint_eq(json_array_size(recent), CMN_LOG_RECENT);
	for (size_t i = 0; i < CMN_LOG_RECENT; i++) {
		json_t *e = json_array_get(recent, i);
		ck_assert_str_eq(json_string_value(json_object_get(e, "message")), got[i].line);
		ck_assert_str_eq(json_string_value(json_object_get(e, "level")),
				 cmn_log_level_name(got[i].level));
		ck_assert_int_eq(json_integer_value(json_object_get(e, "unix_ms")),
				 (json_int_t)got[i].unix_ms);
		ck_assert_int_eq(json_integer_value(json_object_get(e, "count")),
				 (json_int_t)got[i].count);
	}
	json_t *last = json_object_get(root, "last_error"); /* the newest */
	ck_assert_str_eq(json_string_value(json_object_get(last, "message")), "the disk is full");
	ck_assert_str_eq(json_string_value(json_object_get(last, "level")), "error");
	json_decref(root);
}
END_TEST

/* Every row of the table is in the texts it names, with its type; errors are its error rows. */
START_TEST(table_drives_both_texts)
{
	struct dmn_stats_view v;
	fill(&v);
	size_t n, nerr = 0;
	const struct dmn_stats_field *f = dmn_stats_fields(&n);
	char *js = NULL, *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &js, &len), 0);
	ck_assert_int_eq(dmn_stats_metrics(&v, 1 << 20, &text, &len), 0);
	json_error_t je;
	json_t *root = json_loads(js, 0, &je);
	free(js);
	ck_assert_msg(root != NULL, "%s", je.text);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(f[i].path || f[i].metric, "row %zu shows nowhere", i);
		ck_assert_msg(f[i].help && f[i].help[0] && f[i].unit, "row %zu: no help", i);
		if (f[i].path) {
			char obj[64];
			const char *dot = strchr(f[i].path, '.');
			json_t *o = root;
			if (dot) {
				snprintf(obj, sizeof(obj), "%.*s", (int)(dot - f[i].path),
					 f[i].path);
				o = json_object_get(root, obj);
			}
			ck_assert_msg(json_object_get(o, dot ? dot + 1 : f[i].path),
				      "JSON lacks %s", f[i].path);
		}
		if (f[i].metric) {
			char want[160];
			snprintf(want, sizeof(want), "\n# TYPE rollcache_%s %s\nrollcache_%s ",
				 f[i].metric, f[i].flags & DMN_STATS_COUNTER ? "counter" : "gauge",
				 f[i].metric);
			ck_assert_msg(strstr(text, want), "metrics lack: %s", want + 1);
		}
		if (f[i].flags & DMN_STATS_ERROR) {
			ck_assert_msg(f[i].path && !strncmp(f[i].path, "errors.", 7), "%s",
				      f[i].path);
			nerr++;
		}
	}
	ck_assert_uint_eq(json_object_size(json_object_get(root, "errors")), nerr);
	json_decref(root);
	free(text);
}
END_TEST

/* docs/counters.md has a row for every counter and every kind of error of the table. */
START_TEST(counters_documented)
{
	const char *src = getenv("RC_SRCDIR");
	ck_assert_msg(src != NULL, "RC_SRCDIR is not set");
	char path[4096];
	snprintf(path, sizeof(path), "%s/docs/counters.md", src);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "%s: cannot open", path);
	static char doc[1 << 18];
	size_t len = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[len] = '\0';
	size_t n;
	const struct dmn_stats_field *t = dmn_stats_fields(&n);
	for (size_t i = 0; i < n; i++) {
		if (!t[i].path || !(t[i].flags & (DMN_STATS_COUNTER | DMN_STATS_ERROR)))
			continue;
		char row[128];
		snprintf(row, sizeof(row), "\n| `%s` |", t[i].path);
		ck_assert_msg(strstr(doc, row), "docs/counters.md has no row %s", row + 1);
	}
}
END_TEST

/* GET /healthz's verdict over successive probes (dmn_stats_health). */
START_TEST(health_probes)
{
	struct dmn_health h = {0};
	struct dmn_sampler_stats s = {.present = true};
	char why[256];
	ck_assert(dmn_stats_health(&h, &s, 1000, why, sizeof(why)));
	s.records_admitted = 100; /* data arrives, no errors */
	s.bytes_fetched = 100;
	ck_assert(dmn_stats_health(&h, &s, 2000, why, sizeof(why)));
	/* errors, nothing admitted (their bodies are fetched bytes): the source fails */
	s.net_errors = 2;
	s.http_5xx = 1;
	s.bytes_fetched = 180;
	ck_assert(!dmn_stats_health(&h, &s, 3000, why, sizeof(why)));
	ck_assert_msg(strstr(why, "the source fails: 3 transfer errors") == why, "%s", why);
	/* no new error, still nothing admitted (a back-off): still failing, since 3000 */
	ck_assert(!dmn_stats_health(&h, &s, 13000, why, sizeof(why)));
	ck_assert_msg(strstr(why, "nothing admitted in 10 s"), "%s", why);
	s.records_admitted = 200; /* admitted again: healthy */
	ck_assert(dmn_stats_health(&h, &s, 14000, why, sizeof(why)));
	s.http_5xx = 2; /* an error, but an object done too: healthy */
	s.objects_done = 1;
	ck_assert(dmn_stats_health(&h, &s, 15000, why, sizeof(why)));
	s.stopped = true;
	snprintf(s.error, sizeof(s.error), "listing failed:\nHTTP 404");
	ck_assert(!dmn_stats_health(&h, &s, 16000, why, sizeof(why)));
	ck_assert_str_eq(why, "the samplers stopped: listing failed: HTTP 404");
}
END_TEST

/* a sampler waiting out a full disk: its state and the objects listed, in both texts */
START_TEST(waiting_sampler)
{
	struct dmn_stats_view v;
	fill(&v);
	v.sampler.waiting = true;
	v.sampler.listed_objects = 7;
	snprintf(v.sampler.state, sizeof(v.sampler.state),
		 "waiting: disk full (ENOSPC) on /c, retry in 4 s");
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(dmn_stats_json(&v, 1 << 20, &text, &len), 0);
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	free(text);
	ck_assert_msg(root != NULL, "%s", je.text);
	json_t *smp = json_object_get(root, "sampler");
	ck_assert_str_eq(json_string_value(json_object_get(smp, "state")), v.sampler.state);
	ck_assert_int_eq(json_integer_value(json_object_get(smp, "listed_objects")), 7);
	ck_assert(json_is_false(json_object_get(smp, "stopped")));
	json_decref(root);
	ck_assert_int_eq(dmn_stats_metrics(&v, 1 << 20, &text, &len), 0);
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_waiting 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nrollcache_sampler_listed_objects 7\n"));
	free(text);
}
END_TEST

static Suite *stats_suite(void)
{
	Suite *s = suite_create("daemon-stats");
	TCase *tc = tcase_create("texts");
	tcase_add_test(tc, json_fields_and_escapes);
	tcase_add_test(tc, json_invalid_utf8_stays_valid);
	tcase_add_test(tc, metrics_text);
	tcase_add_test(tc, caps_hold);
	tcase_add_test(tc, counters_in_their_places);
	tcase_add_test(tc, waiting_sampler);
	tcase_add_test(tc, table_drives_both_texts);
	tcase_add_test(tc, counters_documented);
	suite_add_tcase(s, tc);
	tc = tcase_create("recent");
	tcase_add_test(tc, recent_ring);
	suite_add_tcase(s, tc);
	tc = tcase_create("health");
	tcase_add_test(tc, health_probes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stats_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
