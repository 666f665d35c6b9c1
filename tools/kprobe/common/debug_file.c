/* Finding an object's separate debug information (see debug_file.h). */
#include "debug_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
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

/* Whether the file at path has the CRC-32 .gnu_debuglink gives for it:
 * a debug file of another build of the object would give wrong
 * variables (gdb refuses it too). */
static bool crc_matches(const char *path, uint32_t want)
{
	static uint32_t table[256];
	unsigned char buf[65536];
	uint32_t crc = 0xffffffffu;
	ssize_t n;
	int fd;

	/* The CRC-32 of zlib and gdb (reflected, polynomial 0xedb88320). */
	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
	close(fd);
	return n == 0 && ~crc == want;
}

/* The debuglink file name at "dir/sub/name" (sub may be empty), readable
 * and with the CRC the link gives. */
static int try_link(char *out, size_t outlen, const char *dir, const char *sub, const char *name,
		    uint32_t crc)
{
	snprintf(out, outlen, "%s%s/%s", dir, sub, name);
	return access(out, R_OK) == 0 && crc_matches(out, crc) ? 0 : -ENOENT;
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
		const char *nul = name ? memchr(name, '\0', data->d_size) : NULL;
		size_t crc_off;
		uint32_t crc;

		if (!name || !nul || strchr(name, '/'))
			return -ENOENT;
		/* The name, NUL, padding to 4 bytes, then the CRC-32 of the
		 * debug file in the object's byte order. */
		crc_off = ((size_t)(nul - name) + 4) & ~(size_t)3;
		if (crc_off + 4 > data->d_size)
			return -ENOENT;
		memcpy(&crc, name + crc_off, 4);
		if (elf_getident(elf, NULL)[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ?
							  ELFDATA2LSB : ELFDATA2MSB))
			crc = __builtin_bswap32(crc);
		snprintf(dir, sizeof(dir), "%s", path);
		slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		else
			snprintf(dir, sizeof(dir), ".");
		/* Not the object itself under the same name. */
		if ((try_link(out, outlen, dir, "", name, crc) || !strcmp(out, path)) &&
		    try_link(out, outlen, dir, "/.debug", name, crc) &&
		    try_link(out, outlen, DEBUG_ROOT, dir[0] == '/' ? dir : "", name, crc))
			return -ENOENT;
		return 0;
	}
	return -ENOENT;
}
