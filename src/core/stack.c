/*
 * Stacks at a hit: kprobes_stack().
 *
 * Off the hit path (at registration, after dlopen/dlclose) every loaded
 * object's call-frame information becomes a compact table (elf/cfi.c);
 * the set of tables is published with one release store and an old set
 * is freed after a grace period, as probepoints are.  On the hit path a
 * read-side section covers the walk: per frame, the rule for its pc from
 * a cache (one slot of two words), else from the tables (a binary search
 * for the object, the block index and a scan for its row), then loads
 * that cannot fault (kp_load_nofault).  No lock, no allocation, no
 * system call.
 *
 * Frames the probes put on the stack are unwound as the frames they stand
 * for: a return-probed frame's return address (its instance's stub) is
 * the real one, kept in the instance; an ip in an out-of-line slot or a
 * detour's copied instructions is the probed instruction's.  Signal
 * frames are unwound through the kernel's rt_sigframe.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <ucontext.h>
#include <unistd.h>

#include "asm/sigcontext.h"
#include "asm/uaccess.h"
#include "core/internal.h"
#include "core/stack.h"
#include "elf/cfi.h"
#include "elf/objpath.h"
#include "elf/sections.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

/* The tables of one loaded object. */
struct stack_obj {
	uintptr_t lo, hi;	/* its code, run-time addresses */
	uintptr_t base;		/* run-time address of the rows' pc 0 */
	struct cfi_table t;
	char *path;
	uintptr_t bias;
	bool kept;		/* carried into the set being built */
};

/*
 * The rules of the pcs unwound lately, by pc: a direct-mapped cache in
 * front of the tables, shared by all threads and lock-free.  A slot is
 * written under a sequence number in its first word (odd while it is
 * written; a writer takes it by compare-and-swap, and a writer that
 * finds it odd, or loses the race, leaves it), the rule in the same word,
 * so a reader sees one whole write or misses.  The cache belongs to one
 * set of tables: a set replaced (an object loaded or gone) takes its
 * cache with it, and the new one starts empty, so no rule of an object
 * that went away is ever read for code loaded in its place.
 */
#define RULE_CACHE_BITS 12
#define RULE_CACHE_SLOTS (1u << RULE_CACHE_BITS)

struct rule_slot {
	uint64_t word;		/* sequence number (bits 0-31), rule (32-63) */
	uint64_t pc;
};

/* What the hit path reads: objects sorted by lo, and their rules cache. */
struct stack_set {
	struct rule_slot *cache;
	uint64_t gen;		/* never the same for two sets: memos name a set by it */
	size_t n;
	struct stack_obj *obj[];
};

static void free_set(struct stack_set *set)
{
	if (set)
		free(set->cache);
	free(set);
}

static struct stack_set *current;
static pthread_mutex_t stack_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long built_gen;
static bool built;
static uint64_t last_set_gen;

/* ---- building (off the hit path) ---- */

/* The object's ELF: its file, or the vDSO's image in memory (copied). */
static Elf *open_object(const struct ksec_object *o, int *fd, void **image)
{
	const char *path = o->path[0] ? o->path : "/proc/self/exe";
	char abs[PATH_MAX];

	*fd = -1;
	*image = NULL;
	if (!strncmp(o->path, "linux-vdso", 10) || !strncmp(o->path, "linux-gate", 10)) {
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
		size_t size;

		if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG))
			return NULL;
		size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
		if (size > (1u << 20) || !(*image = malloc(size)))
			return NULL;
		memcpy(*image, eh, size);
		return elf_memory(*image, size);
	}
	if (o->path[0] && o->text_lo < o->text_hi)
		path = kelf_object_file(o->path, o->text_lo, abs, sizeof(abs));
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	return elf_begin(*fd, ELF_C_READ_MMAP, NULL);
}

static struct stack_obj *build_object(const struct ksec_object *o)
{
	struct stack_obj *so = calloc(1, sizeof(*so));
	void *image;
	int fd;
	Elf *elf;

	if (!so || !(so->path = strdup(o->path)))
		goto fail;
	so->bias = o->bias;
	so->lo = o->text_lo;
	so->hi = o->text_hi;
	elf_version(EV_CURRENT);
	elf = open_object(o, &fd, &image);
	if (elf) {
		/* no call-frame information: an empty table, frame pointers */
		cfi_table_build(elf, &so->t);
		elf_end(elf);
	}
	if (fd >= 0)
		close(fd);
	free(image);
	so->base = so->bias + so->t.base;
	return so;
fail:
	if (so)
		free(so->path);
	free(so);
	return NULL;
}

static void free_object(struct stack_obj *so)
{
	cfi_table_free(&so->t);
	free(so->path);
	free(so);
}

struct building {
	const struct stack_set *old;
	struct stack_set *set;
	size_t cap;
	int err;
};

