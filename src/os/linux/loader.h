/* The dynamic loader's object list, read so that fork() children never
 * inherit the loader's lock from libkprobes. */
#ifndef KP_OS_LOADER_H
#define KP_OS_LOADER_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

/* dl_iterate_phdr() under the loader lock, as library code
 * (kp_lib_code_begin()): fn runs with the mark up. */
int kp_dl_iterate_phdr(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
		       void *arg);

/* The definition of name that the library's own, interposing one hides:
 * the next after the library in the lookup order (RTLD_NEXT), or lib's
 * own where none comes after it.  A program that preloads an object
 * linked against libkprobes.so has the library looked up after its own
 * dependencies, libc among them.  NULL when there is none.  Library code
 * (kp_lib_code_begin()) around the call is the caller's. */
void *kp_next_symbol(const char *name, const char *lib);

/* For the fork handlers: held across fork(), released in parent and child.
 * A leaf: nothing is locked, and no dlopen() is done, under it. */
void kp_loader_lock(void);
void kp_loader_unlock(void);

/* Which loaded object a piece of code belongs to.  Another object mapped
 * at the same place later has another name; the same file loaded again
 * there counts as the same object (its code is the same). */
struct kp_object_id {
	uintptr_t base;			/* dlpi_addr */
	const void *phdr;		/* dlpi_phdr */
	uint64_t name_hash;		/* of dlpi_name */
	bool known;			/* false: code in no object (JIT, anonymous) */
};

/* Whether a and b name the same object (both known). */
static inline bool kp_object_id_equal(const struct kp_object_id *a, const struct kp_object_id *b)
{
	return a->known && b->known && a->base == b->base && a->phdr == b->phdr &&
	       a->name_hash == b->name_hash;
}

/* The object whose segments cover addr: 0, or -ENOENT (id->known false). */
int kp_object_id_of(uintptr_t addr, struct kp_object_id *id);

/*
 * Runs fn(arg) with the loader's object list held still and returns what
 * fn returns.  dlclose() unmaps an object and unlinks it from the list
 * under that same lock, so an object that kp_object_loaded() finds inside
 * fn stays mapped until fn returns: code written there cannot land in
 * memory that was unmapped and handed to something else meanwhile.  The
 * caller holds a lock that fork() takes (as every code rewriter does), so
 * that no fork child inherits the loader's lock held.
 */
int kp_objects_pinned(int (*fn)(void *arg), void *arg);

/* Whether the object is still loaded (an unknown one, NULL or id->known
 * false, always is): for as long as the answer holds, inside kp_objects_pinned();
 * elsewhere under a lock fork() takes. */
bool kp_object_loaded(const struct kp_object_id *id);

/* Which of a rewrite's n entries have an object no longer loaded: a bit
 * per entry, looked up with the loader's list held still (object(ctx, i):
 * entry i's object, NULL for none).  Called before the rewrite writes
 * anything: once it has, nothing may call into the C library, whose own
 * code may be in the middle of the rewrite.  0, or -ENOMEM;
 * kp_objects_gone_free() after. */
struct kp_gone {
	uint8_t *bits;
	uint8_t small[128];
};

int kp_objects_gone(struct kp_gone *g, int n,
		    const struct kp_object_id *(*object)(const void *ctx, int i), const void *ctx);
void kp_objects_gone_free(struct kp_gone *g);

static inline bool kp_gone_bit(const struct kp_gone *g, int i)
{
	return g && (g->bits[i >> 3] >> (i & 7)) & 1;
}

#endif
