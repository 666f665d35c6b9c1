/* The library's signal interposers for an injected agent.
 *
 * Preloaded, the agent comes first in symbol lookup, so the program's
 * sigaction(), signal(), sigprocmask() and pthread_sigmask() calls reach
 * libkprobes' interposers, which keep SIGTRAP out of every mask and chain
 * the program's own SIGTRAP and SIGSEGV handlers behind the library's.
 * Injected, it comes last, and those calls go straight to libc: a thread
 * blocking every signal is killed at a breakpoint, and a handler the
 * program installs later receives our traps.
 *
 * So the injected agent points the program's own references at the
 * interposers: the GOT slots (JUMP_SLOT and GLOB_DAT relocations) that
 * name these functions, in every loaded object but libc, the loader and
 * the agent, now and whenever objects are added.  Each slot is changed
 * with one aligned 8-byte store, so a concurrent call goes either way,
 * never through a torn pointer; a read-only (RELRO) page is made writable
 * for the store and put back.  The interposers call libc's functions, so
 * nothing changes for the program but what launch mode gives it too.
 * Calls libc makes internally, and calls through dlsym(), are not seen:
 * the same as under LD_PRELOAD. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"
#include "kp_arch.h"

static const char *const names[] = {
	"sigaction", "signal", "bsd_signal", "sysv_signal",
	"sigprocmask", "pthread_sigmask", "pthread_attr_setsigmask_np",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static void *interposer[NNAMES];
static uintptr_t self_base;
static unsigned long long seen_adds;	/* dl_iterate_phdr's dlpi_adds */

/* Our own definitions, from our own symbol table. */
static int find_interposers(void)
{
	Dl_info info;
	void *self;

	if (!dladdr((void *)find_interposers, &info) || !info.dli_fname)
		return -1;
	self_base = (uintptr_t)info.dli_fbase;
	self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	if (!self)
		return -1;
	for (size_t i = 0; i < NNAMES; i++) {
		Dl_info where;
		void *fn = dlsym(self, names[i]);

		/* Only ours: never point a program at someone else's. */
		if (fn && dladdr(fn, &where) && (uintptr_t)where.dli_fbase == self_base)
			interposer[i] = fn;
	}
	dlclose(self);	/* the agent is nodelete: only the reference goes */
	return 0;
}

/* The protection of the page holding addr, from /proc/self/maps; -1 if
 * it is not mapped. */
static int page_prot(uintptr_t addr)
{
	char line[512];
	int prot = -1;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -1;
	while (prot < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || addr < lo || addr >= hi)
			continue;
		prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
		       (perms[2] == 'x' ? PROT_EXEC : 0);
	}
	fclose(f);
	return prot;
}

static void set_slot(uintptr_t slot, void *fn)
{
	uintptr_t page = slot & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
	int prot;

	if (slot & 7 || __atomic_load_n((void **)slot, __ATOMIC_RELAXED) == fn)
		return;
	prot = page_prot(slot);
	if (prot < 0 || !(prot & PROT_READ))
		return;
	if (!(prot & PROT_WRITE) && mprotect((void *)page, 1, prot | PROT_WRITE))
		return;
	__atomic_store_n((void **)slot, fn, __ATOMIC_RELEASE);
	if (!(prot & PROT_WRITE))
		mprotect((void *)page, 1, prot);
}

static int interposer_index(const char *name)
{
	for (size_t i = 0; i < NNAMES; i++)
		if (interposer[i] && !strcmp(name, names[i]))
			return (int)i;
	return -1;
}

/* glibc relocates the d_ptr entries of a loaded object's dynamic section;
 * the vDSO's are left as linked. */
static uintptr_t dyn_addr(uintptr_t base, uintptr_t v)
{
	return v < base ? base + v : v;
}

struct dyn_info {
	const Elf64_Sym *symtab;
	const char *strtab;
	size_t strsz;
	const Elf64_Rela *rela, *jmprel;
	size_t relasz, jmprelsz;
};

static void patch_relocs(uintptr_t base, const struct dyn_info *d, const Elf64_Rela *r,
			 size_t size)
{
	for (size_t k = 0; r && k < size / sizeof(*r); k++) {
		unsigned long type = ELF64_R_TYPE(r[k].r_info);
		const Elf64_Sym *sym;
		int i;

		if (type != KP_R_JUMP_SLOT && type != KP_R_GLOB_DAT)
			continue;
		sym = &d->symtab[ELF64_R_SYM(r[k].r_info)];
		if (sym->st_name >= d->strsz || sym->st_shndx != SHN_UNDEF)
			continue;
		i = interposer_index(d->strtab + sym->st_name);
		if (i >= 0)
			set_slot(base + r[k].r_offset, interposer[i]);
	}
}

/* Objects whose references stay as they are: libc and the loader (their
 * internal calls are not interposed under LD_PRELOAD either), us. */
static bool leave_alone(const struct dl_phdr_info *info)
{
	const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	name = name ? name + 1 : info->dlpi_name;
	if ((uintptr_t)info->dlpi_addr == self_base)
		return true;
	return name && (!strncmp(name, "libc.so", 7) || !strncmp(name, "ld-linux", 8) ||
			!strncmp(name, "linux-vdso", 10));
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t base = (uintptr_t)info->dlpi_addr;
	const Elf64_Dyn *dyn = NULL;
	struct dyn_info d = { 0 };

	(void)size;
	if (arg)
		*(unsigned long long *)arg = info->dlpi_adds;
	if (leave_alone(info))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base + info->dlpi_phdr[i].p_vaddr);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			d.symtab = (const Elf64_Sym *)dyn_addr(base, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			d.strtab = (const char *)dyn_addr(base, dyn->d_un.d_ptr);
			break;
		case DT_STRSZ:
			d.strsz = dyn->d_un.d_val;
			break;
		case DT_RELA:
			d.rela = (const Elf64_Rela *)dyn_addr(base, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			d.relasz = dyn->d_un.d_val;
			break;
		case DT_JMPREL:
			d.jmprel = (const Elf64_Rela *)dyn_addr(base, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			d.jmprelsz = dyn->d_un.d_val;
			break;
		default:
			break;
		}
	}
	if (!d.symtab || !d.strtab)
		return 0;
	patch_relocs(base, &d, d.rela, d.relasz);
	patch_relocs(base, &d, d.jmprel, d.jmprelsz);
	return 0;
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;	/* the same in every object's info */
}

static pthread_mutex_t interpose_lock = PTHREAD_MUTEX_INITIALIZER;
static bool interposing;

void agent_interpose_start(void)
{
	pthread_mutex_lock(&interpose_lock);
	if (!interposing && !find_interposers()) {
		interposing = true;
		dl_iterate_phdr(patch_object, &seen_adds);
	}
	pthread_mutex_unlock(&interpose_lock);
}

void agent_interpose_refresh(void)
{
	unsigned long long adds = 0;

	if (!__atomic_load_n(&interposing, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&interpose_lock);
	/* dlpi_adds counts every object ever loaded: cheap to compare. */
	dl_iterate_phdr(count_objects, &adds);
	if (adds != seen_adds)
		dl_iterate_phdr(patch_object, &seen_adds);
	pthread_mutex_unlock(&interpose_lock);
}