static struct stack_obj *take_old(const struct stack_set *old, const struct ksec_object *o)
{
	for (size_t i = 0; old && i < old->n; i++) {
		struct stack_obj *so = old->obj[i];

		if (!so->kept && so->bias == o->bias && so->lo == o->text_lo &&
		    so->hi == o->text_hi && !strcmp(so->path, o->path)) {
			so->kept = true;
			return so;
		}
	}
	return NULL;
}

static int add_object(const struct ksec_object *o, void *arg)
{
	struct building *b = arg;
	struct stack_obj *so;

	if (o->text_lo >= o->text_hi)
		return 0;
	if (b->set->n == b->cap) {
		size_t cap = b->cap * 2;
		struct stack_set *s = realloc(b->set, sizeof(*s) + cap * sizeof(s->obj[0]));

		if (!s)
			return -ENOMEM;
		b->set = s;
		b->cap = cap;
	}
	so = take_old(b->old, o);
	if (!so && !(so = build_object(o)))
		return -ENOMEM;
	b->set->obj[b->set->n++] = so;
	return 0;
}

static int cmp_obj(const void *a, const void *b)
{
	const struct stack_obj *x = *(struct stack_obj *const *)a, *y = *(struct stack_obj *const *)b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Builds the tables of objects loaded since the last call and publishes
 * the new set; tables of unloaded objects are freed after a grace period.
 * Off the hit path; not from a handler. */
int kp_stack_tables_update(void)
{
	struct building b = { .cap = 16 };
	struct stack_set *old;
	unsigned long long gen;
	int err;

	/* From now on dlclose() must tell us (os/linux/upcalls.h). */
	kp_os_upcall_set(stack_objects_changed, kp_stack_objects_changed);
	pthread_mutex_lock(&stack_lock);
	gen = ksec_generation();
	if (built && gen == built_gen) {
		pthread_mutex_unlock(&stack_lock);
		return 0;
	}
	old = current;
	b.old = old;
	b.set = malloc(sizeof(*b.set) + b.cap * sizeof(b.set->obj[0]));
	err = b.set ? 0 : -ENOMEM;
	if (!err) {
		b.set->n = 0;
		b.set->gen = ++last_set_gen;
		b.set->cache = calloc(RULE_CACHE_SLOTS, sizeof(*b.set->cache));
		err = b.set->cache ? ksec_foreach_object(add_object, &b) : -ENOMEM;
	}
	if (err) {
		for (size_t i = 0; b.set && i < b.set->n; i++)
			if (!b.set->obj[i]->kept)
				free_object(b.set->obj[i]);
		for (size_t i = 0; old && i < old->n; i++)
			old->obj[i]->kept = false;
		free_set(b.set);
		pthread_mutex_unlock(&stack_lock);
		return err;
	}
	qsort(b.set->obj, b.set->n, sizeof(b.set->obj[0]), cmp_obj);
	for (size_t i = 0; i < b.set->n; i++)
		b.set->obj[i]->kept = false;
	__atomic_store_n(&current, b.set, __ATOMIC_RELEASE);
	built_gen = gen;
	built = true;
	if (old) {
		/* the new set holds the kept ones: mark them to spare them */
		for (size_t i = 0; i < b.set->n; i++)
			b.set->obj[i]->kept = true;
		kp_synchronize();
		for (size_t i = 0; i < old->n; i++)
			if (!old->obj[i]->kept)
				free_object(old->obj[i]);
		for (size_t i = 0; i < b.set->n; i++)
			b.set->obj[i]->kept = false;
		free_set(old);
	}
	pthread_mutex_unlock(&stack_lock);
	return 0;
}

void kp_stack_fork_lock(void)
{
	pthread_mutex_lock(&stack_lock);
}

void kp_stack_fork_unlock(void)
{
	pthread_mutex_unlock(&stack_lock);
}

void kp_stack_tables_stats(struct kp_stack_tables_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&stack_lock);
	for (size_t i = 0; current && i < current->n; i++) {
		st->objects++;
		st->rows += current->obj[i]->t.n;
		st->table_bytes += current->obj[i]->t.n * sizeof(struct cfi_row) +
				   (current->obj[i]->t.nblocks + 1) * sizeof(uint32_t);
		st->code_bytes += current->obj[i]->t.code_bytes;
	}
	pthread_mutex_unlock(&stack_lock);
}

/* ---- unwinding (the hit path) ---- */

/* No vector code: a handler calling kprobes_stack() stays one that
 * libkprobes' analysis can prove leaves vector state alone, so an
 * optimized probe need not save it (the compiler would otherwise copy
 * the registers into a frame with SSE).  No jump tables either: the
 * analysis takes an indirect branch for unknown code. */
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize", "no-tree-slp-vectorize", "no-jump-tables")

/* Registers of the frame being unwound; exact: ip is where the thread is
 * (frame 0, or interrupted by a signal), not a return address. */
struct frame {
	uintptr_t ip, sp, bp;
	uintptr_t lr;		/* the link register, where known (first frame), or 0 */
	uintptr_t aux;		/* ARCH_DWARF_AUX's register, where known (first
				 * frame, a signal's), or 0 */
	bool exact;
};

