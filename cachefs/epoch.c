/*
 * epoch.c - epoch snapshots and pins.
 *
 * Owns the list of live epochs, the files they show, and the counts that pin
 * those files (open handles, snapshots, kernel lookups).  Does not choose
 * victims (eviction/ does), does not touch SQL (catalog.c does, called by
 * daemon/) and does not unlink by itself: the evicted files whose last pin
 * went away join the gone chain, which the thread that dropped the pin
 * hands to cfs_store_reap() (store.c) in one batch (delete_gone), or, once
 * the reaper runs (cfs_epochs_start_reaper), queues for the reaper thread,
 * which does the same off that thread.  It never calls up into the
 * daemon: what the daemon must act on is posted as CFS_EV_* bits to its events object.  A
 * snapshot's directory tree is built by epoch_tree.c (epoch_i.h).
 *
 * Invariants: DESIGN 3 (a file in a live epoch is never deleted while the
 * epoch is current or a handle to it is open), DESIGN 4 (evicted-but-open
 * bytes are counted as draining until delete_gone() deleted them).
 * Locking: s->mu protects the list, the hash and every count marked so in
 * epoch.h; it is a leaf lock: never held while calling the store, posting
 * events, the catalog or libfuse.  s->dirty_mu protects the list of files
 * read since the last flush; it is taken alone, or after mu (a file that
 * leaves the hash leaves that list).  The read path takes no lock but
 * dirty_mu, at a file's first read after a flush (mark_dirty).
 *
 * ---------------------------------------------------------------------
 * Design note
 *
 * Terms.
 *   snapshot   struct cfs_epoch: epoch number + sorted array of files, fixed
 *              when the epoch begins (invariant 3, first sentence) and never
 *              changed afterwards, so lookups are a binary search with no
 *              lock beyond the pin counts.
 *   efile      struct cfs_efile: one sealed local file.  Shared by every
 *              snapshot listing it, so one inode and one page cache serve a
 *              shard across epochs.
 *   pin        an open handle (efile.nopen).  A snapshot listing a file
 *              (efile.nepochs) keeps it too.  Kernel lookups (nlookup) keep
 *              only the struct, never the bytes.
 *
 * States of an epoch.
 *
 *     (built) --publish--> CURRENT --publish(next)--> OLD --unheld--> UNLISTED --forgotten--> freed
 *                                     \_________ nothing holds it ______/
 *
 *   CURRENT: s->current; `current` points at it.  OLD: still listed under
 *   epochs/ because something holds it: an open directory handle on it, or
 *   an open handle on one of its files that was evicted since (a handle
 *   "into" E that no newer epoch explains).  UNLISTED: gone from the view;
 *   lookups in it answer ENOENT, its snapshot no longer keeps its files;
 *   the struct stays only while the kernel holds lookups on its inode.
 *   cfs_epochs_publish() moves CURRENT -> OLD or straight to UNLISTED;
 *   epoch_maybe_retire() (from publish, releasedir and the last release of
 *   an evicted file) moves OLD -> UNLISTED and queues its number and posts
 *   CFS_EV_RETIRED, so the owner can drop the kernel's cached entry;
 *   cfs_epoch_forget() frees an UNLISTED epoch.  Shared inodes mean the
 *   kernel's lookup counts cannot say which epoch a handle came through,
 *   hence the definition of "held" above.
 *
 * States of a file.
 *
 *     LIVE --evict--> EVICTED --last pin--> DELETING --delete_gone--> (freed when
 *                                                                 no lookups)
 *
 *   LIVE: listed by some snapshot, catalog SEALED.  EVICTED: the evictor
 *   chose it (catalog EVICTING, cfs_epochs_evict()); it stays readable, its
 *   bytes count as draining (invariant 4).  DELETING: the current epoch does
 *   not list it and no handle is open (efile_maybe_gone()); delete_gone()
 *   unlinks the backing file.  An old epoch still listed (held by
 *   another open file) keeps it in its snapshot but lists it no more, and
 *   opening it (a name the kernel cached) gets ENOENT: invariant 3 protects
 *   a file while its epoch is current or a handle to it is open, and
 *   deleting the rest keeps draining bytes to open files.
 *   Under retire = read a file of the current epoch goes DELETING too, when
 *   it was chosen at the boundary into it, read to the end in it, and its
 *   last handle closed (invariant 3's exception).
 *
 * What an epoch lists.
 *
 *   Its snapshot less the files hidden by a directory of the same name
 *   (ep->hidden, fixed at publish) and less the files deleted since
 *   (efile.deleted).  readdir and lookups (fs_node.c) and the index file
 *   (cfs_epoch_shown_files) show exactly that.  For the current epoch the
 *   set keeps its count (cur_files/bytes/records: set at publish, lowered
 *   in efile_maybe_gone when a file retires), which the stats read, so
 *   `status` counts what `ls current/` shows.  A file's record count is
 *   part of the snapshot (efile.records): reading it is not a read of the
 *   file and retires nothing.
 * ---------------------------------------------------------------------
 */
#include "cachefs/epoch.h"

#include "cachefs/epoch_i.h"
#include "cachefs/layout.h"
#include "cachefs/store.h"
#include "common/clock.h"
#include "common/events.h"
#include "common/log.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define HASH_BUCKETS 16384u

_Static_assert(offsetof(struct cfs_efile, node_type) == 0, "inode -> type needs node_type first");
_Static_assert(offsetof(struct cfs_epoch, node_type) == 0, "inode -> type needs node_type first");

