/* ELF files on disk, read with libelf. */
#include "elf_file.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

struct elf_handle {
	int fd;
	Elf *elf;
};

static int elf_handle_open(const char *path, struct elf_handle *h)
{
	elf_version(EV_CURRENT);
	h->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (h->fd < 0)
		return -errno;
	h->elf = elf_begin(h->fd, ELF_C_READ_MMAP, NULL);
	if (!h->elf || elf_kind(h->elf) != ELF_K_ELF) {
		if (h->elf)
			elf_end(h->elf);
		close(h->fd);
		return -ENOEXEC;
	}
	return 0;
}

static void elf_handle_close(struct elf_handle *h)
{
	elf_end(h->elf);
	close(h->fd);
}

static bool is_defined_function(const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF;
}

/* A function or a data object (not TLS, whose value is no address). */
static bool is_defined_address(const GElf_Sym *sym)
{
	return is_defined_function(sym) ||
	       (GELF_ST_TYPE(sym->st_info) == STT_OBJECT && sym->st_shndx != SHN_UNDEF &&
		sym->st_shndx != SHN_ABS);
}

/* Visits the function symbols (and, when data, the data objects) of one
 * table; hidden (non-default) versions of .dynsym names are skipped. */
static int foreach_in_table(Elf *elf, Elf_Scn *scn, Elf_Data *versym, bool data,
			    int (*fn)(const char *name, const GElf_Sym *sym, void *arg), void *arg)
{
	GElf_Shdr shdr;
	Elf_Data *d;
	size_t n;

	if (!gelf_getshdr(scn, &shdr) || !(d = elf_getdata(scn, NULL)) || !shdr.sh_entsize)
		return 0;
	n = shdr.sh_size / shdr.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Versym ver;
		const char *name;
		int rc;

		if (!gelf_getsym(d, (int)i, &sym) ||
		    !(data ? is_defined_address(&sym) : is_defined_function(&sym)))
			continue;
		if (versym && gelf_getversym(versym, (int)i, &ver) && (ver & 0x8000))
			continue;
		name = elf_strptr(elf, shdr.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		rc = fn(name, &sym, arg);
		if (rc)
			return rc;
	}
	return 0;
}

