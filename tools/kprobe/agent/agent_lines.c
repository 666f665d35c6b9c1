/* FILE:LINE probes through the DWARF line tables of the loaded objects.
 *
 * libdw comes from its static archive for the rest of the agent, but its
 * line tables need its per-thread allocator, which keeps its state in
 * local-exec TLS that a shared object cannot hold; so FILE:LINE loads
 * libdw.so privately (agent_object_open_private(): RTLD_LOCAL, out of the
 * program's symbol scope) the first time it is used. */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kprobes/symbols.h>

#include "agent.h"
#include "agent_resolve.h"
#include "debug_file.h"
#include "util.h"

#ifndef KP_LIBDW_SONAME
#define KP_LIBDW_SONAME "libdw.so.1"
#endif

struct object {
	char path[PATH_MAX];
	uintptr_t bias;
};

struct object_list {
	struct object *v;
	int n, cap;
};

static int list_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct object_list *l = arg;
	struct object *o;

	(void)size;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 32;
		struct object *v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	o = &l->v[l->n];
	if (!info->dlpi_name[0]) {
		/* The main executable: listed first by the loader. */
		ssize_t n = readlink("/proc/self/exe", o->path, sizeof(o->path) - 1);

		if (n <= 0 || l->n)
			return 0;
		o->path[n] = '\0';
	} else {
		snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
	}
	o->bias = info->dlpi_addr;
	l->n++;
	return 0;
}

/* What FILE:LINE needs of the private libdw.so. */
static struct {
	Dwarf *(*begin)(int fd, Dwarf_Cmd cmd);
	int (*end)(Dwarf *dw);
	int (*getsrc_file)(Dwarf *dw, const char *fname, int line, int col, Dwarf_Line ***lines,
			   size_t *nlines);
	int (*lineaddr)(Dwarf_Line *line, Dwarf_Addr *addr);
	int (*lineno)(Dwarf_Line *line, int *lineno);
	int (*beginstatement)(Dwarf_Line *line, bool *flag);
	Dwarf_Die *(*addrdie)(Dwarf *dw, Dwarf_Addr addr, Dwarf_Die *result);
	int (*getscopes)(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die **scopes);
	int (*tag)(Dwarf_Die *die);
	Dwarf_Off (*dieoffset)(Dwarf_Die *die);
} dw_api;

#define BIND(field, name) (*(void **)&dw_api.field = dlsym(h, name)) != NULL

static int load_libdw(char *err, size_t errlen)
{
	void *h;

	if (dw_api.begin)
		return 0;
	h = agent_object_open_private(KP_LIBDW_SONAME);
	if (!h) {
		snprintf(err, errlen, "FILE:LINE needs %s: %s", KP_LIBDW_SONAME, dlerror());
		return -ENOENT;
	}
	if (BIND(end, "dwarf_end") && BIND(getsrc_file, "dwarf_getsrc_file") &&
	    BIND(lineaddr, "dwarf_lineaddr") && BIND(lineno, "dwarf_lineno") &&
	    BIND(beginstatement, "dwarf_linebeginstatement") &&
	    BIND(addrdie, "dwarf_addrdie") && BIND(getscopes, "dwarf_getscopes") &&
	    BIND(tag, "dwarf_tag") && BIND(dieoffset, "dwarf_dieoffset") &&
	    BIND(begin, "dwarf_begin"))	/* last: it says "loaded" */
		return 0;
	dw_api.begin = NULL;
	snprintf(err, errlen, "%s lacks a function FILE:LINE needs", KP_LIBDW_SONAME);
	return -ENOENT;
}

/* One copy of the line's code: the function, or the inlined instance of
 * it, its rows fall in (identified by that DIE), and its first address. */
struct line_copy {
	Dwarf_Off scope;
	Dwarf_Addr addr;
};

/* The innermost function or inlined instance containing addr; 0 when the
 * debug information has none (the whole object is then one copy). */
static Dwarf_Off scope_of(Dwarf *dw, Dwarf_Addr addr)
{
	Dwarf_Die cudie, *scopes = NULL;
	Dwarf_Off off = 0;
	int n;

	if (!dw_api.addrdie(dw, addr, &cudie))
		return 0;
	n = dw_api.getscopes(&cudie, addr, &scopes);
	for (int i = 0; i < n; i++) {
		int tag = dw_api.tag(&scopes[i]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
			off = dw_api.dieoffset(&scopes[i]);
			break;
		}
	}
	free(scopes);
	return off;
}

