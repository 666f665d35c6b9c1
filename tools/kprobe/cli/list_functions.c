/* `kprobe list OBJECT [GLOB]` and `kprobe list -p PID [OBJECT] GLOB`: the
 * functions a probe can name, as `perf probe -F` and `bpftrace -l` list
 * them.  Read from the files on disk, so nothing is loaded into a process;
 * each line is a probe location ("OBJECT:FUNCTION", then the SDT probes as
 * "usdt:OBJECT:PROVIDER:NAME") as a PROBE takes it. */
#include "list_functions.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dwarf_vars.h"
#include "elf_file.h"
#include "escape.h"
#include "kp_arch.h"
#include "usdt.h"
#include "util.h"

#define AGENT_FILE "libkprobe-agent.so"

struct names {
	char **v;
	size_t n, cap;
	const char *glob;	/* NULL: every function */
	int err;
};

static int collect_name(const char *name, void *arg)
{
	struct names *l = arg;

	if (l->glob && fnmatch(l->glob, name, 0))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->err = -ENOMEM;
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n] = strdup(name);
	if (!l->v[l->n]) {
		l->err = -ENOMEM;
		return 1;
	}
	l->n++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct sdt_print {
	const char *label, *glob;
	int printed;
};

/* "usdt:label:provider:name" for an SDT probe whose "provider:name" or
 * name matches the glob, or its "usdt:provider:name" or the line printed
 * ('usdt:*' lists them all). */
static int print_sdt(const struct usdt_probe *p, void *arg)
{
	struct sdt_print *sp = arg;
	char full[160], probe[168], line[PATH_MAX + 176];

	snprintf(full, sizeof(full), "%s:%s", p->provider, p->name);
	snprintf(probe, sizeof(probe), "usdt:%s", full);
	snprintf(line, sizeof(line), "usdt:%s:%s", sp->label, full);
	if (sp->glob && fnmatch(sp->glob, full, 0) && fnmatch(sp->glob, p->name, 0) &&
	    fnmatch(sp->glob, probe, 0) && fnmatch(sp->glob, line, 0))
		return 0;
	fputs("usdt:", stdout);
	text_escape_to(stdout, sp->label, strlen(sp->label));
	putchar(':');
	text_escape_to(stdout, full, strlen(full));
	putchar('\n');
	sp->printed++;
	return 0;
}

/* Prints "label:function" for the file's matching functions, sorted, each
 * once (a name in both symbol tables, or aliased, appears once); returns
 * how many, or -errno. */
static int print_functions(const char *path, const char *label, const char *glob)
{
	struct names l = { .glob = glob };
	int rc = elf_file_foreach_function(path, collect_name, &l), printed = 0;

	if (rc >= 0 && l.err)
		rc = l.err;
	if (rc >= 0) {
		qsort(l.v, l.n, sizeof(*l.v), by_name);
		for (size_t i = 0; i < l.n; i++)
			if (!i || strcmp(l.v[i], l.v[i - 1])) {
				/* File and symbol names are the target's owner's:
				 * escaped for the terminal. */
				text_escape_to(stdout, label, strlen(label));
				putchar(':');
				text_escape_to(stdout, l.v[i], strlen(l.v[i]));
				putchar('\n');
				printed++;
			}
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	if (rc >= 0) {
		/* Then its SDT probes, as usdt: PROBEs name them. */
		struct sdt_print sp = { label, glob, 0 };

		usdt_foreach(path, print_sdt, &sp);
		printed += sp.printed;
	}
	return rc < 0 ? rc : printed;
}

static bool is_elf_object(const char *path)
{
	uint64_t vaddr;

	return access(path, R_OK) == 0 && elf_file_first_load(path, &vaddr) == 0;
}

static bool try_dirs(const char *list, const char *name, char *out, size_t len)
{
	char copy[4096], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", list);
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", dir, name);
		if (is_elf_object(out))
			return true;
	}
	return false;
}

/* The file a name stands for: a path as it is; a file name where the
 * dynamic loader looks (LD_LIBRARY_PATH, then the system directories),
 * then, for programs, on PATH. */
