/* The CLI's session: shared memory, output, event pump and final report. */
#include "kp_arch.h"
#include "session.h"
#include "run.h"
#include "stacks.h"
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t session_stop_signal;
volatile sig_atomic_t session_stop_count;

static void on_stop_signal(int sig)
{
	session_stop_signal = sig;
	session_stop_count++;
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

	if (KP_CYCLES_ALWAYS_INVARIANT) {
		if (f)
			fclose(f);
		return true;
	}
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

uint32_t session_ring_count(void)
{
	const char *env = getenv("KPROBE_RINGS");
	char *end;
	unsigned long n;

	if (!env || !*env)
		return KPS_RINGS;
	errno = 0;
	n = strtoul(env, &end, 10);
	if (errno || *end || !n || n > KPS_RINGS)
		cli_die(EXIT_BAD, "KPROBE_RINGS must be a number of rings from 1 to %d",
			KPS_RINGS);
	return (uint32_t)n;
}

/* Anonymous memory sealed at its size: the target can write it but can
 * neither shrink it under us (a read past its end would kill us with
 * SIGBUS) nor grow it. */
static int make_memory(size_t size)
{
	int fd = memfd_create("kprobe-session", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int e;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void create_shm(struct session *s)
{
	uint32_t nrings = session_ring_count();
	uint64_t tsc_base = 0, ns_base = 0;
	bool tsc = tsc_is_invariant();
	void *base;
	int fd = make_memory(s->map_size);

	if (fd < 0)
		cli_die(EXIT_FAIL, "cannot create the session memory: %s", strerror(-fd));
	base = mmap(NULL, s->map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED)
		cli_die(EXIT_FAIL, "cannot map the session memory: %s", strerror(errno));
	s->shm_fd = fd;
	kps_map_views(&s->map, base);
	s->map.hdr->nrings = nrings;
	s->map.hdr->ring_bytes = KPS_RING_BYTES;
	s->map.hdr->max_probes = KPS_MAX_PROBES;
	if (tsc) {
		ns_base = cli_now_ns();
		tsc_base = kp_cycles();
		s->map.hdr->time_tsc = 1;
		s->map.hdr->ns_base = ns_base;
		s->map.hdr->tsc_base = tsc_base;
	}
	__atomic_store_n(&s->map.hdr->magic, KPS_MAGIC, __ATOMIC_RELEASE);
	if (consumer_init(&s->cons, &s->map, s->opts, nrings, tsc, tsc_base, ns_base))
		cli_die(EXIT_FAIL, "out of memory");
}

/* Whether a process with this PID exists (ours or not). */
static bool pid_alive(long pid)
{
	return pid > 0 && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* "kprobe-PID-HEX", the name earlier versions gave the session memory. */
static long stale_name_pid(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, "kprobe-", 7) || name[7] < '1' || name[7] > '9')
		return 0;
	pid = strtol(name + 7, &end, 10);
	if (*end != '-' || !end[1] || strspn(end + 1, "0123456789abcdef") != strlen(end + 1))
		return 0;
	return pid;
}

void session_clean_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		long pid = stale_name_pid(e->d_name);
		struct stat st;

		if (!pid || pid_alive(pid))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

/* With -- COMMAND, stdout is the command's: the results go to our stderr,
 * as perf stat and strace -c do.  A buffered stream of its own keeps a
 * busy trace from costing a write per line. */
static FILE *report_stream(void)
{
	int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f && fd >= 0)
		close(fd);
	return f ? f : stderr;
}

void session_open(struct session *s, struct cli_opts *o)
{
	memset(s, 0, sizeof(*s));
	s->opts = o;
	s->ctl.fd = -1;
	s->shm_fd = -1;
	s->out.format = o->format;
	s->out.zeros = o->zeros;
	s->out.f = o->command && !o->outfile ? report_stream() : stdout;
	if (o->outfile) {
		s->out.f = fopen(o->outfile, "we");
		if (!s->out.f)
			cli_die(EXIT_FAIL, "cannot write %s: %s", o->outfile, strerror(errno));
	}
	/* Linux keeps POSIX shared memory in /dev/shm. */
	session_clean_stale("/dev/shm");
	s->map_size = o->prog ? kps_total_size(run_image_len(o->prog), run_region_len(o->prog)) :
				kps_size();
	create_shm(s);
	s->map.hdr->drop = o->drop;
	if (o->action == ACT_RECORD)
		record_open(s);
	if (o->prog)
		run_setup(s);
	s->out.map = &s->map;
	s->out.t0 = cli_now_ns();
}

int session_inherit_fd(struct session *s)
{
	static const int at[] = { KPS_INHERIT_FD, 64, 3 };
	int fd = -1;

	/* Above what programs use, as far as the descriptor limit allows;
	 * not close-on-exec. */
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]) && fd < 0; i++)
		fd = fcntl(s->shm_fd, F_DUPFD, at[i]);
	if (fd < 0)
		cli_die(EXIT_FAIL, "cannot hand over the session memory: %s", strerror(errno));
	snprintf(s->shm_ref, sizeof(s->shm_ref), "fd:%d", fd);
	return fd;
}

