/* Symbols of the ELF objects loaded in this process.
 *
 * One cache entry per loaded object, keyed by (path, load bias). Entries are
 * created when dl_iterate_phdr() shows a new object, hold only the object's
 * executable segments until a lookup needs more, and are freed when the object
 * is no longer loaded. Symbol tables are read once per object with libelf and
 * turned into two sorted arrays (by name and by address) whose strings are our
 * own copies, so no file stays open or mapped between calls. */

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "elf/cache.h"
#include "elf/objpath.h"
#include "elf/symbols.h"
#include "os/linux/loader.h"

/* A function symbol, at its runtime address. */
struct kfunc {
	uintptr_t addr;
	size_t size;
	const char *name;
};

/* An executable PT_LOAD segment, at its runtime address. */
struct kseg {
	uintptr_t start;
	size_t size;
};

struct kobj {
	char *path;
	const char *basename;
	uintptr_t bias;
	bool is_main;
	bool is_vdso;
	bool keep;                /* scratch flag of rescan() */
	struct kseg *segs;
	size_t nsegs;

	/* Filled by kobj_load_symbols() on first use. */
	bool syms_loaded;
	char *names;              /* every distinct name, NUL-terminated, back to back */
	struct kfunc *by_name;    /* every (name, addr), by name, best first among equals */
	size_t nnames;
	struct kfunc *by_addr;    /* one per address (the preferred alias), by address */
	uintptr_t *max_end;       /* max_end[i]: highest end among by_addr[0..i] */
	size_t naddrs;

	/* Filled by kobj_load_fdes() on first use. */
	bool fdes_loaded;
	struct kfde *fdes;
	size_t nfdes;
};

/* Recursive so that a ksym_foreach() callback may look up other symbols. */
static pthread_mutex_t cache_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct kobj **objs;        /* main executable first, then dl_iterate_phdr order */
static size_t nobjs;
static unsigned long long seen_adds, seen_subs;
static bool scanned;
static bool libelf_ready;
static unsigned foreach_depth;    /* > 0 while ksym_foreach() runs callbacks */

/* ---- Opening an object's ELF image ---- */

struct elf_file {
	int fd;
	Elf *elf;
	void *image;    /* our copy of the vDSO */
};

/* The vDSO has no file; its whole image, section headers included, is mapped. */
static size_t vdso_image_size(const ElfW(Ehdr) *eh)
{
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	size_t size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;

	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > size)
			size = ph[i].p_offset + ph[i].p_filesz;
	return size;
}

/* libelf is given a private copy: it must never write to (or keep pointers
 * into) the kernel's read-only mapping. */
static int vdso_open(struct elf_file *f)
{
	const ElfW(Ehdr) *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	size_t size;

	if (!eh)
		return -ENOENT;
	size = vdso_image_size(eh);
	f->image = malloc(size);
	if (!f->image)
		return -ENOMEM;
	memcpy(f->image, eh, size);
	f->elf = elf_memory(f->image, size);
	return f->elf ? 0 : -ENOEXEC;
}

static void elf_file_close(struct elf_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	free(f->image);
}

static int elf_file_open(const struct kobj *o, struct elf_file *f)
{
	/* /proc/self/exe still opens when the executable was replaced or deleted. */
	const char *path = o->is_main ? "/proc/self/exe" : o->path;
	int err;

	*f = (struct elf_file){ .fd = -1 };
	if (o->is_vdso) {
		err = vdso_open(f);
		goto out;
	}
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0) {
		err = -errno;
		goto out;
	}
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	err = f->elf && elf_kind(f->elf) == ELF_K_ELF ? 0 : -ENOEXEC;
out:
	if (err)
		elf_file_close(f);
	return err;
}

/* ---- Reading symbol tables ---- */

struct rawsym {
	const char *name;    /* into the Elf's string table until copied */
	uintptr_t addr;
	size_t size;
	bool local;          /* STB_LOCAL */
	bool hidden;         /* a non-default version (name@V, not name@@V) */
};

