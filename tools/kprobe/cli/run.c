/* `kprobe run` on the tool's side (see run.h).
 *
 * The program is compiled here; the image goes into the session memory
 * after the rings, the map region after the image.  The agent copies the
 * image out, verifies it again and runs it; the tool reads the maps from
 * the region, which the target can write: every read of it goes through
 * the language's bounded iteration and decoding (lang.h), and the image
 * the tool prints with is its own copy, never the one in shared memory. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cxx_names.h"
#include "dwarf_vars.h"
#include "lang/lang.h"
#include "ldcache.h"
#include "session.h"
#include "symbolize.h"
#include "usdt.h"

#define PROGRAM_MAX	(1u << 20)	/* bytes of source text */
#define LINE_MAX_OUT	16384		/* a formatted printf line */

struct run_program {
	struct session *session;
	void *image;
	size_t image_len;
	struct lang_image img;		/* over image: ours, trusted */
	void *region;			/* the map region in the session memory */
	struct symbolizer sym;
	bool sym_ready;
	bool exited;			/* exit() was called */
	int nspecial;			/* BEGIN, END and interval probes */
	/* the last object named by `probe`, and how bpftrace prints it */
	char obj_written[256];
	char obj_printed[4096];
	/* the value of a sharded map, summed (lang_map_value): at most an
	 * lhist's 1002 buckets */
	uint64_t val_sum[1024];
};

/* ---- compiling ---- */

static char *read_program_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		cli_die(EXIT_BAD, "cannot read program '%s': %s", path, strerror(errno));
	buf = malloc(PROGRAM_MAX + 1);
	if (!buf)
		cli_die(EXIT_FAIL, "out of memory");
	n = fread(buf, 1, PROGRAM_MAX + 1, f);
	if (ferror(f))
		cli_die(EXIT_BAD, "cannot read program '%s': %s", path, strerror(errno));
	fclose(f);
	if (n > PROGRAM_MAX)
		cli_die(EXIT_BAD, "program '%s' is longer than %u bytes", path, PROGRAM_MAX);
	if (memchr(buf, '\0', n))
		cli_die(EXIT_BAD, "program '%s' is not text", path);
	buf[n] = '\0';
	return buf;
}

/* A uprobe or uretprobe of the image as a probe spec for the agent's
 * resolver: OBJ as written (the agent maps bpftrace's short library names
 * such as "libc" to the loaded object), FUNC (maybe a glob), +OFFSET. */
static void probe_to_spec(const struct lang_image *img, const struct lang_probe_desc *d,
			  struct probe_spec *s)
{
	const char *obj = lang_image_str(img, d->target);
	const char *func = lang_image_str(img, d->func);

	memset(s, 0, sizeof(*s));
	s->kind = SPEC_SYMBOL;
	if (strlen(obj) >= sizeof(s->object) || strlen(func) >= sizeof(s->symbol) ||
	    strpbrk(obj, " \t\n") || strpbrk(func, " \t\n%:") || !func[0])
		cli_die(EXIT_BAD, "cannot probe '%s'", lang_image_str(img, d->text));
	snprintf(s->object, sizeof(s->object), "%s", obj);
	snprintf(s->symbol, sizeof(s->symbol), "%s", func);
	s->offset = d->offset;
	s->is_return = d->kind == LANG_P_URETPROBE;
	spec_format(s);
}

/* A usdt probe of the image: its sites, each with every operand of its
 * SDT note as arg0.. (the fetch plans the agent runs at a hit), appended
 * to o's specs, the first marked with their number. */
static void usdt_probe_specs(struct cli_opts *o, const struct lang_image *img,
			     const struct lang_probe_desc *d)
{
	const char *obj = lang_image_str(img, d->target);
	const char *prov = lang_image_str(img, d->provider);
	const char *name = lang_image_str(img, d->func);
	struct probe_spec s;
	int n;

	memset(&s, 0, sizeof(s));
	s.kind = SPEC_USDT;
	if (strlen(obj) >= sizeof(s.object) ||
	    (size_t)snprintf(s.symbol, sizeof(s.symbol), "%s:%s", prov[0] ? prov : "*",
			     name) >= sizeof(s.symbol) || strchr(name, ':') || strchr(prov, ':'))
		cli_die(EXIT_BAD, "cannot probe '%s'", lang_image_str(img, d->text));
	snprintf(s.object, sizeof(s.object), "%s", obj);
	spec_format(&s);
	n = usdt_sites(o, &s, true, &o->specs[o->nspecs], KPROBE_MAX_SPECS - o->nspecs);
	o->specs[o->nspecs].sites = (uint16_t)n;
	o->nspecs += n;
}

/* A uprobe of the image on a C++ name (uprobe:OBJ:"ns::f", a glob too):
 * one spec per function it matches, by its mangled symbol (bpftrace names
 * the probes so), appended to o's specs, the first marked with their
 * number. */
static void cxx_probe_specs(struct cli_opts *o, const struct lang_image *img,
			    const struct lang_probe_desc *d)
{
	const char *obj = lang_image_str(img, d->target);
	const char *func = lang_image_str(img, d->func);
	struct probe_spec s;
	int n;

	memset(&s, 0, sizeof(s));
	s.kind = SPEC_SYMBOL;
	if (strlen(obj) >= sizeof(s.object) || strlen(func) >= sizeof(s.symbol))
		cli_die(EXIT_BAD, "cannot probe '%s'", lang_image_str(img, d->text));
	snprintf(s.object, sizeof(s.object), "%s", obj);
	snprintf(s.symbol, sizeof(s.symbol), "%s", func);
	s.offset = d->offset;
	s.is_return = d->kind == LANG_P_URETPROBE;
	n = cxx_names_expand(o, &s, &o->specs[o->nspecs], KPROBE_MAX_SPECS - o->nspecs);
	if (n < 0)
		cli_die(EXIT_BAD, "'%s' matches too many C++ functions: narrow it", func);
	if (!n)
		cli_die(EXIT_BAD, "no C++ function matches '%s' in %s", func, obj);
	o->specs[o->nspecs].sites = (uint16_t)n;
	o->nspecs += n;
}

/* The probe specs in image order (a usdt probe's sites together): the
 * agent derives the same list from the image it verified and refuses a
 * config that disagrees. */
