/* The dynamic loader's object list, read so that fork() children never
 * inherit the loader's lock from libkprobes. */
#ifndef KP_OS_LOADER_H
#define KP_OS_LOADER_H

#include <link.h>

/* dl_iterate_phdr() under the loader lock, as library code
 * (kp_lib_code_begin()): fn runs with the mark up. */
int kp_dl_iterate_phdr(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
		       void *arg);

/* For the fork handlers: held across fork(), released in parent and child.
 * A leaf: nothing is locked, and no dlopen() is done, under it. */
void kp_loader_lock(void);
void kp_loader_unlock(void);

#endif
