/* The contract between the core and an architecture.
 *
 * The core decides what is probed and which handlers run; the architecture
 * decodes instructions, owns the out-of-line slots, patches code and turns a
 * trap into calls of the core's dispatch functions. */
#ifndef KP_ARCH_H
#define KP_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The architecture's sizes, instruction holder (struct arch_insn) and
 * register and return-address accessors: src/arch/<arch>/include/. */
#include "asm/kprobes.h"

struct kp_probepoint;

/* Decodes the instruction at pp->addr, which lies in the function
 * [func, func+func_size) (func_size 0: unknown, decode from addr), and builds
 * its out-of-line slot.  -EILSEQ: not an instruction boundary; -EINVAL: the
 * instruction cannot be probed; -ENOMEM. */
int arch_prepare_probepoint(struct kp_probepoint *pp, uintptr_t func, size_t func_size);

/* Whether addr is reached by decoding instructions from start, a known
 * instruction start, without leaving [start, start+len): 0, or -EILSEQ
 * (also when the bytes cannot be decoded that far), -EFAULT, -ENOMEM. */
int arch_check_boundary(uintptr_t start, size_t len, uintptr_t addr);

/* Whether the code of a function, in n ranges [start, end) (its body and
 * the parts the compiler moved away, such as NAME.cold), is proven never to
 * return to the caller: decoded, it has no return, no jump out of the
 * ranges, no indirect jump, and does not run off a range's end. */
bool arch_code_never_returns(const uintptr_t (*ranges)[2], int n);

/* The exit sites of the function [func, func+size) (pad bytes of padding
 * after it), in address order, into sites[0..max): the first instruction
 * of each straight run of instructions that ends in a way out of the
 * function (a return, a tail call), which every return through that way
 * passes exactly once and no other path reaches.  Under the registry lock.
 * *tail: a way out is a jump out of the function (a tail call).  Their
 * number; -EOPNOTSUPP: the function has a way out that ends no such run,
 * or cannot be analysed; -E2BIG: more than max; -ENOMEM, -EFAULT. */
int arch_exit_sites(uintptr_t func, size_t size, size_t pad, uintptr_t *sites, int max,
		    bool *tail);

/* The probepoint will not be hit any more (disarmed, out of the table, a
 * grace period passed): its slot and pp itself are freed once no thread can
 * be inside the slot any more. */
void arch_retire_probepoint(struct kp_probepoint *pp);

/* Writes / removes breakpoints at n probepoints, with one core
 * synchronization for the batch. */
int arch_arm(struct kp_probepoint **pps, int n);
int arch_disarm(struct kp_probepoint **pps, int n);

/* len bytes of the program's code at addr, with the library's own
 * rewrites (breakpoints, jumps, static-key sites) taken out: 0, or -EFAULT
 * when the range is not readable.  Never faults, and never reads the code
 * twice: memory unmapped (and perhaps mapped again) meanwhile yields an
 * error or the bytes of one read. */
int arch_read_original(uintptr_t addr, uint8_t *buf, size_t len);

/* For the stack unwinder: an ip inside an out-of-line slot or a detour's
 * copied instructions becomes the probed instruction's address (true);
 * the stack there is the one the original instruction runs with.  Where
 * the architecture knows the generated code's frame (x86-64: anywhere in
 * a detour), *sp becomes the program's stack pointer at that instruction
 * too.  Async-signal-safe. */
bool arch_unwind_map_ip(uintptr_t *ip, uintptr_t *sp);

/* For the stack unwinder, where no table covers a return address: when
 * pc (the return address minus one) lies in generated code whose frames
 * the architecture knows (x86-64: a detour, returned into by a handler
 * entered by a jump), *pc becomes the probed instruction the frame stands
 * for and *sp the program's stack pointer there (true).  Async-signal-safe. */
bool arch_unwind_return_into(uintptr_t *pc, uintptr_t *sp);

/* Installs the trap handlers. */
int arch_init(void);

/* In a fork child, on its only thread: forgets what the parent's other
 * threads were doing in arch code at the fork (a trap handler reading the
 * rewrite in progress), which no thread of the child will finish. */
void arch_after_fork_child(void);

/* Watchpoints (core/wprobe.c), under the registry lock.  What the
 * architecture needs before a watchpoint is armed (arm64, whose
 * watchpoints trap before the access: the slots its trap handler steps
 * accesses in); 0 or -errno. */
int arch_wprobe_prepare(void);
/* In a fork child, before its watchpoints are armed again: 0, or -errno
 * (they are then left unarmed). */
int arch_wprobe_after_fork_child(void);

/* [lo, hi) of the code that handles traps, to be kept unprobed. */
void arch_trap_path_range(uintptr_t *lo, uintptr_t *hi);

