/* Finding an object's separate debug information (see debug_file.h). */
#include "debug_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEBUG_ROOT "/usr/lib/debug"

static Elf_Scn *section_named(Elf *elf, const char *want, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh->sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}

int debug_file_build_id(Elf *elf, char *hex, size_t hexlen)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			const unsigned char *d = (const unsigned char *)data->d_buf + desc_off;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) ||
			    nh.n_descsz < 2 || 2 * nh.n_descsz + 1 > hexlen)
				continue;
			for (size_t i = 0; i < nh.n_descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", d[i]);
			return 0;
		}
	}
	return -ENOENT;
}

static int try_path(char *out, size_t outlen, const char *fmt, const char *a, const char *b)
{
	snprintf(out, outlen, fmt, a, b);
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

int debug_file_find(Elf *elf, const char *path, char *out, size_t outlen)
{
	char hex[128], dir[4096];
	GElf_Shdr sh;
	Elf_Scn *scn;
	char *slash;

	if (!debug_file_build_id(elf, hex, sizeof(hex)) &&
	    !try_path(out, outlen, DEBUG_ROOT "/.build-id/%.2s/%s.debug", hex, hex + 2))
		return 0;
	scn = section_named(elf, ".gnu_debuglink", &sh);
	if (scn) {
		Elf_Data *data = elf_getdata(scn, NULL);
		const char *name = data ? data->d_buf : NULL;

		if (!name || !data->d_size || !memchr(name, '\0', data->d_size) || strchr(name, '/'))
			return -ENOENT;
		snprintf(dir, sizeof(dir), "%s", path);
		slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		else
			snprintf(dir, sizeof(dir), ".");
		/* Not the object itself under the same name. */
		if ((try_path(out, outlen, "%s/%s", dir, name) || !strcmp(out, path)) &&
		    try_path(out, outlen, "%s/.debug/%s", dir, name) &&
		    try_path(out, outlen, DEBUG_ROOT "%s/%s", dir[0] == '/' ? dir : "", name))
			return -ENOENT;
		return 0;
	}
	return -ENOENT;
}
