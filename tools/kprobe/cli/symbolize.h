/* Addresses of a target process to function names, on the tool's side
 * (usym, func and ustack of probe programs).
 *
 * The target's mappings are read from /proc/PID/maps while it lives (a
 * launched command may be gone when its maps are printed), and read again
 * when an address falls outside the known ones; each object's function
 * symbols are read from its file once. */
#ifndef KPROBE_SYMBOLIZE_H
#define KPROBE_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sym_object;
struct sym_mapping;
struct kps_object;

struct symbolizer {
	pid_t pid;
	struct sym_mapping *maps;
	size_t nmaps;
	struct sym_object **objs;
	size_t nobjs;
	const struct kps_object *noted;	/* session memory: the agent's notes */
	const uint32_t *nnoted;
};

void symbolizer_init(struct symbolizer *z, pid_t pid);
/* Also names addresses in the objects the agent noted loading (the
 * session memory's objects table), once they are gone from the maps. */
void symbolizer_use_noted(struct symbolizer *z, const struct kps_object *noted,
			  const uint32_t *nnoted);
/* Reads the process's mappings again (kept if it is gone). */
void symbolizer_refresh(struct symbolizer *z);
/* The function containing addr: its name and addr's offset in it; 0, or
 * -ENOENT. */
int symbolizer_lookup(struct symbolizer *z, uint64_t addr, char *name, size_t len,
		      uint64_t *offset);
/* Where addr is: its object's path, its link-time address there and, when
 * a function symbol covers it, the function (name NULL otherwise).  The
 * strings live as long as z.  0, or -ENOENT outside every known object. */
struct sym_location {
	const char *path;
	uint64_t vaddr;
	const char *name;
	uint64_t offset;
};
int symbolizer_locate(struct symbolizer *z, uint64_t addr, struct sym_location *loc);
void symbolizer_free(struct symbolizer *z);

#endif