int session_pass_fd(struct session *s)
{
	snprintf(s->shm_ref, sizeof(s->shm_ref), "passed");
	return s->shm_fd;
}

void session_handed_over(struct session *s)
{
	if (s->shm_fd >= 0)
		close(s->shm_fd);
	s->shm_fd = -1;
}

int session_agent_error(const struct session *s, char *buf, size_t len)
{
	int kind = __atomic_load_n(&s->map.hdr->error_kind, __ATOMIC_RELAXED);

	consumer_copy_text(buf, len, s->map.hdr->error, sizeof(s->map.hdr->error));
	if (!buf[0])
		snprintf(buf, len, "the agent failed without saying why");
	return kind == EXIT_BAD ? EXIT_BAD : EXIT_FAIL;
}

/* Flushes and closes the output; 0 or the errno of a write that failed. */
static int close_output(FILE *f)
{
	int e = 0;

	if (fflush(f))
		e = errno;
	if (ferror(f) && !e)
		e = EIO;
	if (f != stdout && f != stderr && fclose(f) && !e)
		e = errno;
	return e;
}

int session_close(struct session *s)
{
	int e = 0;

	session_handed_over(s);
	ctl_close(&s->ctl);
	consumer_free(&s->cons);
	stacks_free();
	if (s->out.f)
		e = close_output(s->out.f);
	s->out.f = NULL;
	if (e == EIO && s->out_errno)
		e = s->out_errno;
	/* A reader that went away (| head) asked for no more: not a failure. */
	if (!e || e == EPIPE)
		return 0;
	cli_warn("cannot write the results to %s: %s",
		 s->opts->outfile ? s->opts->outfile : s->opts->command ? "standard error" :
		 "standard output", strerror(e));
	return -e;
}

/* KPROBE_RETURN_PROBES=1: every return by a return probe (kprobe.1). */
static bool return_probes_only(void)
{
	const char *env = getenv("KPROBE_RETURN_PROBES");

	return env && !strcmp(env, "1");
}

char *session_config(const struct session *s)
{
	struct session_config cfg = {
		.action = s->opts->action,
		.follow = s->opts->follow,
		.nspecs = s->opts->nspecs,
		.specs = s->opts->specs,
		.watch_len = s->opts->watch_len,
		.watch_rw = s->opts->watch_rw,
		.stack_depth = s->opts->stack_depth,
		.stack_count = s->opts->stack_count,
		.return_probes = return_probes_only(),
		.module = (char *)s->opts->module,
		.nmodargs = s->opts->nmodargs,
		.modargs = s->opts->modargs,
		.image_len = s->opts->prog ? run_image_len(s->opts->prog) : 0,
		.region_len = s->opts->prog ? run_region_len(s->opts->prog) : 0,
	};

	snprintf(cfg.shm, sizeof(cfg.shm), "%s", s->shm_ref);
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
	char example[sizeof(s->map.hdr->skip_example)];

	if (!n)
		return;
	consumer_copy_text(example, sizeof(example), s->map.hdr->skip_example,
			   sizeof(s->map.hdr->skip_example));
	cli_warn("skipped %lu function%s that cannot be probed (%s)", (unsigned long)n,
		 n == 1 ? "" : "s", example);
}

int session_pump_delay_ms(const struct session *s, bool busy)
{
	enum kps_action a = s->opts->action;

	if (busy)
		return 0;
	/* a ring holds about a millisecond of a busy thread's events, and
	 * the thread waits for the reader once it is full */
	return a == ACT_RECORD || a == ACT_TRACE || a == ACT_RUN ? 1 : 10;
}