static size_t hash_id(int64_t id)
{
	uint64_t x = (uint64_t)id * 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 50) & (HASH_BUCKETS - 1);
}

int cfs_epochs_init(struct cfs_epochs *s, struct cfs_store *store, struct cmn_events *events)
{
	memset(s, 0, sizeof(*s));
	s->hash = calloc(HASH_BUCKETS, sizeof(*s->hash));
	if (!s->hash)
		return -ENOMEM;
	s->nbuckets = HASH_BUCKETS;
	s->store = store;
	s->events = events;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->dirty_mu, NULL);
	return 0;
}

static void epoch_free(struct cfs_epoch *ep);

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const void *const *)a,
		  y = (uintptr_t) * (const void *const *)b;
	return x < y ? -1 : x > y;
}

/* Whether a directory of the same name hides f in ep (not in its tree). */
static bool epoch_hides(const struct cfs_epoch *ep, const struct cfs_efile *f)
{
	return ep->nhidden &&
	       bsearch(&f, ep->hidden, ep->nhidden, sizeof(*ep->hidden), cmp_ptr) != NULL;
}

static void efile_free(struct cfs_efile *f)
{
	free(f->name);
	free(f);
}

static struct cfs_efile *hash_find(struct cfs_epochs *s, int64_t id)
{
	for (struct cfs_efile *f = s->hash[hash_id(id)]; f; f = f->hnext)
		if (f->id == id)
			return f;
	return NULL;
}

/*
 * Under mu: adds f's part (add true) to the counts cfs_epochs_stat()
 * reports, or takes it out.  Every change of f->nopen, evicted, deleted or
 * in_current is made between tally(s, f, false) and tally(s, f, true).
 */
static void tally(struct cfs_epochs *s, const struct cfs_efile *f, bool add)
{
#define TALLY(field, v) (add ? (s->field += (v)) : (s->field -= (v)))
	TALLY(open_handles, f->nopen);
	if (f->evicted && !f->deleted) {
		TALLY(draining_files, 1);
		if (!f->nopen)
			TALLY(unheld_bytes, f->bytes);
		if (f->in_current)
			TALLY(cur_retiring_files, 1);
	}
#undef TALLY
}

/* Under mu, for a file leaving the hash: off the dirty list (dirty_mu). */
static void dirty_unlink(struct cfs_epochs *s, struct cfs_efile *f)
{
	pthread_mutex_lock(&s->dirty_mu);
	if (f->in_dirty) {
		if (f->dprev)
			f->dprev->dnext = f->dnext;
		else
			s->dirty = f->dnext;
		if (f->dnext)
			f->dnext->dprev = f->dprev;
		f->in_dirty = false;
	}
	pthread_mutex_unlock(&s->dirty_mu);
}

/* Under mu: f leaves the hash, its part of the counts and the dirty list with it. */
static void hash_remove(struct cfs_epochs *s, struct cfs_efile *f)
{
	struct cfs_efile **pp = &s->hash[hash_id(f->id)];
	while (*pp && *pp != f)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = f->hnext;
		s->nfiles--;
		tally(s, f, false);
		dirty_unlink(s, f);
	}
}

static void *reaper_main(void *arg);

int cfs_epochs_start_reaper(struct cfs_epochs *s)
{
	int rc = pthread_cond_init(&s->reap_cv, NULL);
	if (rc != 0)
		return -rc;
	pthread_mutex_lock(&s->mu);
	s->reap_stop = false;
	s->reaper_on = true;
	pthread_mutex_unlock(&s->mu);
	rc = pthread_create(&s->reaper, NULL, reaper_main, s);
	if (rc != 0) {
		pthread_mutex_lock(&s->mu);
		s->reaper_on = false;
		pthread_mutex_unlock(&s->mu);
		pthread_cond_destroy(&s->reap_cv);
		return -rc;
	}
	return 0;
}

void cfs_epochs_reap_wait(struct cfs_epochs *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->reaper_on && s->reap_bytes > 0)
		pthread_cond_wait(&s->reap_cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

/* Lets the reaper delete what it holds and joins it. */
static void stop_reaper(struct cfs_epochs *s)
{
	pthread_mutex_lock(&s->mu);
	bool on = s->reaper_on;
	s->reap_stop = true;
	if (on)
		pthread_cond_broadcast(&s->reap_cv);
	pthread_mutex_unlock(&s->mu);
	if (!on)
		return;
	pthread_join(s->reaper, NULL);
	pthread_mutex_lock(&s->mu);
	s->reaper_on = false;
	pthread_mutex_unlock(&s->mu);
	pthread_cond_destroy(&s->reap_cv);
}

void cfs_epochs_destroy(struct cfs_epochs *s)
{
	if (!s->hash)
		return;
	stop_reaper(s);
	struct cfs_epoch *ep = s->all;
	while (ep) {
		struct cfs_epoch *next = ep->anext;
		epoch_free(ep);
		ep = next;
	}
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct cfs_efile *f = s->hash[i];
		while (f) {
			struct cfs_efile *next = f->hnext;
			efile_free(f);
			f = next;
		}
	}
	free(s->hash);
	s->hash = NULL;
	pthread_mutex_destroy(&s->dirty_mu);
	pthread_mutex_destroy(&s->mu);
}

/*
 * Under mu: moves f on along its states (design note).  A file whose last
 * pin went away while evicted joins the gone chain (run by unlock_and_run_gone()); a
 * file nobody refers to any more is freed.
 */
