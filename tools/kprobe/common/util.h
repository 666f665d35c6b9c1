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

#endif
