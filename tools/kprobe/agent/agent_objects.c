/* Which loaded objects are there only for the agent: the agent itself and
 * what it loads privately (agent_object_open_private(): the instruction
 * decoder, libdw for FILE:LINE) with what those need, unless the program
 * uses them itself.  A symbol without an object never resolves into them:
 * they are not the program's, and the agent runs them while it registers
 * probes. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kprobes/symbols.h>

#include "agent.h"
#include "util.h"

#define MAX_OBJECTS 512
#define MAX_NEEDED 64

struct object {
	char name[128];			/* file name */
	char soname[128];
	int nneeded;
	char needed[MAX_NEEDED][128];
	bool from_program, from_agent;
};

struct objects {
	struct object *v;
	int n;
};

static void read_dynamic(struct object *o, const struct dl_phdr_info *info)
{
	const ElfW(Dyn) *dyn = NULL;
	const char *strtab = NULL;

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_STRTAB)
			/* The loader leaves .dynamic as linked: a vaddr, except
			 * in objects it relocated in place (above the bias). */
			strtab = (const char *)(d->d_un.d_ptr >= info->dlpi_addr ?
						d->d_un.d_ptr : info->dlpi_addr + d->d_un.d_ptr);
	if (!strtab)
		return;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_NEEDED && o->nneeded < MAX_NEEDED)
			str_copy(o->needed[o->nneeded++], sizeof(o->needed[0]),
				 path_base(strtab + d->d_un.d_val));
		else if (d->d_tag == DT_SONAME)
			str_copy(o->soname, sizeof(o->soname), strtab + d->d_un.d_val);
	}
}

static int list_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objects *l = arg;
	struct object *o;

	(void)size;
	if (l->n == MAX_OBJECTS)
		return 1;
	o = &l->v[l->n++];
	memset(o, 0, sizeof(*o));
	/* The loader lists the program first, without a name. */
	str_copy(o->name, sizeof(o->name), l->n == 1 ? "" : path_base(info->dlpi_name));
	read_dynamic(o, info);
	return 0;
}

static struct object *find(struct objects *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name) || !strcmp(l->v[i].soname, name))
			return &l->v[i];
	return NULL;
}

/* Marks o and everything it needs, transitively. */
static void mark(struct objects *l, struct object *o, bool program)
{
	bool *flag = program ? &o->from_program : &o->from_agent;

	if (*flag)
		return;
	*flag = true;
	for (int i = 0; i < o->nneeded; i++) {
		struct object *dep = find(l, o->needed[i]);

		if (dep)
			mark(l, dep, program);
	}
}

#define MAX_PRIVATE_ROOTS 4

/* The objects the agent loaded privately, by file name. */
static char private_roots[MAX_PRIVATE_ROOTS][128];
static int nroots;
static int nprivate = -1;	/* -1: the set below is to be worked out */

void *agent_object_open_private(const char *soname)
{
	/* Already loaded: the program's, which the agent merely uses. */
	void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
	struct link_map *lm = NULL;

	if (h)
		return h;
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && nroots < MAX_PRIVATE_ROOTS) {
		for (int i = 0; i < nroots; i++)
			if (!strcmp(private_roots[i], path_base(lm->l_name)))
				return h;
		str_copy(private_roots[nroots++], sizeof(private_roots[0]), path_base(lm->l_name));
		nprivate = -1;
	}
	return h;
}

bool agent_object_is_private(const char *name)
{
	static char private_names[MAX_OBJECTS][128];
	struct objects l;
	struct object *self;

	/* The set changes only when the agent loads something privately;
	 * objects the program loads later are the program's. */
	if (nprivate < 0) {
		l.v = calloc(MAX_OBJECTS, sizeof(*l.v));
		l.n = 0;
		if (!l.v)
			return false;
		kprobes_objects_foreach(list_object, &l);
		nprivate = 0;
		self = find(&l, agent_self_basename());
		if (l.n && self) {
			mark(&l, &l.v[0], true);
			mark(&l, self, false);
			for (int i = 0; i < nroots; i++) {
				struct object *root = find(&l, private_roots[i]);

				if (root)
					mark(&l, root, false);
			}
			for (int i = 0; i < l.n; i++)
				if (l.v[i].from_agent && !l.v[i].from_program)
					str_copy(private_names[nprivate++], sizeof(private_names[0]),
						 l.v[i].name);
		}
		free(l.v);
	}
	for (int i = 0; i < nprivate; i++)
		if (!strcmp(private_names[i], name))
			return true;
	return false;
}
