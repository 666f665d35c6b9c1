/* Resolving symbols, globs and addresses to probe points, with near-match
 * suggestions for typos and deferral for objects that are not loaded yet. */
#include "agent_resolve.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kprobes/symbols.h>

#include "agent.h"
#include "elf_file.h"
#include "kp_arch.h"
#include "nearmatch.h"
#include "util.h"

int resolve_push(struct resolve_list *l, const struct resolved *r)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 64;
		struct resolved *v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *r;
	return 0;
}

void resolve_list_free(struct resolve_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* ---- loaded objects ---- */

struct object_query {
	const char *want;
	bool found;
	struct nearmatch near;
	char *name;		/* when not NULL: the found object's path */
	size_t namelen;
};

static bool same_file(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

static int query_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct object_query *q = arg;
	const char *path = info->dlpi_name;
	char exe[PATH_MAX];

	(void)size;
	if (!path[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		if (n <= 0)
			return 0;
		exe[n] = '\0';
		path = exe;
	}
	if (!strcmp(path, q->want) || !strcmp(path_base(path), q->want) ||
	    (strchr(q->want, '/') && same_file(path, q->want))) {
		q->found = true;
		if (q->name)
			str_copy(q->name, q->namelen, path);
		return 1;
	}
	nearmatch_offer(&q->near, path_base(path));
	return 0;
}

bool agent_object_loaded(const char *object)
{
	struct object_query q = { .want = object };

	nearmatch_init(&q.near, object);
	kprobes_objects_foreach(query_object, &q);
	return q.found;
}

/* The file an unloaded object name would be loaded from: searched where the
 * dynamic loader usually looks, and beside the objects already loaded. */
struct disk_search {
	const char *want;
	char cand[PATH_MAX];
};

/* Whether path is an ELF object (not, say, a linker script named libc.so). */
static bool is_elf_object(const char *path)
{
	uint64_t vaddr;

	return access(path, R_OK) == 0 && elf_file_first_load(path, &vaddr) == 0;
}

static bool try_beside(struct disk_search *d, const char *object_path)
{
	const char *slash = strrchr(object_path, '/');

	if (!slash)
		return false;
	snprintf(d->cand, sizeof(d->cand), "%.*s/%s", (int)(slash - object_path), object_path,
		 d->want);
	return is_elf_object(d->cand);
}

static int dir_of_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	return try_beside(arg, info->dlpi_name);
}

static bool find_on_disk(const char *object, char *out, size_t outlen)
{
	static const char *const dirs[] = {
		"/lib/" KP_MULTIARCH, "/usr/lib/" KP_MULTIARCH, "/lib64", "/usr/lib64",
		"/lib", "/usr/lib", "/usr/local/lib",
	};
	struct disk_search d = { .want = object };
	const char *llp = getenv("LD_LIBRARY_PATH");
	char exe[PATH_MAX];
	ssize_t n;

	if (strchr(object, '/')) {
		str_copy(out, outlen, object);
		return is_elf_object(object);
	}
	if (llp) {
		char copy[4096], *save = NULL;

		str_copy(copy, sizeof(copy), llp);
		for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
			snprintf(d.cand, sizeof(d.cand), "%s/%s", dir, object);
			if (is_elf_object(d.cand))
				goto found;
		}
	}
	for (unsigned int i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(d.cand, sizeof(d.cand), "%s/%s", dirs[i], object);
		if (is_elf_object(d.cand))
			goto found;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if (try_beside(&d, exe))
			goto found;
	}
	if (kprobes_objects_foreach(dir_of_loaded, &d))
		goto found;
	return false;
found:
	str_copy(out, outlen, d.cand);
	return true;
}

/* ---- symbols ---- */

/* Functions glibc runs with every signal blocked: a new thread before it
 * takes its mask (__ctype_init, _setjmp), the clone wrapper, a posix_spawn
 * child on its way to execve or _exit.  A breakpoint hit there with SIGTRAP
 * blocked makes the kernel kill the process, so a glob never matches them
 * (an explicit probe still may: its jump-optimized form is safe). */
