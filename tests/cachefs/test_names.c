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

/*
 * Whether s is well-formed UTF-8 holding no C1 or bidi control (Unicode
 * table 3-7, written out here independently of names.c).
 */
static bool shown_text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		unsigned char b = *p;
		size_t k;
		unsigned long c;
		if (b < 0x80) {
			p++;
			continue;
		}
		if (b >= 0xC2 && b <= 0xDF)
			k = 2, c = b & 0x1F;
		else if (b >= 0xE0 && b <= 0xEF)
			k = 3, c = b & 0x0F;
		else if (b >= 0xF0 && b <= 0xF4)
			k = 4, c = b & 0x07;
		else
			return false;
		for (size_t i = 1; i < k; i++) {
			if ((p[i] & 0xC0) != 0x80)
				return false;
			c = (c << 6) | (p[i] & 0x3F);
		}
		if ((k == 3 && c < 0x800) || (k == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
		    (c >= 0xD800 && c <= 0xDFFF))
			return false;
		if (c <= 0x9F || c == 0x61C || c == 0x200E || c == 0x200F ||
		    (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069))
			return false;
		p += k;
	}
	return true;
}

/* Percent-decodes a display name into dec (the key, for a lossless name). */
static void decode(const char *name, char *dec)
{
	while (*name) {
		unsigned v;
		if (*name == '%' && sscanf(name + 1, "%2X", &v) == 1) {
			*dec++ = (char)v;
			name += 3;
		} else {
			*dec++ = *name++;
		}
	}
	*dec = '\0';
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
	ck_assert_msg(shown_text_ok(name), "ill-formed UTF-8 or a bidi/C1 control in %s", name);
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

START_TEST(bidi_controls_and_bad_utf8)
{
	bool lossy;

	/* U+202E RIGHT-TO-LEFT OVERRIDE would show "gpj.<RLO>exe" as "exe.jpg" */
	ck_assert_str_eq(san("gpj.\xe2\x80\xae"
			     "exe",
			     &lossy),
			 "gpj.%E2%80%AEexe");
	ck_assert(!lossy);
	ck_assert_str_eq(san("a\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad"
			     "b",
			     NULL),
			 "a%E2%80%AA%E2%80%AB%E2%80%AC%E2%80%ADb"); /* U+202A-U+202D */
	ck_assert_str_eq(san("\xe2\x81\xa6x\xe2\x81\xa9", NULL),
			 "%E2%81%A6x%E2%81%A9"); /* U+2066, U+2069 */
	ck_assert_str_eq(san("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", NULL),
			 "%E2%80%8E%E2%80%8F%D8%9C");	       /* LRM, RLM, ALM */
	ck_assert_str_eq(san("c1\xc2\x85", NULL), "c1%C2%85"); /* U+0085, a C1 control */
	/* ill-formed UTF-8: each byte that starts no character is escaped alone */
	ck_assert_str_eq(san("\xff\xfe", NULL), "%FF%FE");
	ck_assert_str_eq(san("over\xc0\xaf", NULL), "over%C0%AF");	       /* overlong '/' */
	ck_assert_str_eq(san("sur\xed\xa0\x80", NULL), "sur%ED%A0%80");	       /* a surrogate */
	ck_assert_str_eq(san("big\xf4\x90\x80\x80", NULL), "big%F4%90%80%80"); /* > U+10FFFF */
	ck_assert_str_eq(san("cut\xe2\x80", NULL), "cut%E2%80");	       /* truncated */
	ck_assert_str_eq(san("\x80z", NULL), "%80z");			       /* stray tail byte */
	ck_assert_str_eq(san("\xc3\xa9\xc3", NULL), "\xc3\xa9%C3"); /* é then half of one */
	/* well-formed text that is not a control stays as it is */
	ck_assert_str_eq(san("\xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x97\xa5", NULL),
			 "\xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x97\xa5"); /* € 😀 日 */
	ck_assert_str_eq(san("\xe2\x80\x8d", NULL), "\xe2\x80\x8d");	/* ZWJ: not bidi */
	/* the escape of a key and the key spelling that escape never meet */
	ck_assert_str_ne(san("%E2%80%AE", NULL), "%E2%80%AE");
	ck_assert_str_eq(out, "%25E2%2580%25AE");
	assert_safe(san("\xe2\x80\xae/\xff/\xc2\x9b", NULL));
}
END_TEST

START_TEST(cut_never_splits_an_escaped_character)
{
	char key[400];
	bool lossy;

	/* 250 'n' + RLO: its 9-byte escape does not fit 255, so none of it is written */
	memset(key, 'n', 250);
	memcpy(key + 250, "\xe2\x80\xae", 4);
	san(key, &lossy);
	ck_assert(lossy);
	ck_assert_uint_eq(strlen(out), 250);
	assert_safe(out);
	/* 246 'n' + RLO: 255 bytes exactly */
	memmove(key + 246, key + 250, 4);
	san(key, &lossy);
	ck_assert(!lossy);
	ck_assert_uint_eq(strlen(out), 255);
	ck_assert_str_eq(out + 246, "%E2%80%AE");
}
END_TEST

struct named {
	char *name, *key;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/*
 * Every key up to 4 units over an alphabet of multi-byte pieces (bidi
 * controls, pieces of characters, whole characters, '%', '/'): names are
 * safe, percent-decoding a lossless name gives its key back, and no two
 * keys share a name.
 */
START_TEST(reversible_on_utf8_alphabet)
{
	static const char *const alpha[] = {"a",	"/",	    "%",    "\xe2\x80\xae", "\xe2",
					    "\x80\xae", "\xc3\xa9", "\xff", "\xe2\x81\xa6", "~1"};
	const size_t na = sizeof(alpha) / sizeof(alpha[0]), maxlen = 4;
	size_t total = 0, k = 0, lossless = 0;
	struct named *names;

	for (size_t len = 0, p = 1; len <= maxlen; len++, p *= na)
		total += p;
	names = calloc(total, sizeof(*names));
	ck_assert_ptr_nonnull(names);
	for (size_t len = 0; len <= maxlen; len++) {
		size_t count = 1;
		for (size_t i = 0; i < len; i++)
			count *= na;
		for (size_t v = 0; v < count; v++) {
			char key[64] = "", name[CFS_DISPLAY_MAX], dec[CFS_DISPLAY_MAX];
			bool lossy = false;
			size_t x = v;
			for (size_t i = 0; i < len; i++) {
				strcat(key, alpha[x % na]);
				x /= na;
			}
			ck_assert_int_eq(cfs_sanitize_key(key, name, sizeof(name), &lossy), 0);
			if (lossy) {
				ck_assert_int_eq(
				    cfs_display_name(key, (int64_t)k + 1, true, name, sizeof(name)),
				    0);
			} else {
				decode(name, dec);
				ck_assert_msg(strcmp(dec, key) == 0,
					      "%s does not decode to its key", name);
				lossless++;
			}
			assert_safe(name);
			names[k].name = strdup(name);
			names[k++].key = strdup(key);
		}
	}
	ck_assert_uint_eq(k, total);
	ck_assert_uint_gt(lossless, total / 2);
	/* pieces concatenate: equal keys arise ("\xe2" "\x80\xae" is U+202E) */
	qsort(names, total, sizeof(*names), cmp_named);
	for (size_t i = 1; i < total; i++)
		ck_assert_msg(strcmp(names[i - 1].name, names[i].name) != 0 ||
				  strcmp(names[i - 1].key, names[i].key) == 0,
			      "two keys share the name %s", names[i].name);
	for (size_t i = 0; i < total; i++) {
		free(names[i].name);
		free(names[i].key);
	}
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
	    {"bidi_controls_and_bad_utf8", bidi_controls_and_bad_utf8},
	    {"cut_never_splits_an_escaped_character", cut_never_splits_an_escaped_character},
	    {"reversible_on_utf8_alphabet", reversible_on_utf8_alphabet},
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