static void efile_maybe_gone(struct cfs_epochs *s, struct cfs_efile *f)
{
	if (f->nopen)
		return;
	/*
	 * invariant 3: never while its epoch is current or a handle is open;
	 * the exception (retire = read): a retiring file read to the end in
	 * the current epoch, once its last handle closed.
	 */
	uint32_t cur1 = atomic_load_explicit(&s->cur_number1, memory_order_relaxed);
	bool retired = s->retire_read && f->in_current && f->retire_number1 == cur1 &&
		       atomic_load_explicit(&f->full_epoch, memory_order_relaxed) == cur1;
	if (f->evicted && !f->deleted && (!f->in_current || retired)) {
		tally(s, f, false);
		f->deleted = true;
		tally(s, f, true);
		if (f->in_current)
			s->cur_retiring_bytes -= f->bytes;
		if (f->in_current && !epoch_hides(s->current, f)) {
			/* retired: it leaves the listing of `current` now */
			s->cur_files--;
			s->cur_bytes -= f->bytes;
			s->cur_records -= f->records;
		}
		f->gone_busy = true;
		f->gnext = s->gone_pending;
		s->gone_pending = f;
		return;
	}
	/* the struct: while a snapshot lists it or the kernel knows its inode */
	if (!f->nepochs && f->nlookup == 0 && !f->gone_busy) {
		hash_remove(s, f);
		efile_free(f);
	}
}

bool cfs_efile_take_delta(struct cfs_efile *f, struct cfs_shard_stat_delta *d)
{
	if (!atomic_load_explicit(&f->d_reads, memory_order_relaxed) &&
	    !atomic_load_explicit(&f->d_full_reads, memory_order_relaxed) &&
	    !atomic_load_explicit(&f->d_read_bytes, memory_order_relaxed))
		return false;
	d->id = f->id;
	d->reads = atomic_exchange_explicit(&f->d_reads, 0, memory_order_relaxed);
	d->full_reads = atomic_exchange_explicit(&f->d_full_reads, 0, memory_order_relaxed);
	d->read_bytes = atomic_exchange_explicit(&f->d_read_bytes, 0, memory_order_relaxed);
	d->last_read_ms = atomic_load_explicit(&f->last_read_ms, memory_order_relaxed);
	return true;
}

/*
 * The read statistics of the chain's n files since the daemon's last flush
 * go into their catalog rows before delete_gone deletes the rows: a victim
 * that retires under retire = read was read to the end just before its
 * last release, and only its row, while there is one, can count that full
 * read (its records served, the file not unread: cfs_catalog_shards_gone).
 * On failure they are lost, logged, as a failed flush of the daemon's
 * loses its own.
 */
static void flush_gone_stats(struct cfs_epochs *s, struct cfs_efile *chain, size_t n)
{
	struct cfs_shard_stat_delta *d = malloc(n * sizeof(*d));
	size_t k = 0;
	if (!d)
		return; /* the daemon's next flush takes them (and skips the rows gone) */
	for (struct cfs_efile *f = chain; f; f = f->gnext)
		if (cfs_efile_take_delta(f, &d[k]))
			k++;
	int rc = k ? cfs_catalog_shards_add_stats(cfs_store_catalog(s->store), d, k,
						  cfs_epochs_current_number(s, NULL))
		   : 0;
	if (rc != 0)
		cmn_log(CMN_LOG_WARN, "read statistics of %zu evicted files not recorded: %s", k,
			strerror(-rc));
	free(d);
}

/*
 * Deletes the evicted files of the gone chain, whose last pin went away
 * (invariant 3), in one batch: their read statistics first
 * (flush_gone_stats), then one transaction makes them GONE (deletes their
 * rows).  No lock held.
 */
static void delete_gone(struct cfs_epochs *s, struct cfs_efile *chain)
{
	if (!s->store)
		return;
	size_t n = 0;
	for (const struct cfs_efile *f = chain; f; f = f->gnext)
		n++;
	flush_gone_stats(s, chain, n);
	struct cfs_evict_item *items = malloc(n * sizeof(*items));
	int rc = 0;
	if (items) {
		size_t i = 0;
		for (const struct cfs_efile *f = chain; f; f = f->gnext)
			items[i++] =
			    (struct cfs_evict_item){f->id, (enum cfs_kind)f->kind, f->bytes, false};
		rc = cfs_store_reap(s->store, items, n);
		free(items);
	} else { /* one at a time, each its own transaction */
		for (const struct cfs_efile *f = chain; f; f = f->gnext) {
			int r = cfs_store_release_evicted(s->store, (enum cfs_kind)f->kind, f->id,
							  f->bytes);
			rc = rc ? rc : r;
		}
	}
	char rel[CFS_RELPATH_MAX];
	if (rc != 0)
		cmn_log(CMN_LOG_WARN,
			"delete evicted files (%s and %zu more): %s (start-up reconciliation "
			"retries)",
			cfs__relpath((enum cfs_kind)chain->kind, chain->id, rel), n - 1,
			strerror(-rc));
	else
		cmn_log(CMN_LOG_DEBUG, "%zu evicted file%s deleted on their last release", n,
			n == 1 ? "" : "s");
}

