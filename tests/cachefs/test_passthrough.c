/*
 * test_passthrough.c - Check suite of cachefs/passthrough.c: the INIT and
 * OPEN replies it patches, and every message it must leave alone.
 *
 * Messages are built with the kernel's structures (linux/fuse.h) and sent
 * through pipes with the module's own read and writev hooks, so what is
 * checked is the byte stream the kernel would see.  The real mount (the
 * kernel accepting what is sent here) is tests/daemon/test_passthrough.py.
 */
#include "cachefs/passthrough.h"

#include <check.h>
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pipe2 {
	int r, w;
};

static struct pipe2 mkpipe(void)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	return (struct pipe2){p[0], p[1]};
}

static void closepipe(struct pipe2 p)
{
	close(p.r);
	close(p.w);
}

/* Feeds an INIT request through cfs_pt_read() and checks it reads back whole. */
static void feed_init(struct cfs_pt *pt, uint64_t unique, uint32_t flags, uint32_t flags2)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in in;
	} req;
	memset(&req, 0, sizeof(req));
	req.h.len = sizeof(req);
	req.h.opcode = FUSE_INIT;
	req.h.unique = unique;
	req.in.major = 7;
	req.in.minor = 41;
	req.in.max_readahead = 1 << 17;
	req.in.flags = flags;
	req.in.flags2 = flags2;
	struct pipe2 p = mkpipe();
	ck_assert_int_eq(write(p.w, &req, sizeof(req)), (ssize_t)sizeof(req));
	char buf[4096];
	ssize_t n = cfs_pt_read(pt, p.r, buf, sizeof(buf));
	ck_assert_int_eq(n, (ssize_t)sizeof(req));
	ck_assert_int_eq(memcmp(buf, &req, sizeof(req)), 0); /* the request is not changed */
	closepipe(p);
}

struct init_reply {
	struct fuse_out_header h;
	struct fuse_init_out out;
};

static struct init_reply make_init_reply(uint64_t unique, uint32_t flags)
{
	struct init_reply r;
	memset(&r, 0, sizeof(r));
	r.h.len = sizeof(r);
	r.h.unique = unique;
	r.out.major = 7;
	r.out.minor = 38;
	r.out.max_readahead = 1 << 20;
	r.out.flags = flags;
	r.out.max_write = 1 << 20;
	r.out.time_gran = 1;
	r.out.max_pages = 256;
	return r;
}

/*
 * Sends `len` bytes of msg through cfs_pt_writev() in `pieces` iovecs (the
 * first always the 16-byte header, as libfuse sends it) and reads back what
 * reached the fd.
 */
static void send_reply(struct cfs_pt *pt, const void *msg, size_t len, int pieces, void *back)
{
	struct iovec iov[3];
	const char *m = msg;
	size_t hdr = sizeof(struct fuse_out_header);
	int n = 0;
	iov[n++] = (struct iovec){(void *)m, hdr};
	if (len > hdr) {
		size_t rest = len - hdr, first = pieces > 2 ? rest / 2 : rest;
		iov[n++] = (struct iovec){(void *)(m + hdr), first};
		if (pieces > 2)
			iov[n++] = (struct iovec){(void *)(m + hdr + first), rest - first};
	}
	struct pipe2 p = mkpipe();
	ck_assert_int_eq(cfs_pt_writev(pt, p.w, iov, n), (ssize_t)len);
	ck_assert_int_eq(read(p.r, back, len), (ssize_t)len);
	closepipe(p);
}

static struct cfs_pt *enabled_pt(void)
{
	struct cfs_pt *pt = cfs_pt_new();
	ck_assert_ptr_nonnull(pt);
	feed_init(pt, 1, FUSE_INIT_EXT | FUSE_ASYNC_READ, CFS_PT_FLAGS2_PASSTHROUGH);
	struct init_reply r = make_init_reply(1, FUSE_ASYNC_READ), back;
	send_reply(pt, &r, sizeof(r), 2, &back);
	ck_assert(cfs_pt_enabled(pt));
	return pt;
}

