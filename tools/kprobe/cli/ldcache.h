/* Short library names as bpftrace resolves them: through the dynamic
 * loader's cache (/etc/ld.so.cache, as `ldconfig -p` lists it), or
 * without one, its directories. */
#ifndef KPROBE_LDCACHE_H
#define KPROBE_LDCACHE_H

#include <stddef.h>

/* The path of the first 64-bit library in the cache at cache_path whose
 * name starts with "NAME.so" ("libc" -> "/lib/x86_64-linux-gnu/libc.so.6"):
 * 0, or -ENOENT (none, or no readable cache), -ENAMETOOLONG. */
int ldcache_find(const char *cache_path, const char *name, char *out, size_t outlen);

/* The same from /etc/ld.so.cache, else from the loader's directories
 * (NAME.so.N, the soname, else NAME.so, in the first that has one), for a
 * system without a cache (a container's or an initramfs's root). */
int ldcache_find_or_scan(const char *name, char *out, size_t outlen);

/* "DIR/NAME.so.N" (a library's soname, as the cache keys it), else
 * "DIR/NAME.so": 0, or -ENOENT, -ENAMETOOLONG. */
int ldcache_scan_dir(const char *dir, const char *name, char *out, size_t outlen);

#endif
