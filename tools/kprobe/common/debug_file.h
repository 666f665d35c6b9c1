/* Separate debug information files (the object's own, else by build-id,
 * else through .gnu_debuglink), as gdb and elfutils look for them: for the
 * tool's variables by name and the agent's FILE:LINE probes. */
#ifndef KPROBE_DEBUG_FILE_H
#define KPROBE_DEBUG_FILE_H

#include <gelf.h>
#include <stddef.h>

/* The separate debug file of the object at path (open as elf):
 * /usr/lib/debug/.build-id/xx/yyyy.debug, else the .gnu_debuglink name
 * beside the object, in its .debug/ directory or under /usr/lib/debug,
 * with the CRC-32 the link gives (not a debug file of another build).
 * 0 with out set, or -ENOENT. */
int debug_file_find(Elf *elf, const char *path, char *out, size_t outlen);

/* The object's GNU build-id as lowercase hex; 0 or -ENOENT. */
int debug_file_build_id(Elf *elf, char *hex, size_t hexlen);

#endif
