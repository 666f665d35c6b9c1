/*
 * Stacks at a hit: kprobes_stack().
 *
 * Off the hit path (at registration, after dlopen/dlclose) every loaded
 * object's call-frame information becomes a compact table (elf/cfi.c);
 * the set of tables is published with one release store and an old set
 * is freed after a grace period, as probepoints are.  On the hit path a
 * read-side section covers the walk: per frame, a binary search for the
 * object and one for its row, then loads that cannot fault
 * (kp_load_nofault).  No lock, no allocation, no system call.
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

/* What the hit path reads: objects sorted by lo. */
struct stack_set {
	size_t n;
	struct stack_obj *obj[];
};

static struct stack_set *current;
static pthread_mutex_t stack_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long built_gen;
static bool built;

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
		err = ksec_foreach_object(add_object, &b);
	}
	if (err) {
		for (size_t i = 0; b.set && i < b.set->n; i++)
			if (!b.set->obj[i]->kept)
				free_object(b.set->obj[i]);
		for (size_t i = 0; old && i < old->n; i++)
			old->obj[i]->kept = false;
		free(b.set);
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
		free(old);
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
 * the registers into a frame with SSE). */
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize", "no-tree-slp-vectorize")

/* Registers of the frame being unwound; exact: ip is where the thread is
 * (frame 0, or interrupted by a signal), not a return address. */
struct frame {
	uintptr_t ip, sp, bp;
	bool exact;
};

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

/* The row for pc; *last is the object of the previous frame, where the
 * next one usually is too. */
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

/* A signal frame: the handler returned to the signal restorer with the
 * stack pointer at the ucontext of the kernel's signal frame (its return
 * address popped). */
static bool unwind_signal(struct frame *f)
{
	uintptr_t ip, sp, bp;

	if (!arch_sigframe_regs(f->sp, &ip, &sp, &bp))
		return false;
	f->ip = ip;
	f->sp = sp;
	f->bp = bp;
	f->exact = true;
	return true;
}

#define WORD sizeof(uintptr_t)

/* Frame pointers: CFA = fp + ARCH_FP_CFA_OFFSET (asm/kprobes.h). */
static bool fp_plausible(const struct frame *f)
{
	return f->bp >= f->sp && !(f->bp & (WORD - 1)) && f->bp - f->sp < (1UL << 30);
}

/* One frame up; false at the outermost frame or where the stack makes
 * no sense. */
static bool unwind_one(const struct stack_set *set, const struct stack_obj **last,
		       struct kp_thread *t, struct frame *f)
{
	uintptr_t pc = f->exact ? f->ip : f->ip - 1, cfa, ra, bp, ra_at;
	const struct cfi_row *r = set ? row_of(set, last, pc) : NULL;
	int kind = r ? r->r.kind : CFI_NONE;

	switch (kind) {
	case CFI_END:
		return false;
	case CFI_SIGNAL:
		return unwind_signal(f);
	case CFI_SP:
		cfa = f->sp + (intptr_t)r->r.cfa_off;
		break;
	case CFI_BP:
		cfa = f->bp + (intptr_t)r->r.cfa_off;
		break;
	default:
		if (!fp_plausible(f))
			return false;
		cfa = f->bp + ARCH_FP_CFA_OFFSET;
		r = NULL;
		break;
	}
	if (cfa <= f->sp || (cfa & (WORD - 1)))
		return false;
	ra_at = r ? cfa - WORD * r->r.ra8 : arch_return_slot_of_cfa(cfa);
	if (kp_load_nofault(ra_at, &ra) || !ra)
		return false;
	if (!r) {
		if (kp_load_nofault(cfa + ARCH_FP_SAVED_AT, &bp))
			bp = 0;
	} else if (r->r.bp8 == CFI_BP_SAME) {
		bp = f->bp;
	} else if (r->r.bp8 == CFI_BP_LOST || kp_load_nofault(cfa + (intptr_t)WORD * r->r.bp8, &bp)) {
		bp = 0;
	}
	/* a return-probed frame returns to its instance's stub */
	if (t->ri_top)
		ra = kretprobe_find_ret_addr(ra, ra_at);
	f->ip = ra;
	f->sp = cfa;
	f->bp = bp;
	f->exact = false;
	return true;
}

static int unwind(const struct stack_set *set, struct kp_thread *t, const struct pt_regs *regs,
		  unsigned long *ips, int max)
{
	uintptr_t ip = instruction_pointer(regs);
	struct frame f = { ip, user_stack_pointer(regs), arch_frame_pointer(regs), true };
	const struct stack_obj *last = NULL;
	int n = 0;

	/* At a probe the ip is past the breakpoint (as the kernel's): the
	 * probed instruction has not run yet. */
	if (ip && kp_probepoint_lookup(ip - ARCH_BREAKPOINT_LEN))
		f.exact = false;
	ips[n++] = ip;
	while (n < max) {
		if (f.exact && arch_unwind_map_ip(&f.ip))
			ips[n - 1] = f.ip;
		if (!unwind_one(set, &last, t, &f))
			break;
		ips[n++] = f.ip;
	}
	return n;
}

KP_EXPORT int kprobes_stack(const struct pt_regs *regs, unsigned long *ips, int max)
{
	struct kp_thread *t;
	int n;

	if (!regs || !ips || max < 0)
		return -EINVAL;
	if (!max)
		return 0;
	t = kp_thread_current();
	if (!t)
		return -EAGAIN;
	kp_read_enter(t);
	n = unwind(__atomic_load_n(&current, __ATOMIC_ACQUIRE), t, regs, ips, max);
	kp_read_exit(t);
	return n;
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

/* After dlclose: once tables exist, they follow the objects. */
void kp_stack_objects_changed(void)
{
	if (__atomic_load_n(&current, __ATOMIC_ACQUIRE))
		kp_stack_tables_update();
}