struct raw_vec {
	struct rawsym *v;
	size_t n, cap;
};

static int raw_push(struct raw_vec *vec, const struct rawsym *sym)
{
	if (vec->n == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 1024;
		struct rawsym *v = realloc(vec->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		vec->v = v;
		vec->cap = cap;
	}
	vec->v[vec->n++] = *sym;
	return 0;
}

static bool is_function(const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
	       sym->st_shndx != SHN_UNDEF && sym->st_value;
}

/* Appends the defined functions of one SHT_SYMTAB/SHT_DYNSYM section. versym
 * is .gnu.version for .dynsym (NULL otherwise). */
static int collect_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr,
			   Elf_Data *versym, uintptr_t bias, struct raw_vec *vec)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = shdr->sh_entsize ? shdr->sh_size / shdr->sh_entsize : 0;

	for (size_t i = 1; data && i < count; i++) {
		struct rawsym raw;
		GElf_Versym ver;
		GElf_Sym sym;
		int err;

		if (!gelf_getsym(data, (int)i, &sym) || !is_function(&sym))
			continue;
		raw.name = elf_strptr(elf, shdr->sh_link, sym.st_name);
		if (!raw.name || !raw.name[0])
			continue;
		raw.addr = sym.st_value + bias;
		raw.size = sym.st_size;
		raw.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
		raw.hidden = versym && gelf_getversym(versym, (int)i, &ver) &&
			     (ver & 0x8000);
		err = raw_push(vec, &raw);
		if (err)
			return err;
	}
	return 0;
}

static Elf_Data *find_versym(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym)
			return elf_getdata(scn, NULL);
	return NULL;
}

/* Both tables are read: .symtab adds local functions, .dynsym is all that is
 * left in a stripped object. Duplicates are removed when indexing. */
static int collect_symbols(Elf *elf, uintptr_t bias, struct raw_vec *vec)
{
	Elf_Data *versym = find_versym(elf);
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int err = 0;

	while (!err && (scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &shdr))
			continue;
		if (shdr.sh_type == SHT_SYMTAB)
			err = collect_section(elf, scn, &shdr, NULL, bias, vec);
		else if (shdr.sh_type == SHT_DYNSYM)
			err = collect_section(elf, scn, &shdr, versym, bias, vec);
	}
	return err;
}

/* ---- Indexing ---- */

/* Among symbols of one name, what a lookup by name should return first:
 * the default version, a global, one with a size. */
static int name_rank(const struct rawsym *s)
{
	return s->hidden << 2 | s->local << 1 | !s->size;
}

static int cmp_by_name(const void *a, const void *b)
{
	const struct rawsym *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (name_rank(x) != name_rank(y))
		return name_rank(x) - name_rank(y);
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Among aliases of one address, the name an address lookup reports: a global,
 * the one with fewest leading underscores ("malloc", not "__libc_malloc"). */
static int cmp_by_addr(const void *a, const void *b)
{
	const struct rawsym *x = a, *y = b;
	size_t ux = strspn(x->name, "_"), uy = strspn(y->name, "_");
	size_t lx = strlen(x->name), ly = strlen(y->name);

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->local != y->local)
		return x->local - y->local;
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->hidden != y->hidden)
		return x->hidden - y->hidden;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Removes repeated (name, addr) pairs, e.g. a function in both .symtab and
 * .dynsym, keeping the first (best ranked). vec must be sorted by name. */
static void dedupe_names(struct raw_vec *vec)
{
	size_t out = 0, run = 0;

	for (size_t i = 0; i < vec->n; i++) {
		bool dup = false;

		if (out && strcmp(vec->v[out - 1].name, vec->v[i].name))
			run = out;
		for (size_t j = run; j < out && !dup; j++)
			dup = vec->v[j].addr == vec->v[i].addr;
		if (!dup)
			vec->v[out++] = vec->v[i];
	}
	vec->n = out;
}