/* Keeps the lowest address of each copy. */
static void note_row(struct line_copy *copies, size_t *ncopies, Dwarf_Off scope,
		     Dwarf_Addr addr)
{
	for (size_t i = 0; i < *ncopies; i++)
		if (copies[i].scope == scope) {
			if (addr < copies[i].addr)
				copies[i].addr = addr;
			return;
		}
	copies[(*ncopies)++] = (struct line_copy){ scope, addr };
}

/* Whether the row is one of file:line's, and if so its address and whether
 * it begins a statement. */
static bool line_row(Dwarf_Line *line, unsigned int want, Dwarf_Addr *addr, bool *stmt)
{
	int lineno = 0;

	*stmt = false;
	if (dw_api.lineaddr(line, addr) || dw_api.lineno(line, &lineno) ||
	    (unsigned int)lineno != want)
		return false;
	dw_api.beginstatement(line, stmt);
	return true;
}

/* The DWARF of the object open as fd at path, or of its separate debug
 * file (by build-id, else through .gnu_debuglink; *dfd is then its
 * descriptor, to close after dwarf_end()); NULL without any. */
static Dwarf *begin_dwarf(int fd, const char *path, int *dfd)
{
	char dpath[PATH_MAX];
	Dwarf *dw = dw_api.begin(fd, DWARF_C_READ);
	Elf *elf;

	*dfd = -1;
	if (dw)
		return dw;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && !debug_file_find(elf, path, dpath, sizeof(dpath)))
		*dfd = open(dpath, O_RDONLY | O_CLOEXEC);
	if (elf)
		elf_end(elf);
	if (*dfd >= 0)
		dw = dw_api.begin(*dfd, DWARF_C_READ);
	return dw;
}

/* One probe per copy of file:line in one object; returns the number added. */
static int lines_in(const struct object *o, const struct probe_spec *s, int idx,
		    struct resolve_list *out)
{
	Dwarf_Line **lines = NULL;
	struct line_copy *copies = NULL;
	size_t nlines = 0, ncopies = 0;
	bool any_stmt = false;
	int fd = open(o->path, O_RDONLY | O_CLOEXEC), added = 0, dfd = -1;
	Dwarf *dw = NULL;

	if (fd < 0)
		return 0;
	dw = begin_dwarf(fd, o->path, &dfd);
	if (!dw || dw_api.getsrc_file(dw, s->symbol, (int)s->line, 0, &lines, &nlines) ||
	    !(copies = calloc(nlines ? nlines : 1, sizeof(*copies))))
		goto out;
	/* Rows that begin a statement are where the compiler says the line
	 * starts; the others (a value computed early, an epilogue) may even
	 * lie in another scope.  Only when there are none, all rows count. */
	for (size_t i = 0; i < nlines; i++) {
		Dwarf_Addr a;
		bool stmt;

		if (line_row(lines[i], s->line, &a, &stmt) && stmt)
			any_stmt = true;
	}
	for (size_t i = 0; i < nlines; i++) {
		Dwarf_Addr a;
		bool stmt;

		if (line_row(lines[i], s->line, &a, &stmt) && (stmt || !any_stmt))
			note_row(copies, &ncopies, scope_of(dw, a), a);
	}
	for (size_t i = 0; i < ncopies; i++) {
		struct resolved r = { .spec = idx, .addr = (uintptr_t)copies[i].addr + o->bias };

		snprintf(r.name, sizeof(r.name), "%.100s:%u", path_base(s->symbol), s->line);
		str_copy(r.object, sizeof(r.object), path_base(o->path));
		if (resolve_push(out, &r))
			break;
		added++;
	}
out:
	free(copies);
	free(lines);
	if (dw)
		dw_api.end(dw);
	if (dfd >= 0)
		close(dfd);
	close(fd);
	return added;
}

int agent_resolve_line(const struct probe_spec *s, int idx, struct resolve_list *out,
		       char *err, size_t errlen)
{
	struct object_list objs = { 0 };
	int found = 0, rc = load_libdw(err, errlen);

	if (rc)
		return rc;
	agent_object_is_private("");	/* worked out once, outside the walk */
	kprobes_objects_foreach(list_object, &objs);
	for (int i = 0; i < objs.n; i++)
		/* The agent and what it loaded are not the program's code. */
		if (i == 0 || !agent_object_is_private(path_base(objs.v[i].path)))
			found += lines_in(&objs.v[i], s, idx, out);
	free(objs.v);
	if (!found) {
		snprintf(err, errlen, "no code for %s:%u in the debug information of the "
			 "loaded objects (built with -g?)", s->symbol, s->line);
		return -ENOENT;
	}
	return 0;
}
