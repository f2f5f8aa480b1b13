/*
 * test_names.c - cachefs/names.c: display names of raw objects from hostile
 * remote keys (DESIGN invariant 7).
 */
#include "cfs_test.h"

#include "cachefs/names.h"

static char out[CFS_DISPLAY_MAX];

static const char *san(const char *key, bool *lossy)
{
	bool l = false;
	ck_assert_int_eq(cfs_sanitize_key(key, out, sizeof(out), &l), 0);
	if (lossy)
		*lossy = l;
	return out;
}

/* Checks the shape invariant 7 promises for any display path. */
static void assert_safe(const char *name)
{
	const char *p = name;

	ck_assert_msg(name[0] != '\0', "empty name");
	ck_assert_msg(name[0] != '/', "absolute name: %s", name);
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		ck_assert_msg(n > 0, "empty component in %s", name);
		ck_assert_uint_le(n, CFS_NAME_MAX);
		ck_assert_msg(!(n == 1 && p[0] == '.'), "'.' component in %s", name);
		ck_assert_msg(!(n == 2 && p[0] == '.' && p[1] == '.'), "'..' component in %s",
			      name);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg((unsigned char)p[i] >= 0x20 && p[i] != 0x7f,
				      "control byte in %s", name);
		/* no partial escape */
		for (size_t i = 0; i < n; i++)
			if (p[i] == '%')
				ck_assert_msg(i + 2 < n && strchr("0123456789ABCDEF", p[i + 1]) &&
						  strchr("0123456789ABCDEF", p[i + 2]),
					      "cut escape in %s", name);
		if (!slash)
			break;
		p = slash + 1;
	}
}

START_TEST(dotdot_and_absolute)
{
	bool lossy;

	ck_assert_str_eq(san("../../x", &lossy), "%2E%2E/%2E%2E/x");
	ck_assert(!lossy);
	ck_assert_str_eq(san("a/./b", &lossy), "a/%2E/b");
	ck_assert(!lossy);
	ck_assert_str_eq(san("/abs/path", &lossy), "abs/path");
	ck_assert(lossy); /* the leading '/' was dropped: the caller adds a suffix */
	ck_assert_str_eq(san("a//b/", &lossy), "a/b");
	ck_assert(lossy);
	ck_assert_str_eq(san("..", &lossy), "%2E%2E");
	ck_assert_str_eq(san("...", &lossy), "...");
	ck_assert(!lossy);
	assert_safe(san("/../..//./", NULL));
}
END_TEST

START_TEST(control_bytes_and_percent)
{
	bool lossy;

	ck_assert_str_eq(san("a\x01"
			     "b\x7f"
			     "c\n",
			     &lossy),
			 "a%01b%7Fc%0A");
	ck_assert(!lossy);
	ck_assert_str_eq(san("100%", NULL), "100%25");
	ck_assert_str_eq(san("%2E%2E", NULL), "%252E%252E"); /* cannot forge an escape */
	ck_assert_str_eq(san("sp ace+=\xc3\xa9", NULL), "sp ace+=\xc3\xa9"); /* UTF-8 kept */
	assert_safe(san("\x01/\x02/\x1f", NULL));
}
END_TEST

START_TEST(empty_key)
{
	bool lossy;

	ck_assert_str_eq(san("", &lossy), "%00");
	ck_assert(lossy);
	ck_assert_str_eq(san("///", &lossy), "%00");
	ck_assert(lossy);
}
END_TEST

START_TEST(long_components_are_cut)
{
	char key[1200];
	bool lossy;

	memset(key, 'n', 300);
	key[300] = '\0';
	san(key, &lossy);
	ck_assert_uint_eq(strlen(out), CFS_NAME_MAX);
	ck_assert(lossy);
	/* escapes are never cut in half: 300 control bytes = 85 whole escapes */
	memset(key, '\x01', 300);
	san(key, &lossy);
	ck_assert_uint_eq(strlen(out), 85 * 3);
	ck_assert(lossy);
	assert_safe(out);
	/* 254 'n' + one escape: the escape does not fit, the name stops at 254 */
	memset(key, 'n', 254);
	key[254] = '\x01';
	key[255] = '\0';
	san(key, &lossy);
	ck_assert_uint_eq(strlen(out), 254);
	ck_assert(lossy);
	/* a cut never leaves half a UTF-8 character: "nn" + 140 x "é" (2 bytes) */
	key[0] = key[1] = 'n';
	for (int i = 0; i < 140; i++) {
		key[2 + 2 * i] = (char)0xc3;
		key[3 + 2 * i] = (char)0xa9;
	}
	key[282] = '\0';
	san(key, &lossy);
	ck_assert_uint_eq(strlen(out), 254); /* "nn" + 126 whole characters */
	ck_assert(lossy);
	ck_assert_int_eq((unsigned char)out[253], 0xa9);
	ck_assert_int_eq(cfs_display_name(key, 7, true, out, sizeof(out)), 0);
	ck_assert_uint_eq(strlen(out), 254); /* "nn" + 125 characters + "~7" */
	ck_assert_str_eq(out + 252, "~7");
	/* exactly 255 bytes is not lossy */
	memset(key, 'n', 255);
	key[255] = '\0';
	san(key, &lossy);
	ck_assert_uint_eq(strlen(out), 255);
	ck_assert(!lossy);
}
END_TEST