static void collect_specs(struct cli_opts *o, struct run_program *p)
{
	for (uint32_t i = 0; i < p->img.hdr->nprobes; i++) {
		const struct lang_probe_desc *d = &p->img.probes[i];

		if (d->kind == LANG_P_USDT) {
			usdt_probe_specs(o, &p->img, d);
			continue;
		}
		if (d->kind != LANG_P_UPROBE && d->kind != LANG_P_URETPROBE) {
			p->nspecial++;
			continue;
		}
		if (o->nspecs == KPROBE_MAX_SPECS)
			cli_die(EXIT_BAD, "too many probes (at most %d)", KPROBE_MAX_SPECS);
		if (cxx_looks_cxx(lang_image_str(&p->img, d->func))) {
			cxx_probe_specs(o, &p->img, d);
			continue;
		}
		probe_to_spec(&p->img, d, &o->specs[o->nspecs++]);
	}
}

/* The file on disk of the object a program's probe names, as the tool
 * finds it for variables by name (cli_object_path()). */
static int program_object_path(const struct cli_opts *o, const char *obj, char *path,
			       size_t pathlen, char *why, size_t whylen)
{
	struct probe_spec s;

	memset(&s, 0, sizeof(s));
	s.kind = SPEC_SYMBOL;
	snprintf(s.object, sizeof(s.object), "%s", obj);
	return cli_object_path(o, &s, path, pathlen, why, whylen);
}

/* args->NAME: the parameter's position and type from the debug
 * information of the object the probe names. */
static int param_of(const char *obj, const char *func, const char *name, int *index,
		    struct lang_type *type, char *why, size_t whylen, void *arg)
{
	char path[PATH_MAX];
	int size = 0;
	bool sign = false;

	if (program_object_path(arg, obj, path, sizeof(path), why, whylen))
		return -1;
	if (dwarf_param(path, func, name, index, &size, &sign, why, whylen))
		return -1;
	type->kind = LANG_T_INT;
	type->size = (uint16_t)size;
	type->is_signed = sign;
	return 0;
}

/* argN of a usdt probe: its operand count from the SDT notes, as the
 * probe will be resolved (usdt_probe_specs()). */
static int usdt_nargs_of(const char *obj, const char *provider, const char *name, int *nargs,
			 void *arg)
{
	const struct cli_opts *o = arg;
	struct probe_spec s;

	memset(&s, 0, sizeof(s));
	s.kind = SPEC_USDT;
	if (strlen(obj) >= sizeof(s.object) ||
	    (size_t)snprintf(s.symbol, sizeof(s.symbol), "%s:%s", provider[0] ? provider : "*",
			     name) >= sizeof(s.symbol))
		return -1;
	snprintf(s.object, sizeof(s.object), "%s", obj);
	return usdt_operand_count(o, &s, nargs);
}

/* ((struct S *)EXPR)->FIELD: S from the debug information of the object
 * the probe names (on disk, as for args->NAME). */
static int field_of(const char *obj, const char *sname, const char *field,
		    struct lang_field *out, char *why, size_t whylen, void *arg)
{
	char path[PATH_MAX];
	unsigned int offset = 0;
	int kind = 0, size = 0;
	bool sign = false;

	memset(out, 0, sizeof(*out));
	if (program_object_path(arg, obj, path, sizeof(path), why, whylen))
		return -1;
	if (dwarf_struct_field(path, sname, field, &offset, &kind, &size, &sign, out->sname,
			       sizeof(out->sname), why, whylen))
		return -1;
	out->offset = offset;
	out->kind = kind == 2 ? LANG_F_STRUCT : kind == 1 ? LANG_F_STRUCT_PTR : LANG_F_INT;
	out->size = (uint8_t)size;
	out->is_signed = sign;
	return 0;
}

static int param_struct_of(const char *obj, const char *func, const char *name, char *sname,
			   size_t len, void *arg)
{
	char path[PATH_MAX], why[PATH_MAX + 128];

	if (program_object_path(arg, obj, path, sizeof(path), why, sizeof(why)))
		return -1;
	return dwarf_param_struct(path, func, name, sname, len);
}

/* The file a program's probe names: a path that exists; or a name the
 * tool finds (mapped by the process, the command itself, on the command
 * search path, in the loader's directories or cache), as bpftrace
 * resolves it. */
static bool target_exists(const char *obj, void *arg)
{
	const struct cli_opts *o = arg;
	char path[PATH_MAX], why[PATH_MAX + 128];

	if (strchr(obj, '/'))
		return access(obj, F_OK) == 0;
	/* cli_object_path() looks in the loader's directories without a
	 * process, and with one only at what it maps */
	return !program_object_path(o, obj, path, sizeof(path), why, sizeof(why)) ||
	       (o->pid && cli_library_on_disk(obj, path, sizeof(path))) ||
	       cli_exe_on_path(obj, path, sizeof(path)) ||
	       !ldcache_find_or_scan(obj, path, sizeof(path));
}

/* A bare name of a program that leads to a file of another name (python3,
 * a symlink to python3.11): the path found, which the probe then names,
 * as bpftrace attaches to that file and prints that path.  The program is
 * the command when the name is its own (a ./python3 of the user's is not
 * the one on PATH), else the one on the command search path.  A library
 * name stays a name (the agent resolves it), as does a name the process
 * maps (-p) and a program whose file has its name. */
static bool target_path(const char *obj, char *path, size_t len, void *arg)
{
	const struct cli_opts *o = arg;
	char found[PATH_MAX], real[PATH_MAX], why[PATH_MAX + 128];
	const char *base;

	if (!ldcache_find_or_scan(obj, found, sizeof(found)) ||
	    (o->pid && !program_object_path(o, obj, found, sizeof(found), why, sizeof(why))))
		return false;
	if (!o->command || !cli_exe_on_path(o->command[0], found, sizeof(found)) ||
	    strcmp(strrchr(found, '/') ? strrchr(found, '/') + 1 : found, obj)) {
		if (!cli_exe_on_path(obj, found, sizeof(found)))
			return false;
	}
	if (!realpath(found, real) || strlen(found) >= len)
		return false;
	base = strrchr(real, '/');
	if (!strcmp(base ? base + 1 : real, obj))
		return false;
	snprintf(path, len, "%s", found);
	return true;
}

/* bpftrace prints its warnings on standard error as it checks. */
static void print_warning(const char *text, void *arg)
{
	(void)arg;
	fflush(stdout);
	fputs(text, stderr);
}