static const char *const signals_blocked_functions[] = {
	"__ctype_init", "_setjmp", "__sigsetjmp", "clone", "execve", "_exit",
};

#define NUNSAFE (sizeof(signals_blocked_functions) / sizeof(signals_blocked_functions[0]))

struct collect {
	const struct probe_spec *spec;
	int idx;
	struct resolve_list *out;
	const char *self;
	uintptr_t unsafe[NUNSAFE];	/* their addresses in libc */
	int err;
	bool own_code;			/* AGENT_RESOLVE_OWN_CODE, on OBJ:* */
	bool each_name;			/* AGENT_RESOLVE_EACH_NAME */
};

/* What crt1.o, crti.o and crtbegin.o/crtend.o put in every program and
 * library: run before main and constructors, after exit and destructors. */
static const char *const toolchain_functions[] = {
	"_start", "_init", "_fini", "frame_dummy", "register_tm_clones",
	"deregister_tm_clones", "__do_global_dtors_aux", "__libc_csu_init",
	"__libc_csu_fini", "_dl_relocate_static_pie",
};

static bool is_toolchain_function(const char *name)
{
	for (size_t i = 0; i < sizeof(toolchain_functions) / sizeof(toolchain_functions[0]); i++)
		if (!strcmp(name, toolchain_functions[i]))
			return true;
	return false;
}

static void find_unsafe(struct collect *c)
{
	for (unsigned int i = 0; i < NUNSAFE; i++) {
		char name[64];
		struct kprobes_sym sym = { .sz = sizeof(sym) };

		snprintf(name, sizeof(name), "libc.so.6:%s", signals_blocked_functions[i]);
		c->unsafe[i] = kprobes_sym_lookup_name(name, &sym) ? 0 : sym.addr;
	}
}

static bool is_unsafe(const struct collect *c, uintptr_t addr)
{
	for (unsigned int i = 0; i < NUNSAFE; i++)
		if (c->unsafe[i] == addr)
			return true;
	return false;
}

static int index_of_addr(const struct resolve_list *l, int from, uintptr_t addr)
{
	for (int i = from; i < l->n; i++)
		if (l->v[i].addr == addr)
			return i;
	return -1;
}