START_TEST(init_accepted)
{
	struct cfs_pt *pt = cfs_pt_new();
	ck_assert(!cfs_pt_enabled(pt));
	feed_init(pt, 42, FUSE_INIT_EXT | FUSE_ASYNC_READ, CFS_PT_FLAGS2_PASSTHROUGH);
	ck_assert(!cfs_pt_enabled(pt)); /* not before our reply left */
	struct init_reply r = make_init_reply(42, FUSE_ASYNC_READ | FUSE_BIG_WRITES), back;
	send_reply(pt, &r, sizeof(r), _i ? 3 : 2, &back);
	ck_assert(cfs_pt_enabled(pt));
	struct init_reply want = r;
	want.out.flags |= FUSE_INIT_EXT;
	want.out.flags2 |= CFS_PT_FLAGS2_PASSTHROUGH;
	want.out.unused[0] = CFS_PT_MAX_STACK_DEPTH;
	ck_assert_int_eq(memcmp(&back, &want, sizeof(want)), 0);
	ck_assert_uint_eq(back.out.max_write, 1u << 20); /* everything else as libfuse wrote it */
	ck_assert_uint_eq(back.out.minor, 38);
	/* once: the next reply with that unique (there is none in the protocol) is left alone */
	send_reply(pt, &r, sizeof(r), 2, &back);
	ck_assert_int_eq(memcmp(&back, &r, sizeof(r)), 0);
	cfs_pt_free(pt);
}
END_TEST

/* Each case: what the kernel offered / what libfuse replied, and no patch. */
START_TEST(init_left_alone)
{
	struct {
		const char *why;
		uint32_t kflags, kflags2, reply_flags;
		int32_t error;
	} c[] = {
	    {"not offered", FUSE_INIT_EXT, 0, 0, 0},
	    {"no INIT_EXT from the kernel", 0, CFS_PT_FLAGS2_PASSTHROUGH, 0, 0},
	    {"writeback cache", FUSE_INIT_EXT, CFS_PT_FLAGS2_PASSTHROUGH, FUSE_WRITEBACK_CACHE, 0},
	    {"error reply", FUSE_INIT_EXT, CFS_PT_FLAGS2_PASSTHROUGH, 0, -EPROTO},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct cfs_pt *pt = cfs_pt_new();
		feed_init(pt, 7, c[i].kflags, c[i].kflags2);
		struct init_reply r = make_init_reply(7, c[i].reply_flags), back;
		size_t len = sizeof(r);
		if (c[i].error) {
			r.h.error = c[i].error;
			r.h.len = (uint32_t)(len = sizeof(r.h));
		}
		send_reply(pt, &r, len, 2, &back);
		ck_assert_msg(memcmp(&back, &r, len) == 0, "%s: reply changed", c[i].why);
		ck_assert_msg(!cfs_pt_enabled(pt), "%s: enabled", c[i].why);
		cfs_pt_free(pt);
	}
}
END_TEST

START_TEST(init_reply_only)
{
	/* replies that are not the INIT reply pass unchanged even while it is due */
	struct cfs_pt *pt = cfs_pt_new();
	feed_init(pt, 5, FUSE_INIT_EXT, CFS_PT_FLAGS2_PASSTHROUGH);
	struct init_reply other = make_init_reply(6, 0), back;
	send_reply(pt, &other, sizeof(other), 2, &back);
	ck_assert_int_eq(memcmp(&back, &other, sizeof(other)), 0);
	ck_assert(!cfs_pt_enabled(pt));
	cfs_pt_free(pt);
}
END_TEST

START_TEST(init_write_fails)
{
	struct cfs_pt *pt = cfs_pt_new();
	feed_init(pt, 3, FUSE_INIT_EXT, CFS_PT_FLAGS2_PASSTHROUGH);
	struct init_reply r = make_init_reply(3, 0);
	struct iovec iov[2] = {{&r.h, sizeof(r.h)}, {&r.out, sizeof(r.out)}};
	errno = 0;
	ck_assert_int_eq(cfs_pt_writev(pt, -1, iov, 2), -1); /* writev's semantics */
	ck_assert_int_eq(errno, EBADF);
	ck_assert(!cfs_pt_enabled(pt));
	cfs_pt_free(pt);
}
END_TEST

struct open_reply {
	struct fuse_out_header h;
	struct fuse_open_out out;
};

static struct open_reply make_open_reply(uint64_t unique, uint64_t fh)
{
	struct open_reply r;
	memset(&r, 0, sizeof(r));
	r.h.len = sizeof(r);
	r.h.unique = unique;
	r.out.fh = fh;
	r.out.open_flags = FOPEN_NOFLUSH;
	return r;
}