/* Copies the names into one block owned by o and repoints vec at the copies;
 * equal names (adjacent, vec is sorted by name) share one copy. */
static int copy_names(struct kobj *o, struct raw_vec *vec)
{
	size_t total = 0;
	char *p;

	for (size_t i = 0; i < vec->n; i++)
		if (!i || strcmp(vec->v[i - 1].name, vec->v[i].name))
			total += strlen(vec->v[i].name) + 1;
	o->names = p = malloc(total ? total : 1);
	if (!o->names)
		return -ENOMEM;
	for (size_t i = 0; i < vec->n; i++) {
		if (i && !strcmp(vec->v[i - 1].name, vec->v[i].name)) {
			vec->v[i].name = vec->v[i - 1].name;
			continue;
		}
		size_t len = strlen(vec->v[i].name) + 1;

		memcpy(p, vec->v[i].name, len);
		vec->v[i].name = p;
		p += len;
	}
	return 0;
}

static int build_name_index(struct kobj *o, struct raw_vec *vec)
{
	o->by_name = malloc((vec->n ? vec->n : 1) * sizeof(*o->by_name));
	if (!o->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < vec->n; i++)
		o->by_name[i] = (struct kfunc){ vec->v[i].addr, vec->v[i].size,
						vec->v[i].name };
	o->nnames = vec->n;
	return 0;
}

/* One entry per address: the preferred alias, with the largest size any alias
 * gives when the preferred one has none. Reorders vec. */
static int build_addr_index(struct kobj *o, struct raw_vec *vec)
{
	size_t n = 0;

	qsort(vec->v, vec->n, sizeof(*vec->v), cmp_by_addr);
	o->by_addr = malloc((vec->n ? vec->n : 1) * sizeof(*o->by_addr));
	o->max_end = malloc((vec->n ? vec->n : 1) * sizeof(*o->max_end));
	if (!o->by_addr || !o->max_end)
		return -ENOMEM;
	for (size_t i = 0; i < vec->n; i++) {
		const struct rawsym *s = &vec->v[i];

		if (n && o->by_addr[n - 1].addr == s->addr) {
			if (!o->by_addr[n - 1].size)
				o->by_addr[n - 1].size = s->size;
			continue;
		}
		o->by_addr[n] = (struct kfunc){ s->addr, s->size, s->name };
		o->max_end[n] = s->addr + s->size;
		if (n && o->max_end[n - 1] > o->max_end[n])
			o->max_end[n] = o->max_end[n - 1];
		n++;
	}
	o->naddrs = n;
	return 0;
}

static int build_indexes(struct kobj *o, struct raw_vec *vec)
{
	int err;

	qsort(vec->v, vec->n, sizeof(*vec->v), cmp_by_name);
	dedupe_names(vec);
	err = copy_names(o, vec);
	if (!err)
		err = build_name_index(o, vec);
	if (!err)
		err = build_addr_index(o, vec);
	return err;
}

static void kobj_drop_symbols(struct kobj *o)
{
	free(o->names);
	free(o->by_name);
	free(o->by_addr);
	free(o->max_end);
	o->names = NULL;
	o->by_name = o->by_addr = NULL;
	o->max_end = NULL;
	o->nnames = o->naddrs = 0;
}

/* Fills o's symbol indexes once. An object whose file cannot be read simply
 * has no symbols; only running out of memory is an error (and is retried). */
static int kobj_load_symbols(struct kobj *o)
{
	struct raw_vec vec = { 0 };
	struct elf_file f;
	int err;

	if (o->syms_loaded)
		return 0;
	err = elf_file_open(o, &f);
	if (err)
		goto out;
	err = collect_symbols(f.elf, o->bias, &vec);
	if (!err)
		err = build_indexes(o, &vec);
	elf_file_close(&f);
	free(vec.v);
	if (err)
		kobj_drop_symbols(o);
out:
	if (err == -ENOMEM)
		return err;
	o->syms_loaded = true;
	return 0;
}