START_TEST(deep_keys_are_joined)
{
	char key[200] = "";
	bool lossy;
	int slashes = 0;

	for (int i = 0; i < 40; i++)
		strcat(key, i ? "/d" : "d");
	san(key, &lossy);
	ck_assert(!lossy);
	for (const char *p = out; *p; p++)
		slashes += *p == '/';
	ck_assert_int_eq(slashes, CFS_DEPTH_MAX - 1);
	ck_assert_ptr_nonnull(strstr(out, "d%2Fd"));
	assert_safe(out);
}
END_TEST

START_TEST(suffix_cannot_be_forged)
{
	char name[CFS_DISPLAY_MAX];
	char key[400];

	ck_assert_str_eq(san("file~12", NULL), "file%7E12");
	ck_assert_str_eq(san("file~", NULL), "file~");
	ck_assert_str_eq(san("a~b", NULL), "a~b");
	ck_assert_str_eq(san("a~12/b", NULL), "a~12/b");
	ck_assert_int_eq(cfs_display_name("file", 12, true, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "file~12");
	ck_assert_int_eq(cfs_display_name("file", 12, false, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "file");
	/* a suffix on a long name keeps the component within 255 bytes */
	memset(key, 'x', 399);
	key[399] = '\0';
	ck_assert_int_eq(cfs_display_name(key, 123456789, true, name, sizeof(name)), 0);
	ck_assert_uint_eq(strlen(name), CFS_NAME_MAX);
	ck_assert_str_eq(name + CFS_NAME_MAX - 10, "~123456789");
	ck_assert_int_eq(cfs_sanitize_key("abc", name, 3, NULL), -ENAMETOOLONG);
}
END_TEST

/*
 * Every key over a hostile alphabet up to length 5: names are safe, and
 * with the suffix rule (lossy -> "~id") no two keys share a name.
 */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(injective_on_hostile_alphabet)
{
	static const char alpha[] = {'a', '/', '.', '%', '~', '1', '\x01'};
	const size_t na = sizeof(alpha), maxlen = 5;
	size_t total = 0, k = 0;
	char **names;

	for (size_t len = 0, p = 1; len <= maxlen; len++, p *= na)
		total += p;
	names = calloc(total, sizeof(*names));
	ck_assert_ptr_nonnull(names);
	for (size_t len = 0; len <= maxlen; len++) {
		size_t count = 1;
		for (size_t i = 0; i < len; i++)
			count *= na;
		for (size_t v = 0; v < count; v++) {
			char key[8];
			char name[CFS_DISPLAY_MAX];
			bool lossy = false;
			size_t x = v;
			for (size_t i = 0; i < len; i++) {
				key[i] = alpha[x % na];
				x /= na;
			}
			key[len] = '\0';
			ck_assert_int_eq(cfs_sanitize_key(key, name, sizeof(name), &lossy), 0);
			if (lossy)
				ck_assert_int_eq(
				    cfs_display_name(key, (int64_t)k + 1, true, name, sizeof(name)),
				    0);
			assert_safe(name);
			names[k++] = strdup(name);
		}
	}
	ck_assert_uint_eq(k, total);
	qsort(names, total, sizeof(*names), cmp_str);
	for (size_t i = 1; i < total; i++)
		ck_assert_msg(strcmp(names[i - 1], names[i]) != 0, "two keys share the name %s",
			      names[i]);
	for (size_t i = 0; i < total; i++)
		free(names[i]);
	free(names);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachefs");
	SRunner *sr;
	int failed;
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"dotdot_and_absolute", dotdot_and_absolute},
	    {"control_bytes_and_percent", control_bytes_and_percent},
	    {"empty_key", empty_key},
	    {"long_components_are_cut", long_components_are_cut},
	    {"deep_keys_are_joined", deep_keys_are_joined},
	    {"suffix_cannot_be_forged", suffix_cannot_be_forged},
	    {"injective_on_hostile_alphabet", injective_on_hostile_alphabet},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