/* f moves to the frame at ip and sp: one whose link register and
 * ARCH_DWARF_AUX register are not known (bp is each step's own). */
static inline __attribute__((always_inline)) void frame_move(struct frame *f, uintptr_t ip,
							    uintptr_t sp, bool exact)
{
	f->ip = ip;
	f->sp = sp;
	f->lr = 0;
	f->aux = 0;
	f->exact = exact;
}

/* Where no table covers a pc: frame pointers. */
static const struct cfi_rule no_rule = { .kind = CFI_NONE, .bp8 = CFI_BP_SAME, .ra8 = 1 };

static const struct stack_obj *object_of(const struct stack_set *set, uintptr_t pc)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (set->obj[mid]->lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? set->obj[lo - 1] : NULL;
}

/* The row for pc; *last is the object of the previous lookup, where the
 * next one often is too. */
static const struct cfi_row *row_of(const struct stack_set *set, const struct stack_obj **last,
				    uintptr_t pc)
{
	const struct stack_obj *so = *last;

	if (!so || pc < so->lo || pc >= so->hi)
		*last = so = object_of(set, pc);
	if (!so || pc >= so->hi || pc < so->base || pc - so->base > UINT32_MAX)
		return NULL;
	return cfi_table_find(&so->t, pc - so->base);
}

/* A rule packed in a word, as the cache keeps it and the walk reads it:
 * cfa8 in bits 0-12, bp8 in 13-20, the kind in 21-23, ra8 in 24-31
 * (shifts and masks, where a bit-field structure would be packed and
 * unpacked through memory). */
typedef uint32_t rule_t;

static inline rule_t rule_pack(struct cfi_rule r)
{
	return ((uint32_t)r.cfa8 & 0x1fff) | (uint32_t)(uint8_t)r.bp8 << 13 |
	       (uint32_t)r.kind << 21 | (uint32_t)r.ra8 << 24;
}

static inline unsigned int rule_kind(rule_t w)
{
	return (w >> 21) & 7;
}

/* cfa8 sign-extended from 13 bits. */
static inline int32_t rule_cfa8(rule_t w)
{
	return (int32_t)(w << 19) >> 19;
}

/* The CFA offset in bytes: cfa8 times 8. */
static inline intptr_t rule_cfa_off(rule_t w)
{
	return (intptr_t)((int32_t)(w << 19) >> 16);
}

static inline int rule_bp8(rule_t w)
{
	return (int8_t)((w >> 13) & 0xff);
}

static inline unsigned int rule_ra8(rule_t w)
{
	return w >> 24;
}

static inline unsigned int slot_index(uintptr_t pc)
{
	return (unsigned int)((pc ^ (pc >> RULE_CACHE_BITS)) & (RULE_CACHE_SLOTS - 1));
}

static inline struct rule_slot *slot_of(struct rule_slot *cache, uintptr_t pc)
{
	return &cache[slot_index(pc)];
}

/* The cached rule of pc: true and *r, or false.  A seqlock read: the word
 * before and after the pc, both even and equal, so the two belong to one
 * write (a slot never written reads as pc 0 with the rule of no table,
 * which is pc 0's anyway). */
static inline bool cache_get(struct rule_slot *cache, uintptr_t pc, rule_t *r)
{
	const struct rule_slot *s = slot_of(cache, pc);
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
	uint64_t at = __atomic_load_n(&s->pc, __ATOMIC_RELAXED);

	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (at != pc || (w & 1) || __atomic_load_n(&s->word, __ATOMIC_RELAXED) != w)
		return false;
	*r = (rule_t)(w >> 32);
	return true;
}

/* Caches pc's rule, unless the slot is being written (by another thread,
 * or by the code this signal handler interrupted): it stays as it is. */
static void cache_put(struct rule_slot *cache, uintptr_t pc, rule_t r)
{
	struct rule_slot *s = slot_of(cache, pc);
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);

	if ((w & 1) || !__atomic_compare_exchange_n(&s->word, &w, w | 1, false, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return;
	/* the odd word is visible before the new pc */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->pc, pc, __ATOMIC_RELAXED);
	__atomic_store_n(&s->word, (uint64_t)r << 32 | (uint32_t)(w + 2),
			 __ATOMIC_RELEASE);
}

/* The rule at pc from the tables (and into the cache). */
static __attribute__((noinline)) rule_t rule_lookup(const struct stack_set *set,
						     const struct stack_obj **last, uintptr_t pc,
						     bool cached)
{
	const struct cfi_row *row = row_of(set, last, pc);
	rule_t r = rule_pack(row ? row->r : no_rule);

	if (cached)
		cache_put(set->cache, pc, r);
	return r;
}

static inline __attribute__((always_inline)) rule_t
rule_at(const struct stack_set *set, const struct stack_obj **last, uintptr_t pc, bool cached)
{
	rule_t r;

	if (!set)
		return rule_pack(no_rule);
	if (cached && cache_get(set->cache, pc, &r))
		return r;
	return rule_lookup(set, last, pc, cached);
}