static int kobj_load_fdes(struct kobj *o)
{
	struct elf_file f;
	int err;

	if (o->fdes_loaded)
		return 0;
	err = elf_file_open(o, &f);
	if (err)
		goto out;
	err = kfde_table_build(f.elf, &o->fdes, &o->nfdes);
	elf_file_close(&f);
out:
	if (err == -ENOMEM)
		return err;
	o->fdes_loaded = true;
	return 0;
}

/* ---- Searching one object ---- */

static const struct kfunc *kobj_find_name(const struct kobj *o, const char *name)
{
	size_t lo = 0, hi = o->nnames;

	/* First of the equal names: the best ranked one. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(o->by_name[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < o->nnames && !strcmp(o->by_name[lo].name, name))
		return &o->by_name[lo];
	return NULL;
}

/* Number of by_addr entries starting at or before addr. */
static size_t count_starting_by(const struct kobj *o, uintptr_t addr)
{
	size_t lo = 0, hi = o->naddrs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->by_addr[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct kfunc *kobj_func_at(const struct kobj *o, uintptr_t addr)
{
	size_t n = count_starting_by(o, addr);

	return n && o->by_addr[n - 1].addr == addr ? &o->by_addr[n - 1] : NULL;
}

/* The innermost sized symbol containing addr. Symbols may nest (an assembly
 * entry point inside a larger function), so the search walks back while some
 * earlier symbol still reaches past addr, which max_end tells. */
static const struct kfunc *kobj_func_containing(const struct kobj *o, uintptr_t addr)
{
	for (size_t i = count_starting_by(o, addr); i > 0 && o->max_end[i - 1] > addr; i--) {
		const struct kfunc *f = &o->by_addr[i - 1];

		if (addr < f->addr + f->size)
			return f;
	}
	return NULL;
}

/* ---- The object list ---- */

static const char *exe_path(void)
{
	static char path[PATH_MAX];
	ssize_t len;

	if (path[0])
		return path;
	len = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (len <= 0)
		return "/proc/self/exe";
	path[len] = '\0';
	return path;
}

static void kobj_free(struct kobj *o)
{
	kobj_drop_symbols(o);
	free(o->fdes);
	free(o->segs);
	free(o->path);
	free(o);
}

static bool in_load_segment(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start && addr - start < ph->p_memsz)
			return true;
	}
	return false;
}

static int copy_exec_segments(struct kobj *o, const struct dl_phdr_info *info)
{
	o->segs = calloc(info->dlpi_phnum ? info->dlpi_phnum : 1, sizeof(*o->segs));
	if (!o->segs)
		return -ENOMEM;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			o->segs[o->nsegs++] = (struct kseg){
				info->dlpi_addr + ph->p_vaddr, ph->p_memsz };
	}
	return 0;
}

static struct kobj *kobj_new(const struct dl_phdr_info *info, const char *path,
			     bool is_main)
{
	uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
	struct kobj *o = calloc(1, sizeof(*o));
	const char *slash;

	if (!o)
		return NULL;
	o->path = strdup(path);
	if (!o->path || copy_exec_segments(o, info))
		goto fail;
	slash = strrchr(o->path, '/');
	o->basename = slash ? slash + 1 : o->path;
	o->bias = info->dlpi_addr;
	o->is_main = is_main;
	o->is_vdso = vdso && in_load_segment(info, vdso);
	return o;
fail:
	kobj_free(o);
	return NULL;
}

/* A full path or a file name, given as the first len bytes of name. */
static bool kobj_named(const struct kobj *o, const char *name, size_t len)
{
	return (!strncmp(o->path, name, len) && !o->path[len]) ||
	       (!strncmp(o->basename, name, len) && !o->basename[len]);
}

static struct kobj *object_named(const char *name, size_t len)
{
	for (size_t i = 0; i < nobjs; i++)
		if (kobj_named(objs[i], name, len))
			return objs[i];
	return NULL;
}