static bool has_name(const struct resolve_list *l, int from, const char *name)
{
	for (int i = from; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return true;
	return false;
}

/* Of two names for one function, the one a user would write: fewer leading
 * underscores, then shorter ("malloc" over "__libc_malloc"). */
static bool better_name(const char *a, const char *b)
{
	size_t ua = strspn(a, "_"), ub = strspn(b, "_");

	if (ua != ub)
		return ua < ub;
	return strlen(a) < strlen(b);
}

static void name_probe(struct resolved *r, const char *sym, unsigned long off, bool is_return)
{
	if (off)
		snprintf(r->name, sizeof(r->name), "%s+0x%lx", sym, off);
	else
		snprintf(r->name, sizeof(r->name), "%s%s", sym, is_return ? "%return" : "");
}

static int collect_glob(const struct kprobes_sym *sym, void *arg)
{
	struct collect *c = arg;
	struct resolved r = { .spec = c->idx, .from_glob = true };
	int first = c->out->n, at;

	/* The agent never probes itself, nor, unless asked by name, the
	 * libraries only it uses. */
	if (!strcmp(sym->basename, c->self) || !sym->name || is_unsafe(c, sym->addr) ||
	    (!c->spec->object[0] && agent_object_is_private(sym->basename)) ||
	    (c->own_code && is_toolchain_function(sym->name)))
		return 0;
	r.addr = sym->addr + c->spec->offset;
	/* Aliases share an address: one probe, under the best name; or, for
	 * a program, one per name, as bpftrace attaches them. */
	while (first > 0 && c->out->v[first - 1].spec == c->idx)
		first--;
	name_probe(&r, sym->name, c->spec->offset, c->spec->is_return);
	if (c->each_name && has_name(c->out, first, r.name))
		return 0;
	at = c->each_name ? -1 : index_of_addr(c->out, first, r.addr);
	if (at >= 0) {
		if (better_name(r.name, c->out->v[at].name))
			str_copy(c->out->v[at].name, sizeof(r.name), r.name);
		return 0;
	}
	str_copy(r.object, sizeof(r.object), sym->basename);
	r.sym_size = sym->size;
	c->err = resolve_push(c->out, &r);
	return c->err;
}

static const char *offset_refusal(int rc)
{
	return rc == -EINVAL ? "the offset is beyond the end of the function" :
			       "the offset is not an instruction boundary";
}

/* Each of a glob's matches [from, l->n) with the spec's offset: checked
 * per function (after the walk: the check takes libkprobes' lock, which
 * is never taken inside the symbol cache's). */
static void check_glob_offsets(struct resolve_list *l, int from, unsigned long offset)
{
	for (int i = from; i < l->n && offset; i++) {
		int rc = kprobes_sym_check_offset(l->v[i].addr - offset, l->v[i].sym_size, offset);

		if (rc) {
			l->v[i].refused = rc;
			l->v[i].why = offset_refusal(rc);
		}
	}
}

static int offer_name(const struct kprobes_sym *sym, void *arg)
{
	if (sym->name)
		nearmatch_offer(arg, sym->name);
	return 0;
}

static int offer_file_name(const char *name, void *arg)
{
	nearmatch_offer(arg, name);
	return 0;
}

static int unknown_symbol(const struct probe_spec *s, const char *path, char *err, size_t errlen)
{
	struct nearmatch m;
	char hint[300];

	nearmatch_init(&m, s->symbol);
	if (path)
		elf_file_foreach_function(path, offer_file_name, &m);
	else
		kprobes_sym_foreach(s->object[0] ? s->object : NULL, NULL, offer_name, &m);
	if (s->object[0])
		snprintf(err, errlen, "unknown symbol '%s' in %s%s", s->symbol, s->object,
			 nearmatch_hint(&m, hint, sizeof(hint)));
	else
		snprintf(err, errlen, "unknown symbol '%s'%s", s->symbol,
			 nearmatch_hint(&m, hint, sizeof(hint)));
	return -ENOENT;
}

static int take_public(const struct kprobes_sym *sym, void *arg)
{
	if (agent_object_is_private(sym->basename))
		return 0;
	*(struct kprobes_sym *)arg = *sym;
	return 1;
}

/* An unqualified name found first in the agent or a library only it uses:
 * the program's own definition, in lookup order, or -ENOENT. */
static int first_public(const char *name, struct kprobes_sym *out)
{
	int rc = kprobes_sym_foreach(NULL, name, take_public, out);

	return rc == 1 ? 0 : rc < 0 ? rc : -ENOENT;
}

static int resolve_symbol(const struct probe_spec *s, int idx, struct resolve_list *out,
			  char *err, size_t errlen, unsigned flags)
{
	char full[600];
	struct kprobes_sym sym = { .sz = sizeof(sym) };
	struct resolved r = { .spec = idx };
	int rc;

	if (spec_is_glob(s)) {
		struct collect c = { s, idx, out, agent_self_basename(), { 0 }, 0,
				     (flags & AGENT_RESOLVE_OWN_CODE) && !strcmp(s->symbol, "*"),
				     flags & AGENT_RESOLVE_EACH_NAME };
		int before = out->n;

		find_unsafe(&c);
		agent_object_is_private("");	/* looked up once, outside the walk */
		rc = kprobes_sym_foreach(s->object[0] ? s->object : NULL, s->symbol, collect_glob, &c);
		if (rc < 0 || c.err) {
			snprintf(err, errlen, "cannot list the functions matching '%s': %s",
				 s->symbol, strerror(-(rc < 0 ? rc : c.err)));
			return rc < 0 ? rc : c.err;
		}
		if (out->n == before) {
			snprintf(err, errlen, "no function matches '%s'%s%s", s->symbol,
				 s->object[0] ? " in " : "", s->object);
			return -ENOENT;
		}
		check_glob_offsets(out, before, s->offset);
		return 0;
	}
	if (s->object[0])
		snprintf(full, sizeof(full), "%s:%s", s->object, s->symbol);
	else
		snprintf(full, sizeof(full), "%s", s->symbol);
	rc = kprobes_sym_lookup_name(full, &sym);
	if (!rc && !s->object[0] && agent_object_is_private(sym.basename))
		rc = first_public(s->symbol, &sym);
	if (rc == -ENOENT)
		return unknown_symbol(s, NULL, err, errlen);
	if (rc) {
		snprintf(err, errlen, "cannot look up '%s': %s", full, strerror(-rc));
		return rc;
	}
	rc = s->offset ? kprobes_sym_check_offset(sym.addr, sym.size, s->offset) : 0;
	if (rc == -EINVAL && sym.size) {
		snprintf(err, errlen, "offset 0x%lx is beyond the end of %s (%zu bytes)",
			 s->offset, s->symbol, sym.size);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot probe %s+0x%lx: %s", s->symbol, s->offset,
			 offset_refusal(rc));
		return rc;
	}
	r.addr = sym.addr + s->offset;
	name_probe(&r, sym.name, s->offset, s->is_return);
	str_copy(r.object, sizeof(r.object), sym.basename);
	return resolve_push(out, &r);
}

