/* Stacks on the tool's side (see stacks.h).
 *
 * Demangling: __cxa_demangle() of libstdc++, the C++ ABI's own demangler,
 * present wherever g++ and any C++ program are; it runs here in the tool,
 * never in the target.  Lines: libdw on the object's file, or on its
 * separate debug file found by build ID (the tool reads files, the target
 * is not touched). */
#include "stacks.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer.h"
#include "cxx_names.h"
#include "elf_file.h"
#include "escape.h"
#include "session.h"
#include "stack_table.h"
#include "symbolize.h"


#define REFRESH_NS 50000000ull

struct line_object {
	char *path;
	int fd;
	Dwarf *dw;			/* NULL: no DWARF */
};

static struct {
	bool ready, lines;
	struct symbolizer sym;
	char exe[PATH_MAX];
	unsigned long long refreshed;
	struct line_object *objs;
	size_t nobjs;
} st;

void stacks_attached(struct session *s)
{
	char link[64];
	ssize_t n;

	if (st.ready || !s->target)
		return;
	st.ready = true;
	st.lines = s->opts->lines;
	symbolizer_init(&st.sym, s->target);
	symbolizer_use_noted(&st.sym, s->map.objects, &s->map.hdr->nobjects);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)s->target);
	n = readlink(link, st.exe, sizeof(st.exe) - 1);
	st.exe[n > 0 ? n : 0] = '\0';
	symbolizer_refresh(&st.sym);
	st.refreshed = cli_now_ns();
}

void stacks_pump(struct session *s)
{
	unsigned long long now;

	if (!st.ready) {
		stacks_attached(s);
		return;
	}
	now = cli_now_ns();
	if (now - st.refreshed >= REFRESH_NS) {
		symbolizer_refresh(&st.sym);
		st.refreshed = now;
	}
}

