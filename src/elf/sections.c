/* Finding named sections (jump-label and tracepoint tables) in loaded
 * objects: dl_iterate_phdr names the objects, libelf reads their section
 * headers, and the load bias turns file addresses into run-time ones. */
#include "elf/sections.h"
#include "elf/objpath.h"
#include "os/linux/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct collect {
	struct ksec_object *objs;
	char **paths;
	int n, cap;
	unsigned long long gen;
	int err;
};

static void text_range(const struct dl_phdr_info *info, struct ksec_object *o)
{
	o->text_lo = UINTPTR_MAX;
	o->text_hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (lo < o->text_lo)
			o->text_lo = lo;
		if (lo + ph->p_memsz > o->text_hi)
			o->text_hi = lo + ph->p_memsz;
	}
}

static int collect_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct collect *c = arg;

	c->gen = info->dlpi_adds + info->dlpi_subs;
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 32;
		struct ksec_object *o = realloc(c->objs, cap * sizeof(*o));
		char **p = o ? realloc(c->paths, cap * sizeof(*p)) : NULL;

		if (o)
			c->objs = o;
		if (!p) {
			c->err = -ENOMEM;
			return 1;
		}
		c->paths = p;
		c->cap = cap;
	}
	c->paths[c->n] = strdup(info->dlpi_name ? info->dlpi_name : "");
	if (!c->paths[c->n]) {
		c->err = -ENOMEM;
		return 1;
	}
	c->objs[c->n].path = c->paths[c->n];
	c->objs[c->n].bias = info->dlpi_addr;
	text_range(info, &c->objs[c->n]);
	c->n++;
	return 0;
}

static int gen_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(unsigned long long *)arg = info->dlpi_adds + info->dlpi_subs;
	return 1;
}

unsigned long long ksec_generation(void)
{
	unsigned long long g = 0;

	kp_dl_iterate_phdr(gen_one, &g);
	return g;
}

int ksec_foreach_object(int (*fn)(const struct ksec_object *o, void *arg), void *arg)
{
	struct collect c = { 0 };
	int ret;

	kp_dl_iterate_phdr(collect_one, &c);
	ret = c.err;
	for (int i = 0; i < c.n && !ret; i++)
		ret = fn(&c.objs[i], arg);
	for (int i = 0; i < c.n; i++)
		free(c.paths[i]);
	free(c.paths);
	free(c.objs);
	return ret;
}

static int find_in_elf(Elf *elf, const char *name, uintptr_t *addr, size_t *size)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name)) {
			*addr = sh.sh_addr;
			*size = sh.sh_size;
			return 0;
		}
	}
	return -ENOENT;
}

int ksec_find(const struct ksec_object *o, const char *name, uintptr_t *addr, size_t *size)
{
	const char *path = o->path[0] ? o->path : "/proc/self/exe";
	char abs[PATH_MAX];
	int fd, err;
	Elf *elf;

	if (!strncmp(o->path, "linux-vdso", 10) || !strncmp(o->path, "linux-gate", 10))
		return -ENOENT;
	/* dlopen("./x.so") is known as "./x.so" for good: open the mapped
	 * file instead, wherever the process has gone since. */
	if (o->path[0] && o->text_lo < o->text_hi)
		path = kelf_object_file(o->path, o->text_lo, abs, sizeof(abs));
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return -EINVAL;
	}
	err = find_in_elf(elf, name, addr, size);
	elf_end(elf);
	close(fd);
	if (!err)
		*addr += o->bias;
	return err;
}