/* A signal frame: the handler returned to the signal restorer with the
 * stack pointer at the ucontext of the kernel's signal frame (its return
 * address popped).  Inline, the registers read through temporaries: a
 * frame whose address escaped to a call would live in memory, and each
 * step of the walk would wait for its stores. */
static inline bool unwind_signal(struct frame *f)
{
	uintptr_t ip, sp, bp, aux;

	if (!arch_sigframe_regs(f->sp, &ip, &sp, &bp))
		return false;
	aux = arch_sigframe_aux(f->sp);
	frame_move(f, ip, sp, true);
	f->bp = bp;
	f->aux = aux;
	return true;
}

#define WORD sizeof(uintptr_t)

/* A frame of the library's save code (CFI_CHAIN, elf/cfi.h): its CFA is
 * the probed code's stack pointer, and its caller the probed instruction
 * itself, read through the detour's return address and the probepoint. */
static inline bool unwind_chain(struct frame *f, rule_t r)
{
	int32_t cfa8 = rule_cfa8(r);
	enum cfi_chain_base how = cfi_chain_base(cfa8);
	uintptr_t base = f->sp, p, q, ip;

	if (how == CFI_CHAIN_AUX)
		base = f->aux;
	else if (how != CFI_CHAIN_SP &&
		 kp_load_nofault(f->sp + (how == CFI_CHAIN_AT_SP8 ? WORD : 0), &base))
		return false;
	if (!base)
		return false;
	base += WORD * cfi_chain_off8(cfa8);
	if (base <= f->sp || (base & (WORD - 1)) ||
	    kp_load_nofault(base - WORD * rule_ra8(r), &p) ||
	    kp_load_nofault(p + (intptr_t)rule_bp8(r), &q) || kp_load_nofault(q, &ip) || !ip)
		return false;
	frame_move(f, ip, base, true);
	return true;
}

/* Frame pointers: CFA = fp + ARCH_FP_CFA_OFFSET (asm/kprobes.h). */
static bool fp_plausible(const struct frame *f)
{
	return f->bp >= f->sp && !(f->bp & (WORD - 1)) && f->bp - f->sp < (1UL << 30);
}

/*
 * What one step of the walk did, for a memo (kprobes_stack_memo()): the
 * frame's registers and the words it read.  The step is a function of
 * them and of the set of tables alone, so when the registers are the same
 * and the words still read the same, the step gives the same caller.
 */
struct memo_frame {
	uintptr_t ip, sp, bp;		/* the frame's registers (ip mapped, if exact) */
	uintptr_t ra_at, ra;		/* the return address's slot, and what it held */
	uintptr_t bp_at, bpv;		/* the caller's bp's slot (memo_no_slot: none), what it held */
	uint32_t flags;			/* MF_* */
	uint32_t pad;
};

/* What a step with no slot for the caller's bp reads for it. */
static const uintptr_t memo_no_slot;

#define MF_EXACT	1u	/* the frame's ip is exact (frame.exact) */
#define MF_FAST		2u	/* the step read ra_at (and bp_at) and nothing else */
#define MF_END		4u	/* the walk ended here, by the rule or the registers */
#define MF_USES_BP	8u	/* the step used the frame's bp (CFA or end) */
#define MF_BP_SAME	16u	/* the caller's bp is the frame's own */
#define MF_DEP		32u	/* the walk from this frame on depends on its bp */
/* Neither MF_FAST nor MF_END: the step read more (a signal frame, the
 * link register), or faulted, or mapped a return address: it is taken
 * again, from the tables. */

static inline __attribute__((always_inline)) void memo_state(struct memo_frame *rec,
							     const struct frame *f)
{
	rec->ip = f->ip;
	rec->sp = f->sp;
	rec->bp = f->bp;
	rec->flags = f->exact ? MF_EXACT : 0;
}

/* What a step did: nothing (the outermost frame, or a stack that makes
 * no sense), moved to the caller, or found that the frame stands for
 * another one (a return into a detour: the probed instruction's frame),
 * which replaces it. */
#define STEP_END	0
#define STEP_CALLER	1
#define STEP_REPLACED	2

/* Where a return address leads into generated code the architecture
 * knows the frames of (a handler entered by a jump returns into its
 * detour): f becomes the frame it stands for. */
static inline __attribute__((always_inline)) bool unwind_generated(struct frame *f,
								     uintptr_t pc)
{
	uintptr_t at = pc, sp = f->sp;

	if (!arch_unwind_return_into(&at, &sp))
		return false;
	frame_move(f, at, sp, true);
	return true;
}

/* One frame up (STEP_*).  rec, when not NULL, gets what the step did. */
static inline __attribute__((always_inline)) int
unwind_one(const struct stack_set *set, const struct stack_obj **last, const struct kp_thread *t,
	   struct frame *f, bool cached, struct memo_frame *rec)
{
	uintptr_t pc = f->exact ? f->ip : f->ip - 1, cfa, ra, raw, bp, ra_at, bp_at = 0;
	rule_t r = rule_at(set, last, pc, cached);
	int bp8 = rule_bp8(r);
	bool bp_fault;