static int foreach_symbol(const char *path, bool data,
			  int (*fn)(const char *name, const GElf_Sym *sym, void *arg), void *arg)
{
	struct elf_handle h;
	Elf_Scn *symtab = NULL, *dynsym = NULL, *scn = NULL;
	Elf_Data *versym = NULL;
	int rc = elf_handle_open(path, &h);

	if (rc)
		return rc;
	while ((scn = elf_nextscn(h.elf, scn))) {
		GElf_Shdr shdr;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		if (shdr.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (shdr.sh_type == SHT_DYNSYM)
			dynsym = scn;
		else if (shdr.sh_type == SHT_GNU_versym)
			versym = elf_getdata(scn, NULL);
	}
	rc = 0;
	if (symtab)
		rc = foreach_in_table(h.elf, symtab, NULL, data, fn, arg);
	if (!rc && dynsym)
		rc = foreach_in_table(h.elf, dynsym, versym, data, fn, arg);
	elf_handle_close(&h);
	return rc;
}

struct find_one {
	const char *name;
	uint64_t value;
};

static int match_name(const char *name, const GElf_Sym *sym, void *arg)
{
	struct find_one *f = arg;

	if (strcmp(name, f->name))
		return 0;
	f->value = sym->st_value;
	return 1;
}

int elf_file_symbol(const char *path, const char *name, uint64_t *value)
{
	struct find_one f = { name, 0 };
	int rc = foreach_symbol(path, false, match_name, &f);

	if (rc < 0)
		return rc;
	if (!rc)
		return -ENOENT;
	*value = f.value;
	return 0;
}

int elf_file_address_symbol(const char *path, const char *name, uint64_t *value)
{
	struct find_one f = { name, 0 };
	int rc = foreach_symbol(path, true, match_name, &f);

	if (rc < 0)
		return rc;
	if (!rc)
		return -ENOENT;
	*value = f.value;
	return 0;
}

struct visit {
	int (*fn)(const char *name, void *arg);
	void *arg;
};

static int visit_name(const char *name, const GElf_Sym *sym, void *arg)
{
	struct visit *v = arg;

	(void)sym;
	return v->fn(name, v->arg);
}

int elf_file_foreach_function(const char *path, int (*fn)(const char *name, void *arg),
			      void *arg)
{
	struct visit v = { fn, arg };

	return foreach_symbol(path, false, visit_name, &v);
}

int elf_file_first_load(const char *path, uint64_t *vaddr)
{
	struct elf_handle h;
	size_t n = 0;
	bool found = false;
	int rc = elf_handle_open(path, &h);

	if (rc)
		return rc;
	if (elf_getphdrnum(h.elf, &n))
		n = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(h.elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (!found || (ph.p_vaddr & ~0xfffull) < *vaddr)
			*vaddr = ph.p_vaddr & ~0xfffull;
		found = true;
	}
	elf_handle_close(&h);
	return found ? 0 : -ENOEXEC;
}

int elf_file_has_interp(const char *path)
{
	struct elf_handle h;
	size_t n = 0;
	int dynamic = 0;
	int rc = elf_handle_open(path, &h);

	if (rc)
		return rc;
	if (elf_getphdrnum(h.elf, &n))
		n = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(h.elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			dynamic = 1;
	}
	elf_handle_close(&h);
	return dynamic;
}

struct visit_range {
	int (*fn)(const char *name, uint64_t value, uint64_t size, void *arg);
	void *arg;
};

static int visit_range(const char *name, const GElf_Sym *sym, void *arg)
{
	struct visit_range *v = arg;

	return v->fn(name, sym->st_value, sym->st_size, v->arg);
}

int elf_file_foreach_function_range(const char *path,
				    int (*fn)(const char *name, uint64_t value, uint64_t size,
					      void *arg),
				    void *arg)
{
	struct visit_range v = { fn, arg };

	return foreach_symbol(path, false, visit_range, &v);
}

int elf_file_loads(const char *path, struct elf_load *out, int max)
{
	struct elf_handle h;
	size_t n = 0;
	int found = 0;
	int rc = elf_handle_open(path, &h);

	if (rc)
		return rc;
	if (elf_getphdrnum(h.elf, &n))
		n = 0;
	for (size_t i = 0; i < n && found < max; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(h.elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		out[found].offset = ph.p_offset;
		out[found].vaddr = ph.p_vaddr;
		out[found].filesz = ph.p_filesz;
		found++;
	}
	elf_handle_close(&h);
	return found;
}

/* The build ID note of the file, in its bytes; its length or 0. */
static size_t build_id(Elf *elf, unsigned char *out, size_t max)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) ||
			    !nh.n_descsz || nh.n_descsz > max)
				continue;
			memcpy(out, (const char *)data->d_buf + desc_off, nh.n_descsz);
			return nh.n_descsz;
		}
	}
	return 0;
}

int elf_file_debug_path(const char *path, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char id[64];
	struct elf_handle h;
	size_t n, pos;
	int rc = elf_handle_open(path, &h);

	if (rc)
		return rc;
	n = build_id(h.elf, id, sizeof(id));
	elf_handle_close(&h);
	if (n < 2 || len < sizeof("/usr/lib/debug/.build-id/xx/.debug") + 2 * n)
		return -ENOENT;
	pos = (size_t)snprintf(out, len, "/usr/lib/debug/.build-id/%c%c/", hex[id[0] >> 4],
			       hex[id[0] & 15]);
	for (size_t i = 1; i < n; i++) {
		out[pos++] = hex[id[i] >> 4];
		out[pos++] = hex[id[i] & 15];
	}
	snprintf(out + pos, len - pos, ".debug");
	return access(out, R_OK) ? -ENOENT : 0;
}