/* ---- addresses ---- */

struct bias_query {
	const char *want;
	uintptr_t bias;
	bool found;
};

static int query_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct object_query q = { .want = ((struct bias_query *)arg)->want };

	nearmatch_init(&q.near, q.want);
	query_object(info, size, &q);
	if (q.found) {
		((struct bias_query *)arg)->bias = info->dlpi_addr;
		((struct bias_query *)arg)->found = true;
		return 1;
	}
	return 0;
}

static int resolve_address(const struct probe_spec *s, int idx, struct resolve_list *out,
			   char *err, size_t errlen)
{
	struct resolved r = { .spec = idx };
	struct kprobes_sym sym = { .sz = sizeof(sym) };

	r.addr = s->address;
	if (s->object[0]) {
		struct bias_query q = { .want = s->object };

		kprobes_objects_foreach(query_bias, &q);
		if (!q.found) {
			snprintf(err, errlen, "unknown object '%s'", s->object);
			return -ENOENT;
		}
		r.addr += q.bias;
		if (s->semaphore)
			r.semaphore = s->semaphore + q.bias;
	}
	if (kprobes_sym_object_of(r.addr, &sym)) {
		snprintf(err, errlen, "address 0x%lx is not in the code of any loaded object",
			 (unsigned long)r.addr);
		return -EINVAL;
	}
	str_copy(r.object, sizeof(r.object), sym.basename);
	if (!kprobes_sym_lookup_addr(r.addr, &sym) && sym.name)
		name_probe(&r, sym.name, r.addr - sym.addr, false);
	else
		snprintf(r.name, sizeof(r.name), "0x%lx", (unsigned long)r.addr);
	return resolve_push(out, &r);
}

/* ---- objects not loaded yet ---- */

struct glob_match {
	const char *glob;
};

static int file_glob_matches(const char *name, void *arg)
{
	return !fnmatch(((struct glob_match *)arg)->glob, name, 0);
}