	if (rec)
		memo_state(rec, f);
	switch (rule_kind(r)) {
	case CFI_END:
		if (rec)
			rec->flags |= MF_END;
		return STEP_END;
	case CFI_SIGNAL:
		return unwind_signal(f) ? STEP_CALLER : STEP_END;
	case CFI_CHAIN:
		return unwind_chain(f, r) ? STEP_CALLER : STEP_END;
	case CFI_SP:
	case CFI_BP:
		if (rec && rule_kind(r) == CFI_BP)
			rec->flags |= MF_USES_BP;
		cfa = (rule_kind(r) == CFI_SP ? f->sp : f->bp) + rule_cfa_off(r);
		ra_at = cfa - WORD * rule_ra8(r);
		if (bp8 != CFI_BP_SAME && bp8 != CFI_BP_LOST)
			bp_at = cfa + (intptr_t)WORD * bp8;
		break;
	case CFI_LR:
		/* the return address is still in the link register: known
		 * only for the frame the registers were taken in */
		cfa = f->sp + rule_cfa_off(r);
		if (!f->lr || cfa < f->sp || (cfa & (WORD - 1)))
			return STEP_END;
		ra = f->lr;
		if (t->ri_top)
			ra = kretprobe_find_ret_addr(ra, arch_return_slot_of_cfa(cfa));
		frame_move(f, ra, cfa, false);
		return STEP_CALLER;
	default:
		if (!f->exact && unwind_generated(f, pc))
			return STEP_REPLACED;
		if (rec)
			rec->flags |= MF_USES_BP;
		if (!fp_plausible(f)) {
			if (rec)
				rec->flags |= MF_END;
			return STEP_END;
		}
		cfa = f->bp + ARCH_FP_CFA_OFFSET;
		ra_at = arch_return_slot_of_cfa(cfa);
		bp_at = cfa + ARCH_FP_SAVED_AT;
		bp8 = 0;
		break;
	}
	if (cfa <= f->sp || (cfa & (WORD - 1))) {
		if (rec)
			rec->flags |= MF_END;
		return STEP_END;
	}
	if (kp_load_nofault(ra_at, &ra) || !ra)
		return STEP_END;
	bp_fault = false;
	if (bp8 == CFI_BP_SAME)
		bp = f->bp;
	else if (!bp_at || (bp_fault = kp_load_nofault(bp_at, &bp)))
		bp = 0;
	/* a return-probed frame returns to its instance's stub; the
	 * instance knows the frame by its slot */
	raw = ra;
	if (t->ri_top)
		ra = kretprobe_find_ret_addr(ra, arch_return_slot_of_cfa(cfa));
	if (rec) {
		rec->ra_at = ra_at;
		rec->ra = raw;
		/* no slot: a word that reads 0, so that following the memo
		 * loads and compares two words per frame without a branch */
		if (bp8 == CFI_BP_SAME || !bp_at) {
			rec->bp_at = (uintptr_t)&memo_no_slot;
			rec->bpv = 0;
		} else {
			rec->bp_at = bp_at;
			rec->bpv = bp;
		}
		if (bp8 == CFI_BP_SAME)
			rec->flags |= MF_BP_SAME;
		if (!bp_fault && ra == raw)
			rec->flags |= MF_FAST;
	}
	frame_move(f, ra, cfa, false);
	f->bp = bp;
	return STEP_CALLER;
}

static inline __attribute__((always_inline)) int
unwind(const struct stack_set *set, const struct kp_thread *t, const struct pt_regs *regs,
       unsigned long *ips, int max, bool cached)
{
	uintptr_t ip = instruction_pointer(regs);
	struct frame f = { ip, user_stack_pointer(regs), arch_frame_pointer(regs),
			   arch_link_register(regs), arch_aux_register(regs), true };
	const struct stack_obj *last = NULL;
	int n = 0;

	/* At a probe the ip is past the breakpoint (as the kernel's on
	 * x86-64): the probed instruction has not run yet.  Where the trap
	 * reports the breakpoint's own address (arm64), the ip is exact. */
	if (ARCH_BREAKPOINT_LEN && ip && kp_probepoint_lookup(ip - ARCH_BREAKPOINT_LEN))
		f.exact = false;
	ips[n++] = ip;
	while (n < max) {
		if (f.exact) {
			uintptr_t at = f.ip, sp = f.sp;

			if (arch_unwind_map_ip(&at, &sp)) {
				ips[n - 1] = f.ip = at;
				f.sp = sp;
			}
		}
		int step = unwind_one(set, &last, t, &f, cached, NULL);

		if (step == STEP_END)
			break;
		if (step == STEP_REPLACED)
			ips[n - 1] = f.ip;
		else
			ips[n++] = f.ip;
	}
	return n;
}

/* The record of a thread that has none: no return-probe instances. */
static const struct kp_thread no_record;