void run_compile(struct cli_opts *o)
{
	struct lang_compile_opts copts = {
		.filename = o->prog_file ? o->prog_file : "stdin",
		.nparams = o->nparams,
		.params = o->params,
		.map_keys = o->map_keys,
		.param = param_of,
		.param_arg = o,
		.usdt_nargs = usdt_nargs_of,
		.field = field_of,
		.param_struct = param_struct_of,
		.warning = print_warning,
		.target_exists = target_exists,
		.target_path = target_path,
		.unsafe = o->unsafe,
		.has_command = o->command != NULL,
	};
	char *text = o->prog_file ? read_program_file(o->prog_file) : strdup(o->prog_text);
	struct run_program *p = calloc(1, sizeof(*p));
	struct lang_error err;
	char why[256];
	int rc;

	if (!text || !p)
		cli_die(EXIT_FAIL, "out of memory");
	memset(&err, 0, sizeof(err));
	rc = lang_compile(text, &copts, &p->image, &p->image_len, &err);
	free(text);
	if (rc == -ENOMEM)
		cli_die(EXIT_FAIL, "out of memory");
	if (rc) {
		/* bpftrace's form: the place, the reason, the line, a marker. */
		fflush(stdout);
		fputs(err.text[0] ? err.text : err.msg, stderr);
		if (!err.text[0] || err.text[strlen(err.text) - 1] != '\n')
			fputc('\n', stderr);
		fputs(err.more, stderr);
		exit(EXIT_BAD);
	}
	if (p->image_len > KPS_IMAGE_MAX)
		cli_die(EXIT_BAD, "the program is too big (%zu bytes compiled)", p->image_len);
	rc = lang_image_load(&p->img, p->image, p->image_len, why, sizeof(why));
	if (rc)
		cli_die(EXIT_FAIL, "the compiled program does not verify: %s", why);
	if (p->img.region_size > KPS_REGION_MAX)
		cli_die(EXIT_BAD, "the program's maps need too much memory (%zu bytes; "
			"--map-keys sets fewer keys)", p->img.region_size);
	collect_specs(o, p);
	o->prog = p;
}

size_t run_image_len(const struct run_program *p)
{
	return p->image_len;
}

size_t run_region_len(const struct run_program *p)
{
	return p->img.region_size;
}

/* ---- symbols, for usym, func and ustack ---- */

/* "name", or with_offset "name+OFFSET" (decimal, as bpftrace's stacks). */
static int fmt_sym(uint64_t addr, int with_offset, char *out, size_t outlen, void *arg)
{
	struct run_program *p = arg;
	char name[256];
	uint64_t off;

	if (!p->sym_ready || symbolizer_lookup(&p->sym, addr, name, sizeof(name), &off))
		return -1;
	if (with_offset)
		snprintf(out, outlen, "%s+%" PRIu64, name, off);
	else
		snprintf(out, outlen, "%s", name);
	return 0;
}

/* The object file holding addr, for ustack(perf). */
static int fmt_object(uint64_t addr, char *out, size_t outlen, void *arg)
{
	struct run_program *p = arg;
	struct sym_location loc;

	if (!p->sym_ready || symbolizer_locate(&p->sym, addr, &loc) || !loc.path)
		return -1;
	snprintf(out, outlen, "%s", loc.path);
	return 0;
}

/* The agent's probe ids: PROBE_ID_DESC | descriptor for a uprobe point
 * (bpftrace names the function a glob matched: "uprobe:OBJ:name", OBJ as
 * printed_object() says), else the program's probe number. */
#define PROBE_ID_DESC (1ull << 32)

/* The object of a probe as bpftrace prints it: a short library name
 * ("libc") as the loader's cache resolves it, or with -p as the process
 * maps it (its path in /proc/PID/maps); a path as written. */
static const char *printed_object(struct run_program *p, const char *obj)
{
	pid_t pid = p->session ? p->session->opts->pid : 0;

	if (strchr(obj, '/'))
		return obj;
	if (strcmp(p->obj_written, obj)) {
		snprintf(p->obj_written, sizeof(p->obj_written), "%s", obj);
		if ((!pid || !cli_short_library_of_pid(pid, obj, p->obj_printed,
							sizeof(p->obj_printed))) &&
		    ldcache_find_or_scan(obj, p->obj_printed, sizeof(p->obj_printed)))
			snprintf(p->obj_printed, sizeof(p->obj_printed), "%s", obj);
	}
	return p->obj_printed;
}

static int fmt_probe_name(uint64_t id, char *out, size_t outlen, void *arg)
{
	struct run_program *p = arg;
	const struct kps_desc *d;
	const struct probe_spec *spec;
	const char *pct;

	if (!(id & PROBE_ID_DESC)) {
		if (id >= p->img.hdr->nprobes)
			return -1;
		snprintf(out, outlen, "%s", lang_image_str(&p->img, p->img.probes[id].text));
		return 0;
	}
	d = p->session ? consumer_desc(&p->session->cons, (uint32_t)id) : NULL;
	if (!d)
		return -1;
	spec = &p->session->opts->specs[d->spec];
	if ((spec->sites && spec->kind == SPEC_ADDRESS) || !strncmp(spec->label, "usdt:", 5)) {
		/* an SDT site: "usdt:OBJ:PROVIDER:NAME" */
		snprintf(out, outlen, "usdt:%s:%s", printed_object(p, spec->object), spec->label + 5);
		return 0;
	}
	pct = strstr(d->name, "%return");
	snprintf(out, outlen, "%s:%s:%.*s", spec->is_return ? "uretprobe" : "uprobe",
		 printed_object(p, spec->object),
		 (int)(pct ? pct - d->name : (long)strlen(d->name)), d->name);
	return 0;
}

/* A strftime() value: the target's nsecs are CLOCK_MONOTONIC's, which
 * is this host's too: the wall clock is that plus the clocks' offset now. */
static int fmt_strftime(uint64_t nsecs, uint32_t fmt, char *out, size_t outlen, void *arg)
{
	struct run_program *p = arg;
	struct timespec wall, mono;
	int64_t off;

	if (fmt >= p->img.hdr->nfmts || clock_gettime(CLOCK_REALTIME, &wall) ||
	    clock_gettime(CLOCK_MONOTONIC, &mono))
		return -1;
	off = ((int64_t)wall.tv_sec - (int64_t)mono.tv_sec) * 1000000000 +
	      (wall.tv_nsec - mono.tv_nsec);
	return lang_strftime(lang_image_str(&p->img, p->img.fmts[fmt].fmt),
			     (int64_t)nsecs + off, out, outlen);
}