static struct kobj *object_at(uintptr_t addr, const struct kseg **seg)
{
	for (size_t i = 0; i < nobjs; i++) {
		for (size_t j = 0; j < objs[i]->nsegs; j++) {
			const struct kseg *s = &objs[i]->segs[j];

			if (addr >= s->start && addr - s->start < s->size) {
				if (seg)
					*seg = s;
				return objs[i];
			}
		}
	}
	return NULL;
}

/* ---- Noticing dlopen/dlclose ---- */

struct counters {
	unsigned long long adds, subs;
	bool valid;
};

static bool has_counters(size_t size)
{
	return size >= offsetof(struct dl_phdr_info, dlpi_subs) +
		       sizeof(((struct dl_phdr_info *)0)->dlpi_subs);
}

/* Reads the loader's counters from the first entry and stops. */
static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct counters *c = arg;

	if (has_counters(size))
		*c = (struct counters){ info->dlpi_adds, info->dlpi_subs, true };
	return 1;
}

struct rescan {
	struct kobj **list;
	size_t n, cap;
	struct counters counters;
	bool past_first;
	int err;
};

static int rescan_push(struct rescan *r, struct kobj *o)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		struct kobj **list = realloc(r->list, cap * sizeof(*list));

		if (!list)
			return -ENOMEM;
		r->list = list;
		r->cap = cap;
	}
	r->list[r->n++] = o;
	/* Whatever the loader's order, the main executable is searched first. */
	if (o->is_main && r->n > 1) {
		memmove(r->list + 1, r->list, (r->n - 1) * sizeof(*r->list));
		r->list[0] = o;
	}
	return 0;
}

/* Takes a cached entry for (path, bias), marking it kept, or returns NULL. */
static struct kobj *take_cached(const char *path, uintptr_t bias)
{
	for (size_t i = 0; i < nobjs; i++) {
		struct kobj *o = objs[i];

		if (!o->keep && o->bias == bias && !strcmp(o->path, path)) {
			o->keep = true;
			return o;
		}
	}
	return NULL;
}

/* An address inside the object: its first loadable segment. */
static uintptr_t first_load(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD)
			return info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	return info->dlpi_addr;
}

static int rescan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct rescan *r = arg;
	/* The loader lists the executable first, with an empty name. */
	bool is_main = !r->past_first && !info->dlpi_name[0];
	const char *path = is_main ? exe_path() : info->dlpi_name;
	char abs[PATH_MAX];
	struct kobj *o;

	if (!is_main && path[0] && path[0] != '/' && info->dlpi_phnum)
		path = kelf_object_file(path, first_load(info), abs, sizeof(abs));

	/* Counters read under the same loader lock as the list they describe. */
	if (!r->past_first && has_counters(size))
		r->counters = (struct counters){ info->dlpi_adds, info->dlpi_subs, true };
	r->past_first = true;
	if (!path[0])
		return 0;
	o = take_cached(path, info->dlpi_addr);
	if (!o)
		o = kobj_new(info, path, is_main);
	if (!o || rescan_push(r, o)) {
		if (o && !o->keep)
			kobj_free(o);
		r->err = -ENOMEM;
		return 1;
	}
	return 0;
}

/* Replaces the object list with the loader's, reusing the entries of objects
 * still loaded. On failure the old list stays as it was. */
static int rescan(void)
{
	struct rescan r = { 0 };

	kp_dl_iterate_phdr(rescan_one, &r);
	for (size_t i = 0; i < (r.err ? r.n : nobjs); i++) {
		struct kobj *o = r.err ? r.list[i] : objs[i];

		if (!o->keep)
			kobj_free(o);
	}
	if (r.err) {
		for (size_t i = 0; i < nobjs; i++)
			objs[i]->keep = false;
		free(r.list);
		return r.err;
	}
	for (size_t i = 0; i < r.n; i++)
		r.list[i]->keep = false;
	free(objs);
	objs = r.list;
	nobjs = r.n;
	seen_adds = r.counters.adds;
	seen_subs = r.counters.subs;
	scanned = r.counters.valid;
	return 0;
}

