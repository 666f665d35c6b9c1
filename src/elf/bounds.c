/* Function bounds from .eh_frame, for objects (or addresses) without sized
 * symbols: every function the compiler emits gets one FDE whose
 * [initial_location, initial_location + address_range) is its code, and
 * .eh_frame survives stripping because the unwinder needs it.
 *
 * libdw's dwarf_cfi_addrframe() + dwarf_frame_info() cannot be used for this:
 * the range they report is that of one CFI row, narrowed at every
 * DW_CFA_advance_loc, not the FDE's. So the entries are walked with
 * dwarf_next_cfi() and the FDE's two addresses decoded here. */

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "elf/cache.h"

/* The .eh_frame bytes and what decoding them needs. */
struct eh_frame {
	const unsigned char *ident;
	Elf_Data *data;
	uintptr_t addr;       /* sh_addr: base of DW_EH_PE_pcrel values */
	size_t addr_size;     /* size of a DW_EH_PE_absptr value */
	Dwarf_Off cie_off;    /* the last CIE looked up, and its FDE encoding */
	uint8_t cie_enc;
};

/* The growing result of one walk. */
struct fde_vec {
	struct kfde *v;
	size_t n, cap;
};

static bool find_eh_frame(Elf *elf, struct eh_frame *eh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		const char *name;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (!name || strcmp(name, ".eh_frame"))
			continue;
		eh->data = elf_getdata(scn, NULL);
		eh->addr = shdr.sh_addr;
		eh->ident = (const unsigned char *)elf_getident(elf, NULL);
		eh->addr_size = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8;
		return eh->data && eh->data->d_buf && eh->data->d_size && eh->ident;
	}
	return false;
}

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *val)
{
	unsigned shift = 0;

	*val = 0;
	while (*p < end && shift < 64) {
		uint8_t b = *(*p)++;

		*val |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

static bool read_sleb(const uint8_t **p, const uint8_t *end, uint64_t *val)
{
	unsigned shift = 0;
	uint8_t b = 0;

	*val = 0;
	do {
		if (*p >= end || shift >= 64)
			return false;
		b = *(*p)++;
		*val |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		*val |= ~(uint64_t)0 << shift;
	return true;
}

/* Reads a fixed-size little-endian field (x86-64 only, so host order) and
 * sign-extends it when asked. */
static bool read_fixed(const uint8_t **p, const uint8_t *end, size_t size,
		       bool is_signed, uint64_t *val)
{
	uint64_t v = 0;

	if ((size_t)(end - *p) < size)
		return false;
	memcpy(&v, *p, size);
	*p += size;
	if (is_signed && size < 8 && (v >> (size * 8 - 1)) & 1)
		v |= ~(uint64_t)0 << (size * 8);
	*val = v;
	return true;
}

/* Reads the value part of a DW_EH_PE encoding, without applying its base. */
static bool read_format(const struct eh_frame *eh, uint8_t enc,
			const uint8_t **p, const uint8_t *end, uint64_t *val)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		return read_fixed(p, end, eh->addr_size, false, val);
	case DW_EH_PE_uleb128:
		return read_uleb(p, end, val);
	case DW_EH_PE_sleb128:
		return read_sleb(p, end, val);
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return read_fixed(p, end, 2, enc & DW_EH_PE_signed, val);
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return read_fixed(p, end, 4, enc & DW_EH_PE_signed, val);
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return read_fixed(p, end, 8, false, val);
	}
	return false;
}

/* Reads an encoded address. Only absolute and pc-relative ones can occur in
 * an FDE's initial_location as emitted by GCC, clang and the linkers. */
static bool read_address(const struct eh_frame *eh, uint8_t enc,
			 const uint8_t **p, const uint8_t *end, uint64_t *val)
{
	uintptr_t here = eh->addr + (uintptr_t)(*p - (const uint8_t *)eh->data->d_buf);

	if (!read_format(eh, enc, p, end, val))
		return false;
	switch (enc & 0x70) {
	case 0:
		return true;
	case DW_EH_PE_pcrel:
		*val += here;
		return true;
	}
	return false;
}

/* Finds the FDE address encoding ('R') in a CIE's "z" augmentation data. */
static bool cie_fde_encoding(const struct eh_frame *eh, const Dwarf_CIE *cie,
			     uint8_t *enc)
{
	const char *aug = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p + cie->augmentation_data_size;
	uint64_t skip;

	*enc = DW_EH_PE_absptr;
	if (aug[0] != 'z')
		return aug[0] == '\0';
	for (aug++; *aug; aug++) {
		if (*aug == 'S' || *aug == 'B')
			continue;
		if (p >= end)
			return false;
		switch (*aug) {
		case 'R':
			*enc = *p;
			return true;
		case 'L':
			p++;
			break;
		case 'P': { /* personality: encoding byte, then the pointer */
			uint8_t penc = *p++;

			if (!read_format(eh, penc, &p, end, &skip))
				return false;
			break;
		}
		default:
			return false;
		}
	}
	return true;
}

/* The FDE encoding of the CIE at section offset off. The last answer is kept:
 * an object usually has one or two CIEs shared by runs of FDEs. */
static bool fde_encoding_of(struct eh_frame *eh, Dwarf_Off off, uint8_t *enc)
{
	Dwarf_CFI_Entry entry;
	Dwarf_Off next;

	if (off == eh->cie_off) {
		*enc = eh->cie_enc;
		return true;
	}
	if (dwarf_next_cfi(eh->ident, eh->data, true, off, &next, &entry) != 0 ||
	    entry.CIE_id != DW_CIE_ID_64 || !cie_fde_encoding(eh, &entry.cie, enc))
		return false;
	eh->cie_off = off;
	eh->cie_enc = *enc;
	return true;
}

static int fde_vec_push(struct fde_vec *vec, uintptr_t start, uintptr_t end)
{
	if (vec->n == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 256;
		struct kfde *v = realloc(vec->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		vec->v = v;
		vec->cap = cap;
	}
	vec->v[vec->n++] = (struct kfde){ .start = start, .end = end };
	return 0;
}

/* Decodes one FDE's range and appends it; undecodable FDEs are skipped. */
static int add_fde(struct eh_frame *eh, const Dwarf_FDE *fde,
		   struct fde_vec *vec)
{
	const uint8_t *p = fde->start;
	uint64_t start, range;
	uint8_t enc;

	if (!fde_encoding_of(eh, fde->CIE_pointer, &enc) ||
	    !read_address(eh, enc, &p, fde->end, &start) ||
	    !read_format(eh, enc, &p, fde->end, &range))
		return 0;
	/* The linker zeroes the FDEs of discarded code instead of removing them. */
	if (!range || !start)
		return 0;
	return fde_vec_push(vec, start, start + range);
}

static int cmp_fde(const void *a, const void *b)
{
	const struct kfde *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

int kfde_table_build(Elf *elf, struct kfde **out, size_t *count)
{
	struct fde_vec vec = { 0 };
	struct eh_frame eh = { .cie_off = (Dwarf_Off)-1 };
	Dwarf_Off off = 0, next;
	int err = 0;

	*out = NULL;
	*count = 0;
	if (!find_eh_frame(elf, &eh))
		return 0;

	/* A malformed entry ends the walk; what was read before it stays usable. */
	for (; off != (Dwarf_Off)-1; off = next) {
		Dwarf_CFI_Entry entry;

		if (dwarf_next_cfi(eh.ident, eh.data, true, off, &next, &entry) != 0)
			break;
		if (entry.CIE_id == DW_CIE_ID_64)
			continue;
		err = add_fde(&eh, &entry.fde, &vec);
		if (err)
			goto fail;
	}
	qsort(vec.v, vec.n, sizeof(*vec.v), cmp_fde);
	*out = vec.v;
	*count = vec.n;
	return 0;
fail:
	free(vec.v);
	return err;
}

const struct kfde *kfde_table_find(const struct kfde *table, size_t count,
				   uintptr_t addr)
{
	size_t lo = 0, hi = count;

	/* Last FDE starting at or before addr; FDEs do not overlap. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (table[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= table[lo - 1].end)
		return NULL;
	return &table[lo - 1];
}
