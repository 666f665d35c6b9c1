/* kprobe report, replay, dump: reading a recording (record.c writes it).
 *
 * Each thread's file is walked once, in the order its events were written
 * (the order they happened on that thread), keeping the call stack: an
 * entry of a function that has a return probe pushes a frame, a return
 * pops the nearest frame of its function.  Frames above it never saw
 * their return (longjmp, an exception, a missed return) and are closed
 * there, marked; frames still open at the thread's last event are closed
 * then, marked.  A return with no frame of its function (entered before
 * the recording) and the events of probes without a partner are shown as
 * single events.  Everything read is checked: a file that makes no sense
 * from some point on is read up to there, with a warning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cxx_names.h"
#include "output.h"
#include "recdata.h"

#define MAX_DEPTH_SHOWN 4096

struct rd_desc {
	bool valid;
	uint8_t kind;			/* enum kps_desc_kind */
	uint32_t pid;
	uint64_t addr;
	int func;			/* index in funcs[] */
	struct kps_desc copy;		/* for the shared value printers */
	struct probe_spec *spec;
};

struct rd_func {
	char name[192];
	uint32_t pid;
	uint64_t addr;
	bool has_entry, has_return;
	/* report */
	uint64_t total, self, calls;
	int active;			/* frames of it on the current stack */
};

struct recording {
	const char *dir;
	bool time_tsc;
	uint64_t tsc_base, ns_base;
	double ns_per_tick;
	uint64_t lost;
	uint64_t missed_returns;	/* calls whose return probe had no instance */
	struct rd_desc *descs;		/* KPS_MAX_PROBES */
	struct rd_func *funcs;
	int nfuncs;
	struct probe_spec specs[KPROBE_MAX_SPECS];
	bool spec_ok[KPROBE_MAX_SPECS];
	uint64_t corrupt;		/* files with bad records (read up to them) */
};

/* One thread's file. */
struct rd_thread {
	pid_t pid, tid;
	const unsigned char *data;
	size_t len;
	uint64_t first_ns;
};

struct frame {
	int func;
	uint32_t desc;
	uint64_t start, child;
	struct trace_event entry;
};

/* How a frame ended. */
enum frame_end { END_RETURN, END_SKIPPED, END_OPEN };

struct walk_ops {
	void (*enter)(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
		      bool leaf);
	void (*leave)(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
		      uint64_t end, const struct trace_event *ret, enum frame_end how, bool leaf);
	/* An event with no partner: entry-only probes, returns never entered. */
	void (*single)(void *ctx, const struct rd_thread *t, const struct trace_event *ev,
		       int depth);
};

static void die_bad_recording(const struct recording *r, const char *what)
{
	cli_die(EXIT_FAIL, "%s is not a usable kprobe recording: %s", r->dir, what);
}

/* ---- loading ---- */

/* Opens a file of the recording for reading, or NULL (errno set).  Only a
 * regular file: a FIFO or a device put in its place must not block or
 * feed the reader forever (O_NONBLOCK keeps open() itself from waiting
 * for a FIFO's writer). */