/* Under mu: the files of a deleted gone chain leave the counts (and may be freed). */
static void gone_done(struct cfs_epochs *s, struct cfs_efile *chain)
{
	while (chain) {
		struct cfs_efile *f = chain;
		chain = f->gnext;
		f->gone_busy = false;
		s->draining_bytes -= f->bytes;
		s->gone_files++;
		s->gone_bytes += f->bytes;
		efile_maybe_gone(s, f); /* may free f */
	}
}

/*
 * The reaper: deletes the queue's files in batches, each what piled up
 * while it deleted the last, until stopped with the queue empty.
 */
static void *reaper_main(void *arg)
{
	struct cfs_epochs *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->reap_queue && !s->reap_stop)
			pthread_cond_wait(&s->reap_cv, &s->mu);
		struct cfs_efile *chain = s->reap_queue;
		if (!chain)
			break; /* stopped, nothing left */
		s->reap_queue = NULL;
		pthread_mutex_unlock(&s->mu);
		delete_gone(s, chain);
		pthread_mutex_lock(&s->mu);
		for (const struct cfs_efile *f = chain; f; f = f->gnext)
			s->reap_bytes -= f->bytes;
		gone_done(s, chain);
		pthread_cond_broadcast(&s->reap_cv); /* cfs_epochs_reap_wait */
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/*
 * Takes the gone chain under mu and unlocks; deletes its files (or queues
 * them for the reaper), then posts CFS_EV_RETIRED if epochs left the view.
 */
