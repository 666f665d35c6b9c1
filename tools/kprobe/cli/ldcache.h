/* Short library names as bpftrace resolves them: through the dynamic
 * loader's cache (/etc/ld.so.cache, as `ldconfig -p` lists it). */
#ifndef KPROBE_LDCACHE_H
#define KPROBE_LDCACHE_H

#include <stddef.h>

/* The path of the first 64-bit library in the cache at cache_path whose
 * name starts with "NAME.so" ("libc" -> "/lib/x86_64-linux-gnu/libc.so.6"):
 * 0, or -ENOENT (none, or no readable cache), -ENAMETOOLONG. */
int ldcache_find(const char *cache_path, const char *name, char *out, size_t outlen);

#endif