static int open_regular(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

static FILE *open_in(const struct recording *r, const char *name)
{
	char path[PATH_MAX];
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	fd = open_regular(AT_FDCWD, path);
	if (fd < 0)
		return NULL;
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

static void load_info(struct recording *r)
{
	FILE *f = open_in(r, "info");
	char key[64];
	unsigned long long v;
	double d;
	int version = 0;

	if (!f)
		cli_die(EXIT_FAIL, "cannot read %s/info: %s (record with kprobe record -o %s)",
			r->dir, errno == EINVAL ? "not a regular file" : strerror(errno), r->dir);
	if (fscanf(f, "kprobe-record %d\n", &version) != 1 || version != 1)
		die_bad_recording(r, "unknown version");
	r->ns_per_tick = 1.0;
	while (fscanf(f, "%63s", key) == 1) {
		if (!strcmp(key, "ns_per_tick")) {
			if (fscanf(f, "%lf", &d) != 1 || !(d > 0 && d < 1e6))
				die_bad_recording(r, "bad ns_per_tick");
			r->ns_per_tick = d;
			continue;
		}
		if (fscanf(f, "%llu", &v) != 1)
			die_bad_recording(r, "bad info line");
		if (!strcmp(key, "time_tsc"))
			r->time_tsc = v != 0;
		else if (!strcmp(key, "tsc_base"))
			r->tsc_base = v;
		else if (!strcmp(key, "ns_base"))
			r->ns_base = v;
		else if (!strcmp(key, "lost_full") || !strcmp(key, "lost_ringless"))
			r->lost += v;
		else if (!strcmp(key, "missed_returns"))
			r->missed_returns = v;
	}
	fclose(f);
}

static void load_specs(struct recording *r)
{
	FILE *f = open_in(r, "specs");
	char line[SPEC_TEXT_MAX + 32], err[160];

	if (!f)
		die_bad_recording(r, "no specs file");
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');
		long i = strtol(line, NULL, 10);

		line[strcspn(line, "\n")] = '\0';
		if (!tab || i < 0 || i >= KPROBE_MAX_SPECS)
			continue;
		r->spec_ok[i] = !spec_parse(tab + 1, &r->specs[i], err, sizeof(err));
	}
	fclose(f);
}

/* Where a demangled name's parameter list starts: the first '(' outside
 * template arguments that is not operator()'s own. */
static size_t params_at(const char *s)
{
	int angle = 0;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '<')
			angle++;
		else if (s[i] == '>' && angle)
			angle--;
		else if (s[i] == '(' && !angle) {
			if (i >= 8 && !strncmp(s + i - 8, "operator", 8) && s[i + 1] == ')') {
				i++;
				continue;
			}
			return i;
		}
	}
	return strlen(s);
}

/* A function's name as uftrace shows it by default: a C++ symbol
 * demangled, without its parameter list (also one the agent named
 * already demangled, as given: 'ns::f(int)'); others as they are. */
static void display_name(const char *sym, char *out, size_t len)
{
	char *full = cxx_demangle(sym);

	snprintf(out, len, "%s", sym);
	if (full)
		snprintf(out, len, "%.*s", (int)params_at(full), full);
	else if (strchr(sym, '(') && params_at(sym) > 0)
		snprintf(out, len, "%.*s", (int)params_at(sym), sym);
	free(full);
}

static int func_of(struct recording *r, const char *name, uint32_t pid, uint64_t addr)
{
	for (int i = r->nfuncs - 1; i >= 0; i--)
		if (r->funcs[i].addr == addr && r->funcs[i].pid == pid)
			return i;
	if (r->nfuncs % 256 == 0) {
		struct rd_func *v = realloc(r->funcs, (size_t)(r->nfuncs + 256) * sizeof(*v));

		if (!v)
			cli_die(EXIT_FAIL, "out of memory");
		r->funcs = v;
	}
	memset(&r->funcs[r->nfuncs], 0, sizeof(r->funcs[0]));
	display_name(name, r->funcs[r->nfuncs].name, sizeof(r->funcs[0].name));
	r->funcs[r->nfuncs].pid = pid;
	r->funcs[r->nfuncs].addr = addr;
	return r->nfuncs++;
}

/* The spec a descriptor's events are read with (a tracepoint's declared
 * arguments appended, as the agent chose them). */
static struct probe_spec *desc_spec(struct recording *r, unsigned int spec, const char *args)
{
	char text[SPEC_TEXT_MAX + 200], err[160];
	struct probe_spec *s;

	if (spec >= KPROBE_MAX_SPECS || !r->spec_ok[spec])
		return NULL;
	if (!args[0])
		return &r->specs[spec];
	s = malloc(sizeof(*s));
	snprintf(text, sizeof(text), "%s %s", r->specs[spec].text, args);
	if (!s || spec_parse(text, s, err, sizeof(err))) {
		free(s);
		return NULL;
	}
	return s;
}