/* Units in use right now: out-of-line slots, of which quarantined, and
 * detour buffers (a racy snapshot, for kp_get_stats). */
void arch_stats(unsigned long *slots, unsigned long *retired_slots, unsigned long *detours);
/* Bytes the arch code has allocated for good (tables that describe its
 * executable pools to unwinders and debuggers, which stay as they do). */
size_t arch_kept_bytes(void);
/* Frees quarantined slots no thread can be in; returns how many.  Under
 * the registry lock. */
int arch_reclaim(void);

/* ---- jump optimization ---- */

/* Analyses (once) whether pp can take a jump: 0, -EINVAL (see
 * arch_opt_why), -ENOMEM. */
int arch_opt_analyse_pp(struct kp_probepoint *pp);
const char *arch_opt_why(const struct kp_probepoint *pp);
/* Bytes the jump of pp replaces (1 when it cannot be optimized). */
uint8_t arch_opt_region_len(const struct kp_probepoint *pp);
/* Ranges no thread may be in while pp's jump is installed; returns count
 * (at most ARCH_OPT_CENSUS_MAX). */
/* ARCH_OPT_CENSUS_MAX: asm/kprobes.h. */
int arch_opt_census_ranges(const struct kp_probepoint *pp, uintptr_t (*r)[2]);
/* Would a probe at addr be optimized?  NULL, or why not (no side effects). */
const char *arch_opt_check(uintptr_t addr, uintptr_t func, size_t size, size_t pad);
/* Builds pp's detour, which trapping threads use from then on: 0,
 * -EINVAL, -ENOMEM. */
int arch_detour_build(struct kp_probepoint *pp);
/* Installs / removes the jumps (detours built before). */
int arch_optimize(struct kp_probepoint **pps, int n);
int arch_unoptimize(struct kp_probepoint **pps, int n);
/* KP_OPT_SAVE_* bits for the function at fn, its size bytes of code
 * read into code: whether it may change vector/x87 registers, r8-r11 or
 * errno, or read its pt_regs (a handler that provably cannot spares the
 * detour or the return trampoline that work), with what it calls or
 * branches to outside itself, through kp_code_walk_call(w, target).
 * Callers use kp_code_needs(). */
struct kp_code_walk;
uint8_t arch_code_scan(struct kp_code_walk *w, const void *code, size_t size, uintptr_t fn);

/* ---- static keys ---- */

/* One site to rewrite: to a JMP to target, or to a NOP. */
struct arch_jl_patch {
	uintptr_t addr;
	uintptr_t target;
	bool jump;
};

/* A site is ARCH_JUMP_LABEL_LEN bytes (asm/kprobes.h). */
static inline size_t arch_jump_label_len(void)
{
	return ARCH_JUMP_LABEL_LEN;
}
/* A site's bytes in the NOP form. */
extern const uint8_t arch_jump_label_nop[ARCH_JUMP_LABEL_LEN];
/* -EINVAL unless every site holds a NOP or its JMP (nothing written). */
int arch_jump_label_check(const struct arch_jl_patch *p, int n);
/* Rewrites the sites live, int3 first, cores synchronized in between.
 * Threads that meet a half-written site are sent on by the trap handler
 * per the key's current value. */
int arch_jump_label_apply(const struct arch_jl_patch *p, int n);

/* ---- return probes and jprobes ---- */

struct pt_regs;
struct kp_thread;

/* fn(a, b) with the vector and x87 state saved around it. */
int kp_call_fpu_saved(int (*fn)(void *, void *), void *a, void *b);
#ifdef ARCH_HAS_RETURN_VECTOR_REGS
/* The same code under the name that says fn also gets the saved image,
 * in the layout arch_fpu_image_layout() names (kp_thread.vec_layout). */
int kp_call_fpu_image(int (*fn)(void *, void *, const void *), void *a, void *b);
unsigned int arch_fpu_image_layout(void);
#endif

/* Per-instance return stubs with unwind information (see retstub.c). */
struct ret_stubs;
struct ret_stubs *arch_ret_stubs_create(int n, uintptr_t (*ret_loc)(int, void *), void *arg);
void arch_ret_stubs_destroy(struct ret_stubs *rs);
uintptr_t arch_ret_stub(const struct ret_stubs *rs, int i);
/* ARCH_RET_STUB_ENTRY, the bytes of a stub before its return point, and
 * arch_ret_stub_call(), the optimized entry's fast instance set-up, are
 * in asm/kprobes.h. */

/* The trampoline a return-probed function returns into. */
uintptr_t arch_kretprobe_trampoline(void);

/* Saves what a jprobe's entry function may change (registers, vector and
 * x87 state, the stack arguments) in the thread's jprobe area. 0/-ENOMEM. */
int arch_jprobe_save(struct kp_thread *t, struct pt_regs *regs);

#endif
