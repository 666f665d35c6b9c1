/*
 * Where the code of a function can be entered from outside the function:
 * the direct branches of the rest of its object (a GCC .cold part jumping
 * back into its function, a stub jumping into another function's middle),
 * and the code addresses the object's memory holds (function pointers,
 * tables of case or label addresses: where indirect jumps can go).
 *
 * Both are collected once per object and kept, as offsets from the
 * object's first segment, for the few objects probed last; a change in the
 * set of loaded objects (dl_iterate_phdr's counters) drops them.
 */
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>

#include "arch/x86_64/coderefs.h"
#include "os/linux/memory.h"

#define MAX_SEGS 16
#define MAX_OBJECTS 8
#define CHUNK (64 * 1024)

struct seg {
	uintptr_t start, end;
	bool exec;
};

struct offsets {
	uint32_t *v;		/* sorted, unique once built */
	size_t n, cap;
	bool built;
};

struct object {
	bool used;
	uintptr_t bias, base;	/* base: the lowest segment's start */
	const void *phdr;
	struct seg segs[MAX_SEGS];
	int nsegs;
	struct offsets refs[2];	/* CODE_REF_BRANCH, CODE_REF_HELD */
	unsigned long last_use;
};

static struct object objects[MAX_OBJECTS];
static unsigned long long seen_adds, seen_subs;
static unsigned long use_clock;
static uint8_t *chunk;		/* CHUNK bytes while a collection is built */

struct lookup {
	uintptr_t addr;
	bool found;
	unsigned long long adds, subs;
	struct object o;
};

static int lookup_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lookup *l = arg;
	struct object *o = &l->o;
	bool contains = false;

	l->adds = info->dlpi_adds;
	l->subs = info->dlpi_subs;
	memset(o, 0, sizeof(*o));
	o->base = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !ph->p_memsz)
			continue;
		if (o->nsegs == MAX_SEGS)
			return 0;
		o->segs[o->nsegs++] = (struct seg){ start, start + ph->p_memsz, ph->p_flags & PF_X };
		if (start < o->base)
			o->base = start;
		contains |= l->addr >= start && l->addr - start < ph->p_memsz;
	}
	if (!contains)
		return 0;
	l->found = true;
	o->used = true;
	o->bias = info->dlpi_addr;
	o->phdr = info->dlpi_phdr;
	return 1;
}

static void drop(struct object *o)
{
	for (int k = 0; k < 2; k++)
		free(o->refs[k].v);
	memset(o, 0, sizeof(*o));
}

/* The cached object that contains addr, or a new slot for it. */
static struct object *object_of(uintptr_t addr)
{
	struct lookup l = { .addr = addr };
	struct object *slot = &objects[0];

	dl_iterate_phdr(lookup_cb, &l);
	if (!l.found)
		return NULL;
	if (l.adds != seen_adds || l.subs != seen_subs) {
		for (int i = 0; i < MAX_OBJECTS; i++)
			drop(&objects[i]);
		seen_adds = l.adds;
		seen_subs = l.subs;
	}
	for (int i = 0; i < MAX_OBJECTS; i++) {
		struct object *o = &objects[i];

		if (o->used && o->bias == l.o.bias && o->phdr == l.o.phdr) {
			o->last_use = ++use_clock;
			return o;
		}
		if (!o->used || (slot->used && o->last_use < slot->last_use))
			slot = o;
	}
	drop(slot);
	*slot = l.o;
	slot->last_use = ++use_clock;
	return slot;
}

static bool in_exec(const struct object *o, uint64_t v)
{
	for (int i = 0; i < o->nsegs; i++)
		if (o->segs[i].exec && v >= o->segs[i].start && v < o->segs[i].end)
			return true;
	return false;
}

static int push(struct offsets *r, uint32_t off)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4096;
		uint32_t *n = realloc(r->v, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		r->v = n;
		r->cap = cap;
	}
	r->v[r->n++] = off;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void finish(struct offsets *r)
{
	size_t n = 0;

	qsort(r->v, r->n, sizeof(*r->v), cmp_u32);
	for (size_t i = 0; i < r->n; i++)
		if (!n || r->v[n - 1] != r->v[i])
			r->v[n++] = r->v[i];
	r->n = n;
	r->built = true;
	/* Kept: no more room than the unique offsets take (python3.11: 91,000
	 * branch targets, 360 KiB). */
	if (n && n < r->cap) {
		uint32_t *v = realloc(r->v, n * sizeof(*v));

		if (v) {
			r->v = v;
			r->cap = n;
		}
	}
}