static void unlock_and_run_gone(struct cfs_epochs *s)
{
	struct cfs_efile *chain = s->gone_pending;
	bool retired = s->nretired > 0;
	s->gone_pending = NULL;
	if (chain && s->reaper_on) {
		struct cfs_efile *last = chain;
		s->reap_bytes += last->bytes;
		while (last->gnext) {
			last = last->gnext;
			s->reap_bytes += last->bytes;
		}
		last->gnext = s->reap_queue;
		s->reap_queue = chain;
		pthread_cond_broadcast(&s->reap_cv);
		chain = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (retired && s->events)
		cmn_events_post(s->events, CFS_EV_RETIRED);
	if (!chain)
		return;
	delete_gone(s, chain);
	pthread_mutex_lock(&s->mu);
	gone_done(s, chain);
	pthread_mutex_unlock(&s->mu);
}

size_t cfs_epochs_take_retired(struct cfs_epochs *s, uint32_t *out, size_t max)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->nretired < max ? s->nretired : max;
	memcpy(out, s->retired_numbers, n * sizeof(*out));
	memmove(s->retired_numbers, s->retired_numbers + n, (s->nretired - n) * sizeof(*out));
	s->nretired -= n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* Under mu: an UNLISTED epoch the kernel forgot is freed. */
static void epoch_maybe_free(struct cfs_epochs *s, struct cfs_epoch *ep)
{
	if (ep->listed || ep->nlookup || ep->nopendir)
		return;
	struct cfs_epoch **pp = &s->all;
	while (*pp && *pp != ep)
		pp = &(*pp)->anext;
	if (*pp)
		*pp = ep->anext;
	epoch_free(ep);
}

/*
 * Under mu: an OLD epoch that nothing holds (design note) leaves the list,
 * drops its snapshot's references and is freed once the kernel forgot it.
 */
static void epoch_maybe_retire(struct cfs_epochs *s, struct cfs_epoch *ep)
{
	if (!ep->listed || ep == s->current || ep->nopendir)
		return;
	for (size_t i = 0; i < ep->nfiles; i++)
		if (ep->files[i]->evicted && ep->files[i]->nopen)
			return; /* a handle into E (invariant 3) */
	struct cfs_epoch **pp = &s->list;
	while (*pp && *pp != ep)
		pp = &(*pp)->next;
	if (*pp)
		*pp = ep->next;
	ep->listed = false;
	for (size_t i = 0; i < ep->nfiles; i++) {
		struct cfs_efile *f = ep->files[i];
		f->nepochs--;
		efile_maybe_gone(s, f);
	}
	cmn_log(CMN_LOG_DEBUG, "epoch %u left the view", ep->number);
	free(ep->files);
	ep->files = NULL;
	ep->nfiles = 0; /* the tree stays (kernel inodes) but is never walked again */
	if (s->nretired < CFS_RETIRED_MAX) /* else the kernel's entry stays until it is forgotten */
		s->retired_numbers[s->nretired++] = ep->number;
	epoch_maybe_free(s, ep);
}

/* Under mu: re-checks every OLD epoch (after an evicted file's last release). */
static void retire_old(struct cfs_epochs *s)
{
	struct cfs_epoch *ep = s->list;
	while (ep) {
		struct cfs_epoch *next = ep->next;
		epoch_maybe_retire(s, ep);
		ep = next;
	}
}

static void epoch_free(struct cfs_epoch *ep)
{
	cfs__edir_free_children(&ep->root);
	free(ep->hidden);
	free(ep->files);
	free(ep);
}

/* A new, empty snapshot for n files (ep->files allocated, nfiles 0), or NULL. */
static struct cfs_epoch *epoch_new(uint32_t number, uint64_t started_ms, size_t n)
{
	struct cfs_epoch *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->node_type = CFS_NODE_EPOCH;
	ep->root.node_type = CFS_NODE_DIR;
	ep->root.ep = ep;
	ep->index.node_type = CFS_NODE_INDEX;
	ep->index.ep = ep;
	ep->number = number;
	ep->started_ms = started_ms;
	snprintf(ep->name, sizeof(ep->name), "%u", number);
	ep->files = calloc(n ? n : 1, sizeof(*ep->files));
	if (!ep->files) {
		epoch_free(ep);
		return NULL;
	}
	return ep;
}

/*
 * Under s->mu: a new efile for `in`, published in epoch `number`, added to
 * fresh[] (so a failed publish frees it) and, once its strings are set, to
 * the hash.  Returns it, or NULL when out of memory (what was made is in
 * fresh[] or freed).
 */
static struct cfs_efile *efile_new(struct cfs_epochs *s, const struct cfs_efile_in *in,
				   uint32_t number, struct cfs_efile **fresh, size_t *nfresh)
{
	struct cfs_efile *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->node_type = CFS_NODE_FILE;
	f->id = in->id;
	f->kind = in->kind;
	f->name = strdup(in->name);
	f->bytes = in->bytes;
	f->records = in->records;
	f->created_epoch = in->created_epoch;
	f->crc = in->crc;
	f->has_crc = in->has_crc;
	if (in->retiring) { /* a victim a restart kept: it retires in this epoch */
		f->evicted = true;
		f->retire_number1 = number + 1;
		s->draining_bytes += f->bytes;
	}
	fresh[(*nfresh)++] = f;
	if (!f->name)
		return NULL;
	f->hnext = s->hash[hash_id(f->id)];
	s->hash[hash_id(f->id)] = f;
	s->nfiles++;
	tally(s, f, true);
	return f;
}

/*
 * Under s->mu: fills ep->files from in[0..n), finding each file in the set
 * or making it (efile_new), and sums the epoch's bytes and records.
 * Returns 0, -EINVAL (a deleted file, or an evicted one not retiring:
 * invariant 1) or -ENOMEM; on failure the files made are in fresh[].
 */
static int epoch_take_files(struct cfs_epochs *s, struct cfs_epoch *ep,
			    const struct cfs_efile_in *in, size_t n, struct cfs_efile **fresh,
			    size_t *nfresh)
{
	for (size_t i = 0; i < n; i++) {
		struct cfs_efile *f = hash_find(s, in[i].id);
		if (f && (f->deleted || (f->evicted && !in[i].retiring)))
			return -EINVAL; /* an evicted file never comes back (invariant 1) */
		if (!f) {
			f = efile_new(s, &in[i], ep->number, fresh, nfresh);
			if (!f)
				return -ENOMEM;
		}
		ep->files[i] = f;
		ep->bytes += f->bytes;
		ep->records += f->records;
	}
	ep->nfiles = n;
	return 0;
}

/*
 * Under s->mu: prev stopped being current.  It leaves the view unless held
 * (epoch_maybe_retire, which may free it); if it stays listed, its evicted
 * files that nothing else keeps may go, and *held (if not NULL) becomes its
 * number + 1.
 */
static void epoch_leave_current(struct cfs_epochs *s, struct cfs_epoch *prev, uint32_t *held)
{
	uint32_t prev_number = prev->number;
	epoch_maybe_retire(s, prev); /* may free prev */
	bool still = false;
	for (struct cfs_epoch *e = s->list; e; e = e->next)
		still |= e->number == prev_number;
	if (still) {
		/* held by an open evicted file: its other evicted files may go */
		for (size_t i = 0; i < prev->nfiles; i++)
			efile_maybe_gone(s, prev->files[i]);
		if (held)
			*held = prev_number + 1;
	}
}

/*
 * Under s->mu, the commit point of a publish (nothing here fails): ep
 * becomes current and listed, its files are pinned by it, the set's
 * current counts restart, and the previous epoch moves to OLD or
 * UNLISTED (design note, "States of an epoch").  *held (if not NULL) is
 * set to that epoch's number + 1 when it stays listed.
 */
static void epoch_make_current(struct cfs_epochs *s, struct cfs_epoch *ep, uint32_t *held)
{
	size_t n = ep->nfiles;
	if (s->current)
		for (size_t i = 0; i < s->current->nfiles; i++) {
			struct cfs_efile *f = s->current->files[i];
			tally(s, f, false);
			f->in_current = false;
			tally(s, f, true);
		}
	s->cur_retiring_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfs_efile *f = ep->files[i];
		f->nepochs++;
		tally(s, f, false);
		f->in_current = true;
		tally(s, f, true);
		if (f->evicted && !f->deleted)
			s->cur_retiring_bytes += f->bytes;
	}
	struct cfs_epoch **pp = &s->list;
	while (*pp)
		pp = &(*pp)->next;
	*pp = ep;
	ep->listed = true;
	ep->anext = s->all;
	s->all = ep;
	struct cfs_epoch *prev = s->current;
	if (prev) {
		atomic_store(&prev->read_bytes, atomic_load(&s->cur_read_bytes));
		atomic_store(&prev->files_read_full, atomic_load(&s->cur_full_files));
	}
	s->current = ep;
	s->cur_files = n - ep->nhidden;
	s->cur_bytes = ep->bytes;
	s->cur_records = ep->records;
	for (size_t i = 0; i < ep->nhidden; i++) {
		s->cur_bytes -= ep->hidden[i]->bytes;
		s->cur_records -= ep->hidden[i]->records;
	}
	atomic_store(&s->cur_read_bytes, 0);
	atomic_store(&s->cur_full_files, 0);
	atomic_store(&s->cur_nfiles, (uint64_t)n);
	atomic_store(&s->cur_number1, ep->number + 1);
	if (prev)
		epoch_leave_current(s, prev, held);
}

