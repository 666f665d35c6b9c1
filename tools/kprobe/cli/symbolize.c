/* Addresses of a target process to function names (see symbolize.h). */
#include "symbolize.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf_file.h"
#include "shm.h"

#define MAX_LOADS 16

struct sym_entry {
	uint64_t value, size;
	char *name;
};

struct sym_object {
	char *path;
	struct elf_load loads[MAX_LOADS];
	int nloads;
	struct sym_entry *syms;		/* sorted by value */
	size_t nsyms, cap;
	bool read;
};

struct sym_mapping {
	uint64_t start, end, offset;
	struct sym_object *obj;
};

void symbolizer_init(struct symbolizer *z, pid_t pid)
{
	memset(z, 0, sizeof(*z));
	z->pid = pid;
}

static struct sym_object *object_for(struct symbolizer *z, const char *path)
{
	struct sym_object **v, *o;

	for (size_t i = 0; i < z->nobjs; i++)
		if (!strcmp(z->objs[i]->path, path))
			return z->objs[i];
	v = realloc(z->objs, (z->nobjs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	z->objs = v;
	o = calloc(1, sizeof(*o));
	if (!o || !(o->path = strdup(path))) {
		free(o);
		return NULL;
	}
	z->objs[z->nobjs++] = o;
	return o;
}

static bool overlaps_any(const struct sym_mapping *v, size_t n, const struct sym_mapping *m)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].start < m->end && m->start < v[i].end)
			return true;
	return false;
}

/* Appends m to *v (*n used, room for *cap); false when out of memory. */
static bool push_mapping(struct sym_mapping **v, size_t *n, size_t *cap,
			 const struct sym_mapping *m)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct sym_mapping *w = realloc(*v, c * sizeof(*w));

		if (!w)
			return false;
		*v = w;
		*cap = c;
	}
	(*v)[(*n)++] = *m;
	return true;
}

/* The executable mappings of /proc/PID/maps into *v (none when the
 * process is gone). */
static void read_maps(struct symbolizer *z, struct sym_mapping **v, size_t *n, size_t *cap)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)z->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], file[PATH_MAX];
		int got = sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &start, &end, perms,
				 &off, file);
		struct sym_mapping m = { start, end, off, NULL };

		if (got != 5 || perms[2] != 'x' || file[0] != '/')
			continue;
		m.obj = object_for(z, file);
		if (m.obj && !push_mapping(v, n, cap, &m))
			break;
	}
	fclose(f);
}

/* The segments the agent noted as the program loaded objects (session
 * memory, which the target can write: every field is checked), where
 * nothing in *v overlaps them: a library dlopen()ed and closed between two
 * reads of the maps still names its functions. */
static void add_noted(struct symbolizer *z, struct sym_mapping **v, size_t *n, size_t *cap)
{
	uint32_t count;

	if (!z->noted || !z->nnoted)
		return;
	count = __atomic_load_n(z->nnoted, __ATOMIC_ACQUIRE);
	if (count > KPS_OBJECTS)
		count = KPS_OBJECTS;
	for (uint32_t i = 0; i < count; i++) {
		const struct kps_object *o = &z->noted[i];
		char file[KPS_OBJECT_PATH];
		struct sym_mapping m;

		if (!__atomic_load_n(&o->ready, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&o->pid, __ATOMIC_RELAXED) != (uint32_t)z->pid)
			continue;
		m.start = __atomic_load_n(&o->start, __ATOMIC_RELAXED);
		m.end = __atomic_load_n(&o->end, __ATOMIC_RELAXED);
		m.offset = __atomic_load_n(&o->offset, __ATOMIC_RELAXED);
		memcpy(file, o->path, sizeof(file));
		if (!memchr(file, '\0', sizeof(file)) || file[0] != '/' || m.start >= m.end ||
		    m.end - m.start > (1ull << 40))
			continue;
		if (overlaps_any(*v, *n, &m))
			continue;
		m.obj = object_for(z, file);
		if (m.obj && !push_mapping(v, n, cap, &m))
			return;
	}
}

/* The mappings read before that are gone now, and that nothing in *v
 * overlaps, are kept after them: addresses a stack took in a library the
 * program has closed since still name its functions.  At most MAX_GONE of
 * them, the most recent first (a program loading and closing libraries
 * without end at new addresses must not make each read slower). */
#define MAX_GONE 1024

static void keep_unmapped(struct symbolizer *z, struct sym_mapping **v, size_t *n, size_t *cap)
{
	size_t now = *n;

	for (size_t i = 0; i < z->nmaps && *n - now < MAX_GONE; i++)
		if (!overlaps_any(*v, now, &z->maps[i]) && !push_mapping(v, n, cap, &z->maps[i]))
			return;
}

