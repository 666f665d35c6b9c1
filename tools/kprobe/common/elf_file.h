/* Questions about ELF files on disk (not necessarily loaded). */
#ifndef KPROBE_ELF_FILE_H
#define KPROBE_ELF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The link-time address (st_value) of the defined function name in the
 * file, from .symtab or else .dynsym (the default version when the name is
 * versioned).  0, -ENOENT, or -errno when the file cannot be read. */
int elf_file_symbol(const char *path, const char *name, uint64_t *value);

/* The same for a defined function or data object (a global variable). */
int elf_file_address_symbol(const char *path, const char *name, uint64_t *value);

/* Calls fn for each defined function symbol of the file (both tables);
 * stops when fn returns non-zero and returns that. */
int elf_file_foreach_function(const char *path, int (*fn)(const char *name, void *arg),
			      void *arg);

/* The lowest p_vaddr of the file's PT_LOAD segments (page-aligned). */
int elf_file_first_load(const char *path, uint64_t *vaddr);

/* 1 if the file is an ELF executable run by the dynamic loader (it has
 * PT_INTERP, so LD_PRELOAD applies), 0 if not, -errno when it cannot be
 * read. */
int elf_file_has_interp(const char *path);

/* The same with each symbol's address and size. */
int elf_file_foreach_function_range(const char *path,
				    int (*fn)(const char *name, uint64_t value, uint64_t size,
					      void *arg),
				    void *arg);

/* The file's PT_LOAD segments, at most max; their number or -errno. */
struct elf_load {
	uint64_t offset, vaddr, filesz;
};
int elf_file_loads(const char *path, struct elf_load *out, int max);

/* The separate debug file of the file, found by its build ID under
 * /usr/lib/debug/.build-id/ (Debian's -dbg and -dbgsym packages): 0 with
 * its path in out, or -ENOENT (-errno when the file cannot be read). */
int elf_file_debug_path(const char *path, char *out, size_t len);

#endif