int cfs_epochs_publish(struct cfs_epochs *s, uint32_t number, const struct cfs_efile_in *in,
		       size_t n, uint64_t started_ms, uint32_t *held)
{
	struct cfs_epoch *ep = epoch_new(number, started_ms, n);
	struct cfs_efile **fresh = calloc(n ? n : 1, sizeof(*fresh)); /* created here */
	size_t nfresh = 0;
	int rc = -ENOMEM;

	if (held)
		*held = 0;
	if (!ep || !fresh)
		goto fail;
	pthread_mutex_lock(&s->mu);
	if (s->current && number <= s->current->number) {
		rc = -EINVAL;
		goto fail_locked;
	}
	rc = epoch_take_files(s, ep, in, n, fresh, &nfresh);
	if (rc == 0)
		rc = cfs__epoch_build_tree(ep);
	if (rc != 0)
		goto fail_locked;
	if (ep->nhidden > 1) /* epoch_hides() searches it */
		qsort(ep->hidden, ep->nhidden, sizeof(*ep->hidden), cmp_ptr);
	/* Commit point: nothing below fails. */
	epoch_make_current(s, ep, held);
	free(fresh);
	unlock_and_run_gone(s);
	return 0;

fail_locked:
	for (size_t i = 0; i < nfresh; i++) {
		if (fresh[i]->name)
			hash_remove(s, fresh[i]);
		efile_free(fresh[i]);
	}
	pthread_mutex_unlock(&s->mu);
fail:
	if (ep)
		epoch_free(ep);
	free(fresh);
	return rc;
}

uint64_t cfs_epochs_evict(struct cfs_epochs *s, const int64_t *ids, size_t n)
{
	uint64_t bytes = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		struct cfs_efile *f = hash_find(s, ids[i]);
		if (!f || f->evicted)
			continue;
		if (f->in_current)
			s->cur_retiring_bytes += f->bytes;
		tally(s, f, false);
		f->evicted = true;
		tally(s, f, true);
		/* read to the end in the epoch before does not retire it: the
		 * boundary publishes the next epoch, where it must be read */
		f->retire_number1 = atomic_load(&s->cur_number1) + 1;
		s->draining_bytes += f->bytes;
		bytes += f->bytes;
		efile_maybe_gone(s, f);
	}
	unlock_and_run_gone(s);
	return bytes;
}

bool cfs_epochs_in_current(struct cfs_epochs *s, int64_t id)
{
	pthread_mutex_lock(&s->mu);
	struct cfs_efile *f = hash_find(s, id);
	bool in = f && f->in_current;
	pthread_mutex_unlock(&s->mu);
	return in;
}

bool cfs_efile_deleted(struct cfs_epochs *s, const struct cfs_efile *f)
{
	pthread_mutex_lock(&s->mu);
	bool d = f->deleted;
	pthread_mutex_unlock(&s->mu);
	return d;
}

bool cfs_epochs_pinned(struct cfs_epochs *s, int64_t id)
{
	pthread_mutex_lock(&s->mu);
	struct cfs_efile *f = hash_find(s, id);
	bool pinned = f && f->nopen > 0;
	pthread_mutex_unlock(&s->mu);
	return pinned;
}

bool cfs_epochs_held(struct cfs_epochs *s, int64_t id)
{
	pthread_mutex_lock(&s->mu);
	struct cfs_efile *f = hash_find(s, id);
	bool held = f && !f->deleted && (f->nopen > 0 || f->nepochs > 0);
	pthread_mutex_unlock(&s->mu);
	return held;
}

struct cfs_epoch *cfs_epochs_lookup_current(struct cfs_epochs *s)
{
	pthread_mutex_lock(&s->mu);
	struct cfs_epoch *ep = s->current;
	if (ep)
		ep->nlookup++;
	pthread_mutex_unlock(&s->mu);
	return ep;
}

uint32_t cfs_epochs_current_number(struct cfs_epochs *s, bool *have)
{
	uint32_t n1 = atomic_load(&s->cur_number1);
	if (have)
		*have = n1 != 0;
	return n1 ? n1 - 1 : 0;
}

struct cfs_epoch *cfs_epochs_lookup(struct cfs_epochs *s, uint32_t number)
{
	pthread_mutex_lock(&s->mu);
	struct cfs_epoch *ep = s->list;
	while (ep && ep->number != number)
		ep = ep->next;
	if (ep)
		ep->nlookup++;
	pthread_mutex_unlock(&s->mu);
	return ep;
}

struct cfs_efile *cfs_epoch_lookup_file(struct cfs_epochs *s, struct cfs_epoch *ep,
					const char *name)
{
	/* ep->files is immutable while listed; an UNLISTED epoch shows nothing. */
	pthread_mutex_lock(&s->mu);
	size_t lo = 0, hi = ep->listed ? ep->nfiles : 0;
	struct cfs_efile *f = NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ep->files[mid]->name);
		if (c == 0) {
			f = ep->files[mid];
			break;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (f)
		f->nlookup++;
	pthread_mutex_unlock(&s->mu);
	return f;
}