START_TEST(open_patched)
{
	struct cfs_pt *pt = enabled_pt();
	struct open_reply r = make_open_reply(9, 0x100000003ull), back;
	cfs_pt_arm(17, r.out.fh);
	send_reply(pt, &r, sizeof(r), 2, &back);
	ck_assert(cfs_pt_disarm());
	ck_assert_uint_eq(back.out.open_flags, FOPEN_NOFLUSH | CFS_PT_FOPEN_PASSTHROUGH);
	ck_assert_uint_eq(back.out.padding, 17); /* backing_id */
	ck_assert_uint_eq(back.out.fh, r.out.fh);
	ck_assert_int_eq(memcmp(&back.h, &r.h, sizeof(r.h)), 0);
	/* disarmed: the thread's next OPEN reply leaves as it is */
	send_reply(pt, &r, sizeof(r), 2, &back);
	ck_assert_int_eq(memcmp(&back, &r, sizeof(r)), 0);
	ck_assert(!cfs_pt_disarm());
	cfs_pt_free(pt);
}
END_TEST

START_TEST(open_left_alone)
{
	struct cfs_pt *pt = enabled_pt();
	struct open_reply back;
	/* another handle's reply */
	struct open_reply r = make_open_reply(9, 2);
	cfs_pt_arm(17, 1);
	send_reply(pt, &r, sizeof(r), 2, &back);
	ck_assert_int_eq(memcmp(&back, &r, sizeof(r)), 0);
	ck_assert(!cfs_pt_disarm());
	/* an error reply */
	struct fuse_out_header e = {.len = sizeof(e), .error = -ENOENT, .unique = 10};
	struct fuse_out_header eback;
	cfs_pt_arm(17, 2);
	send_reply(pt, &e, sizeof(e), 1, &eback);
	ck_assert_int_eq(memcmp(&eback, &e, sizeof(e)), 0);
	ck_assert(!cfs_pt_disarm());
	/* a reply of another size (an entry reply) */
	struct {
		struct fuse_out_header h;
		struct fuse_entry_out out;
	} ent, entback;
	memset(&ent, 0, sizeof(ent));
	ent.h.len = sizeof(ent);
	ent.h.unique = 11;
	cfs_pt_arm(17, 0);
	send_reply(pt, &ent, sizeof(ent), 2, &entback);
	ck_assert_int_eq(memcmp(&entback, &ent, sizeof(ent)), 0);
	ck_assert(!cfs_pt_disarm());
	cfs_pt_free(pt);
}
END_TEST

struct other_thread {
	struct cfs_pt *pt;
	struct open_reply r, back;
};

static void *send_from_other_thread(void *arg)
{
	struct other_thread *o = arg;
	send_reply(o->pt, &o->r, sizeof(o->r), 2, &o->back);
	return NULL;
}

START_TEST(arm_is_per_thread)
{
	struct cfs_pt *pt = enabled_pt();
	struct other_thread o = {.pt = pt, .r = make_open_reply(12, 5)};
	cfs_pt_arm(3, 5); /* armed here; the reply leaves from another thread */
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, send_from_other_thread, &o), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(memcmp(&o.back, &o.r, sizeof(o.r)), 0);
	/* still armed here: this thread's reply is patched */
	struct open_reply back;
	send_reply(pt, &o.r, sizeof(o.r), 2, &back);
	ck_assert(cfs_pt_disarm());
	ck_assert_uint_eq(back.out.padding, 3);
	cfs_pt_free(pt);
}
END_TEST

START_TEST(backing_needs_enabled)
{
	struct cfs_pt *pt = cfs_pt_new();
	ck_assert_int_eq(cfs_pt_backing_open(pt, 0, 0), -EOPNOTSUPP);
	cfs_pt_free(pt);
	ck_assert(!cfs_pt_enabled(NULL));
}
END_TEST

static Suite *pt_suite(void)
{
	Suite *s = suite_create("fuse-passthrough");
	TCase *tc = tcase_create("protocol");
	tcase_add_loop_test(tc, init_accepted, 0, 2); /* reply in 2 and in 3 iovecs */
	tcase_add_test(tc, init_left_alone);
	tcase_add_test(tc, init_reply_only);
	tcase_add_test(tc, init_write_fails);
	tcase_add_test(tc, open_patched);
	tcase_add_test(tc, open_left_alone);
	tcase_add_test(tc, arm_is_per_thread);
	tcase_add_test(tc, backing_needs_enabled);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pt_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