static void load_descs(struct recording *r)
{
	FILE *f = open_in(r, "descs");
	char line[1024];

	if (!f)
		die_bad_recording(r, "no descs file");
	r->descs = calloc(KPS_MAX_PROBES, sizeof(*r->descs));
	if (!r->descs)
		cli_die(EXIT_FAIL, "out of memory");
	while (fgets(line, sizeof(line), f)) {
		char *field[8], *p = line;
		unsigned long id;
		struct rd_desc *d;
		int n = 0;

		line[strcspn(line, "\n")] = '\0';
		/* strsep keeps the empty last field (no declared arguments). */
		while (n < 8 && (field[n] = strsep(&p, "\t")))
			n++;
		if (n < 7)
			continue;
		id = strtoul(field[0], NULL, 10);
		/* An id seen before keeps its first line. */
		if (id >= KPS_MAX_PROBES || r->descs[id].valid)
			continue;
		d = &r->descs[id];
		d->kind = (uint8_t)strtoul(field[1], NULL, 10);
		d->pid = (uint32_t)strtoul(field[2], NULL, 10);
		d->addr = strtoull(field[3], NULL, 16);
		if (d->kind < DESC_ENTRY || d->kind > DESC_TRACEPOINT)
			continue;
		d->spec = desc_spec(r, (unsigned int)strtoul(field[4], NULL, 10),
				    n > 7 ? field[7] : "");
		if (!d->spec)
			continue;
		snprintf(d->copy.name, sizeof(d->copy.name), "%s", field[6]);
		snprintf(d->copy.object, sizeof(d->copy.object), "%s", field[5]);
		d->copy.kind = d->kind;
		d->copy.addr = d->addr;
		d->copy.pid = d->pid;
		d->func = func_of(r, field[6], d->pid, d->kind == DESC_TRACEPOINT ? id : d->addr);
		if (d->kind == DESC_RETURN)
			r->funcs[d->func].has_return = true;
		else
			r->funcs[d->func].has_entry = true;
		d->valid = true;
	}
	fclose(f);
}

static uint64_t to_ns(const struct recording *r, uint64_t stamp)
{
	double d;

	if (!r->time_tsc)
		return stamp;
	d = (double)(int64_t)(stamp - r->tsc_base) * r->ns_per_tick;
	if (!(d > -9e18))
		d = -9e18;
	if (d > 9e18)
		d = 9e18;
	return r->ns_base + (uint64_t)(int64_t)d;
}

/* Fills ev from a record's header e, its values (and then its strings)
 * at p, up to end.  1, or -1 when it makes no sense. */
static int fill_event(const struct recording *r, const struct rd_thread *t,
		      const struct kps_event *e, const unsigned char *p, const unsigned char *end,
		      struct trace_event *ev)
{
	const struct rd_desc *d;

	if ((e->type != EV_ENTRY && e->type != EV_RETURN) || e->desc >= KPS_MAX_PROBES)
		return -1;
	d = &r->descs[e->desc];
	if (!d->valid || e->nvals != d->spec->nargs || e->nvals > (size_t)(end - p) / 8)
		return -1;
	memset(ev, 0, sizeof(*ev));
	ev->type = e->type;
	ev->desc_id = e->desc;
	ev->desc = &d->copy;
	ev->spec = d->spec;
	ev->pid = t->pid;
	ev->tid = t->tid;
	ev->time_ns = ev->entry_ns = to_ns(r, e->time_ns);
	for (int i = 0; i < e->nvals; i++)
		memcpy(&ev->vals[i], p + 8 * i, 8);
	p += 8 * e->nvals;
	for (int i = 0; i < e->nvals; i++) {
		uint16_t n;

		if (d->spec->args[i].type != ARG_STRING)
			continue;
		if (end - p < 2)
			return -1;
		n = (uint16_t)(p[0] | p[1] << 8);
		p += 2;
		if (n == KPS_STR_FAULT)
			continue;
		if (n > KPS_STR_MAX || end - p < n)
			return -1;
		ev->str[i] = p;
		ev->strlen[i] = n;
		p += n;
	}
	return 1;
}

/* Where a thread's events are read: the offset in its file, and the TSC
 * of the event before (the upper bits of a compact event's time). */
struct rd_pos {
	size_t off;
	uint64_t tsc;
};

static struct rd_pos pos_start(const struct recording *r)
{
	return (struct rd_pos){ .off = 0, .tsc = r->tsc_base };
}

/* A compact event's TSC from its low 48 bits: the value nearest the
 * thread's event before (its upper bits, or one more or less across a
 * wrap, when a signal handler's event came in between). */
