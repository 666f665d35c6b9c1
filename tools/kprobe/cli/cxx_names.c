/* C++ names in PROBEs (see cxx_names.h): the object's mangled function
 * symbols demangled with the C++ runtime's __cxa_demangle(), matched
 * against the name as the user wrote it. */
#include "cxx_names.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dwarf_vars.h"
#include "elf_file.h"

/* The C++ runtime's demangler (libstdc++, the Itanium ABI). */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define MAX_MATCHES 64

struct cxx_match {
	const char *pattern;	/* the user's name or glob, no spaces */
	char *mangled[MAX_MATCHES];
	char *demangled[MAX_MATCHES];
	uint64_t value[MAX_MATCHES];
	int n;
	bool too_many;
	bool one_per_function;	/* aliases of a function are one match */
};

bool cxx_looks_cxx(const char *sym)
{
	return strstr(sym, "::") || strchr(sym, '(');
}

/* s without its spaces, into out. */
static void squeeze(const char *s, char *out, size_t len)
{
	size_t o = 0;

	for (; *s && o + 1 < len; s++)
		if (*s != ' ')
			out[o++] = *s;
	out[o] = '\0';
}

/* The qualified name without the return type a template's demangled
 * name starts with and without the parameter list: between the last
 * top-level space before the '(' that opens the parameters and that '('
 * (templates nest, so only what is outside <...> counts). */
static void qualified_name(const char *full, char *out, size_t len)
{
	const char *open = NULL, *start = full;
	int depth = 0;

	for (const char *p = full; *p && !open; p++) {
		if (*p == '<')
			depth++;
		else if (*p == '>' && depth)
			depth--;
		else if (*p == '(' && !depth && p > full)
			open = p;
		else if (*p == ' ' && !depth)
			start = p + 1;
	}
	if (!open)
		open = full + strlen(full);
	if (start > open)
		start = full;
	snprintf(out, len, "%.*s", (int)(open - start), start);
}

char *cxx_demangle(const char *name)
{
	int status = 0;
	char *dem;

	if (strncmp(name, "_Z", 2))
		return NULL;
	dem = __cxa_demangle(name, NULL, NULL, &status);
	if (dem && status) {
		free(dem);
		return NULL;
	}
	return dem;
}

static int offer(const char *name, uint64_t value, uint64_t size, void *arg)
{
	struct cxx_match *m = arg;
	char squeezed[1024], qual[1024];
	char *dem = cxx_demangle(name);

	(void)size;
	if (!dem)
		return 0;
	qualified_name(dem, qual, sizeof(qual));
	squeeze(qual, qual, sizeof(qual));
	squeeze(dem, squeezed, sizeof(squeezed));
	if (fnmatch(m->pattern, qual, 0) && fnmatch(m->pattern, squeezed, 0)) {
		free(dem);
		return 0;
	}
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->mangled[i], name) ||
		    /* a constructor's or destructor's complete and base
		     * object symbols (C1, C2) at one address: one function,
		     * which the user cannot tell apart by its name */
		    (m->one_per_function && m->value[i] == value && !strcmp(m->demangled[i], dem))) {
			free(dem);
			return 0;	/* in both symbol tables */
		}
	if (m->n == MAX_MATCHES) {
		m->too_many = true;
		free(dem);
		return 1;
	}
	m->mangled[m->n] = strdup(name);
	m->value[m->n] = value;
	m->demangled[m->n++] = dem;
	return 0;
}

static void add_probes(struct cli_opts *o, int i, struct cxx_match *m)
{
	struct probe_spec orig = o->specs[i];

	for (int k = 0; k < m->n; k++) {
		struct probe_spec *out = k ? &o->specs[o->nspecs] : &o->specs[i];
		char err[600];

		if (k && o->nspecs == KPROBE_MAX_SPECS)
			cli_die(EXIT_BAD, "too many probes (at most %d)", KPROBE_MAX_SPECS);
		if (!m->mangled[k] || strlen(m->mangled[k]) >= sizeof(out->symbol))
			cli_die(EXIT_BAD, "'%s': a mangled name too long to probe", orig.text);
		*out = orig;
		snprintf(out->symbol, sizeof(out->symbol), "%s", m->mangled[k]);
		/* the name as the user wrote it: a return probe's with %return */
		snprintf(out->label, sizeof(out->label), "%s%s", m->demangled[k],
			 orig.is_return ? "%return" : "");
		if (spec_format(out) && spec_too_long(out, err, sizeof(err)))
			cli_die(EXIT_BAD, "%s", err);
		if (k)
			o->nspecs++;
	}
}

void cxx_names_resolve(struct cli_opts *o)
{
	int nspecs = o->nspecs;

	for (int i = 0; i < nspecs; i++) {
		struct probe_spec *s = &o->specs[i];
		struct cxx_match m = { 0 };
		char path[PATH_MAX], err[PATH_MAX + 128], pattern[512];

		if (s->kind != SPEC_SYMBOL || !cxx_looks_cxx(s->symbol) ||
		    cli_object_path(o, s, path, sizeof(path), err, sizeof(err)))
			continue;
		squeeze(s->symbol, pattern, sizeof(pattern));
		m.pattern = pattern;
		m.one_per_function = true;
		elf_file_foreach_function_range(path, offer, &m);
		if (m.too_many)
			cli_die(EXIT_BAD, "'%s' matches more than %d C++ functions: narrow it",
				s->text, MAX_MATCHES);
		if (m.n)
			add_probes(o, i, &m);
		for (int k = 0; k < m.n; k++) {
			free(m.mangled[k]);
			free(m.demangled[k]);
		}
	}
}

int cxx_names_expand(const struct cli_opts *o, const struct probe_spec *s, struct probe_spec *out,
		     int max)
{
	struct cxx_match m = { 0 };
	char path[PATH_MAX], err[PATH_MAX + 128], pattern[512];
	int n = 0;

	if (cli_object_path(o, s, path, sizeof(path), err, sizeof(err)))
		cli_die(EXIT_BAD, "%s", err);
	squeeze(s->symbol, pattern, sizeof(pattern));
	m.pattern = pattern;
	elf_file_foreach_function_range(path, offer, &m);
	if (m.too_many || m.n > max)
		n = -1;
	for (int k = 0; k < m.n; k++) {
		if (n >= 0 && strlen(m.mangled[k]) < sizeof(out[n].symbol)) {
			out[n] = *s;
			snprintf(out[n].symbol, sizeof(out[n].symbol), "%s", m.mangled[k]);
			spec_format(&out[n]);
			n++;
		}
		free(m.mangled[k]);
		free(m.demangled[k]);
	}
	return n;
}