/* The calling thread's record for a walk, and its read-side section begun:
 * the thread's own (which every handler's thread has), else the shared
 * section of threads without one.  Never claims a record: handlers call
 * this, and the handler analysis would find the claim's system call and
 * thread-pointer store, and make every hit keep errno. */
static inline __attribute__((always_inline)) const struct kp_thread *walk_enter(void)
{
	struct kp_thread *t = kp_thread_existing();

	if (__builtin_expect(!t, 0)) {
		kp_guest_read_enter();
		return &no_record;
	}
	kp_read_enter(t);
	return t;
}

static inline __attribute__((always_inline)) void walk_exit(const struct kp_thread *t)
{
	if (__builtin_expect(t == &no_record, 0))
		kp_guest_read_exit();
	else
		kp_read_exit((struct kp_thread *)t);
}

static inline __attribute__((always_inline)) int
stack_of(const struct pt_regs *regs, unsigned long *ips, int max, bool cached)
{
	const struct kp_thread *t;
	int n;

	if (!regs || !ips || max < 0)
		return -EINVAL;
	if (!max)
		return 0;
	t = walk_enter();
	n = unwind(__atomic_load_n(&current, __ATOMIC_ACQUIRE), t, regs, ips, max, cached);
	walk_exit(t);
	return n;
}

KP_EXPORT int kprobes_stack(const struct pt_regs *regs, unsigned long *ips, int max)
{
	return stack_of(regs, ips, max, true);
}

int kp_stack_uncached(const struct pt_regs *regs, unsigned long *ips, int max)
{
	return stack_of(regs, ips, max, false);
}

/* ---- remembered stacks: kprobes_stack_memo() ----
 *
 * The walk is a function of the first frame's registers, the words it
 * reads and the set of tables.  A memo keeps, for each frame of the last
 * stack, its registers and the words its step read; a new walk goes on
 * from the tables only until it reaches a frame whose registers are a
 * remembered frame's, then checks the words the remembered steps read
 * (independent loads, no rule looked up) and takes the remembered callers
 * as long as they hold; where one does not, the walk goes on from the
 * tables and may join the memo again further out.  A frame's bp need
 * match only where the walk from it uses bp (MF_DEP): without frame
 * pointers, bp is just one more register.  docs/design.md section 14. */
struct kprobes_stack_memo {
	uint32_t cap;		/* frames in f[], and in the scratch after it */
	uint32_t busy;		/* a call is using it (this thread's: a signal) */
	uint64_t gen;		/* the set of tables f[] was unwound with */
	uint32_t n;		/* frames in f[] (the last stack it returned), f[0] the outermost */
	uint32_t pad;
	uint64_t reserved;
	struct memo_frame f[];
};

_Static_assert(sizeof(struct kprobes_stack_memo) == 32 && sizeof(struct memo_frame) == 64,
	       "KPROBES_STACK_MEMO_SIZE() (kprobes.h) follows the memo's layout");

/* Field by field, where a structure assignment could become a vector
 * move or a call to memcpy. */
static inline __attribute__((always_inline)) void memo_copy(struct memo_frame *d,
							    const struct memo_frame *s)
{
	d->ip = s->ip;
	d->sp = s->sp;
	d->bp = s->bp;
	d->ra_at = s->ra_at;
	d->ra = s->ra;
	d->bp_at = s->bp_at;
	d->bpv = s->bpv;
	d->flags = s->flags;
}

/* Whether the walk at f may go on as the remembered frame m did. */
static inline __attribute__((always_inline)) bool memo_joins(const struct memo_frame *m,
							     const struct frame *f)
{
	return m->sp == f->sp && m->ip == f->ip && !(m->flags & MF_EXACT) == !f->exact &&
	       (!(m->flags & MF_DEP) || m->bp == f->bp);
}

/* MF_DEP of f[from..n), from the outermost in: a frame's walk depends on
 * its bp where its step uses it, where its step is taken again from the
 * tables, or where it hands it on to a caller that depends on it. */
static inline __attribute__((always_inline)) void memo_deps(struct memo_frame *mf, uint32_t from,
							     uint32_t n)
{
	uint32_t dep = from && (mf[from - 1].flags & MF_DEP);

	/* without a branch per frame (the flags vary from frame to frame):
	 * an end depends on bp where it used it, a step taken again always,
	 * a remembered step where it uses bp or hands it on */
	for (uint32_t i = from; i < n; i++) {
		uint32_t fl = mf[i].flags & ~MF_DEP;
		uint32_t uses = !!(fl & MF_USES_BP), same = !!(fl & MF_BP_SAME);
		uint32_t end = !!(fl & MF_END), fast = !!(fl & MF_FAST) & (i != 0);

		dep = uses | ((end ^ 1) & ((fast ^ 1) | (same & dep)));
		mf[i].flags = fl | (dep ? MF_DEP : 0);
	}
}

/* The memo after a walk that did not follow it to the end: the n frames
 * the walk recorded in the scratch, innermost first. */
