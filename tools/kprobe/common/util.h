/* Small string helpers shared by the CLI and the agent. */
#ifndef KPROBE_UTIL_H
#define KPROBE_UTIL_H

#include <stddef.h>
#include <string.h>

/* Copies src into dst[size], truncating; dst is always terminated. */
static inline void str_copy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (!size)
		return;
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* The file name part of a path. */
static inline const char *path_base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Whether the file name base is a library that bpftrace's short library
 * name names ("libc": libc.so, libc.so.6, libc.so.6.1). */
static inline int short_library_matches(const char *base, const char *name)
{
	size_t len = strlen(name);

	return !strncmp(base, name, len) && !strncmp(base + len, ".so", 3) &&
	       (base[len + 3] == '\0' || base[len + 3] == '.');
}

#endif