static struct lang_fmt_ops fmt_ops(struct run_program *p)
{
	struct lang_fmt_ops ops = { fmt_sym, fmt_probe_name, p, fmt_object, fmt_strftime };

	return ops;
}

/* ---- JSON as bpftrace writes it ---- */

static void json_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"')
			fputs("\\\"", f);
		else if (c == '\\')
			fputs("\\\\", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c <= 0x1f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
}

static void json_message(FILE *f, const char *type, const char *msg)
{
	fprintf(f, "{\"type\": \"%s\", \"data\": \"", type);
	json_escaped(f, msg);
	fputs("\"}\n", f);
}

/* Types bpftrace prints quoted in JSON (not strftime()'s: bpftrace 0.17
 * writes its text bare, and so does this). */
static bool is_quoted(const struct lang_type *t)
{
	return t->kind == LANG_T_STR || t->kind == LANG_T_USTACK ||
	       t->kind == LANG_T_USTACK_PERF || t->kind == LANG_T_USYM ||
	       t->kind == LANG_T_PROBE || t->kind == LANG_T_BUF;
}

/* A tuple's parts, laid out one after the other in len bytes, as bpftrace
 * prints them: "(1, abc)", or in JSON [1,"abc"]. */
/* Brackets around a tuple (JSON: an array), n times. */
static void tuple_brackets(bool open, bool json, unsigned n, FILE *f)
{
	while (n--)
		fputc(open ? (json ? '[' : '(') : (json ? ']' : ')'), f);
}

/* A tuple value: its parts one after the other, nest[] (LANG_NEST)
 * marking the tuples inside it, as bpftrace prints "(1, (a, 2))". */
static void tuple_out(struct run_program *p, const struct lang_type *parts, const uint8_t *nest,
		      unsigned n, const void *data, size_t len, bool json, FILE *f)
{
	struct lang_fmt_ops ops = fmt_ops(p);
	size_t off = 0;
	char text[4096];

	tuple_brackets(true, json, 1, f);
	for (unsigned i = 0; i < n && off + parts[i].size <= len; off += parts[i].size, i++) {
		if (lang_format_value(&parts[i], (const char *)data + off, &ops, text,
				      sizeof(text)) < 0)
			text[0] = '\0';
		fputs(!i ? "" : json ? "," : ", ", f);
		tuple_brackets(true, json, LANG_NEST_OPENS(nest[i]), f);
		if (json && is_quoted(&parts[i])) {
			fputc('"', f);
			json_escaped(f, text);
			fputc('"', f);
		} else {
			fputs(text, f);
		}
		tuple_brackets(false, json, LANG_NEST_CLOSES(nest[i]), f);
	}
	tuple_brackets(false, json, 1, f);
}

/* ---- maps ---- */

struct entry {
	const void *key, *val;
	struct lang_agg agg;
	uint64_t total;			/* hist/lhist: sum of the buckets */
};

static _Thread_local const struct lang_map_desc *sort_map;

static bool is_hist(const struct lang_map_desc *m)
{
	return m->kind == LANG_M_HIST || m->kind == LANG_M_LHIST;
}

static bool is_stats(const struct lang_map_desc *m)
{
	return m->kind == LANG_M_AVG || m->kind == LANG_M_STATS;
}

static bool sorts_by_value(const struct lang_map_desc *m)
{
	return m->kind == LANG_M_INT || m->kind == LANG_M_COUNT || m->kind == LANG_M_SUM ||
	       m->kind == LANG_M_MIN || m->kind == LANG_M_MAX;
}

static int64_t average(const struct lang_agg *a)
{
	return a->count ? a->sum / a->count : 0;
}

/* Values bpftrace prints unsigned: counts, unsigned integers, and sums of
 * unsigned values. */
static bool prints_unsigned(const struct lang_map_desc *m)
{
	return m->kind == LANG_M_COUNT || (m->kind == LANG_M_SUM && !m->val.is_signed) ||
	       (m->kind == LANG_M_INT && !m->val.is_signed && m->val.kind == LANG_T_INT);
}

/* One key part against another: integers by value, strings by bytes. */
static int cmp_key_part(const struct lang_type *t, const unsigned char *a, const unsigned char *b)
{
	if (t->kind == LANG_T_INT && t->size <= 8) {
		int64_t x = 0, y = 0;
		uint64_t ux = 0, uy = 0;

		memcpy(&ux, a, t->size);
		memcpy(&uy, b, t->size);
		if (!t->is_signed)
			return ux < uy ? -1 : ux > uy;
		x = (int64_t)(ux << (64 - 8 * t->size)) >> (64 - 8 * t->size);
		y = (int64_t)(uy << (64 - 8 * t->size)) >> (64 - 8 * t->size);
		return x < y ? -1 : x > y;
	}
	if (t->kind == LANG_T_STR)
		return strncmp((const char *)a, (const char *)b, t->size);
	return memcmp(a, b, t->size);
}

static int cmp_keys(const struct lang_map_desc *m, const void *a, const void *b)
{
	size_t off = 0;

	if (!a || !b)
		return 0;
	for (int i = 0; i < m->nkeys && i < LANG_MAX_KEY_PARTS; i++) {
		int c = cmp_key_part(&m->keys[i], (const unsigned char *)a + off,
				     (const unsigned char *)b + off);

		if (c)
			return c;
		off += m->keys[i].size;
	}
	return 0;
}

/* bpftrace's orders: integer-valued maps by value, hist and lhist by the
 * total of their buckets, avg and stats by the average, the others by key;
 * equal ones by key (bpftrace's order there is its hash table's). */
static int cmp_entries(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	const struct lang_map_desc *m = sort_map;
	int c = 0;

	if (sorts_by_value(m)) {
		if (prints_unsigned(m) || (m->kind == LANG_M_INT && !m->val.is_signed))
			c = (uint64_t)a->agg.value < (uint64_t)b->agg.value ? -1 :
			    (uint64_t)a->agg.value > (uint64_t)b->agg.value;
		else
			c = a->agg.value < b->agg.value ? -1 : a->agg.value > b->agg.value;
	} else if (is_hist(m)) {
		c = a->total < b->total ? -1 : a->total > b->total;
	} else if (is_stats(m)) {
		int64_t x = average(&a->agg), y = average(&b->agg);

		c = x < y ? -1 : x > y;
	}
	return c ? c : cmp_keys(m, a->key, b->key);
}