static int check_deferred(const struct probe_spec *s, const char *path, char *err,
			  size_t errlen)
{
	uint64_t value;
	int rc;

	/* An address in a file found on disk (the tool read it there: an
	 * SDT probe, a variable's point) waits for it as it is. */
	if (s->kind == SPEC_ADDRESS)
		return 0;
	if (s->kind != SPEC_SYMBOL) {
		snprintf(err, errlen, "object '%s' is not loaded: only symbols can wait for it",
			 s->object);
		return -ENOENT;
	}
	if (spec_is_glob(s)) {
		struct glob_match g = { s->symbol };

		rc = elf_file_foreach_function(path, file_glob_matches, &g);
		if (rc > 0)
			return 0;
		if (rc < 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
			return rc;
		}
		snprintf(err, errlen, "no function matches '%s' in %s", s->symbol, s->object);
		return -ENOENT;
	}
	rc = elf_file_symbol(path, s->symbol, &value);
	if (rc == -ENOENT)
		return unknown_symbol(s, path, err, errlen);
	if (rc) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* An object named by file name that is neither loaded nor on the search
 * path may still be dlopen'ed by full path from anywhere: wait for it,
 * unless the name looks like a typo of a loaded object's. */
static bool may_load_later(const char *object)
{
	struct object_query q = { .want = object };

	if (strchr(object, '/'))
		return false;
	nearmatch_init(&q.near, object);
	kprobes_objects_foreach(query_object, &q);
	return !nearmatch_result(&q.near);
}

static int unknown_object(const char *object, char *err, size_t errlen)
{
	struct object_query q = { .want = object };
	char hint[300];

	nearmatch_init(&q.near, object);
	kprobes_objects_foreach(query_object, &q);
	snprintf(err, errlen, "unknown object '%s'%s", object,
		 nearmatch_hint(&q.near, hint, sizeof(hint)));
	return -ENXIO;
}

struct tp_collect {
	const struct probe_spec *spec;
	int idx;
	struct resolve_list *out;
	const char *self;
	int err;
	char msg[200];
};

static int collect_tracepoint(struct kprobes_tracepoint *tp, const char *object, void *arg)
{
	struct tp_collect *c = arg;
	const char *colon = strchr(c->spec->symbol, ':');
	char provider[128];
	const char *base = strrchr(object, '/');
	struct resolved r = { .spec = c->idx, .addr = (uintptr_t)tp };

	base = base ? base + 1 : object;
	snprintf(provider, sizeof(provider), "%.*s", (int)(colon - c->spec->symbol),
		 c->spec->symbol);
	if (!strcmp(base, c->self) || fnmatch(provider, tp->provider, 0) ||
	    fnmatch(colon + 1, tp->name, 0))
		return 0;
	for (int i = 0; i < c->spec->nargs; i++)
		if (c->spec->args[i].src >= tp->nargs) {
			snprintf(c->msg, sizeof(c->msg), "tracepoint %s:%s has %u argument%s: '%.120s'",
				 tp->provider, tp->name, tp->nargs, tp->nargs == 1 ? "" : "s",
				 c->spec->text);
			c->err = -EINVAL;
			return 1;
		}
	r.from_glob = spec_is_glob(c->spec);
	snprintf(r.name, sizeof(r.name), "%s:%s", tp->provider, tp->name);
	str_copy(r.object, sizeof(r.object), base);
	c->err = resolve_push(c->out, &r);
	return c->err;
}

/* tp:PROVIDER:NAME: the matching tracepoints of every loaded object; the
 * point's address is the tracepoint's descriptor. */
static int resolve_tracepoint(const struct probe_spec *s, int idx, struct resolve_list *out,
			      char *err, size_t errlen)
{
	struct tp_collect c = { s, idx, out, agent_self_basename(), 0, "" };
	int first = out->n, rc = kprobes_tracepoint_foreach(collect_tracepoint, &c);

	if (c.msg[0]) {
		snprintf(err, errlen, "%s", c.msg);
		return c.err;
	}
	if (rc < 0 || c.err) {
		rc = rc < 0 ? rc : c.err;
		snprintf(err, errlen, "cannot read the tracepoints: %s", strerror(-rc));
		return rc;
	}
	if (out->n == first) {
		snprintf(err, errlen, "no tracepoint matches 'tp:%s' in the loaded objects", s->symbol);
		return -ENOENT;
	}
	return 0;
}

/* A relative OBJECT path names a file from this process's directory (the
 * tool's, for a command it launched), and a path may be a symbolic link:
 * the symbol tables know objects by the absolute path they were loaded
 * from, or file name.  s, or *buf with the path made absolute and real. */
static const struct probe_spec *absolute_object(const struct probe_spec *s,
						struct probe_spec *buf)
{
	char path[PATH_MAX];

	/* a relative path, or a symbolic link (uprobe:/usr/bin/python3:f
	 * names python3.11, which is what the process maps) */
	if (!strchr(s->object, '/') || !realpath(s->object, path) || !strcmp(path, s->object) ||
	    strlen(path) >= sizeof(buf->object))
		return s;
	*buf = *s;
	memcpy(buf->object, path, strlen(path) + 1);
	return buf;
}

/* Whether the spec's object is loaded (*loaded), and the spec to resolve:
 * an object named by a path that the loader mapped under another name (a
 * symbolic link on the way: /lib is usr/lib on Debian, and a probe on
 * /lib/x86_64-linux-gnu/libc.so.6 reads back as /usr/lib/...) takes the
 * loader's name, which the symbol tables know it by.  s may be buf
 * already.  One walk of the loaded objects for both. */
static const struct probe_spec *loaded_name(const struct probe_spec *s, struct probe_spec *buf,
					    bool *loaded)
{
	char name[PATH_MAX];
	struct object_query q = { .want = s->object, .name = name, .namelen = sizeof(name) };

	*loaded = false;
	if (!s->object[0])
		return s;
	nearmatch_init(&q.near, s->object);
	kprobes_objects_foreach(query_object, &q);
	*loaded = q.found;
	if (!q.found || !strchr(s->object, '/') || !strcmp(name, s->object) ||
	    strlen(name) >= sizeof(buf->object))
		return s;
	if (s != buf)
		*buf = *s;
	memcpy(buf->object, name, strlen(name) + 1);
	return buf;
}

static int resolve_spec(const struct probe_spec *spec, int idx, struct resolve_list *out,
			char *deferred_path, size_t pathlen, char *err, size_t errlen,
			unsigned flags);

int agent_resolve(const struct probe_spec *spec, int idx, struct resolve_list *out,
		  char *deferred_path, size_t pathlen, char *err, size_t errlen, unsigned flags)
{
	int rc = resolve_spec(spec, idx, out, deferred_path, pathlen, err, errlen, flags);

	/* a symbol's -ENOENT: no such function (an unknown object is
	 * -ENXIO) */
	if (rc == -ENOENT && (flags & AGENT_RESOLVE_MISSING_OK) && spec->kind == SPEC_SYMBOL)
		return AGENT_RESOLVED_NOTHING;
	return rc;
}

static int resolve_spec(const struct probe_spec *spec, int idx, struct resolve_list *out,
			char *deferred_path, size_t pathlen, char *err, size_t errlen,
			unsigned flags)
{
	struct probe_spec abs;
	bool loaded;
	const struct probe_spec *s = loaded_name(absolute_object(spec, &abs), &abs, &loaded);

	if (spec_has_vars(s) || s->kind == SPEC_USDT) {
		/* The tool locates variables with DWARF and sends fetch plans. */
		snprintf(err, errlen, "'%.200s': variables by name and SDT probes must be resolved "
			 "by the kprobe tool", s->text);
		return -EINVAL;
	}
	if (s->kind == SPEC_TRACEPOINT)
		return resolve_tracepoint(s, idx, out, err, errlen);
	if (s->object[0] && !loaded) {
		int rc;

		if (!find_on_disk(s->object, deferred_path, pathlen)) {
			if (s->kind != SPEC_SYMBOL || !may_load_later(s->object))
				return unknown_object(s->object, err, errlen);
			/* Nothing to check its symbols against yet. */
			str_copy(deferred_path, pathlen, s->object);
			return 1;
		}
		rc = check_deferred(s, deferred_path, err, errlen);
		return rc ? rc : 1;
	}
	switch (s->kind) {
	case SPEC_SYMBOL:
		return resolve_symbol(s, idx, out, err, errlen, flags);
	case SPEC_ADDRESS:
		return resolve_address(s, idx, out, err, errlen);
	case SPEC_LINE:
		return agent_resolve_line(s, idx, out, err, errlen);
	case SPEC_TRACEPOINT:
	case SPEC_USDT:
		break;
	}
	return -EINVAL;
}
