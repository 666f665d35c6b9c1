/* FILE:LINE probes through the DWARF line tables of the loaded objects
 * (elfutils libdw). */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_resolve.h"
#include "elf/symbols.h"
#include "util.h"
#include "os/linux/loader.h"

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

static bool seen(const struct resolve_list *l, int from, uintptr_t addr)
{
	for (int i = from; i < l->n; i++)
		if (l->v[i].addr == addr)
			return true;
	return false;
}

/* Line records of one object for file:line; returns the number added. */
static int lines_in(const struct object *o, const struct probe_spec *s, int idx,
		    struct resolve_list *out, int first)
{
	Dwarf_Line **lines = NULL;
	size_t nlines = 0;
	int fd = open(o->path, O_RDONLY | O_CLOEXEC), added = 0;
	Elf *elf = NULL;
	Dwarf *dw = NULL;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf)
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!dw || dwarf_getsrc_file(dw, s->symbol, (int)s->line, 0, &lines, &nlines))
		goto out;
	for (size_t i = 0; i < nlines; i++) {
		struct resolved r = { .spec = idx };
		Dwarf_Addr a;
		int lineno = 0;

		if (dwarf_lineaddr(lines[i], &a) || dwarf_lineno(lines[i], &lineno) ||
		    (unsigned int)lineno != s->line)
			continue;
		r.addr = (uintptr_t)a + o->bias;
		if (seen(out, first, r.addr))
			continue;
		snprintf(r.name, sizeof(r.name), "%.100s:%u", path_base(s->symbol), s->line);
		str_copy(r.object, sizeof(r.object), path_base(o->path));
		if (resolve_push(out, &r))
			break;
		added++;
	}
	free(lines);
out:
	if (dw)
		dwarf_end(dw);
	if (elf)
		elf_end(elf);
	close(fd);
	return added;
}

int agent_resolve_line(const struct probe_spec *s, int idx, struct resolve_list *out,
		       char *err, size_t errlen)
{
	struct object_list objs = { 0 };
	int first = out->n, found = 0;

	kp_dl_iterate_phdr(list_object, &objs);
	for (int i = 0; i < objs.n; i++)
		found += lines_in(&objs.v[i], s, idx, out, first);
	free(objs.v);
	if (!found) {
		snprintf(err, errlen, "no code for %s:%u in the debug information of the "
			 "loaded objects (built with -g?)", s->symbol, s->line);
		return -ENOENT;
	}
	return 0;
}