static uint64_t compact_tsc(uint64_t prev, uint64_t low)
{
	const uint64_t span = 1ull << 48, mask = span - 1;
	uint64_t t = (prev & ~mask) | low;

	if (t > prev && t - prev > span / 2 && t >= span)
		t -= span;
	else if (t < prev && prev - t > span / 2 && t <= UINT64_MAX - span)
		t += span;
	return t;
}

/* Decodes the record at pos into ev and moves pos past it.  1: an event,
 * 0: the end, -1: a record that makes no sense (stop there). */
static int next_event(const struct recording *r, const struct rd_thread *t, struct rd_pos *pos,
		      struct trace_event *ev)
{
	for (;;) {
		const unsigned char *p = t->data + pos->off;
		struct kps_event e;
		uint64_t w;

		if (t->len - pos->off < 8)
			return t->len == pos->off ? 0 : -1;
		memcpy(&w, p, 8);
		if (w & KPS_REC_COMPACT) {
			pos->off += 8;
			pos->tsc = compact_tsc(pos->tsc, w >> KPS_REC_TIME_SHIFT);
			e.type = w & KPS_REC_COMPACT_RETURN ? EV_RETURN : EV_ENTRY;
			e.nvals = 0;
			e.desc = (uint32_t)(w >> KPS_REC_DESC_SHIFT) & KPS_REC_DESC_MASK;
			e.time_ns = pos->tsc;
			return fill_event(r, t, &e, p + 8, p + 8, ev);
		}
		memcpy(&e, p, 8);
		if (e.size < 8 || e.size % 8 || e.size > t->len - pos->off)
			return -1;
		pos->off += e.size;
		if (e.type == EV_PAD)
			continue;
		if (e.type == EV_REC_ENTRY || e.type == EV_REC_RETURN) {
			struct kps_rec_event c;

			if (e.size != sizeof(c))
				return -1;
			memcpy(&c, p, sizeof(c));
			e.type = c.type == EV_REC_ENTRY ? EV_ENTRY : EV_RETURN;
			e.nvals = 0;
			e.desc = c.desc;
			e.time_ns = c.time;
			pos->tsc = c.time;
			return fill_event(r, t, &e, p + sizeof(c), p + sizeof(c), ev);
		}
		if (e.size < sizeof(e))
			return -1;
		memcpy(&e, p, sizeof(e));
		if (e.type == EV_ENTRY || e.type == EV_RETURN)
			pos->tsc = e.time_ns;
		return fill_event(r, t, &e, p + sizeof(e), p + e.size, ev);
	}
}

static int by_first_event(const void *a, const void *b)
{
	const struct rd_thread *x = a, *y = b;

	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Maps every PID-TID.dat file; sorted by their first event. */
static struct rd_thread *load_threads(struct recording *r, int *count)
{
	DIR *dir = opendir(r->dir);
	struct rd_thread *v = NULL;
	struct dirent *e;
	int n = 0;

	if (!dir)
		cli_die(EXIT_FAIL, "cannot read %s: %s", r->dir, strerror(errno));
	while ((e = readdir(dir))) {
		unsigned int pid, tid;
		char tail[8];
		struct stat st;
		struct trace_event ev;
		struct rd_pos pos = pos_start(r);
		int fd;

		if (sscanf(e->d_name, "%u-%u.%7s", &pid, &tid, tail) != 3 || strcmp(tail, "dat"))
			continue;
		fd = open_regular(dirfd(dir), e->d_name);
		if (fd < 0 || fstat(fd, &st) || !st.st_size) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (n % 64 == 0) {
			struct rd_thread *nv = realloc(v, (size_t)(n + 64) * sizeof(*v));

			if (!nv)
				cli_die(EXIT_FAIL, "out of memory");
			v = nv;
		}
		v[n].data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (v[n].data == MAP_FAILED)
			cli_die(EXIT_FAIL, "cannot map %s/%s: %s", r->dir, e->d_name, strerror(errno));
		madvise((void *)v[n].data, (size_t)st.st_size, MADV_SEQUENTIAL);
		v[n].len = (size_t)st.st_size;
		v[n].pid = (pid_t)pid;
		v[n].tid = (pid_t)tid;
		v[n].first_ns = next_event(r, &v[n], &pos, &ev) == 1 ? ev.time_ns : UINT64_MAX;
		n++;
	}
	closedir(dir);
	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), by_first_event);
	*count = n;
	return v;
}