/* bpftrace keeps a keyless count() map from the start: one never
 * counted (or cleared, or deleted) prints as 0. */
static struct entry *zero_count_entry(struct run_program *p, unsigned i, struct entry *v,
				      size_t *n)
{
	static const uint64_t zero;
	struct entry *e = v ? v : malloc(sizeof(*e));

	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->val = &zero;
	lang_map_agg(&p->img, i, &zero, &e->agg);
	*n = 1;
	return e;
}

/* The live entries of map i, sorted; NULL (n 0) for none. */
static struct entry *map_entries(struct run_program *p, unsigned i, size_t *n)
{
	const struct lang_map_desc *m = &p->img.maps[i];
	size_t pos = 0, cap = 0;
	struct entry *v = NULL;
	const void *key, *val;

	*n = 0;
	while (lang_map_next(&p->img, p->region, i, &pos, &key, &val) == 1) {
		struct entry *e;

		if (*n == cap) {
			struct entry *w = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*w));

			if (!w)
				break;
			v = w;
		}
		/* a sharded map is keyless: its one entry's value is the sum */
		if (m->val_size <= sizeof(p->val_sum))
			val = lang_map_value(&p->img, p->region, i, val, p->val_sum);
		e = &v[(*n)++];
		memset(e, 0, sizeof(*e));
		e->key = key;
		e->val = val;
		if (is_hist(m)) {
			unsigned nb = 0;
			const uint64_t *b = lang_map_buckets(&p->img, i, val, &nb);

			for (unsigned k = 0; b && k < nb; k++)
				e->total += b[k];
		} else {
			lang_map_agg(&p->img, i, val, &e->agg);
		}
	}
	if (!*n && !m->nkeys && m->kind == LANG_M_COUNT)
		v = zero_count_entry(p, i, v, n);
	sort_map = m;
	if (*n > 1)
		qsort(v, *n, sizeof(*v), cmp_entries);
	return v;
}

/* The key as bpftrace writes it in JSON: the parts' text joined by ','. */
/* A stack in a map key (text and JSON alike): bpftrace indents its
 * frames by 4, not the 8 of values and printf.  Rewrites stack in place
 * (it only shrinks). */
static void key_stack_indent(char *stack)
{
	char *w = stack;

	for (const char *p = stack; *p; p++) {
		*w++ = *p;
		if (*p == '\n' && !strncmp(p + 1, "        ", 8)) {
			memcpy(w, "    ", 4);
			w += 4;
			p += 8;
		}
	}
	*w = '\0';
}

static void json_key(struct run_program *p, const struct lang_map_desc *m, const void *key,
		     FILE *f)
{
	struct lang_fmt_ops ops = fmt_ops(p);
	char joined[16384] = "", part[8192];
	size_t off = 0, len = 0;

	for (int i = 0; i < m->nkeys && i < LANG_MAX_KEY_PARTS; i++) {
		if (lang_format_value(&m->keys[i], (const unsigned char *)key + off, &ops, part,
				      sizeof(part)) < 0)
			part[0] = '\0';
		if (m->keys[i].kind == LANG_T_USTACK)
			key_stack_indent(part);
		len += (size_t)snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? "," : "",
					part);
		if (len >= sizeof(joined))
			len = sizeof(joined) - 1;
		off += m->keys[i].size;
	}
	fputc('"', f);
	json_escaped(f, joined);
	fputs("\": ", f);
}

static void json_hist(const struct lang_map_desc *m, const uint64_t *b, unsigned nb,
		      int64_t div, FILE *f)
{
	int lo = -1, hi = -1;
	bool first = true;

	for (unsigned i = 0; i < nb; i++)
		if (b[i]) {
			if (lo < 0)
				lo = (int)i;
			hi = (int)i;
		}
	fputc('[', f);
	for (int i = lo; lo >= 0 && i <= hi; i++) {
		fputs(first ? "{" : ", {", f);
		first = false;
		if (m->kind == LANG_M_HIST) {
			if (i == 0)
				fputs("\"max\": -1, ", f);
			else if (i == 1)
				fputs("\"min\": 0, \"max\": 0, ", f);
			else if (i == 2)
				fputs("\"min\": 1, \"max\": 1, ", f);
			else	/* bpftrace 0.17 computes these in 32-bit int (x86 shifts
				 * mod 32): its top bucket, [2^31, ...), prints as
				 * min -2147483648, max 0 */
				fprintf(f, "\"min\": %d, \"max\": %d, ",
					(int32_t)(1U << ((i - 2) & 31)),
					(int32_t)((1U << ((i - 1) & 31)) - 1));
			fprintf(f, "\"count\": %" PRIu64 "}", b[i] / (uint64_t)div);
			continue;
		}
		if (i == 0)
			fprintf(f, "\"max\": %" PRId64 ", ", m->lhist_min - 1);
		else if (i == (int)nb - 1)
			fprintf(f, "\"min\": %" PRId64 ", ", m->lhist_max);
		else
			fprintf(f, "\"min\": %" PRId64 ", \"max\": %" PRId64 ", ",
				(i - 1) * m->lhist_step + m->lhist_min,
				i * m->lhist_step + m->lhist_min - 1);
		fprintf(f, "\"count\": %" PRIu64 "}", b[i]);
	}
	fputc(']', f);
}

