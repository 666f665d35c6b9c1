/* The file behind a loaded object, even when the loader's name for it no
 * longer opens it. */
#include "elf/objpath.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The file mapped at addr, as /proc/self/maps names it: an absolute path,
 * unlike a loader name relative to a working directory since left. */
static int mapped_file(uintptr_t addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int off = 0;
		char *p;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) < 2 || !off ||
		    addr < lo || addr >= hi)
			continue;
		p = line + off;
		p[strcspn(p, "\n")] = 0;
		if (*p == '/' && strlen(p) < len) {
			memcpy(out, p, strlen(p) + 1);
			err = 0;
		}
		break;
	}
	fclose(f);
	return err;
}

const char *kelf_object_file(const char *name, uintptr_t addr, char *buf, size_t len)
{
	if (!name[0] || name[0] == '/' || mapped_file(addr, buf, len))
		return name;
	return buf;
}