int cfs_edir_lookup(struct cfs_epochs *s, struct cfs_edir *dir, const char *name,
		    struct cfs_dent *out)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&s->mu);
	if (dir->ep->listed) {
		size_t lo = 0, hi = dir->nents;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int c = strcmp(name, dir->ents[mid].name);
			if (c == 0) {
				*out = dir->ents[mid];
				if (out->f && out->f->deleted)
					break; /* retired (retire = read): gone from the view */
				if (out->f)
					out->f->nlookup++;
				else
					dir->ep->nlookup++;
				rc = 0;
				break;
			}
			if (c < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void cfs_epoch_forget(struct cfs_epochs *s, struct cfs_epoch *ep, uint64_t n)
{
	pthread_mutex_lock(&s->mu);
	ep->nlookup = n > ep->nlookup ? 0 : ep->nlookup - n;
	epoch_maybe_free(s, ep);
	unlock_and_run_gone(s);
}

void cfs_efile_forget(struct cfs_epochs *s, struct cfs_efile *f, uint64_t n)
{
	pthread_mutex_lock(&s->mu);
	f->nlookup = n > f->nlookup ? 0 : f->nlookup - n;
	efile_maybe_gone(s, f);
	unlock_and_run_gone(s);
}

void cfs_epoch_opendir(struct cfs_epochs *s, struct cfs_epoch *ep)
{
	pthread_mutex_lock(&s->mu);
	ep->nopendir++;
	pthread_mutex_unlock(&s->mu);
}

void cfs_epoch_releasedir(struct cfs_epochs *s, struct cfs_epoch *ep)
{
	pthread_mutex_lock(&s->mu);
	ep->nopendir--;
	if (ep->listed)
		epoch_maybe_retire(s, ep);
	else
		epoch_maybe_free(s, ep);
	unlock_and_run_gone(s);
}

int cfs_efile_open(struct cfs_epochs *s, struct cfs_efile *f)
{
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	if (f->deleted) {
		rc = -ENOENT;
	} else {
		tally(s, f, false);
		f->nopen++;
		tally(s, f, true);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void cfs_efile_release(struct cfs_epochs *s, struct cfs_efile *f)
{
	pthread_mutex_lock(&s->mu);
	tally(s, f, false);
	f->nopen--;
	tally(s, f, true);
	if (f->evicted && f->nopen == 0)
		retire_old(s); /* the last handle into an old epoch may be gone */
	efile_maybe_gone(s, f);
	unlock_and_run_gone(s);
}

bool cfs_efile_may_retire(struct cfs_epochs *s, const struct cfs_efile *f)
{
	pthread_mutex_lock(&s->mu);
	bool may = s->retire_read && f->evicted && !f->deleted;
	pthread_mutex_unlock(&s->mu);
	return may;
}

int cfs_epoch_hold(struct cfs_epochs *s, struct cfs_epoch *ep)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&s->mu);
	if (ep->listed) {
		ep->nopendir++;
		rc = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

size_t cfs_epoch_shown_files(struct cfs_epochs *s, struct cfs_epoch *ep, size_t *pos,
			     struct cfs_efile **out, size_t max)
{
	size_t n = 0, i = *pos;
	pthread_mutex_lock(&s->mu);
	for (; ep->listed && i < ep->nfiles && n < max; i++) {
		struct cfs_efile *f = ep->files[i];
		if (!f->deleted && !epoch_hides(ep, f))
			out[n++] = f;
	}
	pthread_mutex_unlock(&s->mu);
	*pos = i;
	return n;
}

int cfs_epochs_list_numbers(struct cfs_epochs *s, uint32_t **out, size_t *n)
{
	pthread_mutex_lock(&s->mu);
	size_t cnt = 0;
	for (struct cfs_epoch *e = s->list; e; e = e->next)
		cnt++;
	uint32_t *arr = cnt ? malloc(cnt * sizeof(*arr)) : NULL;
	if (cnt && !arr) {
		pthread_mutex_unlock(&s->mu);
		return -ENOMEM;
	}
	size_t i = 0;
	for (struct cfs_epoch *e = s->list; e; e = e->next)
		arr[i++] = e->number;
	pthread_mutex_unlock(&s->mu);
	*out = arr;
	*n = cnt;
	return 0;
}

void cfs_epochs_foreach_dirty(struct cfs_epochs *s, void (*fn)(struct cfs_efile *f, void *ctx),
			      void *ctx)
{
	pthread_mutex_lock(&s->dirty_mu);
	struct cfs_efile *f = s->dirty;
	s->dirty = NULL;
	while (f) {
		struct cfs_efile *next = f->dnext;
		f->dnext = f->dprev = NULL;
		f->in_dirty = false;
		/*
		 * Cleared before fn takes the counters, by an exchange: it reads
		 * the flag a read set (mark_dirty), so that read's counts are
		 * seen by fn; a read after it finds the flag clear and lists f
		 * again.
		 */
		(void)atomic_exchange(&f->dirty, false);
		fn(f, ctx);
		f = next;
	}
	pthread_mutex_unlock(&s->dirty_mu);
}

void cfs_epochs_foreach_file(struct cfs_epochs *s, void (*fn)(struct cfs_efile *f, void *ctx),
			     void *ctx)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nbuckets; i++)
		for (struct cfs_efile *f = s->hash[i]; f; f = f->hnext)
			fn(f, ctx);
	pthread_mutex_unlock(&s->mu);
}

#ifndef NDEBUG
/*
 * Under mu: the counts kept by tally() equal a walk of the files.  Builds
 * without NDEBUG only, and only on views of up to TALLY_CHECK_MAX files:
 * the default build keeps its asserts, and a stats read must not walk a
 * large view (docs/scale.md).
 */
#define TALLY_CHECK_MAX 4096
static void check_tally(const struct cfs_epochs *s)
{
	uint64_t open = 0, draining = 0, unheld = 0, retiring = 0, retiring_bytes = 0;
	if (s->nfiles > TALLY_CHECK_MAX)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		for (const struct cfs_efile *f = s->hash[i]; f; f = f->hnext) {
			open += f->nopen;
			if (f->evicted && !f->deleted) {
				draining++;
				if (!f->nopen)
					unheld += f->bytes;
				if (f->in_current) {
					retiring++;
					retiring_bytes += f->bytes;
				}
			}
		}
	}
	assert(open == s->open_handles && draining == s->draining_files &&
	       unheld == s->unheld_bytes && retiring == s->cur_retiring_files &&
	       retiring_bytes == s->cur_retiring_bytes && "epoch set: a kept count differs");
}
#else
#define check_tally(s) ((void)0)
#endif

void cfs_epochs_stat(struct cfs_epochs *s, struct cfs_epochs_stat *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->mu);
	for (struct cfs_epoch *e = s->list; e; e = e->next)
		st->epochs_listed++;
	st->files_alive = s->nfiles;
	st->draining_bytes = s->draining_bytes;
	st->draining_unheld_bytes = s->reap_bytes; /* queued: nothing holds them */
	st->gone_files = s->gone_files;
	st->gone_bytes = s->gone_bytes;
	st->current_files = s->cur_files;
	st->current_bytes = s->cur_bytes;
	st->current_records = s->cur_records;
	st->open_handles = s->open_handles;
	st->draining_files = s->draining_files;
	st->draining_unheld_bytes += s->unheld_bytes;
	st->retiring_files = s->cur_retiring_files;
	st->retiring_bytes = s->cur_retiring_bytes;
	check_tally(s);
	pthread_mutex_unlock(&s->mu);
}