static void recording_load(struct recording *r, const char *dir)
{
	memset(r, 0, sizeof(*r));
	r->dir = dir;
	load_info(r);
	load_specs(r);
	load_descs(r);
}

static void recording_free(struct recording *r)
{
	for (int i = 0; r->descs && i < KPS_MAX_PROBES; i++) {
		struct rd_desc *d = &r->descs[i];

		/* A tracepoint's own spec (declared arguments) was made for it. */
		if (d->spec && (d->spec < r->specs || d->spec >= r->specs + KPROBE_MAX_SPECS))
			free(d->spec);
	}
	free(r->descs);
	free(r->funcs);
	r->descs = NULL;
	r->funcs = NULL;
}

/* ---- the call graph of one thread ---- */

struct walker {
	struct frame *stack;
	int depth, cap;
};

static void push(struct walker *w, int func, const struct trace_event *ev)
{
	if (w->depth == w->cap) {
		int cap = w->cap ? w->cap * 2 : 64;
		struct frame *v = realloc(w->stack, (size_t)cap * sizeof(*v));

		if (!v)
			cli_die(EXIT_FAIL, "out of memory");
		w->stack = v;
		w->cap = cap;
	}
	w->stack[w->depth].func = func;
	w->stack[w->depth].desc = ev->desc_id;
	w->stack[w->depth].start = ev->time_ns;
	w->stack[w->depth].child = 0;
	w->stack[w->depth].entry = *ev;
	w->depth++;
}

/* Closes the top frame at time end. */
static void pop(struct walker *w, const struct walk_ops *ops, void *ctx, const struct rd_thread *t,
		uint64_t end, const struct trace_event *ret, enum frame_end how, bool leaf)
{
	struct frame *f = &w->stack[--w->depth];
	uint64_t dur = end > f->start ? end - f->start : 0;

	ops->leave(ctx, t, f, w->depth, end, ret, how, leaf);
	if (w->depth)
		w->stack[w->depth - 1].child += dur;
}

static int frame_of(const struct walker *w, int func)
{
	for (int i = w->depth - 1; i >= 0; i--)
		if (w->stack[i].func == func)
			return i;
	return -1;
}

/* Whether the event after off is the return of func (entry and return
 * print as one line). */
static bool next_is_return_of(const struct recording *r, const struct rd_thread *t, struct rd_pos pos,
			      int func)
{
	struct trace_event ev;

	return next_event(r, t, &pos, &ev) == 1 && ev.type == EV_RETURN &&
	       r->descs[ev.desc_id].func == func;
}

static void walk_thread(struct recording *r, const struct rd_thread *t, const struct walk_ops *ops,
			void *ctx)
{
	struct walker w = { 0 };
	struct trace_event ev;
	uint64_t last = t->first_ns;
	struct rd_pos pos = pos_start(r);
	bool leaf = false;
	int rc;

	while ((rc = next_event(r, t, &pos, &ev)) == 1) {
		int func = r->descs[ev.desc_id].func, at;

		last = ev.time_ns;
		if (ev.type == EV_ENTRY && r->funcs[func].has_return &&
		    r->descs[ev.desc_id].kind == DESC_ENTRY) {
			leaf = next_is_return_of(r, t, pos, func);
			push(&w, func, &ev);
			ops->enter(ctx, t, &w.stack[w.depth - 1], w.depth - 1, leaf);
			continue;
		}
		at = ev.type == EV_RETURN && r->funcs[func].has_entry ? frame_of(&w, func) : -1;
		if (at < 0) {
			ops->single(ctx, t, &ev, w.depth);
			leaf = false;
			continue;
		}
		while (w.depth - 1 > at)
			pop(&w, ops, ctx, t, ev.time_ns, NULL, END_SKIPPED, false);
		pop(&w, ops, ctx, t, ev.time_ns, &ev, END_RETURN, leaf);
		leaf = false;
	}
	if (rc < 0)
		r->corrupt++;
	while (w.depth)
		pop(&w, ops, ctx, t, last, NULL, END_OPEN, false);
	free(w.stack);
}