static int refresh_locked(void)
{
	struct counters c = { 0 };

	if (!libelf_ready) {
		elf_version(EV_CURRENT);
		libelf_ready = true;
	}
	/* A ksym_foreach() callback is running: the entries it walks must live. */
	if (foreach_depth)
		return 0;
	kp_dl_iterate_phdr(read_counters, &c);
	if (scanned && c.valid && c.adds == seen_adds && c.subs == seen_subs)
		return 0;
	return rescan();
}

/* ---- Lookups ---- */

static void fill_object(const struct kobj *o, struct ksym *out)
{
	*out = (struct ksym){
		.object = o->path,
		.basename = o->basename,
		.load_bias = o->bias,
		.is_main = o->is_main,
	};
}

static void fill_func(const struct kobj *o, const struct kfunc *f, struct ksym *out)
{
	fill_object(o, out);
	out->addr = f->addr;
	out->size = f->size;
	out->name = f->name;
}

static int lookup_in(struct kobj *o, const char *name, struct ksym *out)
{
	const struct kfunc *f;
	int err = kobj_load_symbols(o);

	if (err)
		return err;
	f = kobj_find_name(o, name);
	if (!f)
		return -ENOENT;
	fill_func(o, f, out);
	return 0;
}

/* Splits "object:name" at the rightmost ':' whose left part names a loaded
 * object, so that "libfoo.so:ns::f" and "ns::f" both work. Returns the length
 * of the object part, 0 when spec is a plain name. */
static size_t object_part(const char *spec)
{
	const char *colon = strrchr(spec, ':');

	for (; colon; colon = memrchr(spec, ':', colon - spec))
		if (colon > spec && object_named(spec, colon - spec))
			return colon - spec;
	return 0;
}

static int lookup_name_locked(const char *spec, struct ksym *out)
{
	size_t len = object_part(spec);
	const char *name = len ? spec + len + 1 : spec;

	for (size_t i = 0; i < nobjs; i++) {
		int err;

		if (len && !kobj_named(objs[i], spec, len))
			continue;
		err = lookup_in(objs[i], name, out);
		if (err != -ENOENT)
			return err;
	}
	return -ENOENT;
}

/* The function of o whose FDE covers addr, named when a symbol starts there. */
static int lookup_fde_in(struct kobj *o, uintptr_t addr, struct ksym *out)
{
	const struct kfde *fde;
	const struct kfunc *f;
	int err = kobj_load_fdes(o);

	if (err)
		return err;
	fde = kfde_table_find(o->fdes, o->nfdes, addr - o->bias);
	if (!fde)
		return -ENOENT;
	fill_object(o, out);
	out->addr = fde->start + o->bias;
	out->size = fde->end - fde->start;
	f = kobj_func_at(o, out->addr);
	out->name = f ? f->name : NULL;
	return 0;
}

static int lookup_addr_locked(uintptr_t addr, struct ksym *out, bool fde_only)
{
	struct kobj *o = object_at(addr, NULL);
	const struct kfunc *f;
	int err;

	if (!o)
		return -ENOENT;
	err = kobj_load_symbols(o);
	if (err)
		return err;
	f = fde_only ? NULL : kobj_func_containing(o, addr);
	if (f) {
		fill_func(o, f, out);
		return 0;
	}
	return lookup_fde_in(o, addr, out);
}

/* The first FDE of o starting after addr, as a runtime address, or end. */
static uintptr_t next_fde_start(const struct kobj *o, uintptr_t addr, uintptr_t end)
{
	size_t lo = 0, hi = o->nfdes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->fdes[mid].start + o->bias <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < o->nfdes && o->fdes[lo].start + o->bias < end)
		return o->fdes[lo].start + o->bias;
	return end;
}