uint64_t cfs_epochs_retiring_bytes(struct cfs_epochs *s)
{
	pthread_mutex_lock(&s->mu);
	uint64_t b = s->cur_retiring_bytes;
	pthread_mutex_unlock(&s->mu);
	return b;
}

void cfs_epochs_set_retire_read(struct cfs_epochs *s, bool on)
{
	pthread_mutex_lock(&s->mu);
	s->retire_read = on;
	pthread_mutex_unlock(&s->mu);
}

uint32_t cfs_epochs_current1(struct cfs_epochs *s)
{
	return atomic_load_explicit(&s->cur_number1, memory_order_relaxed);
}

/* A read that opened f's statistics for this handle: one read call, now. */
static void account_first(struct cfs_efile *f)
{
	atomic_fetch_add_explicit(&f->d_reads, 1, memory_order_relaxed);
	atomic_store_explicit(&f->last_read_ms, cmn_wall_ms(), memory_order_relaxed);
}

/* f was read to its end by a handle opened in epoch epoch1 - 1. */
static void account_end(struct cfs_epochs *s, struct cfs_efile *f, uint32_t epoch1)
{
	atomic_store_explicit(&f->served_full, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&f->d_full_reads, 1, memory_order_relaxed);
	uint32_t cur1 = atomic_load_explicit(&s->cur_number1, memory_order_relaxed);
	if (atomic_exchange_explicit(&f->full_epoch, epoch1, memory_order_relaxed) == epoch1 ||
	    epoch1 != cur1)
		return; /* already counted in this epoch, or read in one already left */
	uint64_t done = atomic_fetch_add_explicit(&s->cur_full_files, 1, memory_order_relaxed) + 1;
	if (done == atomic_load_explicit(&s->cur_nfiles, memory_order_relaxed) && s->events)
		cmn_events_post(s->events, CFS_EV_ALL_READ);
}

/*
 * After f's counters moved: f on the set's dirty list unless it is there.
 * Both sides exchange the flag (sequentially consistent, after the
 * counters' updates here, before their take in cfs_epochs_foreach_dirty):
 * either the flush's exchange reads this one's true, and then sees the
 * counts, or this exchange reads the flush's false and lists f again.
 */
static void mark_dirty(struct cfs_epochs *s, struct cfs_efile *f)
{
	if (atomic_exchange(&f->dirty, true))
		return;
	pthread_mutex_lock(&s->dirty_mu);
	if (!f->in_dirty) {
		f->dprev = NULL;
		f->dnext = s->dirty;
		if (s->dirty)
			s->dirty->dprev = f;
		s->dirty = f;
		f->in_dirty = true;
	}
	pthread_mutex_unlock(&s->dirty_mu);
}

void cfs_efile_account(struct cfs_epochs *s, struct cfs_efile *f, uint64_t off, uint64_t len,
		       bool first, bool *end_done, uint32_t epoch1)
{
	atomic_fetch_add_explicit(&f->d_read_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->cur_read_bytes, len, memory_order_relaxed);
	if (first)
		account_first(f);
	if (!*end_done && off + len >= f->bytes) {
		*end_done = true;
		account_end(s, f, epoch1);
	}
	mark_dirty(s, f);
}

void cfs_efile_account_cached(struct cfs_epochs *s, struct cfs_efile *f, uint32_t epoch1)
{
	/*
	 * The bytes came from the page cache or the kernel (passthrough): no
	 * read bytes are counted (the daemon read none), and never added then
	 * taken back, which a flush in between would see as a negative delta.
	 */
	if (!atomic_load_explicit(&f->served_full, memory_order_relaxed))
		return;
	account_first(f);
	account_end(s, f, epoch1);
	mark_dirty(s, f);
}
