/* A cheap look before a walk over a whole object's DWARF: whether any of
 * its strings could be a name a glob matches.  The walk for inlined
 * copies of an unqualified probe's function visits every DIE of every
 * object the program maps (libc's separate debug file alone takes over a
 * second); a name that appears in none of the DWARF's strings cannot be
 * any DIE's. */
#include <elfutils/libdw.h>
#include <gelf.h>
#include <stdbool.h>
#include <string.h>

#include "dwarf_vars.h"

/* The longest run of glob characters that must appear, as they are, in
 * any name the glob matches: between the metacharacters. */
static void literal_run(const char *glob, const char **run, size_t *len)
{
	size_t best = 0, cur = 0;
	const char *start = glob, *best_at = glob;

	for (const char *p = glob;; p++) {
		if (!*p || strchr("*?[]\\", *p)) {
			if (cur > best) {
				best = cur;
				best_at = start;
			}
			if (!*p)
				break;
			cur = 0;
			start = p + 1;
			continue;
		}
		cur++;
	}
	*run = best_at;
	*len = best;
}

/* Whether a section of elf named name holds the bytes. */
static bool section_holds(Elf *elf, const char *name, const char *bytes, size_t len)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sname;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || !(sname = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(sname, name) || sh.sh_type == SHT_NOBITS)
			continue;
		data = elf_getdata(scn, NULL);
		if (data && data->d_buf && memmem(data->d_buf, data->d_size, bytes, len))
			return true;
	}
	return false;
}

/* Names are in .debug_str (by offset or index), short ones inline in
 * .debug_info, and those dwz moved in the alternate file's .debug_str. */
static bool dwarf_holds(Dwarf *dw, const char *bytes, size_t len)
{
	Elf *elf = dwarf_getelf(dw);
	Dwarf *alt = dwarf_getalt(dw);

	return section_holds(elf, ".debug_str", bytes, len) ||
	       section_holds(elf, ".debug_info", bytes, len) ||
	       (alt && section_holds(dwarf_getelf(alt), ".debug_str", bytes, len));
}

bool dwarf_may_name(Dwarf *dw, const char *const *globs, int nglobs)
{
	for (int g = 0; g < nglobs; g++) {
		const char *run;
		size_t len;

		literal_run(globs[g], &run, &len);
		if (!len || dwarf_holds(dw, run, len))
			return true;
	}
	return false;
}