static int lookup_unsized_locked(uintptr_t addr, struct ksym *out)
{
	const struct kseg *seg;
	struct kobj *o = object_at(addr, &seg);
	const struct kfde *fde;
	const struct kfunc *f;
	uintptr_t end;
	size_t n;
	int err;

	if (!o)
		return -ENOENT;
	err = kobj_load_symbols(o);
	if (!err)
		err = kobj_load_fdes(o);
	if (err)
		return err;
	n = count_starting_by(o, addr);
	if (!n)
		return -ENOENT;
	f = &o->by_addr[n - 1];
	/* Past a sized function's end nothing is known to start anywhere. */
	if (f->size || f->addr < seg->start)
		return -ENOENT;
	end = seg->start + seg->size;
	if (n < o->naddrs && o->by_addr[n].addr < end)
		end = o->by_addr[n].addr;
	end = next_fde_start(o, f->addr, end);
	fde = kfde_table_find(o->fdes, o->nfdes, f->addr - o->bias);
	if (fde && fde->end + o->bias < end)
		end = fde->end + o->bias;
	if (addr >= end)
		return -ENOENT;
	fill_func(o, f, out);
	out->size = end - f->addr;
	return 0;
}

static int object_of_locked(uintptr_t addr, struct ksym *out)
{
	const struct kseg *seg;
	struct kobj *o = object_at(addr, &seg);

	if (!o)
		return -ENOENT;
	fill_object(o, out);
	out->addr = seg->start;
	out->size = seg->size;
	return 0;
}

static int foreach_in(struct kobj *o, const char *glob,
		      int (*fn)(const struct ksym *sym, void *arg), void *arg)
{
	int err = kobj_load_symbols(o);

	for (size_t i = 0; !err && i < o->nnames; i++) {
		struct ksym sym;

		if (glob && fnmatch(glob, o->by_name[i].name, 0))
			continue;
		fill_func(o, &o->by_name[i], &sym);
		err = fn(&sym, arg);
	}
	return err;
}

static int foreach_locked(const char *object, const char *glob,
			  int (*fn)(const struct ksym *sym, void *arg), void *arg)
{
	int err = 0;

	for (size_t i = 0; !err && i < nobjs; i++)
		if (!object || kobj_named(objs[i], object, strlen(object)))
			err = foreach_in(objs[i], glob, fn, arg);
	return err;
}

/* ---- Entry points: lock, refresh, look up ---- */

int ksym_lookup_name(const char *spec, struct ksym *out)
{
	int err;

	if (!spec || !out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = lookup_name_locked(spec, out);
	pthread_mutex_unlock(&cache_lock);
	return err;
}

int ksym_lookup_addr(uintptr_t addr, struct ksym *out)
{
	int err;

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = lookup_addr_locked(addr, out, false);
	pthread_mutex_unlock(&cache_lock);
	return err;
}

int ksym_lookup_fde(uintptr_t addr, struct ksym *out)
{
	int err;

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = lookup_addr_locked(addr, out, true);
	pthread_mutex_unlock(&cache_lock);
	return err;
}

int ksym_lookup_unsized(uintptr_t addr, struct ksym *out)
{
	int err;

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = lookup_unsized_locked(addr, out);
	pthread_mutex_unlock(&cache_lock);
	return err;
}

int ksym_object_of(uintptr_t addr, struct ksym *out)
{
	int err;

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = object_of_locked(addr, out);
	pthread_mutex_unlock(&cache_lock);
	return err;
}

int ksym_foreach(const char *object, const char *glob,
		 int (*fn)(const struct ksym *sym, void *arg), void *arg)
{
	int err;

	if (!fn)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err) {
		foreach_depth++;
		err = foreach_locked(object, glob, fn, arg);
		foreach_depth--;
	}
	pthread_mutex_unlock(&cache_lock);
	return err;
}

/* ---- Variables: read from the object's file at each lookup ---- */

