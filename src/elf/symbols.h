/* Symbols and function bounds of the ELF objects loaded in this process. */
#ifndef KP_ELF_SYMBOLS_H
#define KP_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one lookup finds. Strings point into a cache that lives until
 * ksym_invalidate() drops the object (dlclose); copy what you keep. */
struct ksym {
	uintptr_t addr;       /* runtime address of the function's first byte */
	size_t size;          /* function size in bytes (0 if unknown) */
	const char *name;     /* symbol name, or NULL for a function known only from .eh_frame */
	const char *object;   /* full path of the object ("/proc/self/exe" target for main) */
	const char *basename; /* file name part of object */
	uintptr_t load_bias;  /* dlpi_addr of the object */
	bool is_main;         /* the main executable */
};

/* Resolves "name" (every object, main executable first) or "object:name"
 * (object = full path or file name of a loaded object) to a function symbol
 * (STT_FUNC or STT_GNU_IFUNC, defined, from .symtab or .dynsym).
 * Returns 0, -ENOENT for an unknown symbol or object. */
int ksym_lookup_name(const char *spec, struct ksym *out);

/* Finds the function containing addr: bounds from .symtab/.dynsym sizes, else from
 * the .eh_frame FDE covering addr (name then NULL). Returns 0, or -ENOENT when addr
 * is in no loaded object or in no known function. */
int ksym_lookup_addr(uintptr_t addr, struct ksym *out);

/* For an address in no sized function: the symbol of size 0 (an assembly
 * label, crtstuff's deregister_tm_clones) starting at or before addr in the
 * same segment, with size set to the bytes up to the next symbol, .eh_frame
 * FDE or the end of the segment, which must contain addr; -ENOENT when
 * there is none (or a sized function ends before addr). */
int ksym_lookup_unsized(uintptr_t addr, struct ksym *out);

/* Returns the loaded object containing addr in one of its executable PT_LOAD
 * segments (fills object, basename, load_bias, is_main; addr/size = the segment),
 * or -ENOENT. */
int ksym_object_of(uintptr_t addr, struct ksym *out);

/* Resolves "name" or "object:name" to a variable (STT_OBJECT or STT_COMMON,
 * defined, from .symtab or .dynsym), main executable first: addr, size and
 * the object (name is left NULL).  Reads the files at each call: for
 * registration, not for hot paths.  Returns 0, -ENOENT. */
int ksym_lookup_data(const char *spec, struct ksym *out);

/* The variable containing addr: its start, size, object, and name copied
 * into name[len] (out->name points there).  Returns 0, -ENOENT. */
int ksym_data_at(uintptr_t addr, struct ksym *out, char *name, size_t len);

/* Calls fn for every function symbol whose name matches the glob (fnmatch) in the
 * objects matching object (NULL = all, main first); stops and returns fn's value
 * when it is non-zero. Returns 0 when all were visited. */
int ksym_foreach(const char *object, const char *glob,
		 int (*fn)(const struct ksym *sym, void *arg), void *arg);

/* Drops cached data of objects that are no longer loaded and notices new ones.
 * Cheap when nothing changed (dl_iterate_phdr adds/subs counters). */
void ksym_refresh(void);

/* The cache's lock, for the fork handlers (src/core/fork.c): held across
 * fork(), released in the parent and made anew in the child. */
void ksym_lock(void);
void ksym_unlock(void);
void ksym_after_fork_child(void);

#endif
