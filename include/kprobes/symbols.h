/*
 * kprobes/symbols.h - the functions and objects of the running process, as
 * libkprobes sees them when it resolves symbol_name.
 *
 * For tools built on the library (a tracer's agent, a debugger-like
 * handler) that must name what they probe the way register_kprobe() does:
 * same lookup order, same bounds, same cache.  Each call returns 0 or a
 * negative errno; see docs/api.md section 10 for one mini man page each.
 *
 * struct kprobes_sym can grow: a caller sets sz to sizeof(struct
 * kprobes_sym) as it knows it, and the library fills what both know
 * (fields it does not know stay zero).  Callbacks get the library's own
 * struct, with sz set to its size.
 */
#ifndef KPROBES_SYMBOLS_H
#define KPROBES_SYMBOLS_H

#include <link.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kprobes_sym {
	size_t sz;		/* sizeof(struct kprobes_sym): set by the caller */
	unsigned long addr;	/* runtime address of the function's first byte,
				 * or of the segment (kprobes_sym_object_of) */
	size_t size;		/* its size in bytes, 0 when unknown */
	/* Symbol name, NULL for a function known only from .eh_frame.  The
	 * strings stay valid until the object is unloaded: copy what you
	 * keep. */
	const char *name;
	const char *object;	/* full path of the object */
	const char *basename;	/* file name part of object */
	unsigned long load_bias; /* the object's dlpi_addr */
	bool is_main;		/* the main executable */
};

/* The size of the first version of struct kprobes_sym: the least sz the
 * library accepts. */
#define KPROBES_SYM_SZ_V1 (offsetof(struct kprobes_sym, is_main) + sizeof(bool))

/* The function named spec, "name" (every object, main executable first,
 * as symbol_name) or "object:name" (a loaded object's full path or file
 * name).  -EINVAL: spec or out NULL, spec empty, out->sz too small;
 * -ENOENT: no such function or object. */
int kprobes_sym_lookup_name(const char *spec, struct kprobes_sym *out);

/* The function containing addr: bounds from the symbol tables, else from
 * the .eh_frame entry covering it (name NULL then).  -EINVAL: out NULL or
 * out->sz too small; -ENOENT: addr is in no loaded object or no known
 * function. */
int kprobes_sym_lookup_addr(unsigned long addr, struct kprobes_sym *out);

/* The loaded object with addr in one of its executable segments: object,
 * basename, load_bias, is_main, and addr/size the segment (name NULL).
 * -EINVAL, -ENOENT as kprobes_sym_lookup_addr(). */
int kprobes_sym_object_of(unsigned long addr, struct kprobes_sym *out);

/* Calls fn for every function symbol whose name matches glob (fnmatch(3);
 * NULL: every one) in the objects whose full path or file name is object
 * (NULL: all, main executable first, then in load order).  Stops at, and
 * returns, the first non-zero value fn returns; 0 when every one was
 * visited.  -EINVAL: fn NULL.  fn may look other symbols up, but not
 * register probes. */
int kprobes_sym_foreach(const char *object, const char *glob,
			int (*fn)(const struct kprobes_sym *sym, void *arg), void *arg);

/* Whether register_kprobe() accepts symbol_name + offset for the function
 * symbol at sym_addr of sym_size bytes: 0 when the offset lies in the
 * function (registration still checks that it is an instruction
 * boundary); for a symbol of size 0 (sym_size 0), whose code runs to the
 * next symbol, also that decoding from the symbol reaches it.  -EINVAL:
 * beyond the function, or sym_addr 0; -EILSEQ: (size 0) not an
 * instruction boundary. */
int kprobes_sym_check_offset(unsigned long sym_addr, size_t sym_size, unsigned long offset);

/* dl_iterate_phdr(3) for tools linked with the library: the same callback
 * and return value, but safe against the library's fork handling (a fork
 * during the walk waits for it, so a child never inherits the loader's
 * lock held).  -EINVAL: fn NULL. */
struct dl_phdr_info;	/* <link.h> defines it under _GNU_SOURCE only */
int kprobes_objects_foreach(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
			    void *arg);

/* After objects were loaded (a dlopen() the library did not see): builds
 * their unwind tables for kprobes_stack() now, before their code runs,
 * rather than at the next registration.  Not from a handler. */
void kprobes_objects_changed(void);

#ifdef __cplusplus
}
#endif

#endif /* KPROBES_SYMBOLS_H */
