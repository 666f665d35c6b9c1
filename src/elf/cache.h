/* Private to src/elf: what symbols.c and bounds.c share, plus a test hook. */
#ifndef KP_ELF_CACHE_H
#define KP_ELF_CACHE_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#include "elf/symbols.h"

/* Address range [start, end) of one .eh_frame FDE, in file (link-time)
 * addresses of its object: add the load bias for the runtime range. */
struct kfde {
	uintptr_t start;
	uintptr_t end;
};

/* Reads every FDE of elf's .eh_frame into *out (malloc'd, sorted by start).
 * An object without .eh_frame gives an empty table. Returns 0 or -ENOMEM. */
int kfde_table_build(Elf *elf, struct kfde **out, size_t *count);

/* The FDE of table covering file address addr, or NULL. */
const struct kfde *kfde_table_find(const struct kfde *table, size_t count,
				   uintptr_t addr);

/* For tests: ksym_lookup_addr() restricted to the .eh_frame path, so that it can
 * be checked against symbol sizes where both exist. */
int ksym_lookup_fde(uintptr_t addr, struct ksym *out);

#endif
