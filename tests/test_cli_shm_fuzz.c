/* The CLI's reading side against hostile session memory: the target can
 * write every byte of it, so random and mutated headers, descriptors, ring
 * positions and event records (also changing while they are read) must
 * never crash the tool, hang it or make it print what it should not.
 * Links the CLI's own session, consumer and output code (plain and ASan
 * builds); the seeds are fixed, so a failure names one that reproduces.
 * Also the tool's other reader of files it does not choose: the loader's
 * cache of short library names, and the directories without one. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldcache.h"
#include "session.h"
#include "symbolize.h"
#include "stack_table.h"

/* ---- what main.c provides to the CLI ---- */

static char last_warning[4096];
static int nwarnings;

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_warning, sizeof(last_warning), fmt, ap);
	va_end(ap);
	nwarnings++;
}

void cli_die(int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cr_assert_fail("the reader gave up (status %d): %s", status, msg);
	abort();
}

unsigned long long cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* ---- a session as the CLI opens it, with two probes ---- */

static struct probe_spec specs[2];
static struct cli_opts opts;
static struct session sess;

static void open_session(enum kps_action action, enum out_format format)
{
	char err[160];

	cr_assert_eq(spec_parse("fz_entry a=arg1:u64 s=arg2:string", &specs[0], err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(spec_parse("fz_ret%return r=retval:x64", &specs[1], err, sizeof(err)), 0,
		     "%s", err);
	memset(&opts, 0, sizeof(opts));
	opts.cmd = action == ACT_TRACE ? CMD_TRACE : action == ACT_COUNT ? CMD_COUNT :
		   action == ACT_LOAD ? CMD_LOAD : CMD_LATENCY;
	opts.action = action;
	opts.specs = specs;
	opts.nspecs = 2;
	opts.outfile = "/dev/null";
	opts.format = format;
	session_open(&sess, &opts);
	output_begin(&sess.out);
}

static void publish_descs(void)
{
	struct kps_desc *d = sess.map.desc;

	d[0] = (struct kps_desc){ .addr = 0x1000, .pid = 1, .spec = 0, .kind = DESC_ENTRY };
	strcpy(d[0].name, "fz_entry");
	strcpy(d[0].object, "fz");
	d[1] = (struct kps_desc){ .addr = 0x1000, .pid = 1, .spec = 1, .kind = DESC_RETURN };
	strcpy(d[1].name, "fz_ret%return");
	strcpy(d[1].object, "fz");
	d[0].ready = d[1].ready = 1;
	sess.map.hdr->ndesc = 2;
}

/* xorshift64*: reproducible from its seed. */
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/* Values that break naive arithmetic, or random ones. */
static uint64_t nasty(void)
{
	static const uint64_t v[] = {
		0, 1, 7, 8, 24, 0x7f, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffff8,
		0xffffffff, 0x100000000ull, KPS_RING_BYTES, KPS_RING_BYTES + 8, KPS_MAX_PROBES,
		KPS_RINGS, KPS_RINGS + 1, INT64_MAX, (uint64_t)INT64_MIN, UINT64_MAX - 7,
		UINT64_MAX,
	};
	uint64_t r = rnd();

	return r % 3 ? v[r % (sizeof(v) / sizeof(v[0]))] : rnd();
}

/* ---- writing events as an agent does ---- */

struct writer {
	uint32_t ring;
	uint64_t head;
};

static unsigned char *ring_data(uint32_t ring)
{
	return sess.map.ring_data + (size_t)ring * KPS_RING_BYTES;
}

static void claim(uint32_t ring, uint32_t tid)
{
	sess.map.rings[ring].owner = (uint64_t)1234 << 32 | tid;
	sess.map.rings[ring].used = 1;
	if (sess.map.hdr->rings_hint < ring + 1)
		sess.map.hdr->rings_hint = ring + 1;
}

/* Appends one record of len bytes (a multiple of 8) at the writer's head,
 * padding to the ring's start first as the agent does; returns it. */
static struct kps_event *reserve(struct writer *w, uint32_t len)
{
	uint32_t pos = (uint32_t)(w->head & (KPS_RING_BYTES - 1));
	struct kps_event *ev;

	if (len > KPS_RING_BYTES - pos) {
		ev = (struct kps_event *)(ring_data(w->ring) + pos);
		ev->size = KPS_RING_BYTES - pos;
		ev->type = EV_PAD;
		w->head += KPS_RING_BYTES - pos;
		pos = 0;
	}
	ev = (struct kps_event *)(ring_data(w->ring) + pos);
	memset(ev, 0, len);
	ev->size = len;
	w->head += len;
	return ev;
}

static void put_entry(struct writer *w, uint64_t t, uint64_t a, const char *str)
{
	size_t n = strlen(str);
	uint32_t len = (uint32_t)(sizeof(struct kps_event) + 16 + 2 + n + 7) & ~7u;
	struct kps_event *ev = reserve(w, len);
	unsigned char *p = (unsigned char *)&ev->vals[2];

	ev->type = EV_ENTRY;
	ev->nvals = 2;
	ev->desc = 0;
	ev->time_ns = t;
	ev->vals[0] = a;
	ev->vals[1] = 0x4000;
	p[0] = (unsigned char)n;
	p[1] = (unsigned char)(n >> 8);
	memcpy(p + 2, str, n);
}

static void put_return(struct writer *w, uint64_t t, uint64_t r)
{
	struct kps_event *ev = reserve(w, sizeof(struct kps_event) + 16);

	ev->type = EV_RETURN;
	ev->nvals = 2;
	ev->desc = 1;
	ev->time_ns = t;
	ev->vals[0] = t - 10;
	ev->vals[1] = r;
}

static void commit(struct writer *w)
{
	__atomic_store_n(&sess.map.rings[w->ring].head, w->head, __ATOMIC_RELEASE);
}

/* Writes n valid events into each of nrings rings; returns how many. */
static int fill_valid(uint32_t nrings, int n)
{
	for (uint32_t ring = 0; ring < nrings; ring++) {
		/* where a scribbled head says, as a producer would */
		struct writer w = { ring, (sess.map.rings[ring].head + 7) & ~7ull };

		claim(ring, 100 + ring);
		for (int i = 0; i < n; i++) {
			if (i % 2)
				put_return(&w, (uint64_t)i * 100, (uint64_t)i);
			else
				put_entry(&w, (uint64_t)i * 100, (uint64_t)i, "hello");
		}
		commit(&w);
	}
	return (int)nrings * n;
}

static size_t drain_all(int max_rounds)
{
	size_t total = 0, n;

	for (int i = 0; i < max_rounds && (n = consumer_drain(&sess.cons, &sess.out)); i++)
		total += n;
	return total;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

TestSuite(shm_fuzz, .timeout = 60);

/* The baseline: valid events all arrive, so the harness itself works. */
Test(shm_fuzz, valid_events_all_arrive)
{
	int n;

	open_session(ACT_TRACE, FMT_JSON);
	publish_descs();
	n = fill_valid(3, 500);
	cr_assert_eq(drain_all(100), (size_t)n);
	cr_assert_eq(sess.cons.corrupt, 0);
	session_report(&sess);
	cr_assert_eq(nwarnings, 0, "%s", last_warning);
}

/* A descriptor count of UINT64_MAX and names without a terminator. */
Test(shm_fuzz, count_with_hostile_descriptor_count)
{
	struct kps_header *h;
	FILE *f;
	char line[512];
	int lines = 0;

	open_session(ACT_COUNT, FMT_TEXT);
	opts.outfile = NULL;
	fclose(sess.out.f);
	sess.out.f = f = tmpfile();
	cr_assert(f);
	h = sess.map.hdr;
	for (int i = 0; i < 40; i++) {
		struct kps_desc *d = &sess.map.desc[i];

		memset(d, 'A' + i % 26, sizeof(*d));
		d->kind = DESC_ENTRY;
		d->spec = (uint16_t)(i % 2);
		d->ready = 1;
		sess.map.counters[(size_t)KPS_RINGS * KPS_MAX_PROBES + i] = (uint64_t)i + 1;
	}
	sess.map.desc[3].name[5] = '\033';
	h->ndesc = UINT64_MAX;
	h->rings_hint = UINT32_MAX;
	session_report(&sess);
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		cr_assert(printable(strtok(line, "\n") ? line : ""), "escape printed: %s", line);
		lines++;
	}
	cr_assert_eq(lines, 41, "a row per valid descriptor and a heading");
	sess.out.f = NULL;
	fclose(f);
}

/* A record claiming 4 GiB - 8 bytes in a ring whose head is 4 GiB on. */
Test(shm_fuzz, trace_with_huge_record)
{
	struct kps_event *ev;

	open_session(ACT_TRACE, FMT_TEXT);
	publish_descs();
	claim(0, 7);
	ev = (struct kps_event *)ring_data(0);
	ev->size = 0xfffffff8u;
	ev->type = EV_ENTRY;
	sess.map.rings[0].head = 0x100000000ull;
	cr_assert_eq(consumer_drain(&sess.cons, &sess.out), 0);
	cr_assert_eq(sess.cons.corrupt, 1);
	session_report(&sess);
	cr_assert(strstr(last_warning, "corrupt"), "%s", last_warning);
	/* Later events in that ring are read again. */
	{
		struct writer w = { 0, sess.map.rings[0].head };

		put_entry(&w, 5, 6, "after");
		commit(&w);
	}
	cr_assert_eq(consumer_drain(&sess.cons, &sess.out), 1);
}

/* The agent's messages: no terminator, escapes and newlines, any kind. */
Test(shm_fuzz, agent_messages_are_one_clean_line)
{
	struct kps_header *h;
	char msg[KPS_MSG];

	open_session(ACT_COUNT, FMT_TEXT);
	h = sess.map.hdr;
	memset(h->error, '\n', sizeof(h->error));
	memcpy(h->error, "\033]0;owned\007", 10);
	h->error_kind = 12345;
	cr_assert_eq(session_agent_error(&sess, msg, sizeof(msg)), EXIT_FAIL);
	cr_assert(strlen(msg) < sizeof(msg));
	cr_assert(printable(msg), "%s", msg);
	h->error_kind = EXIT_BAD;
	cr_assert_eq(session_agent_error(&sess, msg, sizeof(msg)), EXIT_BAD);
	memset(h->skip_example, '\033', sizeof(h->skip_example));
	h->skipped = UINT64_MAX;
	session_note_skipped(&sess);
	cr_assert(strlen(last_warning) < 300, "%s", last_warning);
	cr_assert(printable(last_warning), "%s", last_warning);
}

/* One drain does bounded work however much a target claims is there. */
Test(shm_fuzz, drain_is_bounded)
{
	uint64_t consumed = 0;
	unsigned long long t0;

	open_session(ACT_TRACE, FMT_TEXT);
	publish_descs();
	for (uint32_t ring = 0; ring < 32; ring++) {
		claim(ring, ring + 1);
		/* a full ring of the smallest records there are */
		for (uint32_t off = 0; off < KPS_RING_BYTES; off += 8) {
			struct kps_event *ev = (struct kps_event *)(ring_data(ring) + off);

			ev->size = 8;
			ev->type = EV_PAD;
		}
		sess.map.rings[ring].head = KPS_RING_BYTES;
	}
	sess.map.hdr->rings_hint = KPS_RINGS;
	for (uint32_t ring = 32; ring < KPS_RINGS; ring++)
		sess.map.rings[ring].used = 1;
	t0 = cli_now_ns();
	cr_assert_eq(consumer_drain(&sess.cons, &sess.out), 0);
	cr_assert_lt(cli_now_ns() - t0, 5000000000ull);
	for (uint32_t ring = 0; ring < 32; ring++)
		consumed += sess.cons.tails[ring];
	cr_assert_leq(consumed, CONSUMER_DRAIN_MAX + KPS_RING_BYTES, "one drain read %lu bytes",
		      (unsigned long)consumed);
	cr_assert_gt(consumed, 0);
	/* and the next drains go on from there */
	for (int i = 0; i < 64; i++)
		consumer_drain(&sess.cons, &sess.out);
	for (uint32_t ring = 0; ring < 32; ring++)
		cr_assert_eq(sess.cons.tails[ring], KPS_RING_BYTES);
}

/* The end of a trace reads everything, more than one drain takes. */
Test(shm_fuzz, final_drain_reads_everything)
{
	size_t n = 0;

	open_session(ACT_TRACE, FMT_TEXT);
	publish_descs();
	for (uint32_t ring = 0; ring < 20; ring++) {
		struct writer w = { ring, 0 };

		claim(ring, ring + 1);
		while (w.head + 64 < KPS_RING_BYTES) {
			put_return(&w, w.head, ring);
			n++;
		}
		commit(&w);
	}
	cr_assert_gt((uint64_t)n * 40, CONSUMER_DRAIN_MAX);
	cr_assert_eq(consumer_drain_all(&sess.cons, &sess.out), n);
}

/* Random headers, descriptors, counters and histograms, then the reports. */
static void scramble_summary(void)
{
	struct kps_header *h = sess.map.hdr;
	uint64_t *hdr_words = (uint64_t *)h;
	int nd = (int)(rnd() % 64);

	for (int k = 0; k < 16; k++)
		hdr_words[rnd() % (sizeof(*h) / 8)] = nasty();
	h->ndesc = nasty();
	h->rings_hint = (uint32_t)nasty();
	for (int i = 0; i < nd; i++) {
		struct kps_desc *d = &sess.map.desc[rnd() % 128];
		unsigned char *b = (unsigned char *)d;

		for (int k = 0; k < 24; k++)
			b[rnd() % sizeof(*d)] = (unsigned char)rnd();
		d->ready = (uint8_t)(rnd() % 3);
	}
	for (int k = 0; k < 64; k++) {
		uint32_t ring = (uint32_t)(rnd() % (KPS_RINGS + 1));

		if (ring < KPS_RINGS)
			sess.map.rings[ring].used = (uint32_t)nasty();
		sess.map.counters[(size_t)ring * KPS_MAX_PROBES + rnd() % 128] = nasty();
		sess.map.hist[(size_t)ring * KPS_BUCKETS + rnd() % KPS_BUCKETS] = nasty();
	}
}

Test(shm_fuzz, random_summaries)
{
	open_session(ACT_COUNT, FMT_JSON);
	for (int iter = 0; iter < 300; iter++) {
		rng = 0x9e3779b97f4a7c15ull * (uint64_t)(iter + 1);
		publish_descs();
		scramble_summary();
		opts.action = iter % 2 ? ACT_COUNT : ACT_LATENCY;
		sess.out.format = (enum out_format)(iter % 3);
		session_note_skipped(&sess);
		session_report(&sess);
	}
}

/* Valid rings, then random bytes over records and ring positions. */
static void mutate_rings(uint32_t nrings)
{
	int nmut = 1 + (int)(rnd() % 32);

	for (int k = 0; k < nmut; k++) {
		uint32_t ring = (uint32_t)(rnd() % nrings);
		uint64_t head = sess.map.rings[ring].head;

		switch (rnd() % 6) {
		case 0:
			sess.map.rings[ring].head = rnd() % 2 ? nasty() : head + nasty() % 4096;
			break;
		case 1:
			sess.map.rings[ring].tail = nasty();
			break;
		case 2:
			sess.map.hdr->rings_hint = (uint32_t)nasty();
			break;
		default: {
			/* a word of a record near the head */
			uint64_t off = (head - rnd() % 2048) & (KPS_RING_BYTES - 8);
			uint64_t *wd = (uint64_t *)(ring_data(ring) + off);

			*wd = rnd() % 2 ? nasty() : *wd ^ (1ull << (rnd() % 64));
		}
		}
	}
}

Test(shm_fuzz, random_ring_mutations)
{
	open_session(ACT_TRACE, FMT_TEXT);
	for (int iter = 0; iter < 400; iter++) {
		rng = 0x853c49e6748fea9bull * (uint64_t)(iter + 1);
		publish_descs();
		if (iter % 7 == 0)
			scramble_summary();
		fill_valid(1 + (uint32_t)(rnd() % 4), 1 + (int)(rnd() % 40));
		mutate_rings(4);
		sess.out.format = (enum out_format)(iter % 3);
		drain_all(4);
	}
	session_report(&sess);
}

/* A target rewriting its rings while the tool reads them. */
static volatile int scribbling;

static void *scribbler(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg;

	while (__atomic_load_n(&scribbling, __ATOMIC_RELAXED)) {
		uint64_t off, *wd;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off = (x >> 8) % 4096 & ~7ull;
		wd = (uint64_t *)(ring_data((uint32_t)(x % 2)) + off);
		__atomic_store_n(wd, x % 5 ? x : 0xfffffff8u, __ATOMIC_RELAXED);
		if (x % 64 == 0)
			__atomic_store_n(&sess.map.rings[x % 2].head, x >> 40, __ATOMIC_RELAXED);
	}
	return NULL;
}

Test(shm_fuzz, rings_changing_under_the_reader)
{
	pthread_t th;

	open_session(ACT_TRACE, FMT_JSON);
	publish_descs();
	scribbling = 1;
	cr_assert_eq(pthread_create(&th, NULL, scribbler, (void *)0x1234567ull), 0);
	for (int iter = 0; iter < 300; iter++) {
		rng = 0xda942042e4dd58b5ull * (uint64_t)(iter + 1);
		fill_valid(2, 1 + (int)(rnd() % 60));
		drain_all(3);
	}
	__atomic_store_n(&scribbling, 0, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	session_report(&sess);
}

/* A loaded module's lines (kprobe load): records whose length field lies,
 * text with control characters and no terminator, and records of the
 * other kinds where only lines belong.  Only clean lines come out. */
Test(shm_fuzz, load_lines_hostile)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);

	open_session(ACT_LOAD, FMT_TEXT);
	cr_assert(mem);
	sess.out.f = mem;
	for (int iter = 0; iter < 300; iter++) {
		struct writer w;

		rng = 0x9e3779b97f4a7c15ull * (uint64_t)(iter + 1);
		claim(0, 77);
		w = (struct writer){ 0, sess.map.rings[0].head };
		for (int i = 0; i < 1 + (int)(rnd() % 20); i++) {
			uint32_t n = (uint32_t)(rnd() % 64);
			struct kps_event *ev = reserve(&w, (sizeof(*ev) + n + 7) & ~7u);
			unsigned char *p = (unsigned char *)ev->vals;

			ev->type = rnd() % 5 ? EV_TEXT : (uint16_t)(rnd() % 8);
			ev->reserved = rnd() % 3 ? n : (uint32_t)nasty();
			ev->desc = (uint32_t)nasty();
			ev->nvals = (uint16_t)nasty();
			ev->time_ns = (uint64_t)i;
			for (uint32_t k = 0; k < n; k++)
				p[k] = (unsigned char)(rnd() % 3 ? 'a' + rnd() % 26 : rnd());
		}
		commit(&w);
		drain_all(3);
	}
	fflush(mem);
	/* Every line printable, none longer than a record can hold. */
	for (char *line = text, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		cr_assert(nl, "an unterminated line");
		*nl = '\0';
		cr_assert(printable(line), "a control character in '%s'", line);
		cr_assert_leq(strlen(line), 64);
	}
	sess.out.f = NULL;
	fclose(mem);
	free(text);
}

/* count --stacks: a table of valid entries among hostile ones (depths past
 * the session's, unknown descriptors, counts of zero), a hostile entry
 * count: only the valid stacks are printed, merged, with their counts
 * (each entry's owner's hits and the other threads' summed). */
Test(shm_fuzz, count_stacks_hostile_table)
{
	const uint32_t depth = 4, stride = kps_stack_stride(depth);
	unsigned char *entries;
	char *text = NULL;
	size_t len = 0;
	FILE *mem;

	open_session(ACT_COUNT, FMT_FOLDED);
	opts.stack_depth = depth;
	opts.stack_count = true;
	publish_descs();
	mem = open_memstream(&text, &len);
	cr_assert(mem);
	fclose(sess.out.f);
	sess.out.f = mem;
	entries = sess.map.ring_data + kps_stack_entries_off();
	for (uint32_t i = 0; i < 64; i++) {
		static const uint32_t bad_desc[] = { 2, KPS_MAX_PROBES, UINT32_MAX };
		static const uint32_t bad_depth[] = { 5, 1000, UINT32_MAX };
		struct kps_stack_entry *e = (void *)(entries + (size_t)i * stride);

		/* every fourth an unknown descriptor, every third a depth past
		 * the session's, every fifth unused */
		e->desc = i % 4 ? 0 : bad_desc[i % 3];
		e->depth = i % 3 ? 2 : bad_depth[i % 3];
		/* the owner's and the others' hits add up: 10, however
		 * split (own alone where i % 7 is 0) */
		e->count = i % 5 ? i % 7 : 0;
		e->own = i % 5 ? 10 - i % 7 : 0;
		e->ips[0] = 0x1000;
		e->ips[1] = i % 2 ? 0x2000 : 0x3000;
	}
	*(uint64_t *)(void *)sess.map.ring_data = UINT64_MAX;
	session_report(&sess);
	fflush(mem);
	{
		uint64_t odd = 0, even = 0;
		char want[128];

		for (uint32_t i = 0; i < 64; i++)
			if (i % 4 && i % 3 && i % 5)
				*(i % 2 ? &odd : &even) += 10;
		snprintf(want, sizeof(want), "0x2000;0x1000 %lu\n", (unsigned long)odd);
		cr_expect(strstr(text, want), "%s not in:\n%s", want, text);
		snprintf(want, sizeof(want), "0x3000;0x1000 %lu\n", (unsigned long)even);
		cr_expect(strstr(text, want), "%s not in:\n%s", want, text);
		/* the two valid stacks, nothing else */
		cr_expect(strchr(text, '\n') && strchr(strchr(text, '\n') + 1, '\n') &&
			  !strchr(strchr(strchr(text, '\n') + 1, '\n') + 1, '\n'), "%s", text);
	}
	for (char *line = text, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		cr_assert(nl, "an unterminated line");
		*nl = '\0';
		cr_assert(printable(line), "a control character in '%s'", line);
	}
	sess.out.f = NULL;
	fclose(mem);
	free(text);
}

/* trace --stack: records whose frame count is past the depth asked for or
 * past the record are dropped; valid ones print their frames. */
Test(shm_fuzz, trace_stacks_hostile_counts)
{
	struct writer w = { 0, 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *mem;

	open_session(ACT_TRACE, FMT_JSON);
	opts.stack_depth = 3;
	publish_descs();
	mem = open_memstream(&text, &len);
	cr_assert(mem);
	fclose(sess.out.f);
	sess.out.f = mem;
	claim(0, 9);
	for (int i = 0; i < 4; i++) {
		/* a return event (no strings): entry time, retval, frames */
		static const uint32_t frames[] = { 2, 4, 0xffffffff, 3 };
		uint32_t n = i == 3 ? 40 : frames[i];
		uint32_t room = i == 3 ? 3 : n > 8 ? 1 : n;
		struct kps_event *ev = reserve(&w, (uint32_t)sizeof(*ev) + 16 + 8 * room);

		ev->type = EV_RETURN;
		ev->nvals = 2;
		ev->desc = 1;
		ev->time_ns = 100 + (uint64_t)i;
		ev->vals[0] = 90;
		ev->vals[1] = (uint64_t)i;
		ev->reserved = i == 2 ? 0xffffffffu : n << KPS_STACK_SHIFT;
		for (uint32_t k = 0; k < room; k++)
			ev->vals[2 + k] = 0xa000 + k;
	}
	commit(&w);
	cr_assert_eq(drain_all(5), 1);
	fflush(mem);
	cr_expect(strstr(text, "\"stack\":[\"0xa000\",\"0xa001\"]}"), "%s", text);
	sess.out.f = NULL;
	fclose(mem);
	free(text);
}

/* The objects table the agent fills as the program loads libraries: the
 * target may write anything there (counts past the end, unterminated or
 * relative paths, ranges upside down or huge, entries changing between
 * reads); the symbolizer reads only checked, terminated copies. */
Test(shm_fuzz, noted_objects_hostile)
{
	static struct kps_object objs[KPS_OBJECTS];
	uint32_t n = 0xffffffffu;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct symbolizer z;
	char name[256];
	uint64_t off;

	for (int round = 0; round < 40; round++) {
		unsigned char *b = (unsigned char *)objs;

		for (size_t i = 0; i < sizeof(objs); i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			b[i] = (unsigned char)(seed >> 56);
		}
		for (int i = 0; i < KPS_OBJECTS; i++) {
			objs[i].pid = (uint32_t)getpid();
			objs[i].ready = (unsigned char)(i & 1);
			if (i % 3 == 0)
				memcpy(objs[i].path, "/proc/self/exe", 15);	/* a real file */
			if (i % 5 == 0)
				objs[i].end = objs[i].start + 4096;
		}
		symbolizer_init(&z, getpid());
		symbolizer_use_noted(&z, objs, &n);
		symbolizer_refresh(&z);
		for (int k = 0; k < 64; k++)
			symbolizer_lookup(&z, objs[k].start + 16, name, sizeof(name), &off);
		/* the process's own code is still found first */
		cr_expect_eq(symbolizer_lookup(&z, (uint64_t)(uintptr_t)&cli_warn, name, sizeof(name),
					       &off), 0);
		cr_expect_str_eq(name, "cli_warn");
		symbolizer_free(&z);
	}
}

/* ---- short library names on a system without the loader's cache ---- */

static void touch(const char *dir, const char *name)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fclose(f);
}

/* The cache is read from a file the tool does not choose: a hostile or
 * absent one leaves the directories, where the soname comes first. */
Test(shm_fuzz, short_library_names_from_a_directory)
{
	char dir[] = "/tmp/kprobe-ldscanXXXXXX", out[512], want[512];

	cr_assert_not_null(mkdtemp(dir));
	touch(dir, "libfoo.so");
	touch(dir, "libfoo.so.3.1.4");
	touch(dir, "libfoobar.so.1");
	touch(dir, "libfoo.a");
	cr_assert_eq(ldcache_scan_dir(dir, "libfoo", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/libfoo.so", dir);
	cr_expect_str_eq(out, want, "no soname: the development link");
	touch(dir, "libfoo.so.3");
	cr_assert_eq(ldcache_scan_dir(dir, "libfoo", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/libfoo.so.3", dir);
	cr_expect_str_eq(out, want, "the soname first");
	cr_assert_eq(ldcache_scan_dir(dir, "libfoobar", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/libfoobar.so.1", dir);
	cr_expect_str_eq(out, want);
	cr_expect_eq(ldcache_scan_dir(dir, "libfo", out, sizeof(out)), -ENOENT);
	cr_expect_eq(ldcache_scan_dir(dir, "libfoo", out, 8), -ENAMETOOLONG);
	cr_expect_eq(ldcache_scan_dir("/nonexistent-dir", "libfoo", out, sizeof(out)), -ENOENT);
	/* a cache that is not one: nothing from it */
	cr_expect_eq(ldcache_find(dir, "libfoo", out, sizeof(out)), -ENOENT);
	snprintf(want, sizeof(want), "%s/libfoo.so.3", dir);
	cr_expect_eq(ldcache_find(want, "libfoo", out, sizeof(out)), -ENOENT);
	for (const char *const *f = (const char *const[]){ "libfoo.so", "libfoo.so.3.1.4",
							     "libfoobar.so.1", "libfoo.a",
							     "libfoo.so.3", NULL }; *f; f++) {
		snprintf(want, sizeof(want), "%s/%s", dir, *f);
		unlink(want);
	}
	rmdir(dir);
}