bool session_pump(struct session *s)
{
	size_t n = 0;

	if (s->opts->stack_depth)
		stacks_pump(s);
	if (s->opts->action == ACT_TRACE || s->opts->action == ACT_LOAD ||
	    s->opts->action == ACT_RUN) {
		consumer_free_dead_rings(&s->cons);
		n = consumer_drain(&s->cons, &s->out);
	} else if (s->opts->action == ACT_RECORD) {
		n = record_drain(s);
	}
	/* Nobody reads any more (kprobe trace ... | head), or the disk is
	 * full: stop probing. */
	if (ferror(s->out.f)) {
		if (!s->out_errno)
			s->out_errno = errno;
		session_stop_signal = SIGPIPE;
	}
	return n > 0;
}

static int by_desc_order(const void *a, const void *b)
{
	const struct count_row *x = a, *y = b;

	return x->desc < y->desc ? -1 : x->desc > y->desc;
}

/* Hits of descriptor id: the rows of the claimed rings, and the shared row. */
static uint64_t hits_of(const struct session *s, uint64_t id, uint32_t nrings)
{
	uint64_t hits = __atomic_load_n(&s->map.counters[(size_t)KPS_RINGS * KPS_MAX_PROBES + id],
					__ATOMIC_RELAXED);

	for (uint32_t ring = 0; ring < nrings; ring++)
		if (__atomic_load_n(&s->map.rings[ring].used, __ATOMIC_RELAXED))
			hits += __atomic_load_n(
				&s->map.counters[(size_t)ring * KPS_MAX_PROBES + id],
				__ATOMIC_RELAXED);
	return hits;
}

static uint64_t descs_published(const struct session *s)
{
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE);

	return n < KPS_MAX_PROBES ? n : KPS_MAX_PROBES;
}

static void report_counts(struct session *s)
{
	uint64_t n = descs_published(s);
	uint32_t nrings = consumer_rings_claimed(&s->cons);
	struct count_row *rows = calloc(n ? n : 1, sizeof(*rows));
	uint64_t lost, ringless;
	int nrows = 0;

	if (!rows)
		cli_die(EXIT_FAIL, "out of memory");
	for (uint64_t id = 0; id < n; id++) {
		struct count_row *r = &rows[nrows];

		if (!__atomic_load_n(&s->map.desc[id].ready, __ATOMIC_ACQUIRE))
			continue;
		r->desc = consumer_desc(&s->cons, id);
		if (!r->desc)
			continue;
		if (r->desc->spec < s->opts->nspecs && s->opts->specs[r->desc->spec].inlined_of[0])
			r->inlined_of = s->opts->specs[r->desc->spec].inlined_of;
		r->missed = __atomic_load_n(&s->map.desc[id].missed, __ATOMIC_RELAXED);
		r->hits = hits_of(s, id, nrings);
		nrows++;
	}
	qsort(rows, (size_t)nrows, sizeof(*rows), by_desc_order);
	lost = consumer_lost_full(&s->cons);
	ringless = consumer_lost_ringless(&s->cons);
	output_counts(&s->out, rows, nrows, lost + ringless < lost ? UINT64_MAX : lost + ringless);
	free(rows);
}

static void report_latency(struct session *s)
{
	uint64_t buckets[KPS_BUCKETS] = { 0 }, missed = 0;
	uint64_t n = descs_published(s);
	uint32_t nrings = consumer_rings_claimed(&s->cons);
	char function[SPEC_TEXT_MAX];
	const struct probe_spec *spec = &s->opts->specs[0];

	for (uint32_t ring = 0; ring <= nrings; ring++) {
		/* the claimed rings' rows, then the shared row */
		size_t row = ring < nrings ? ring : KPS_RINGS;

		if (ring < nrings && !__atomic_load_n(&s->map.rings[ring].used, __ATOMIC_RELAXED))
			continue;
		for (int b = 0; b < KPS_BUCKETS; b++)
			buckets[b] += __atomic_load_n(&s->map.hist[row * KPS_BUCKETS + b],
						      __ATOMIC_RELAXED);
	}
	for (uint64_t id = 0; id < n; id++)
		if (__atomic_load_n(&s->map.desc[id].ready, __ATOMIC_ACQUIRE))
			missed += __atomic_load_n(&s->map.desc[id].missed, __ATOMIC_RELAXED);
	snprintf(function, sizeof(function), "%s%s%s", spec->object, spec->object[0] ? ":" : "",
		 spec->symbol);
	output_latency(&s->out, function, buckets, missed);
}

