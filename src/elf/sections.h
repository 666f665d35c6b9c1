/* Named sections of the ELF objects loaded in this process, found through
 * their section headers on disk (the program headers do not name them). */
#ifndef KP_ELF_SECTIONS_H
#define KP_ELF_SECTIONS_H

#include <stddef.h>
#include <stdint.h>

struct ksec_object {
	const char *path;	/* file name as the loader knows it ("" main) */
	uintptr_t bias;		/* load bias (dlpi_addr) */
	uintptr_t text_lo;	/* lowest and highest executable address */
	uintptr_t text_hi;
};

/* A number that changes whenever an object is loaded or unloaded. */
unsigned long long ksec_generation(void);

/* Calls fn for every loaded object (main executable first).  Collects the
 * list first, so fn may itself open files or allocate. Returns fn's first
 * non-zero value, 0, or -ENOMEM. */
int ksec_foreach_object(int (*fn)(const struct ksec_object *o, void *arg), void *arg);

/* The runtime address and size of section name in object o; -ENOENT when it
 * has none, another negative errno when the file cannot be read. */
int ksec_find(const struct ksec_object *o, const char *name, uintptr_t *addr, size_t *size);

#endif