static void json_value(struct run_program *p, unsigned i, const struct entry *e, int64_t div,
		       FILE *f)
{
	const struct lang_map_desc *m = &p->img.maps[i];
	struct lang_fmt_ops ops = fmt_ops(p);
	char text[4096];

	if (is_hist(m)) {
		unsigned nb = 0;
		const uint64_t *b = lang_map_buckets(&p->img, i, e->val, &nb);

		json_hist(m, b, b ? nb : 0, div, f);
	} else if (m->kind == LANG_M_STATS) {
		fprintf(f, "{\"count\": %" PRId64 ", \"average\": %" PRId64 ", \"total\": %" PRId64 "}",
			e->agg.count, average(&e->agg), e->agg.sum);
	} else if (m->kind == LANG_M_AVG) {
		fprintf(f, "%" PRId64, average(&e->agg) / div);
	} else if (prints_unsigned(m)) {
		fprintf(f, "%" PRIu64, (uint64_t)e->agg.value / (uint64_t)div);
	} else if (sorts_by_value(m)) {
		fprintf(f, "%" PRId64, e->agg.value / div);
	} else if (m->kind == LANG_M_TUPLE) {
		tuple_out(p, m->vparts, m->vnest, m->nvparts, e->val, m->val_size, true, f);
	} else {
		if (lang_format_value(&m->val, e->val, &ops, text, sizeof(text)) < 0)
			text[0] = '\0';
		if (is_quoted(&m->val)) {
			fputc('"', f);
			json_escaped(f, text);
			fputc('"', f);
		} else {
			fputs(text, f);
		}
	}
}

/* One map as bpftrace's -f json prints it; nothing for an empty one. */
static void json_map(struct run_program *p, unsigned i, int64_t top, int64_t div, FILE *f)
{
	const struct lang_map_desc *m = &p->img.maps[i];
	size_t n, first = 0;
	struct entry *v = map_entries(p, i, &n);

	if (!n) {
		free(v);
		return;
	}
	if (top > 0 && n > (size_t)top)
		first = n - (size_t)top;
	fprintf(f, "{\"type\": \"%s\", \"data\": {\"",
		is_hist(m) ? "hist" : is_stats(m) ? "stats" : "map");
	json_escaped(f, lang_image_str(&p->img, m->name));
	fputs("\": ", f);
	if (m->nkeys)
		fputc('{', f);
	for (size_t k = first; k < n; k++) {
		if (k > first)
			fputs(", ", f);
		if (m->nkeys)
			json_key(p, m, v[k].key, f);
		json_value(p, i, &v[k], div > 0 ? div : 1, f);
	}
	if (m->nkeys)
		fputc('}', f);
	fputs("}}\n", f);
	free(v);
}

/* ---- text as bpftrace prints it ---- */


/* "@name[part, part]" (keyless: "@name"). */
static void text_key(struct run_program *p, const struct lang_map_desc *m, const void *key,
		     FILE *f)
{
	struct lang_fmt_ops ops = fmt_ops(p);
	char part[8192];
	size_t off = 0;

	fputs(lang_image_str(&p->img, m->name), f);
	if (!m->nkeys || !key)
		return;
	fputc('[', f);
	for (int i = 0; i < m->nkeys && i < LANG_MAX_KEY_PARTS; i++) {
		if (lang_format_value(&m->keys[i], (const unsigned char *)key + off, &ops, part,
				      sizeof(part)) < 0)
			part[0] = '\0';
		fputs(i ? ", " : "", f);
		if (m->keys[i].kind == LANG_T_USTACK)
			key_stack_indent(part);
		fputs(part, f);
		off += m->keys[i].size;
	}
	fputc(']', f);
}

/* Bucket lines: label (16 wide), count (8 wide), a bar of 52 scaled to
 * the biggest bucket; from the first bucket in use to the last. */
static void text_buckets(const struct lang_map_desc *m, const uint64_t *b, unsigned nb,
			 int64_t div, FILE *f)
{
	int lo = -1, hi = -1;
	uint64_t max = 0;
	char label[64], bar[53];

	for (unsigned i = 0; i < nb; i++) {
		if (b[i]) {
			if (lo < 0)
				lo = (int)i;
			hi = (int)i;
		}
		if (b[i] > max)
			max = b[i];
	}
	for (int i = lo; lo >= 0 && i <= hi; i++) {
		int width = (int)((float)b[i] / (float)max * 52);

		if (m->kind == LANG_M_HIST)
			lang_hist_label((unsigned)i, label, sizeof(label));
		else
			lang_lhist_label((unsigned)i, m->lhist_min, m->lhist_max, m->lhist_step, label,
					 sizeof(label));
		memset(bar, '@', (size_t)width);
		bar[width] = '\0';
		fprintf(f, "%-16s%8" PRIu64 " |%-52s|\n", label,
			m->kind == LANG_M_HIST ? b[i] / (uint64_t)div : b[i], bar);
	}
}

static void text_value(struct run_program *p, unsigned i, const struct entry *e, int64_t div,
		       FILE *f)
{
	const struct lang_map_desc *m = &p->img.maps[i];
	struct lang_fmt_ops ops = fmt_ops(p);
	char text[8192];

	if (is_hist(m)) {
		unsigned nb = 0;
		const uint64_t *b = lang_map_buckets(&p->img, i, e->val, &nb);

		if (b)
			text_buckets(m, b, nb, div, f);
	} else if (m->kind == LANG_M_STATS) {
		fprintf(f, "count %" PRId64 ", average %" PRId64 ", total %" PRId64, e->agg.count,
			average(&e->agg), e->agg.sum);
	} else if (m->kind == LANG_M_AVG) {
		fprintf(f, "%" PRId64, average(&e->agg) / div);
	} else if (prints_unsigned(m)) {
		fprintf(f, "%" PRIu64, (uint64_t)e->agg.value / (uint64_t)div);
	} else if (sorts_by_value(m)) {
		fprintf(f, "%" PRId64, e->agg.value / div);
	} else if (m->kind == LANG_M_TUPLE) {
		tuple_out(p, m->vparts, m->vnest, m->nvparts, e->val, m->val_size, false, f);
	} else {
		if (lang_format_value(&m->val, e->val, &ops, text, sizeof(text)) < 0)
			text[0] = '\0';
		fputs(text, f);
	}
}

/* One map as bpftrace's text output prints it: the entries joined by a
 * newline (none after stacks and symbols, which end in one), then a
 * newline, and for avg and stats one more; an empty map is that alone. */
static void text_map(struct run_program *p, unsigned i, int64_t top, FILE *f, int64_t div)
{
	const struct lang_map_desc *m = &p->img.maps[i];
	bool no_delim = m->val.kind == LANG_T_USTACK || m->val.kind == LANG_T_USTACK_PERF ||
			m->val.kind == LANG_T_USYM;
	size_t n, first = 0;
	struct entry *v = map_entries(p, i, &n);

	if (top > 0 && n > (size_t)top)
		first = n - (size_t)top;
	for (size_t k = first; k < n; k++) {
		if (k > first && (is_hist(m) || !no_delim))
			fputc('\n', f);
		text_key(p, m, v[k].key, f);
		fputs(is_hist(m) ? ": \n" : ": ", f);
		text_value(p, i, &v[k], div, f);
	}
	fputc('\n', f);
	if (is_stats(m))
		fputc('\n', f);
	free(v);
}