/* Why events were lost, each cause apart. */
static void report_trace_loss(struct session *s)
{
	uint64_t full, after;
	uint64_t ringless = consumer_lost_ringless(&s->cons);

	session_split_losses(s, &full, &after);
	if (after)
		cli_warn("discarded %lu events that came after the end of probing",
			 (unsigned long)after);
	if (full)
		cli_warn("lost %lu events (a ring was full%s)", (unsigned long)full,
			 s->opts->drop ? " and --drop was given" :
					 ": the tool did not read it for seconds");
	if (ringless)
		cli_warn("lost %lu events (threads beyond the session's %u rings had none; "
			 "KPROBE_RINGS sets up to %d)", (unsigned long)ringless,
			 (unsigned int)s->cons.nrings, KPS_RINGS);
	if (s->cons.corrupt)
		cli_warn("skipped %lu corrupt ring contents (the target wrote over them)",
			 (unsigned long)s->cons.corrupt);
}

void session_show_failed_lines(struct session *s)
{
	if (s->opts->action == ACT_LOAD)
		consumer_drain_all(&s->cons, &s->out);
}

void session_stop_reading(struct session *s)
{
	__atomic_store_n(&s->map.hdr->drop, 1, __ATOMIC_RELEASE);
	if (!s->stopped_reading)
		s->lost_at_stop = consumer_lost_full(&s->cons);
	s->stopped_reading = true;
}

void session_split_losses(const struct session *s, uint64_t *during, uint64_t *after)
{
	uint64_t full = consumer_lost_full(&s->cons);

	*during = s->stopped_reading && s->lost_at_stop < full ? s->lost_at_stop : full;
	*after = full - *during;
}

/* A probe on an object the target never loaded (a name that a dlopen()
 * could still have brought in, so not an error at the start), or whose
 * every function was skipped, placed nothing: said, rather than an empty
 * table alone. */
static void warn_unprobed(struct session *s)
{
	uint64_t n = descs_published(s);
	int nspecs = s->opts->nspecs;
	bool *placed = calloc((size_t)nspecs + 1, sizeof(*placed));

	if (!placed)
		return;
	for (uint64_t id = 0; id < n; id++) {
		const struct kps_desc *d = consumer_desc(&s->cons, (uint32_t)id);

		if (d && d->spec < (uint32_t)nspecs)
			placed[d->spec] = true;
	}
	for (int i = 0; i < nspecs; i++) {
		const struct probe_spec *sp = &s->opts->specs[i];

		if (!placed[i] && sp->object[0] && sp->kind == SPEC_SYMBOL)
			cli_warn("nothing was probed for '%s' (no object '%s' was loaded, or none of "
				 "its matches could be probed)", sp->text, sp->object);
	}
	free(placed);
}

void session_report(struct session *s)
{
	if (s->opts->stack_depth)
		stacks_pump(s);
	if (s->opts->action == ACT_COUNT || s->opts->action == ACT_TRACE ||
	    s->opts->action == ACT_LATENCY)
		warn_unprobed(s);
	switch (s->opts->action) {
	case ACT_LOAD:
	case ACT_TRACE:
		consumer_drain_all(&s->cons, &s->out);
		output_end_trace(&s->out);
		report_trace_loss(s);
		break;
	case ACT_RUN:
		consumer_drain_all(&s->cons, &s->out);
		run_report(s);
		report_trace_loss(s);
		/* after the maps, which bpftrace's output ends with */
		warn_unprobed(s);
		break;
	case ACT_COUNT:
		if (s->opts->stack_count)
			stacks_before_counts(s);
		if (s->out.format != FMT_FOLDED)
			report_counts(s);
		if (s->opts->stack_count)
			stacks_report_counts(s);
		break;
	case ACT_LATENCY:
		report_latency(s);
		break;
	case ACT_RECORD:
		record_finish(s);
		break;
	}
	if (ferror(s->out.f) && !s->out_errno)
		s->out_errno = errno;
}
