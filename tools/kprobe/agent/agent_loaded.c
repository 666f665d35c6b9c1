/* Telling the tool where the program's objects are: the executable
 * segments of every object loaded while a session runs go into the
 * session memory's objects table (shm.h), so that the tool names
 * addresses in a library the program has closed since, even one that came
 * and went between two of its reads of /proc/PID/maps.  Called with the
 * agent's lock held, from the dlopen hook and at a session's start. */
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "agent.h"

/* Whether the table has the segment already (this call's own entries are
 * not ready yet: the loop that adds them checks start and path too). */
static bool noted(const struct kps_map *m, uint32_t n, uint64_t start, const char *path)
{
	for (uint32_t i = 0; i < n && i < KPS_OBJECTS; i++)
		if (m->objects[i].start == start && !strcmp(m->objects[i].path, path))
			return true;
	return false;
}

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct kps_map *m = arg;
	const char *path = info->dlpi_name;
	uint64_t page = getauxval(AT_PAGESZ);
	pid_t pid = getpid();
	char real[PATH_MAX];

	(void)size;
	/* The executable has no name here, and is never unloaded. */
	if (!path || path[0] != '/' || !page)
		return 0;
	/* the name the maps show: symbolic links resolved */
	if (realpath(path, real))
		path = real;
	if (strlen(path) >= KPS_OBJECT_PATH)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t start, end;
		struct kps_object *o;
		uint32_t n;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_memsz)
			continue;
		start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
		end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
		n = __atomic_load_n(&m->hdr->nobjects, __ATOMIC_RELAXED);
		if (noted(m, n, start, path))
			continue;
		n = __atomic_fetch_add(&m->hdr->nobjects, 1, __ATOMIC_RELAXED);
		if (n >= KPS_OBJECTS)
			return 1;	/* full: the tool reads the maps as before */
		o = &m->objects[n];
		o->start = start;
		o->end = end;
		o->offset = ph->p_offset & ~(page - 1);
		o->pid = (uint32_t)pid;
		memcpy(o->path, path, strlen(path) + 1);
		__atomic_store_n(&o->ready, 1, __ATOMIC_RELEASE);
	}
	return 0;
}

void agent_loaded_note(struct kps_map *m)
{
	if (m && m->hdr)
		dl_iterate_phdr(note_object, m);
}