void symbolizer_use_noted(struct symbolizer *z, const struct kps_object *noted,
			  const uint32_t *nnoted)
{
	z->noted = noted;
	z->nnoted = nnoted;
}

void symbolizer_refresh(struct symbolizer *z)
{
	struct sym_mapping *v = NULL;
	size_t n = 0, cap = 0;

	read_maps(z, &v, &n, &cap);	/* none once the process is gone */
	add_noted(z, &v, &n, &cap);
	if (!n) {
		free(v);
		return;		/* what was known stays */
	}
	keep_unmapped(z, &v, &n, &cap);
	free(z->maps);
	z->maps = v;
	z->nmaps = n;
}

static int add_symbol(const char *name, uint64_t value, uint64_t size, void *arg)
{
	struct sym_object *o = arg;

	if (!value)
		return 0;
	if (o->nsyms == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 256;
		struct sym_entry *v = realloc(o->syms, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		o->syms = v;
		o->cap = cap;
	}
	o->syms[o->nsyms].name = strdup(name);
	if (!o->syms[o->nsyms].name)
		return -ENOMEM;
	o->syms[o->nsyms].value = value;
	o->syms[o->nsyms].size = size;
	o->nsyms++;
	return 0;
}

static int by_value(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;

	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	/* Bigger first: an alias of size 0 loses to the real one. */
	return x->size > y->size ? -1 : x->size < y->size;
}

static void object_read(struct sym_object *o)
{
	char debug[PATH_MAX];
	int n;

	if (o->read)
		return;
	o->read = true;
	n = elf_file_loads(o->path, o->loads, MAX_LOADS);
	o->nloads = n > 0 ? n : 0;
	elf_file_foreach_function_range(o->path, add_symbol, o);
	/* A stripped object's local functions, from its debug file when one
	 * is installed (the addresses are the same). */
	if (!elf_file_debug_path(o->path, debug, sizeof(debug)))
		elf_file_foreach_function_range(debug, add_symbol, o);
	if (o->nsyms > 1)
		qsort(o->syms, o->nsyms, sizeof(*o->syms), by_value);
}

/* The link-time address of file offset off, through the segment holding it. */
static bool file_vaddr(const struct sym_object *o, uint64_t off, uint64_t *vaddr)
{
	for (int i = 0; i < o->nloads; i++) {
		const struct elf_load *l = &o->loads[i];

		if (off >= l->offset && off < l->offset + l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return true;
		}
	}
	return false;
}

static const struct sym_entry *symbol_at(const struct sym_object *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->nsyms;
	const struct sym_entry *s;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->syms[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &o->syms[lo - 1];
	/* Among equal values, the first (biggest) one. */
	while (s > o->syms && s[-1].value == s->value)
		s--;
	return vaddr < s->value + (s->size ? s->size : 1) ? s : NULL;
}

static const struct sym_mapping *mapping_of(const struct symbolizer *z, uint64_t addr)
{
	for (size_t i = 0; i < z->nmaps; i++)
		if (addr >= z->maps[i].start && addr < z->maps[i].end)
			return &z->maps[i];
	return NULL;
}

int symbolizer_locate(struct symbolizer *z, uint64_t addr, struct sym_location *loc)
{
	const struct sym_mapping *m = mapping_of(z, addr);
	const struct sym_entry *s;

	memset(loc, 0, sizeof(*loc));
	if (!m) {
		symbolizer_refresh(z);
		m = mapping_of(z, addr);
	}
	if (!m)
		return -ENOENT;
	object_read(m->obj);
	loc->path = m->obj->path;
	if (!file_vaddr(m->obj, addr - m->start + m->offset, &loc->vaddr))
		return -ENOENT;
	s = symbol_at(m->obj, loc->vaddr);
	if (s) {
		loc->name = s->name;
		loc->offset = loc->vaddr - s->value;
	}
	return 0;
}

int symbolizer_lookup(struct symbolizer *z, uint64_t addr, char *name, size_t len,
		      uint64_t *offset)
{
	struct sym_location loc;

	if (symbolizer_locate(z, addr, &loc) || !loc.name)
		return -ENOENT;
	snprintf(name, len, "%s", loc.name);
	*offset = loc.offset;
	return 0;
}

void symbolizer_free(struct symbolizer *z)
{
	for (size_t i = 0; i < z->nobjs; i++) {
		for (size_t k = 0; k < z->objs[i]->nsyms; k++)
			free(z->objs[i]->syms[k].name);
		free(z->objs[i]->syms);
		free(z->objs[i]->path);
		free(z->objs[i]);
	}
	free(z->objs);
	free(z->maps);
	memset(z, 0, sizeof(*z));
}
