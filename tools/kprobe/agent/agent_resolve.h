/* From probe specs to probe points in the agent's process. */
#ifndef KPROBE_AGENT_RESOLVE_H
#define KPROBE_AGENT_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec.h"

struct resolved {
	uintptr_t addr;
	int spec;		/* index in the session config */
	bool from_glob;		/* one of a glob's matches: may be skipped */
	/* A glob's match the probe's offset does not fit (-EINVAL past the
	 * function's end, -EILSEQ not an instruction boundary): skipped and
	 * counted, with this reason, instead of registered. */
	int refused;
	const char *why;
	size_t sym_size;	/* st_size of a glob's matched symbol */
	uintptr_t semaphore;	/* run-time address of the probe's semaphore, or 0 */
	char name[120];
	char object[64];
};

struct resolve_list {
	struct resolved *v;
	int n, cap;
};

int resolve_push(struct resolve_list *l, const struct resolved *r);
void resolve_list_free(struct resolve_list *l);

/* Resolves spec number idx into probe points appended to out.  Returns 0;
 * 1 when its object is not loaded but exists on disk, with the object's
 * path in deferred_path, or is a file name found nowhere yet (deferred_path
 * is then that name): arm it when it loads; or -errno with one line in
 * err. */
int agent_resolve(const struct probe_spec *s, int idx, struct resolve_list *out,
		  char *deferred_path, size_t pathlen, char *err, size_t errlen, unsigned flags);

/* agent_resolve() flags: a glob over a whole object (OBJ:*, what record's
 * -F expands to) leaves out the start-up and tear-down code the toolchain
 * adds to every program (_start, _init, frame_dummy...), as uftrace does. */
#define AGENT_RESOLVE_OWN_CODE 1u
/* A glob gives a probe per name, aliases of one function included (as
 * bpftrace attaches a program's), not one per function. */
#define AGENT_RESOLVE_EACH_NAME 2u
/* A function name or glob that matches nothing in its object gives no
 * probe and AGENT_RESOLVED_NOTHING (err says which), as bpftrace skips
 * such a probe of a program (ssllatency.bt names functions only some
 * builds of libcrypto have); the caller decides whether that is an error. */
#define AGENT_RESOLVE_MISSING_OK 4u
#define AGENT_RESOLVED_NOTHING 2

/* Whether the object named as in a spec (path or file name) is loaded. */
bool agent_object_loaded(const char *object);

/* FILE:LINE through the DWARF line tables of the loaded objects (the
 * object filter as in specs, empty for all).  0, or -ENOENT with err set. */
int agent_resolve_line(const struct probe_spec *s, int idx, struct resolve_list *out,
		       char *err, size_t errlen);

#endif
