/* Reading the dynamic loader's cache (glibc's "new" format, the only one
 * Debian 12's ldconfig writes): a header, an array of entries, and the
 * strings they point to, offsets from the start of the file.  The file is
 * read whole and every offset checked against its size. */
#include "ldcache.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_arch.h"

#define CACHE_MAGIC "glibc-ld.so.cache1.1"
#define CACHE_MAX (16u << 20)

struct cache_header {
	char magic[sizeof(CACHE_MAGIC) - 1];
	uint32_t nlibs;
	uint32_t len_strings;
	uint8_t flags;
	uint8_t pad[3];
	uint32_t extension_offset;
	uint32_t unused[3];
};

struct cache_entry {
	int32_t flags;
	uint32_t key, value;	/* offsets of the name and of the path */
	uint32_t osversion;
	uint64_t hwcap;
};

static char *read_cache(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < (long)sizeof(struct cache_header) ||
	    (unsigned long)n > CACHE_MAX || fseek(f, 0, SEEK_SET))
		goto out;
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf) {
		buf[n] = '\0';	/* every string ends inside the buffer */
		*len = (size_t)n;
	}
out:
	fclose(f);
	return buf;
}

int ldcache_find(const char *cache_path, const char *name, char *out, size_t outlen)
{
	struct cache_header h;
	char prefix[256];
	size_t len = 0, plen;
	char *buf;
	int rc = -ENOENT;

	if (snprintf(prefix, sizeof(prefix), "%s.so", name) >= (int)sizeof(prefix))
		return -ENAMETOOLONG;
	plen = strlen(prefix);
	buf = read_cache(cache_path, &len);
	if (!buf)
		return -ENOENT;
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, CACHE_MAGIC, sizeof(h.magic)) ||
	    h.nlibs > (len - sizeof(h)) / sizeof(struct cache_entry))
		goto out;
	for (uint32_t i = 0; i < h.nlibs; i++) {
		struct cache_entry e;

		memcpy(&e, buf + sizeof(h) + (size_t)i * sizeof(e), sizeof(e));
		/* a library of this ABI, the only kind a process of ours loads */
		if (e.flags != KP_LDCACHE_FLAGS || e.key >= len || e.value >= len ||
		    strncmp(buf + e.key, prefix, plen))
			continue;
		rc = snprintf(out, outlen, "%s", buf + e.value) < (int)outlen ? 0 : -ENAMETOOLONG;
		break;
	}
out:
	free(buf);
	return rc;
}

int ldcache_scan_dir(const char *dir, const char *name, char *out, size_t outlen)
{
	size_t n = strlen(name);
	char best[256] = "";
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return -ENOENT;
	while ((e = readdir(d))) {
		const char *rest = e->d_name + n;

		if (strncmp(e->d_name, name, n) || strncmp(rest, ".so", 3))
			continue;
		rest += 3;
		if (*rest == '.' && rest[1] && strspn(rest + 1, "0123456789") == strlen(rest + 1)) {
			snprintf(best, sizeof(best), "%s", e->d_name);
			break;
		}
		if (!*rest && !best[0])
			snprintf(best, sizeof(best), "%s", e->d_name);
	}
	closedir(d);
	if (!best[0])
		return -ENOENT;
	return snprintf(out, outlen, "%s/%s", dir, best) < (int)outlen ? 0 : -ENAMETOOLONG;
}

int ldcache_find_or_scan(const char *name, char *out, size_t outlen)
{
	static const char *const dirs[] = {
		"/lib/" KP_MULTIARCH, "/usr/lib/" KP_MULTIARCH, "/lib64", "/usr/lib64",
		"/lib", "/usr/lib",
	};

	if (!ldcache_find("/etc/ld.so.cache", name, out, outlen))
		return 0;
	if (!name[0] || strchr(name, '/'))
		return -ENOENT;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!ldcache_scan_dir(dirs[i], name, out, outlen))
			return 0;
	return -ENOENT;
}