/* ---- report ---- */

static void report_leave(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
			 uint64_t end, const struct trace_event *ret, enum frame_end how, bool leaf)
{
	struct recording *r = ctx;
	struct rd_func *fn = &r->funcs[f->func];
	uint64_t dur = end > f->start ? end - f->start : 0;

	(void)t, (void)depth, (void)ret, (void)how, (void)leaf;
	fn->calls++;
	fn->self += dur > f->child ? dur - f->child : 0;
	/* A recursive call's time is already in its outermost call's. */
	if (--fn->active == 0)
		fn->total += dur;
}

static void report_enter(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
			 bool leaf)
{
	struct recording *r = ctx;

	(void)t, (void)depth, (void)leaf;
	r->funcs[f->func].active++;
}

static void report_single(void *ctx, const struct rd_thread *t, const struct trace_event *ev,
			  int depth)
{
	struct recording *r = ctx;

	(void)t, (void)depth;
	r->funcs[r->descs[ev->desc_id].func].calls++;
}

static enum report_sort sort_key;

static int by_sort_key(const void *a, const void *b)
{
	const struct rd_func *x = a, *y = b;
	uint64_t kx = sort_key == SORT_SELF ? x->self : sort_key == SORT_CALLS ? x->calls : x->total;
	uint64_t ky = sort_key == SORT_SELF ? y->self : sort_key == SORT_CALLS ? y->calls : y->total;

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* uftrace's style: three significant decimals in the largest unit. */
static void print_time(FILE *f, uint64_t ns)
{
	if (ns < 1000000)
		fprintf(f, "%7.3f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		fprintf(f, "%7.3f ms", (double)ns / 1e6);
	else
		fprintf(f, "%7.3f  s", (double)ns / 1e9);
}

/* The same function in every process of a recording is one row. */
static int merge_by_name(struct rd_func *v, int n)
{
	int out = 0;

	for (int i = 0; i < n; i++) {
		int j;

		for (j = 0; j < out; j++)
			if (!strcmp(v[j].name, v[i].name))
				break;
		if (j == out) {
			v[out++] = v[i];
			continue;
		}
		v[j].total += v[i].total;
		v[j].self += v[i].self;
		v[j].calls += v[i].calls;
	}
	return out;
}

static void run_report(struct recording *r, struct rd_thread *threads, int n, enum report_sort k)
{
	static const struct walk_ops ops = { report_enter, report_leave, report_single };
	int nf;

	for (int i = 0; i < n; i++)
		walk_thread(r, &threads[i], &ops, r);
	nf = merge_by_name(r->funcs, r->nfuncs);
	sort_key = k;
	if (nf > 1)
		qsort(r->funcs, (size_t)nf, sizeof(*r->funcs), by_sort_key);
	printf("  Total time   Self time       Calls  Function\n");
	printf("  ==========  ==========  ==========  ====================\n");
	for (int i = 0; i < nf; i++) {
		if (!r->funcs[i].calls)
			continue;
		printf("  ");
		print_time(stdout, r->funcs[i].total);
		printf("  ");
		print_time(stdout, r->funcs[i].self);
		printf("  %10" PRIu64 "  %s\n", r->funcs[i].calls, r->funcs[i].name);
	}
}

/* ---- replay ---- */

static void replay_prefix(const struct rd_thread *t, int depth, const uint64_t *dur)
{
	if (dur) {
		putchar(' ');
		print_time(stdout, *dur);
	} else {
		printf("%11s", "");
	}
	printf(" [%6d] | ", (int)t->tid);
	for (int i = 0; i < depth && i < MAX_DEPTH_SHOWN; i++)
		fputs("  ", stdout);
}

static void print_args(const struct trace_event *ev, bool retval)
{
	bool first = true;

	for (int i = 0; i < ev->spec->nargs; i++) {
		if ((ev->spec->args[i].src == ARG_SRC_RETVAL) != retval)
			continue;
		if (!first)
			fputs(", ", stdout);
		first = false;
		if (!retval)
			printf("%s=", ev->spec->args[i].name);
		output_value_text(stdout, ev, i);
	}
}

static bool has_retval(const struct trace_event *ev)
{
	for (int i = 0; ev && i < ev->spec->nargs; i++)
		if (ev->spec->args[i].src == ARG_SRC_RETVAL)
			return true;
	return false;
}

static void replay_enter(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
			 bool leaf)
{
	struct recording *r = ctx;

	if (leaf)
		return;		/* printed with its return */
	replay_prefix(t, depth, NULL);
	printf("%s(", r->funcs[f->func].name);
	print_args(&f->entry, false);
	puts(") {");
}

static void replay_leave(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
			 uint64_t end, const struct trace_event *ret, enum frame_end how, bool leaf)
{
	struct recording *r = ctx;
	uint64_t dur = end > f->start ? end - f->start : 0;
	const char *name = r->funcs[f->func].name;

	replay_prefix(t, depth, &dur);
	if (leaf) {
		printf("%s(", name);
		print_args(&f->entry, false);
		putchar(')');
	} else {
		putchar('}');
	}
	if (has_retval(ret)) {
		fputs(" = ", stdout);
		print_args(ret, true);
	}
	if (leaf)
		puts(";");
	else if (how == END_RETURN)
		printf(" /* %s */\n", name);
	else
		printf(" /* %s: %s */\n", name,
		       how == END_SKIPPED ? "no return (longjmp, exception or missed)" :
					    "still running at the end");
}

static void replay_single(void *ctx, const struct rd_thread *t, const struct trace_event *ev,
			  int depth)
{
	struct recording *r = ctx;

	replay_prefix(t, depth, NULL);
	if (ev->type == EV_ENTRY) {
		printf("%s(", r->funcs[r->descs[ev->desc_id].func].name);
		print_args(ev, false);
		puts(");  /* entry */");
	} else {
		printf("} ");
		if (has_retval(ev)) {
			fputs("= ", stdout);
			print_args(ev, true);
			putchar(' ');
		}
		printf("/* %s: return, entered before the recording */\n",
		       r->funcs[r->descs[ev->desc_id].func].name);
	}
}

static void run_replay(struct recording *r, struct rd_thread *threads, int n)
{
	static const struct walk_ops ops = { replay_enter, replay_leave, replay_single };

	printf("# DURATION     TID     FUNCTION\n");
	for (int i = 0; i < n; i++) {
		if (i)
			putchar('\n');
		printf("# thread %d of process %d\n", (int)threads[i].tid, (int)threads[i].pid);
		walk_thread(r, &threads[i], &ops, r);
	}
}

/* ---- dump ---- */

struct dumper {
	struct recording *r;
	enum out_format format;
	bool first;
};

static void json_args_of(const struct trace_event *ev, bool retval)
{
	bool first = true;

	putchar('{');
	for (int i = 0; ev && i < ev->spec->nargs; i++) {
		if ((ev->spec->args[i].src == ARG_SRC_RETVAL) != retval)
			continue;
		if (!first)
			putchar(',');
		first = false;
		json_string(stdout, ev->spec->args[i].name, strlen(ev->spec->args[i].name));
		putchar(':');
		output_value_json(stdout, ev, i);
	}
	putchar('}');
}

static void chrome_event(struct dumper *d, const struct rd_thread *t, const char *name, char ph,
			 uint64_t ns, const struct trace_event *args_ev, bool retval,
			 const char *note)
{
	printf("%s{\"name\":", d->first ? "" : ",\n");
	d->first = false;
	json_string(stdout, name, strlen(name));
	/* Microseconds since the recording's start, to the ns. */
	printf(",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d", ph,
	       (double)(ns - d->r->ns_base) / 1e3, (int)t->pid, (int)t->tid);
	if (ph == 'i')
		fputs(",\"s\":\"t\"", stdout);
	fputs(",\"args\":", stdout);
	if (note) {
		fputs("{\"unmatched\":", stdout);
		json_string(stdout, note, strlen(note));
		putchar('}');
	} else {
		json_args_of(args_ev, retval);
	}
	putchar('}');
}

static void json_event(struct dumper *d, const struct rd_thread *t, const char *name,
		       const char *type, uint64_t ns, int depth, const struct trace_event *args_ev,
		       bool retval, const uint64_t *dur, const char *note)
{
	printf("{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"type\":\"%s\",\"function\":", ns,
	       (int)t->pid, (int)t->tid, type);
	json_string(stdout, name, strlen(name));
	printf(",\"depth\":%d", depth);
	if (dur)
		printf(",\"duration_ns\":%" PRIu64, *dur);
	if (note) {
		fputs(",\"unmatched\":", stdout);
		json_string(stdout, note, strlen(note));
	}
	fputs(",\"args\":", stdout);
	json_args_of(args_ev, retval);
	puts("}");
}

static void dump_enter(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
		       bool leaf)
{
	struct dumper *d = ctx;
	const char *name = d->r->funcs[f->func].name;

	(void)leaf;
	if (d->format == FMT_CHROME)
		chrome_event(d, t, name, 'B', f->start, &f->entry, false, NULL);
	else
		json_event(d, t, name, "entry", f->start, depth, &f->entry, false, NULL, NULL);
}

static const char *end_note(enum frame_end how)
{
	return how == END_SKIPPED ? "no return (longjmp, exception or missed)" :
	       how == END_OPEN ? "still running at the end" : NULL;
}

static void dump_leave(void *ctx, const struct rd_thread *t, const struct frame *f, int depth,
		       uint64_t end, const struct trace_event *ret, enum frame_end how, bool leaf)
{
	struct dumper *d = ctx;
	const char *name = d->r->funcs[f->func].name;
	uint64_t dur = end > f->start ? end - f->start : 0;

	(void)leaf;
	if (d->format == FMT_CHROME)
		chrome_event(d, t, name, 'E', end, ret, true, end_note(how));
	else
		json_event(d, t, name, "return", end, depth, ret, true, &dur, end_note(how));
}

static void dump_single(void *ctx, const struct rd_thread *t, const struct trace_event *ev,
			int depth)
{
	struct dumper *d = ctx;
	const char *name = d->r->funcs[d->r->descs[ev->desc_id].func].name;
	bool ret = ev->type == EV_RETURN;

	if (d->format == FMT_CHROME)
		chrome_event(d, t, name, 'i', ev->time_ns, ev, ret, NULL);
	else
		json_event(d, t, name, ret ? "return" : "entry", ev->time_ns, depth, ev, ret, NULL,
			   ret ? "entered before the recording" : NULL);
}

static void run_dump(struct recording *r, struct rd_thread *threads, int n, enum out_format fmt)
{
	static const struct walk_ops ops = { dump_enter, dump_leave, dump_single };
	struct dumper d = { .r = r, .format = fmt, .first = true };

	if (fmt == FMT_CHROME)
		fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", stdout);
	for (int i = 0; i < n; i++)
		walk_thread(r, &threads[i], &ops, &d);
	if (fmt == FMT_CHROME)
		fputs("\n]}\n", stdout);
}

int recdata_run(const struct cli_opts *o)
{
	struct recording r;
	struct rd_thread *threads;
	int n;

	if (o->outfile && !freopen(o->outfile, "we", stdout))
		cli_die(EXIT_FAIL, "cannot write %s: %s", o->outfile, strerror(errno));
	recording_load(&r, o->data_dir);
	threads = load_threads(&r, &n);
	if (o->cmd == CMD_REPORT)
		run_report(&r, threads, n, o->sort);
	else if (o->cmd == CMD_REPLAY)
		run_replay(&r, threads, n);
	else
		run_dump(&r, threads, n, o->format);
	if (fflush(stdout) || ferror(stdout))
		cli_die(EXIT_FAIL, "cannot write the output");
	if (r.corrupt)
		cli_warn("%lu thread file%s end%s in records that make no sense: read up to them",
			 (unsigned long)r.corrupt, r.corrupt == 1 ? "" : "s",
			 r.corrupt == 1 ? "s" : "");
	if (r.lost)
		cli_warn("the recording lost %lu events", (unsigned long)r.lost);
	if (r.missed_returns)
		cli_warn("the recording missed the return of at least %lu calls (closed where "
			 "known, marked)", (unsigned long)r.missed_returns);
	for (int i = 0; i < n; i++)
		munmap((void *)threads[i].data, threads[i].len);
	free(threads);
	recording_free(&r);
	return 0;
}
