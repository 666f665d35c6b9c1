/* The CLI's session: shared memory, output, event pump and final report. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t session_stop_signal;

static void on_stop_signal(int sig)
{
	session_stop_signal = sig;
}

void session_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking wait returns so the loop sees the flag. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Both flags say the TSC ticks at one rate on every CPU, in every
 * power state: its readings can be turned into ns by one linear map. */
static bool tsc_is_invariant(void)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	bool constant = false, nonstop = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return constant && nonstop;
}

static void create_shm(struct session *s)
{
	void *base;
	int fd = -1;

	for (int tries = 0; tries < 16 && fd < 0; tries++) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		snprintf(s->shm_name, sizeof(s->shm_name), "/kprobe-%d-%lx", (int)getpid(),
			 (unsigned long)ts.tv_nsec ^ ((unsigned long)tries << 20));
		fd = shm_open(s->shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0)
		cli_die(EXIT_FAIL, "cannot create the session memory: %s", strerror(errno));
	/* A target running as another user (we are root) must open it too. */
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)kps_size())) {
		int e = errno;

		shm_unlink(s->shm_name);
		cli_die(EXIT_FAIL, "cannot size the session memory: %s", strerror(e));
	}
	base = mmap(NULL, kps_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		int e = errno;

		shm_unlink(s->shm_name);
		cli_die(EXIT_FAIL, "cannot map the session memory: %s", strerror(e));
	}
	kps_map_views(&s->map, base);
	s->map.hdr->nrings = KPS_RINGS;
	s->map.hdr->ring_bytes = KPS_RING_BYTES;
	s->map.hdr->max_probes = KPS_MAX_PROBES;
	if (tsc_is_invariant()) {
		s->map.hdr->time_tsc = 1;
		s->map.hdr->ns_base = cli_now_ns();
		s->map.hdr->tsc_base = __builtin_ia32_rdtsc();
	}
	__atomic_store_n(&s->map.hdr->magic, KPS_MAGIC, __ATOMIC_RELEASE);
}

void session_open(struct session *s, struct cli_opts *o)
{
	memset(s, 0, sizeof(*s));
	s->opts = o;
	s->ctl.fd = -1;
	s->out.format = o->format;
	s->out.zeros = o->zeros;
	s->out.f = stdout;
	if (o->outfile) {
		s->out.f = fopen(o->outfile, "we");
		if (!s->out.f)
			cli_die(EXIT_FAIL, "cannot write %s: %s", o->outfile, strerror(errno));
	}
	create_shm(s);
	s->out.map = &s->map;
	s->out.t0 = cli_now_ns();
	s->cons.map = &s->map;
	s->cons.opts = o;
}

void session_share_with(struct session *s, pid_t pid)
{
	char path[64 + KPS_NAME_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) || st.st_uid == geteuid())
		return;
	/* Linux keeps POSIX shared memory in /dev/shm. */
	snprintf(path, sizeof(path), "/dev/shm%s", s->shm_name);
	if (chown(path, st.st_uid, st.st_gid))
		cli_warn("cannot give the session memory to uid %u: %s", (unsigned int)st.st_uid,
			 strerror(errno));
}

void session_close(struct session *s)
{
	if (s->shm_name[0])
		shm_unlink(s->shm_name);
	s->shm_name[0] = '\0';
	ctl_close(&s->ctl);
	consumer_free(&s->cons);
	if (s->out.f && s->out.f != stdout)
		fclose(s->out.f);
	s->out.f = NULL;
}

char *session_config(const struct session *s)
{
	struct session_config cfg = {
		.action = s->opts->action,
		.follow = s->opts->follow,
		.nspecs = s->opts->nspecs,
		.specs = s->opts->specs,
	};

	snprintf(cfg.shm, sizeof(cfg.shm), "%s", s->shm_name);
	return config_format(&cfg);
}