/* Every 8-byte value, at any byte offset of the segment, that is an
 * address in the object's code. */
static int scan_held(struct object *o, const struct seg *s)
{
	struct offsets *r = &o->refs[CODE_REF_HELD];

	for (uintptr_t at = s->start; at + 8 <= s->end;) {
		size_t len = s->end - at < CHUNK ? s->end - at : CHUNK;

		if (kp_mem_read_nofault(at, chunk, len))
			return -EFAULT;
		for (size_t i = 0; i + 8 <= len; i++) {
			uint64_t v;

			memcpy(&v, chunk + i, 8);
			if (in_exec(o, v) && push(r, (uint32_t)(v - o->base)))
				return -ENOMEM;
		}
		if (len < CHUNK)
			break;
		at += len - 7;
	}
	return 0;
}

/* The targets of the direct branches of an executable segment, decoded
 * from its start (compiled code keeps no data in .text; a stretch of
 * filler decodes as int3s and NOPs).  An instruction that starts with
 * 0xcc or 0xe9 may be a probe's int3 or jump: decoded from the original
 * bytes. */
static int scan_branches(struct object *o, const struct seg *s,
			 int (*read_code)(uintptr_t, uint8_t *, size_t))
{
	struct offsets *r = &o->refs[CODE_REF_BRANCH];
	ZydisDecoder dec;
	uintptr_t chunk_at = 0;
	size_t chunk_len = 0;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (uintptr_t pc = s->start; pc < s->end;) {
		ZydisDecodedInstruction in;
		uint8_t orig[ZYDIS_MAX_INSTRUCTION_LENGTH];
		const uint8_t *p;
		size_t avail;

		if (pc < chunk_at || pc + ZYDIS_MAX_INSTRUCTION_LENGTH > chunk_at + chunk_len) {
			chunk_len = s->end - pc < CHUNK ? s->end - pc : CHUNK;
			chunk_at = pc;
			if (kp_mem_read_nofault(pc, chunk, chunk_len))
				return -EFAULT;
		}
		p = chunk + (pc - chunk_at);
		avail = chunk_at + chunk_len - pc;
		if (*p == 0xcc || *p == 0xe9) {
			/* a probe changes at most the 5 bytes of a jump */
			memcpy(orig, p, avail < sizeof(orig) ? avail : sizeof(orig));
			if (!read_code(pc, orig, avail < 5 ? avail : 5))
				p = orig;
		}
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, p,
				avail < sizeof(orig) ? avail : sizeof(orig), &in))) {
			pc++;
			continue;
		}
		if (in.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE && in.raw.imm[0].is_relative) {
			uint64_t t = pc + in.length + (uint64_t)in.raw.imm[0].value.s;

			if (in_exec(o, t) && push(r, (uint32_t)(t - o->base)))
				return -ENOMEM;
		}
		pc += in.length;
	}
	return 0;
}

static int build(struct object *o, enum code_ref kind,
		 int (*read_code)(uintptr_t, uint8_t *, size_t))
{
	struct offsets *r = &o->refs[kind];
	int err = 0;

	r->n = 0;
	chunk = malloc(CHUNK);
	if (!chunk)
		return -ENOMEM;
	for (int i = 0; !err && i < o->nsegs; i++) {
		if (kind == CODE_REF_HELD)
			err = scan_held(o, &o->segs[i]);
		else if (o->segs[i].exec)
			err = scan_branches(o, &o->segs[i], read_code);
	}
	free(chunk);
	chunk = NULL;
	if (err)
		return err;
	finish(r);
	return 0;
}

int code_refs_into(uintptr_t lo, uintptr_t hi, enum code_ref kind,
		   int (*read_code)(uintptr_t, uint8_t *, size_t), int (*add)(uintptr_t))
{
	struct object *o = object_of(lo);
	struct offsets *r;
	size_t a = 0, b;
	int err;

	if (!o)
		return -ENOENT;
	r = &o->refs[kind];
	if (!r->built && (err = build(o, kind, read_code)))
		return err;
	if (hi <= lo || lo < o->base)
		return 0;
	b = r->n;
	while (a < b) {
		size_t m = (a + b) / 2;

		if (o->base + r->v[m] < lo)
			a = m + 1;
		else
			b = m;
	}
	for (; a < r->n && o->base + r->v[a] < hi; a++)
		if (add(o->base + r->v[a]))
			return -ENOMEM;
	return 0;
}