static Dwarf *dwarf_of(const char *path)
{
	char debug[PATH_MAX];
	struct line_object *v;

	for (size_t i = 0; i < st.nobjs; i++)
		if (!strcmp(st.objs[i].path, path))
			return st.objs[i].dw;
	v = realloc(st.objs, (st.nobjs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	st.objs = v;
	v = &st.objs[st.nobjs];
	v->path = strdup(path);
	if (!v->path)
		return NULL;
	v->fd = open(path, O_RDONLY | O_CLOEXEC);
	v->dw = v->fd >= 0 ? dwarf_begin(v->fd, DWARF_C_READ) : NULL;
	if (!v->dw && !elf_file_debug_path(path, debug, sizeof(debug))) {
		/* stripped: its separate debug file, same addresses */
		if (v->fd >= 0)
			close(v->fd);
		v->fd = open(debug, O_RDONLY | O_CLOEXEC);
		v->dw = v->fd >= 0 ? dwarf_begin(v->fd, DWARF_C_READ) : NULL;
	}
	st.nobjs++;
	return v->dw;
}

/* " FILE:LINE" of vaddr in the object at path, or nothing. */
static void line_of(const char *path, uint64_t vaddr, char *out, size_t len)
{
	Dwarf *dw = dwarf_of(path);
	Dwarf_Die cu;
	Dwarf_Line *line;
	const char *file, *base;
	int lineno;

	out[0] = '\0';
	if (!dw || !dwarf_addrdie(dw, vaddr, &cu) || !(line = dwarf_getsrc_die(&cu, vaddr)))
		return;
	file = dwarf_linesrc(line, NULL, NULL);
	if (!file || dwarf_lineno(line, &lineno) || lineno <= 0)
		return;
	base = strrchr(file, '/');
	snprintf(out, len, " %s:%d", base ? base + 1 : file, lineno);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

void stacks_frame(uint64_t ip, bool innermost, bool with_offset, char *out, size_t len)
{
	/* A return address is named by the call before it: the call may be
	 * a function's last instruction (a noreturn callee). */
	uint64_t at = innermost || !ip ? ip : ip - 1;
	struct sym_location loc;
	char *demangled = NULL, object[PATH_MAX + 4] = "", where[PATH_MAX + 16] = "";
	const char *name;

	if (!st.ready || symbolizer_locate(&st.sym, at, &loc)) {
		snprintf(out, len, "0x%" PRIx64, ip);
		return;
	}
	if (strcmp(loc.path, st.exe))
		snprintf(object, sizeof(object), " [%s]", base_name(loc.path));
	if (st.lines && with_offset)
		line_of(loc.path, loc.vaddr, where, sizeof(where));
	if (!loc.name) {
		/* no symbol: the object's own address, the same in every run */
		snprintf(out, len, "[%s]+0x%" PRIx64 "%s", base_name(loc.path), loc.vaddr + (ip - at),
			 where);
		return;
	}
	demangled = cxx_demangle(loc.name);
	name = demangled ? demangled : loc.name;
	if (with_offset)
		snprintf(out, len, "%s+0x%" PRIx64 "%s%s", name, loc.offset + (ip - at), object,
			 where);
	else
		snprintf(out, len, "%s", name);
	free(demangled);
}

void stacks_print_text(FILE *f, const struct trace_event *ev)
{
	char frame[PATH_MAX + 1024];

	for (uint32_t i = 0; i < ev->nstack; i++) {
		stacks_frame(ev->stack[i], i == 0, true, frame, sizeof(frame));
		fprintf(f, "        %s\n", frame);
	}
}

void stacks_print_json(FILE *f, const struct trace_event *ev)
{
	char frame[PATH_MAX + 1024];

	fputc('[', f);
	for (uint32_t i = 0; i < ev->nstack; i++) {
		stacks_frame(ev->stack[i], i == 0, true, frame, sizeof(frame));
		if (i)
			fputc(',', f);
		json_string(f, frame, strlen(frame));
	}
	fputc(']', f);
}

/* ---- count --stacks ---- */

struct stack_total {
	uint32_t desc, depth;
	uint64_t count;
	const uint64_t *ips;		/* depth frames (the tool's copy) */
	char *folded;			/* folded: "outer;...;inner" */
};

static int by_stack(const void *a, const void *b)
{
	const struct stack_total *x = a, *y = b;

	if (x->desc != y->desc)
		return x->desc < y->desc ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	for (uint32_t i = 0; i < x->depth; i++)
		if (x->ips[i] != y->ips[i])
			return x->ips[i] < y->ips[i] ? -1 : 1;
	return 0;
}

static int by_count(const void *a, const void *b)
{
	const struct stack_total *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	return by_stack(a, b);
}

static int by_folded(const void *a, const void *b)
{
	const struct stack_total *x = a, *y = b;

	return strcmp(x->folded, y->folded);
}

/* Checked copies of the table's entries in use (ips into frames); the
 * target may have written anything there. */
static size_t collect(struct session *s, struct stack_total *v, uint64_t *frames, size_t max)
{
	unsigned int depth = s->opts->stack_depth;
	uint32_t stride = kps_stack_stride(depth);
	const unsigned char *entries = s->map.ring_data + kps_stack_entries_off();
	size_t n = 0;

	for (size_t k = 0; k < max; k++) {
		const struct kps_stack_entry *e = (const void *)(entries + k * stride);
		struct stack_total *t = &v[n];
		uint64_t *ips = frames + n * (size_t)depth;

		/* the owner's and the others' hits (stack_table.h); a sum
		 * that wraps is the target's garbage, harmless */
		t->count = __atomic_load_n(&e->count, __ATOMIC_ACQUIRE) +
			   __atomic_load_n(&e->own, __ATOMIC_ACQUIRE);
		t->desc = __atomic_load_n(&e->desc, __ATOMIC_RELAXED);
		t->depth = __atomic_load_n(&e->depth, __ATOMIC_RELAXED);
		if (!t->count || t->depth > depth || !consumer_desc(&s->cons, t->desc))
			continue;
		for (uint32_t i = 0; i < t->depth; i++)
			ips[i] = __atomic_load_n(&e->ips[i], __ATOMIC_RELAXED);
		t->ips = ips;
		t->folded = NULL;
		n++;
	}
	return n;
}

/* The same stack twice (the target may write anything): one. */
static size_t merge_same(struct stack_total *v, size_t n)
{
	size_t out = 0;

	if (n > 1)
		qsort(v, n, sizeof(*v), by_stack);
	for (size_t i = 0; i < n; i++) {
		if (out && !by_stack(&v[out - 1], &v[i])) {
			v[out - 1].count += v[i].count;
			continue;
		}
		v[out++] = v[i];
	}
	return out;
}

/* "outer;...;inner", function names only (flame-graph tools merge by
 * name); NULL when out of memory. */
static char *fold(const struct stack_total *t)
{
	char frame[PATH_MAX + 1024], *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	for (uint32_t i = t->depth; i-- > 0;) {
		stacks_frame(t->ips[i], i == 0, false, frame, sizeof(frame));
		/* ';' separates frames and a space ends the stack: neither may
		 * appear in a frame */
		for (char *c = frame; *c; c++)
			if (*c == ';')
				*c = ':';
		fprintf(m, "%s%s", i + 1 == t->depth ? "" : ";", frame);
	}
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void print_folded(FILE *f, struct stack_total *v, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		v[i].folded = fold(&v[i]);
		if (v[i].folded)
			v[k++] = v[i];
	}
	if (k > 1)
		qsort(v, k, sizeof(*v), by_folded);
	for (size_t i = 0; i < k;) {
		uint64_t count = 0;
		size_t j = i;

		/* distinct addresses, same names: one line */
		for (; j < k && !strcmp(v[j].folded, v[i].folded); j++)
			count += v[j].count;
		fprintf(f, "%s %" PRIu64 "\n", v[i].folded, count);
		i = j;
	}
	for (size_t i = 0; i < k; i++)
		free(v[i].folded);
}

/* bpftrace's @[ustack]: count map, least first. */
static void print_text(FILE *f, struct session *s, struct stack_total *v, size_t n)
{
	char frame[PATH_MAX + 1024];

	if (n > 1)
		qsort(v, n, sizeof(*v), by_count);
	if (n)
		fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const struct kps_desc *d = consumer_desc(&s->cons, v[i].desc);

		fputs("@[", f);
		text_field_to(f, d->name, sizeof(d->name), 0);
		fputs(",\n", f);
		for (uint32_t k = 0; k < v[i].depth; k++) {
			stacks_frame(v[i].ips[k], k == 0, true, frame, sizeof(frame));
			fprintf(f, "    %s\n", frame);
		}
		fprintf(f, "]: %" PRIu64 "\n", v[i].count);
	}
}

/* The valid stacks of the table, merged (v and *frames malloc'd). */
static size_t gather(struct session *s, struct stack_total **vp, uint64_t **frames)
{
	unsigned int depth = s->opts->stack_depth;
	uint64_t used = __atomic_load_n((const uint64_t *)(const void *)s->map.ring_data,
					__ATOMIC_ACQUIRE);
	uint32_t max = kps_stack_max_entries(depth);

	if (used > max)
		used = max;
	*vp = calloc(used ? used : 1, sizeof(**vp));
	*frames = calloc(used ? used * depth : 1, sizeof(**frames));
	if (!*vp || !*frames)
		cli_die(EXIT_FAIL, "out of memory");
	return merge_same(*vp, collect(s, *vp, *frames, used));
}

static void warn_lost(struct session *s)
{
	uint64_t lost = consumer_lost_full(&s->cons), ringless = consumer_lost_ringless(&s->cons);

	if (lost + ringless)
		cli_warn("%" PRIu64 " hits not counted by stack (the table of %u stacks was full)",
			 lost + ringless, (unsigned int)kps_stack_max_entries(s->opts->stack_depth));
}

/* JSON: ,"stacks":[{"probe":"...","stack":["inner+0x0",...],"count":N},...]
 * most hits first. */
static void stacks_json(void *arg, FILE *f)
{
	struct session *s = arg;
	char frame[PATH_MAX + 1024];
	struct stack_total *v;
	uint64_t *frames;
	size_t n = gather(s, &v, &frames);

	if (n > 1)
		qsort(v, n, sizeof(*v), by_count);
	fputs(",\"stacks\":[", f);
	for (size_t i = n; i-- > 0;) {
		const struct kps_desc *d = consumer_desc(&s->cons, v[i].desc);

		fputs(i + 1 == n ? "{\"probe\":" : ",{\"probe\":", f);
		json_string(f, d->name, strnlen(d->name, sizeof(d->name)));
		fputs(",\"stack\":[", f);
		for (uint32_t k = 0; k < v[i].depth; k++) {
			stacks_frame(v[i].ips[k], k == 0, true, frame, sizeof(frame));
			if (k)
				fputc(',', f);
			json_string(f, frame, strlen(frame));
		}
		fprintf(f, "],\"count\":%" PRIu64 "}", v[i].count);
	}
	fputc(']', f);
	free(frames);
	free(v);
	warn_lost(s);
}

void stacks_before_counts(struct session *s)
{
	if (s->opts->stack_count && s->out.format == FMT_JSON) {
		s->out.counts_json_more = stacks_json;
		s->out.counts_json_more_arg = s;
	}
}

void stacks_report_counts(struct session *s)
{
	struct stack_total *v;
	uint64_t *frames;
	size_t n;

	if (s->out.format == FMT_JSON)
		return;		/* part of the count object (stacks_json) */
	n = gather(s, &v, &frames);
	if (s->out.format == FMT_FOLDED)
		print_folded(s->out.f, v, n);
	else
		print_text(s->out.f, s, v, n);
	free(frames);
	free(v);
	warn_lost(s);
}

void stacks_free(void)
{
	for (size_t i = 0; i < st.nobjs; i++) {
		if (st.objs[i].dw)
			dwarf_end(st.objs[i].dw);
		if (st.objs[i].fd >= 0)
			close(st.objs[i].fd);
		free(st.objs[i].path);
	}
	free(st.objs);
	if (st.ready)
		symbolizer_free(&st.sym);
	memset(&st, 0, sizeof(st));
}