static void print_map(struct session *s, unsigned i, int64_t top, int64_t div)
{
	struct run_program *p = s->opts->prog;

	if (i >= p->img.hdr->nmaps)
		return;
	if (p->img.maps[i].kind == LANG_M_STATS) {
		top = 0;	/* bpftrace ignores top and div for stats() maps */
		div = 1;
	}
	if (div <= 0)
		div = 1;
	if (s->out.format == FMT_JSON)
		json_map(p, i, top, div, s->out.f);
	else
		text_map(p, i, top, s->out.f, div);
}

/* ---- events ---- */

/* At most this much of a file cat() prints or of a command's output. */
#define CAT_MAX_BYTES (1u << 20)

/* All of stream f up to max bytes (malloc'ed, NUL-terminated; *len its
 * length), or NULL. */
static char *read_stream(FILE *f, size_t max, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (n < cap || cap >= max)
			break;
		{
			char *bigger = realloc(buf, cap * 2 + 1);

			if (!bigger) {
				free(buf);
				return NULL;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	if (!buf)
		return NULL;
	buf[n] = 0;
	*len = n;
	return buf;
}

/* Text a program's cat() or system() put out: as it is, or in JSON as
 * bpftrace's message of that type. */
static void put_text(struct session *s, const char *type, const char *text, size_t len)
{
	if (s->out.format == FMT_JSON)
		json_message(s->out.f, type, text);
	else
		fwrite(text, 1, len, s->out.f);
}

/* All of f (up to CAT_MAX_BYTES) as put_text() puts it, f closed by
 * close_fn (fclose, pclose). */
static void put_stream(struct session *s, const char *type, FILE *f, int (*close_fn)(FILE *))
{
	size_t len = 0;
	char *text = read_stream(f, CAT_MAX_BYTES, &len);

	close_fn(f);
	if (!text)
		return;
	put_text(s, type, text, len);
	free(text);
}

static void event_printf(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	struct lang_fmt_ops ops = fmt_ops(p);
	char line[LINE_MAX_OUT];
	ssize_t n = lang_format_printf(&p->img, ev->prog_id, ev->text, ev->textlen, &ops, line,
				       sizeof(line));

	if (n < 0)
		return;
	if (s->out.format == FMT_JSON)
		json_message(s->out.f, "printf", line);
	else
		fwrite(line, 1, strnlen(line, sizeof(line)), s->out.f);
}

/* cat(FMT, ...): the file the format names, printed whole when the tool
 * handles the event (as bpftrace does); one that cannot be read is an
 * error line, and the run goes on. */
static void event_cat(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	struct lang_fmt_ops ops = fmt_ops(p);
	char path[LINE_MAX_OUT];
	FILE *f;

	if (lang_format_printf(&p->img, ev->prog_id, ev->text, ev->textlen, &ops, path,
			       sizeof(path)) < 0)
		return;
	f = fopen(path, "r");
	if (!f) {
		fflush(s->out.f);
		fprintf(stderr, "ERROR: failed to open file '%s': %s\n", path, strerror(errno));
		return;
	}
	put_stream(s, "cat", f, fclose);
}

/* system(FMT, ...) (--unsafe): the command run by /bin/sh when the tool
 * handles the event, its standard output into the run's, its standard
 * error left to the terminal, as bpftrace does. */
static void event_system(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	struct lang_fmt_ops ops = fmt_ops(p);
	char cmd[LINE_MAX_OUT];
	FILE *f;

	if (!s->opts->unsafe ||
	    lang_format_printf(&p->img, ev->prog_id, ev->text, ev->textlen, &ops, cmd, sizeof(cmd)) < 0)
		return;
	fflush(s->out.f);
	fflush(stderr);
	f = popen(cmd, "r");
	if (!f) {
		fprintf(stderr, "ERROR: system(\"%s\"): %s\n", cmd, strerror(errno));
		return;
	}
	put_stream(s, "syscall", f, pclose);
}

/* join(ARRAY[, DELIM]): the array's strings joined by the delimiter, one
 * line, up to the first empty one (as bpftrace's join() stops).  The count
 * came from the target: bounded here. */
static void event_join(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	char line[LANG_JOIN_REC + LANG_JOIN_MAX * 64 + 2];
	const char *delim;
	size_t len = 0;
	uint64_t n;

	if (ev->prog_id >= p->img.hdr->nfmts || ev->textlen != LANG_JOIN_REC)
		return;
	delim = lang_image_str(&p->img, p->img.fmts[ev->prog_id].fmt);
	memcpy(&n, ev->text, 8);
	if (n > LANG_JOIN_MAX)
		n = LANG_JOIN_MAX;
	for (uint64_t i = 0; i < n; i++) {
		const char *str = (const char *)ev->text + 8 + i * LANG_STRLEN;
		size_t sl = strnlen(str, LANG_STRLEN), dl = strnlen(delim, 63);

		if (!sl)
			break;
		if (i && len + dl < sizeof(line)) {
			memcpy(line + len, delim, dl);
			len += dl;
		}
		if (len + sl < sizeof(line)) {
			memcpy(line + len, str, sl);
			len += sl;
		}
	}
	line[len++] = '\n';
	line[len] = '\0';
	put_text(s, "join", line, len);
}

/* time(FMT): the tool's local time when it handles the event, as
 * bpftrace formats it when it handles its own. */
static void event_time(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	char text[512];
	struct tm tm;
	time_t now = time(NULL);

	if (ev->prog_id >= p->img.hdr->nfmts || !localtime_r(&now, &tm))
		return;
	if (!strftime(text, sizeof(text), lang_image_str(&p->img, p->img.fmts[ev->prog_id].fmt),
		      &tm))
		text[0] = '\0';
	if (s->out.format == FMT_JSON)
		json_message(s->out.f, "time", text);
	else
		fputs(text, s->out.f);
}

static void event_value(struct session *s, const struct trace_event *ev)
{
	struct run_program *p = s->opts->prog;
	struct lang_fmt_ops ops = fmt_ops(p);
	const struct lang_fmt_desc *d;
	char text[4096];

	if (ev->prog_id >= p->img.hdr->nfmts)
		return;
	d = &p->img.fmts[ev->prog_id];
	if (d->nargs > 1 && ev->textlen >= d->rec_size) {	/* a tuple's parts */
		bool json = s->out.format == FMT_JSON;

		if (json)
			fputs("{\"type\": \"value\", \"data\": ", s->out.f);
		tuple_out(p, d->arg, d->nest, d->nargs, ev->text, d->rec_size, json, s->out.f);
		fputs(json ? "}\n" : "\n", s->out.f);
		return;
	}
	if (d->nargs != 1 || ev->textlen < d->arg[0].size ||
	    lang_format_value(&d->arg[0], ev->text, &ops, text, sizeof(text)) < 0)
		return;
	if (s->out.format != FMT_JSON) {
		fprintf(s->out.f, "%s\n", text);
		return;
	}
	fputs("{\"type\": \"value\", \"data\": ", s->out.f);
	if (is_quoted(&d->arg[0])) {
		fputc('"', s->out.f);
		json_escaped(s->out.f, text);
		fputs("\"}\n", s->out.f);
	} else {
		fprintf(s->out.f, "%s}\n", text);
	}
}

static void print_event(struct session *s, const struct trace_event *ev)
{
	int64_t args[2] = { 0, 1 };

	if (ev->textlen >= sizeof(args))
		memcpy(args, ev->text, sizeof(args));
	print_map(s, ev->prog_id, args[0], args[1]);
}

static void prog_event(void *arg, const struct trace_event *ev)
{
	struct session *s = arg;
	struct run_program *p = s->opts->prog;

	switch (ev->prog_type) {
	case LANG_EV_PRINTF:
		event_printf(s, ev);
		break;
	case LANG_EV_TIME:
		event_time(s, ev);
		break;
	case LANG_EV_CAT:
		event_cat(s, ev);
		break;
	case LANG_EV_SYSTEM:
		event_system(s, ev);
		break;
	case LANG_EV_JOIN:
		event_join(s, ev);
		break;
	case LANG_EV_EXIT:
		p->exited = true;
		break;
	case LANG_EV_PRINT_MAP:
		print_event(s, ev);
		break;
	case LANG_EV_CLEAR:
		if (ev->prog_id < p->img.hdr->nmaps)
			lang_map_clear(&p->img, p->region, ev->prog_id);
		break;
	case LANG_EV_ZERO:
		if (ev->prog_id < p->img.hdr->nmaps)
			lang_map_zero(&p->img, p->region, ev->prog_id);
		break;
	case LANG_EV_PRINT_VALUE:
		event_value(s, ev);
		break;
	default:
		break;		/* the target may write anything */
	}
}

/* ---- the session ---- */

void run_setup(struct session *s)
{
	struct run_program *p = s->opts->prog;
	int rc;

	p->session = s;
	memcpy((char *)s->map.base + kps_off_image(), p->image, p->image_len);
	p->region = (char *)s->map.base + kps_off_region(p->image_len);
	rc = lang_maps_init(&p->img, p->region, p->img.region_size);
	if (rc)
		cli_die(EXIT_FAIL, "cannot set up the program's maps: %s", strerror(-rc));
	s->out.prog_event = prog_event;
	s->out.prog_arg = s;
}

void run_attached(struct session *s)
{
	struct run_program *p = s->opts->prog;
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE);

	if (n > KPS_MAX_PROBES)
		n = KPS_MAX_PROBES;
	n += (uint64_t)p->nspecial;
	symbolizer_init(&p->sym, s->target);
	symbolizer_use_noted(&p->sym, s->map.objects, &s->map.hdr->nobjects);
	symbolizer_refresh(&p->sym);
	p->sym_ready = true;
	if (s->out.format == FMT_JSON)
		fprintf(s->out.f, "{\"type\": \"attached_probes\", \"data\": {\"probes\": %" PRIu64
			"}}\n", n);
	else
		fprintf(s->out.f, "Attaching %" PRIu64 " probe%s...\n", n, n == 1 ? "" : "s");
	fflush(s->out.f);
}

bool run_exit_requested(const struct session *s)
{
	return s->opts->prog && s->opts->prog->exited;
}

static int by_name(const void *a, const void *b, void *arg)
{
	const struct run_program *p = arg;
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return strcmp(lang_image_str(&p->img, p->img.maps[x].name),
		      lang_image_str(&p->img, p->img.maps[y].name));
}

void run_report(struct session *s)
{
	struct run_program *p = s->opts->prog;
	unsigned order[LANG_MAX_MAPS], n = p->img.hdr->nmaps;
	uint64_t lost = 0;

	if (n > LANG_MAX_MAPS)
		n = LANG_MAX_MAPS;
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(order[0]), by_name, p);
	/* bpftrace ends a run with two newlines on its standard output,
	 * whatever -f says, then prints every map by name.  Ours is the
	 * results' stream (a launched command's standard output is its own);
	 * with -o FILE, the file gets what bpftrace's does: not those. */
	if (!s->opts->outfile)
		fputs("\n\n", s->out.f);
	for (unsigned k = 0; k < n; k++)
		print_map(s, order[k], 0, 1);
	for (unsigned i = 0; i < n; i++)
		lost += lang_maps_dropped(&p->img, p->region, i);
	if (lost)
		cli_warn("%" PRIu64 " map updates dropped: a map was full (--map-keys N gives "
			 "more room)", lost);
	lost = consumer_lost_full(&s->cons) + consumer_lost_ringless(&s->cons);
	if (lost) {
		if (s->out.format == FMT_JSON)
			fprintf(s->out.f, "{\"type\": \"lost_events\", \"data\": {\"events\": %" PRIu64
				"}}\n", lost);
		else
			fprintf(s->out.f, "Lost %" PRIu64 " events\n", lost);
	}
	if (lang_maps_aborted(&p->img, p->region))
		cli_warn("%" PRIu64 " probe runs ended early: a loop ran out of its budget",
			 lang_maps_aborted(&p->img, p->region));
	fflush(s->out.f);
	if (p->sym_ready)
		symbolizer_free(&p->sym);
	p->sym_ready = false;
}