static bool find_object(const char *name, char *out, size_t len)
{
	static const char system_dirs[] = "/lib/" KP_MULTIARCH ":/usr/lib/" KP_MULTIARCH ":"
					  "/lib64:/usr/lib64:/lib:/usr/lib:/usr/local/lib";
	const char *llp = getenv("LD_LIBRARY_PATH"), *path = getenv("PATH");

	if (strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return is_elf_object(out);
	}
	return (llp && try_dirs(llp, name, out, len)) || try_dirs(system_dirs, name, out, len) ||
	       (path && try_dirs(path, name, out, len));
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The executable file mappings of a process, in address order, each once.
 * The agent and what only it uses are not the program's: left out. */
struct mapped {
	char (*path)[PATH_MAX];
	int n, cap;
};

static bool seen_path(const struct mapped *m, const char *path)
{
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->path[i], path))
			return true;
	return false;
}

static int read_maps(pid_t pid, struct mapped *m)
{
	char file[64], line[PATH_MAX + 128];
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/maps", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char perms[8], *path = strchr(line, '/');
		size_t len;

		if (sscanf(line, "%*s %7s", perms) != 1 || !strchr(perms, 'x') || !path)
			continue;
		len = strcspn(path, "\n");
		path[len] = '\0';
		if (len > 10 && !strcmp(path + len - 10, " (deleted)"))
			path[len - 10] = '\0';
		if (!strcmp(base_name(path), AGENT_FILE) || seen_path(m, path))
			continue;
		if (m->n == m->cap) {
			int cap = m->cap ? m->cap * 2 : 32;
			void *v = realloc(m->path, (size_t)cap * sizeof(*m->path));

			if (!v) {
				fclose(f);
				return -ENOMEM;
			}
			m->path = v;
			m->cap = cap;
		}
		snprintf(m->path[m->n++], PATH_MAX, "%s", path);
	}
	fclose(f);
	return 0;
}

static bool object_matches(const char *path, const char *want)
{
	return !strcmp(path, want) || !strcmp(base_name(path), want);
}

static int list_process(const struct cli_opts *o)
{
	struct mapped m = { 0 };
	const char *object = o->list_object, *glob = o->list_glob;
	char proc_path[PATH_MAX + 32];
	int rc = read_maps(o->pid, &m), found = 0;
	bool named = false;

	if (rc)
		cli_die(EXIT_FAIL, "cannot read the mappings of process %d: %s", (int)o->pid,
			strerror(-rc));
	/* An object of the process by its path or file name, or by bpftrace's
	 * short library name ("libc": the libc.so.6 it maps). */
	for (int i = 0; object && !named && i < m.n; i++)
		named = object_matches(m.path[i], object);
	for (int i = 0; object && !named && !strchr(object, '/') && i < m.n; i++)
		if (short_library_matches(base_name(m.path[i]), object)) {
			object = m.path[i];
			named = true;
		}
	/* One word: an object of the process if one has that name, else a
	 * glob over all of them. */
	if (object && !glob && !named) {
		glob = object;
		object = NULL;
	}
	if (object && !named)
		cli_die(EXIT_BAD, "no object '%s' is loaded in process %d", object, (int)o->pid);
	for (int i = 0; i < m.n; i++) {
		if (object && !object_matches(m.path[i], object))
			continue;
		/* Through /proc: the file the process mapped, even in another
		 * mount namespace or since replaced on disk. */
		snprintf(proc_path, sizeof(proc_path), "/proc/%d/root%s", (int)o->pid, m.path[i]);
		rc = print_functions(access(proc_path, R_OK) ? m.path[i] : proc_path,
				     base_name(m.path[i]), glob);
		if (rc > 0)
			found += rc;
	}
	free(m.path);
	fflush(stdout);
	if (!found && glob)
		cli_die(EXIT_BAD, "no function matches '%s' in process %d", glob, (int)o->pid);
	return 0;
}

static int list_file(const struct cli_opts *o)
{
	char path[PATH_MAX];
	int rc;

	if (!find_object(o->list_object, path, sizeof(path)) &&
	    cli_short_library(o->list_object, path, sizeof(path)))
		cli_die(EXIT_BAD, "no ELF object '%s'%s", o->list_object,
			strchr(o->list_object, '/') ? "" :
			" on the library search path or PATH");
	rc = print_functions(path, o->list_object, o->list_glob);
	fflush(stdout);
	if (rc < 0)
		cli_die(EXIT_FAIL, "cannot read %s: %s", path, strerror(-rc));
	if (!rc && o->list_glob)
		cli_die(EXIT_BAD, "no function matches '%s' in %s", o->list_glob, o->list_object);
	return 0;
}

int list_functions_run(const struct cli_opts *o)
{
	return o->pid ? list_process(o) : list_file(o);
}