void session_progress(struct session *s, unsigned long long since_ns)
{
	uint64_t done = __atomic_load_n(&s->map.hdr->progress_done, __ATOMIC_RELAXED);
	uint64_t total = __atomic_load_n(&s->map.hdr->progress_total, __ATOMIC_RELAXED);
	unsigned long long now = cli_now_ns();

	if (now - since_ns < 1000000000ull || !total)
		return;
	/* A terminal gets a line updated in place, a log one line. */
	if (!isatty(STDERR_FILENO)) {
		if (!s->progress_shown)
			fprintf(stderr, "kprobe: registering %lu probes\n", (unsigned long)total);
		s->progress_shown = true;
		s->progress_newline = false;
		return;
	}
	if (s->progress_shown && (done == s->progress_done || now - s->progress_at < 250000000ull))
		return;
	fprintf(stderr, "\rkprobe: registering probes %lu/%lu", (unsigned long)done,
		(unsigned long)total);
	s->progress_shown = true;
	s->progress_newline = true;
	s->progress_done = done;
	s->progress_at = now;
}

void session_progress_done(struct session *s)
{
	if (s->progress_newline)
		fputc('\n', stderr);
	s->progress_shown = false;
	s->progress_newline = false;
}

void session_note_skipped(struct session *s)
{
	uint64_t n = __atomic_load_n(&s->map.hdr->skipped, __ATOMIC_RELAXED);

	if (n)
		cli_warn("skipped %lu function%s that cannot be probed (%s)", (unsigned long)n,
			 n == 1 ? "" : "s", s->map.hdr->skip_example);
}

bool session_pump(struct session *s)
{
	size_t n = 0;

	if (s->opts->action == ACT_TRACE)
		n = consumer_drain(&s->cons, &s->out);
	/* Nobody reads any more (kprobe trace ... | head): stop probing. */
	if (ferror(s->out.f))
		session_stop_signal = SIGPIPE;
	return n > 0;
}

static int by_desc_order(const void *a, const void *b)
{
	const struct count_row *x = a, *y = b;

	return x->desc < y->desc ? -1 : x->desc > y->desc;
}

static void report_counts(struct session *s)
{
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE);
	struct count_row *rows = calloc(n + 1, sizeof(*rows));
	int nrows = 0;

	if (!rows)
		cli_die(EXIT_FAIL, "out of memory");
	if (n > KPS_MAX_PROBES)
		n = KPS_MAX_PROBES;
	for (uint64_t id = 0; id < n; id++) {
		const struct kps_desc *d = &s->map.desc[id];
		struct count_row *r = &rows[nrows];

		if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE))
			continue;
		r->desc = d;
		r->missed = __atomic_load_n(&d->missed, __ATOMIC_RELAXED);
		for (int ring = 0; ring <= KPS_RINGS; ring++)
			if (ring == KPS_RINGS || s->map.rings[ring].used)
				r->hits += __atomic_load_n(
					&s->map.counters[(size_t)ring * KPS_MAX_PROBES + id],
					__ATOMIC_RELAXED);
		nrows++;
	}
	qsort(rows, (size_t)nrows, sizeof(*rows), by_desc_order);
	output_counts(&s->out, rows, nrows, consumer_lost(&s->map));
	free(rows);
}

static void report_latency(struct session *s)
{
	uint64_t buckets[KPS_BUCKETS] = { 0 }, missed = 0;
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE);
	char function[SPEC_TEXT_MAX];
	const struct probe_spec *spec = &s->opts->specs[0];

	for (int ring = 0; ring <= KPS_RINGS; ring++) {
		if (ring < KPS_RINGS && !s->map.rings[ring].used)
			continue;
		for (int b = 0; b < KPS_BUCKETS; b++)
			buckets[b] += __atomic_load_n(
				&s->map.hist[(size_t)ring * KPS_BUCKETS + b], __ATOMIC_RELAXED);
	}
	for (uint64_t id = 0; id < n && id < KPS_MAX_PROBES; id++)
		if (__atomic_load_n(&s->map.desc[id].ready, __ATOMIC_ACQUIRE))
			missed += __atomic_load_n(&s->map.desc[id].missed, __ATOMIC_RELAXED);
	snprintf(function, sizeof(function), "%s%s%s", spec->object, spec->object[0] ? ":" : "",
		 spec->symbol);
	output_latency(&s->out, function, buckets, missed);
}

void session_report(struct session *s)
{
	switch (s->opts->action) {
	case ACT_TRACE:
		consumer_drain(&s->cons, &s->out);
		output_end_trace(&s->out);
		if (consumer_lost(&s->map))
			cli_warn("lost %lu events (the tool did not keep up)",
				 (unsigned long)consumer_lost(&s->map));
		break;
	case ACT_COUNT:
		report_counts(s);
		break;
	case ACT_LATENCY:
		report_latency(s);
		break;
	}
}