/* Variables are looked up only when a watchpoint is registered: no cache. */
struct data_query {
	const char *name;	/* by name, or */
	uintptr_t addr;		/* the variable containing addr */
	struct ksym *out;
	char *buf;		/* its name, by address */
	size_t len;
	bool found;
};

static bool is_variable(const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return (type == STT_OBJECT || type == STT_COMMON) &&
	       sym->st_shndx != SHN_UNDEF && sym->st_value;
}

static bool data_match(const struct data_query *q, const char *name, uintptr_t a, size_t size)
{
	if (q->name)
		return !strcmp(name, q->name);
	return q->addr >= a && q->addr < a + (size ? size : 1);
}

static void data_scan_section(const struct kobj *o, Elf *elf, Elf_Scn *scn,
			      const GElf_Shdr *shdr, struct data_query *q)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = shdr->sh_entsize ? shdr->sh_size / shdr->sh_entsize : 0;

	for (size_t i = 1; data && i < count && !q->found; i++) {
		const char *name;
		GElf_Sym sym;

		if (!gelf_getsym(data, (int)i, &sym) || !is_variable(&sym))
			continue;
		name = elf_strptr(elf, shdr->sh_link, sym.st_name);
		if (!name || !name[0] || !data_match(q, name, sym.st_value + o->bias, sym.st_size))
			continue;
		fill_object(o, q->out);
		q->out->addr = sym.st_value + o->bias;
		q->out->size = sym.st_size;
		if (q->buf && q->len) {
			strncpy(q->buf, name, q->len - 1);
			q->buf[q->len - 1] = '\0';
		}
		q->found = true;
	}
}

static int data_scan(const struct kobj *o, struct data_query *q)
{
	struct elf_file f;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int err = elf_file_open(o, &f);

	if (err)
		return err;
	while (!q->found && (scn = elf_nextscn(f.elf, scn)))
		if (gelf_getshdr(scn, &shdr) &&
		    (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM))
			data_scan_section(o, f.elf, scn, &shdr, q);
	elf_file_close(&f);
	return 0;
}

static int data_lookup_locked(const char *spec, struct data_query *q)
{
	size_t len = spec ? object_part(spec) : 0;

	for (size_t i = 0; i < nobjs && !q->found; i++) {
		if (len && !kobj_named(objs[i], spec, len))
			continue;
		data_scan(objs[i], q);
	}
	return q->found ? 0 : -ENOENT;
}

int ksym_lookup_data(const char *spec, struct ksym *out)
{
	struct data_query q = { .out = out };
	int err;

	if (!spec || !out)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err) {
		size_t len = object_part(spec);

		q.name = len ? spec + len + 1 : spec;
		err = data_lookup_locked(spec, &q);
	}
	pthread_mutex_unlock(&cache_lock);
	if (!err)
		out->name = NULL;
	return err;
}

int ksym_data_at(uintptr_t addr, struct ksym *out, char *name, size_t len)
{
	struct data_query q = { .addr = addr, .out = out, .buf = name, .len = len };
	int err;

	if (!out || !name || !len)
		return -EINVAL;
	pthread_mutex_lock(&cache_lock);
	err = refresh_locked();
	if (!err)
		err = data_lookup_locked(NULL, &q);
	pthread_mutex_unlock(&cache_lock);
	if (!err)
		out->name = name;
	return err;
}

void ksym_refresh(void)
{
	pthread_mutex_lock(&cache_lock);
	refresh_locked();
	pthread_mutex_unlock(&cache_lock);
}

void ksym_lock(void)
{
	pthread_mutex_lock(&cache_lock);
}

void ksym_unlock(void)
{
	pthread_mutex_unlock(&cache_lock);
}

/* A recursive mutex is unlocked only by its owner, a thread of the parent:
 * the child's copy is made anew (it has a single thread, this one). */
void ksym_after_fork_child(void)
{
	static const pthread_mutex_t fresh = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

	memcpy(&cache_lock, &fresh, sizeof(cache_lock));
}