static void memo_take_walk(struct kprobes_stack_memo *m, const struct memo_frame *sc, int n)
{
	for (int i = 0; i < n; i++)
		memo_copy(&m->f[i], &sc[n - 1 - i]);
	m->n = (uint32_t)n;
	memo_deps(m->f, 0, m->n);
}

/* The memo after a walk that joined it at f[p] and followed it to f[q]:
 * f[q..p] stay (moved to the front), the walk's j frames before the join
 * go in front of them. */
static void memo_take_joined(struct kprobes_stack_memo *m, const struct memo_frame *sc, int j,
			     int p, int q)
{
	int keep = p - q + 1;

	for (int i = 0; q && i < keep; i++)
		memo_copy(&m->f[i], &m->f[q + i]);
	for (int i = 0; i < j; i++)
		memo_copy(&m->f[keep + i], &sc[j - 1 - i]);
	m->n = (uint32_t)(keep + j);
	memo_deps(m->f, q ? 0 : (uint32_t)keep, m->n);
}

/* The walk leaves the memo after following f[p..q] from its frame j: those
 * frames into the scratch after the walk's own. */
static inline __attribute__((always_inline)) void
memo_leave(struct memo_frame *sc, const struct memo_frame *mf, int j, int p, int q)
{
	for (int r = p; r >= q; r--)
		memo_copy(&sc[j + p - r], &mf[r]);
}

static int unwind_memo(const struct stack_set *set, const struct kp_thread *t,
		       const struct pt_regs *regs, unsigned long *ips, int max,
		       struct kprobes_stack_memo *m, int *kept)
{
	struct memo_frame *mf = m->f, *sc = m->f + m->cap;
	uintptr_t ip = instruction_pointer(regs), bp;
	struct frame f = { ip, user_stack_pointer(regs), arch_frame_pointer(regs),
			   arch_link_register(regs), arch_aux_register(regs), true };
	const struct stack_obj *last = NULL;
	bool ended = false;
	int n = 0, p = -1, q, j, step;

	/* a memo of another set of tables, or return-probed frames on the
	 * stack (their return addresses are mapped): the tables only */
	if (set && m->gen == set->gen && !t->ri_top)
		p = (int)(m->n < m->cap ? m->n : m->cap) - 1;
	m->gen = set ? set->gen : 0;
	if (ARCH_BREAKPOINT_LEN && ip && kp_probepoint_lookup(ip - ARCH_BREAKPOINT_LEN))
		f.exact = false;
	ips[n++] = ip;
walk:
	while (n < max) {
		if (f.exact) {
			uintptr_t at = f.ip, sp = f.sp;

			if (arch_unwind_map_ip(&at, &sp)) {
				ips[n - 1] = f.ip = at;
				f.sp = sp;
			}
		}
		if (p >= 0) {
			/* frames further out are further up the stack */
			while (p >= 0 && mf[p].sp < f.sp)
				p--;
			if (p >= 0 && memo_joins(&mf[p], &f))
				goto joined;
		}
step:
		step = unwind_one(set, &last, t, &f, true, &sc[n - 1]);
		if (step == STEP_END) {
			ended = true;
			break;
		}
		if (step == STEP_REPLACED) {
			/* the step that led here is taken again rather than
			 * followed: its return address is not this frame's ip */
			ips[n - 1] = f.ip;
			if (n > 1)
				sc[n - 2].flags &= ~MF_FAST;
		} else {
			ips[n++] = f.ip;
		}
	}
	if (!ended)
		memo_state(&sc[n - 1], &f);	/* not stepped: taken again */
	memo_take_walk(m, sc, n);
	*kept = 0;
	return n;

joined:
	/* ips[n - 1] is mf[p]: check the words each remembered step read.
	 * bp follows the walk (a remembered frame's may differ where the
	 * remembered walk did not use it, and a walk taken again might). */
	j = n - 1;
	bp = f.bp;
	for (q = p;; q--) {
		const struct memo_frame *c = &mf[q];
		uintptr_t ra, cbp, nbp;

		if (n == max || (c->flags & MF_END)) {
			/* the stack ends (or is cut) at mf[q]: it shares
			 * mf[p..0] with the last one when q is 0 */
			memo_take_joined(m, sc, j, p, q);
			*kept = q ? 0 : p + 1;
			return n;
		}
		if (!(c->flags & MF_FAST) || !q ||
		    (kp_load_nofault(c->ra_at, &ra) | kp_load_nofault(c->bp_at, &cbp)) || !ra)
			break;
		ips[n++] = ra;
		nbp = c->flags & MF_BP_SAME ? bp : cbp;
		if ((ra ^ c->ra) | (cbp ^ c->bpv)) {
			/* The same registers, so the same rule and the same
			 * words, but they hold another caller than the memo's
			 * (a call from another place): its frame is
			 * mf[q - 1]'s stack pointer with these, and the walk
			 * goes on from it, to join the memo again further out. */
			memo_leave(sc, mf, j, p, q);
			sc[j + p - q].ra = ra;
			sc[j + p - q].bpv = cbp;
			frame_move(&f, ra, mf[q - 1].sp, false);
			f.bp = nbp;
			p = q - 1;
			goto walk;
		}
		bp = nbp;
	}
	/* mf[q]'s step must be taken from the tables: the walk so far into
	 * the scratch, and on from mf[q]'s registers, to join the memo again
	 * further out */
	memo_leave(sc, mf, j, p, q);
	if (q != p) {
		frame_move(&f, mf[q].ip, mf[q].sp, mf[q].flags & MF_EXACT);
		f.bp = bp;
	}
	p = q - 1;
	goto step;
}

/* As kprobes_stack(), with the memo when this call is the only one using
 * it; *kept as kprobes.h says. */
static int stack_memo(struct kprobes_stack_memo *m, const struct pt_regs *regs,
		      unsigned long *ips, int max, int *kept)
{
	const struct stack_set *set;
	const struct kp_thread *t;
	int n;

	*kept = -1;
	if (!m || !regs || !ips || max < 0)
		return -EINVAL;
	if (!max)
		return 0;
	t = walk_enter();
	set = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	/* A signal handler interrupting a call with this memo (or a call
	 * left by longjmp) finds it busy: the walk without it. */
	if (m->busy || (unsigned int)max > m->cap) {
		n = unwind(set, t, regs, ips, max, true);
	} else {
		__atomic_store_n(&m->busy, 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		n = unwind_memo(set, t, regs, ips, max, m, kept);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&m->busy, 0, __ATOMIC_RELAXED);
	}
	walk_exit(t);
	return n;
}

KP_EXPORT int kprobes_stack_memo(struct kprobes_stack_memo *memo, const struct pt_regs *regs,
				 unsigned long *ips, int max, int *kept)
{
	int dummy;

	return stack_memo(memo, regs, ips, max, kept ? kept : &dummy);
}

KP_EXPORT int kprobes_stack_memo_init(struct kprobes_stack_memo *memo, size_t size)
{
	size_t cap;

	if (!memo || ((uintptr_t)memo & 7) || size < KPROBES_STACK_MEMO_SIZE(1))
		return -EINVAL;
	cap = (size - sizeof(*memo)) / (2 * sizeof(memo->f[0]));
	if (cap > KPROBES_STACK_MEMO_MAX)
		cap = KPROBES_STACK_MEMO_MAX;
	memo->cap = (uint32_t)cap;
	memo->busy = 0;
	memo->gen = 0;
	memo->n = 0;
	memo->pad = 0;
	memo->reserved = 0;
	return (int)cap;
}

#pragma GCC pop_options

/* For tests: the kind of row (enum cfi_kind) the tables have for pc, -1
 * when no object's table covers it. */
int kp_stack_row_kind(uintptr_t pc)
{
	struct kp_thread *t = kp_thread_current();
	const struct stack_obj *last = NULL;
	const struct stack_set *set;
	const struct cfi_row *r;
	int kind;

	if (!t)
		return -EAGAIN;
	kp_read_enter(t);
	set = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	r = set ? row_of(set, &last, pc) : NULL;
	kind = r ? r->r.kind : -1;
	kp_read_exit(t);
	return kind;
}

/* For tests: the kind of the rule cached for pc, -1 when none is. */
int kp_stack_cached_kind(uintptr_t pc)
{
	struct kp_thread *t = kp_thread_current();
	const struct stack_set *set;
	rule_t r;
	int kind;

	if (!t)
		return -EAGAIN;
	kp_read_enter(t);
	set = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	kind = set && pc && cache_get(set->cache, pc, &r) ? (int)rule_kind(r) : -1;
	kp_read_exit(t);
	return kind;
}

unsigned int kp_stack_cache_slot(uintptr_t pc)
{
	return slot_index(pc);
}

/* For tests: the cache's two operations on a cache the caller owns
 * (kp_stack_cache_bytes(), zeroed), with rules as the opaque words the
 * cache keeps.  Two pcs share a slot when they differ by a multiple of
 * KP_STACK_CACHE_SAME_SLOT. */
size_t kp_stack_cache_bytes(void)
{
	return RULE_CACHE_SLOTS * sizeof(struct rule_slot);
}

void kp_stack_cache_put(void *cache, uintptr_t pc, uint32_t rule)
{
	cache_put(cache, pc, rule);
}

bool kp_stack_cache_get(void *cache, uintptr_t pc, uint32_t *rule)
{
	return cache_get(cache, pc, rule);
}

_Static_assert(((KP_STACK_CACHE_SAME_SLOT ^ (KP_STACK_CACHE_SAME_SLOT >> RULE_CACHE_BITS)) &
		(RULE_CACHE_SLOTS - 1)) == 0, "KP_STACK_CACHE_SAME_SLOT: the same slot");

/* After dlclose: once tables exist, they follow the objects. */
void kp_stack_objects_changed(void)
{
	if (__atomic_load_n(&current, __ATOMIC_ACQUIRE))
		kp_stack_tables_update();
}
