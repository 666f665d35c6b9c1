/*
 * libkprobes — Kprobes for Linux user-space processes on x86-64 and arm64.
 *
 * Break into almost any instruction of the running process and run a
 * handler there, non-disruptively.  The API follows the kernel's Kprobes
 * interface so that Kprobes users and examples feel at home; see
 * docs/api.md for one mini man page per function.
 *
 * All functions return 0 or a negative errno.  Handlers run on the thread
 * that hit the probe, possibly inside a signal handler: they must be
 * async-signal-safe.
 */
#ifndef KPROBES_H
#define KPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__x86_64__)

/* Registers at the probe, in the layout and with the names of Linux's
 * struct pt_regs on x86-64.  Handlers may change them; the changes take
 * effect when the probed thread resumes. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx;
	unsigned long r11, r10, r9, r8, ax, cx, dx, si, di;
	unsigned long orig_ax;	/* -1: not in a system call */
	unsigned long ip, cs, flags, sp, ss;
};

#define regs_return_value(regs)		((regs)->ax)
#define instruction_pointer(regs)	((regs)->ip)
#define instruction_pointer_set(regs, v) ((void)((regs)->ip = (unsigned long)(v)))
#define user_stack_pointer(regs)	((regs)->sp)

/* An instruction's first byte, as the kernel's kprobe_opcode_t on x86. */
typedef unsigned char kprobe_opcode_t;

#elif defined(__aarch64__)

/* Registers at the probe, in the layout and with the names of Linux's
 * struct user_pt_regs on arm64 (x0..x30, sp, pc, pstate).  Handlers may
 * change them; the changes take effect when the probed thread resumes. */
struct pt_regs {
	unsigned long regs[31];
	unsigned long sp, pc, pstate;
};

#define regs_return_value(r)		((r)->regs[0])
#define instruction_pointer(regs)	((regs)->pc)
#define instruction_pointer_set(regs, v) ((void)((regs)->pc = (unsigned long)(v)))
#define user_stack_pointer(regs)	((regs)->sp)

/* One A64 instruction word, as the kernel's kprobe_opcode_t on arm64. */
typedef unsigned int kprobe_opcode_t;

#else
#error "libkprobes supports x86-64 and arm64 only"
#endif

/* The n-th (0-based) integer argument of a function entered at regs, by the
 * platform's C calling convention: on x86-64 (SysV) rdi, rsi, rdx, rcx,
 * r8, r9, then the stack; on arm64 (AAPCS64) x0..x7, then the stack. */
unsigned long regs_get_kernel_argument(struct pt_regs *regs, unsigned int n);

struct kprobe;
typedef int (*kprobe_pre_handler_t)(struct kprobe *, struct pt_regs *);
typedef void (*kprobe_post_handler_t)(struct kprobe *, struct pt_regs *,
				      unsigned long flags);
typedef int (*kprobe_fault_handler_t)(struct kprobe *, struct pt_regs *,
				      int trapnr);

/* kprobe.flags */
#define KPROBE_FLAG_GONE	1	/* the probed object was unloaded */
#define KPROBE_FLAG_DISABLED	2	/* probe is temporarily disabled */
#define KPROBE_FLAG_OPTIMIZED	4	/* probe is jump-optimized */
#define KPROBE_FLAG_VECTOR_REGS	8	/* handler reads vector registers (set before register) */
/* The pre-handler reads only the integer argument registers of its
 * pt_regs (regs_get_kernel_argument() n < 6; on x86-64 di si dx cx r8 r9)
 * and changes none of it (set before register): a jump-optimized function
 * entry then hands it those alone, at the cost of an empty probe.  Its
 * other fields are then undefined. */
#define KPROBE_FLAG_ARGS_ONLY	16

struct kprobe {
	/* Where: addr, or symbol_name (+ offset) — never both. */
	kprobe_opcode_t *addr;
	const char *symbol_name;	/* "name" or "object:name" */
	unsigned int offset;

	kprobe_pre_handler_t pre_handler;
	kprobe_post_handler_t post_handler;
	kprobe_fault_handler_t fault_handler;

	unsigned long nmissed;		/* hits that could not run handlers */
	unsigned int flags;		/* KPROBE_FLAG_* */

	/* Saved first byte of the probed instruction (filled on register). */
	kprobe_opcode_t opcode;

	/* Private to libkprobes: do not touch. */
	struct kprobe *__next;
	void *__pp;
	unsigned int __state;
	unsigned int __type;
	void *__reserved[4];
};

/* Registers p; on success the probe is armed and p->addr holds the resolved
 * address.  -EINVAL: both or neither of addr/symbol_name, blacklisted or
 * non-executable address, unprobeable instruction, p already registered,
 * symbol_name + offset outside that symbol's function, code that runs only
 * while the process starts; -ENOENT: unknown symbol; -EILSEQ: addr is not
 * an instruction boundary (code of a symbol of size 0 is decoded from the
 * symbol). */
int register_kprobe(struct kprobe *p);
/* Removes p; when it returns no handler of p runs any more.  Unregistering
 * a probe that is not registered just clears p->addr. */
void unregister_kprobe(struct kprobe *p);
/* All or none: on the first failure the ones before are unregistered and
 * that error is returned. */
int register_kprobes(struct kprobe **kps, int num);
void unregister_kprobes(struct kprobe **kps, int num);
/* Temporarily disarm / re-arm a registered probe (-EINVAL if unregistered). */
int disable_kprobe(struct kprobe *p);
int enable_kprobe(struct kprobe *p);

/* ---- Return probes ---- */

struct kretprobe;

/* One pending return of a return-probed function. */
struct kretprobe_instance {
	struct kretprobe *rp;
	kprobe_opcode_t *ret_addr;	/* the real return address */
	pid_t task;			/* thread id */
	char data[] __attribute__((aligned(16)));	/* kretprobe.data_size bytes */
};

typedef int (*kretprobe_handler_t)(struct kretprobe_instance *, struct pt_regs *);

struct kretprobe {
	struct kprobe kp;		/* where: the function's entry */
	kretprobe_handler_t handler;	/* at the return; regs->ax = return value */
	kretprobe_handler_t entry_handler; /* at the entry; non-zero: skip this return */
	int maxactive;			/* instances; <= 0: max(10, 2 * CPUs) */
	int nmissed;			/* entries with no free instance */
	size_t data_size;		/* per-instance private data */

	/* Private to libkprobes: do not touch. */
	void *__pool;
};

/* Limits of a return probe: instances (maxactive) and private bytes per
 * instance (data_size); larger values are refused with -EINVAL. */
#define KRETPROBE_MAXACTIVE_MAX	(1 << 20)
#define KRETPROBE_MAX_DATA_SIZE	((size_t)1 << 20)

/* Registers a return probe on the function entry rp->kp.addr or
 * rp->kp.symbol_name (offset must be 0).  Errors as register_kprobe(), and
 * -EINVAL when the address is not a function entry, when the function
 * never returns to a caller (the program's entry point, exit(), abort(),
 * a function with no way out) or runs only before any probe can be armed,
 * or when maxactive or data_size is above its limit; -ENOMEM, also for a
 * pool of instances above 1 GiB. */
int register_kretprobe(struct kretprobe *rp);
/* Removes rp; returns still pending complete normally, without handler. */
void unregister_kretprobe(struct kretprobe *rp);
int register_kretprobes(struct kretprobe **rps, int num);
void unregister_kretprobes(struct kretprobe **rps, int num);
int disable_kretprobe(struct kretprobe *rp);
int enable_kretprobe(struct kretprobe *rp);

/* For handlers that walk stacks: when a return address read from the stack
 * slot `slot` is the return-probe trampoline, the real return address of
 * the calling thread's frame; otherwise addr unchanged. */
unsigned long kretprobe_find_ret_addr(unsigned long addr, unsigned long slot);

/* ---- Stacks ---- */

/* Return addresses of the stack at a hit, innermost first: regs->ip, then
 * each caller.  Unwinds with the call-frame information of every loaded
 * object (tables built at registration and when objects load), frame
 * pointers where there is none; return-probed frames show their real
 * return addresses, signal frames are unwound through.  Async-signal-safe,
 * no lock, no allocation, no system call, and never claims a per-thread
 * record (a handler's thread has one; a thread without one walks in a
 * shared section).  Returns the number stored, or -EINVAL (bad arguments). */
int kprobes_stack(const struct pt_regs *regs, unsigned long *ips, int max);

/* A memory of the last stack captured, which makes the next capture of a
 * stack that shares its outer frames cheaper: kprobes_stack_memo() walks
 * from the tables only until it meets a remembered frame, then checks the
 * words the remembered frames' unwinding read (one load each) instead of
 * unwinding them.  The result is always kprobes_stack()'s.  The caller
 * provides KPROBES_STACK_MEMO_SIZE(max) bytes, 8-byte aligned, prepared
 * by kprobes_stack_memo_init(), and uses a memo from one thread at a time
 * (one per thread, typically). */
struct kprobes_stack_memo;
#define KPROBES_STACK_MEMO_SIZE(max)	(32 + 128 * (size_t)(max))
#define KPROBES_STACK_MEMO_MAX		1024	/* frames a memo remembers at most */

/* Prepares size bytes at memo; returns the frames it can remember (what
 * the size allows, at most KPROBES_STACK_MEMO_MAX), or -EINVAL (NULL,
 * misaligned, smaller than KPROBES_STACK_MEMO_SIZE(1)).  Allocates
 * nothing: a handler may call it. */
int kprobes_stack_memo_init(struct kprobes_stack_memo *memo, size_t size);

/* kprobes_stack() with a memo: the same frames, the same returns, and
 * async-signal-safe likewise.  *kept (kept may be NULL) says how this
 * stack relates to the last one the memo remembered: k >= 0, its
 * outermost k frames are that stack's outermost k frames, and this stack
 * is remembered now; -1, it was captured without the memo (max larger
 * than the memo remembers, an error, or the memo in use: a signal handler
 * interrupting a call with the same memo, or a call left by longjmp,
 * after which the memo stays unused until kprobes_stack_memo_init()),
 * which still remembers the one before. */
int kprobes_stack_memo(struct kprobes_stack_memo *memo, const struct pt_regs *regs,
		       unsigned long *ips, int max, int *kept);

/* ---- The probed code's vector registers ---- */

/* Copies the low len bytes (1..16) of vector register n (xmm0..xmm15 on
 * x86-64, v0..v31 on arm64) as the probed code had it at the probed
 * instruction into out.
 * Only from inside a pre- or post-handler of a kprobe running for that hit:
 * regs is the pt_regs the handler was given, which identifies the hit.
 * Breakpoint hits read the registers the kernel saved in the signal frame;
 * a jump-optimized hit reads the state its detour saved, which it does for
 * a probe registered with KPROBE_FLAG_VECTOR_REGS in flags (or whose
 * handler may change vector registers); at a function entry a detour keeps
 * only the argument registers xmm0..xmm7.  Async-signal-safe, no lock, no
 * allocation, no system call.  A return probe's handler reads the
 * registers as the function returned (xmm0: a floating-point return
 * value; v0 on arm64) when the return probe was registered with
 * KPROBE_FLAG_VECTOR_REGS in kp.flags.  Returns 0; -EINVAL: out NULL, len 0 or above 16,
 * n above 15 (31 on arm64), or regs not those of a hit whose handlers run
 * on this thread; -ENOENT: inside a handler, but that register's value was
 * not kept for this hit (a jump-optimized probe without the flag, xmm8 and
 * up at a function entry, a return handler without the flag). */
int kprobes_vector_reg(const struct pt_regs *regs, unsigned int n, void *out, size_t len);

/* ---- Reading memory that may not be there ---- */

/* Copies len bytes from src to dst and returns 0, or returns -EFAULT when
 * any byte of either range cannot be accessed (unmapped, PROT_NONE, past
 * the end of a file mapping, a non-canonical or kernel address); dst may
 * then hold part of the copy.  Never kills the process: the fault is
 * caught by the library's SIGSEGV/SIGBUS handler and never reaches the
 * program's own.  Async-signal-safe, no lock, no allocation; usable from
 * any thread and in handlers.  A read of 1, 2, 4 or 8 bytes is a single
 * load, no system call; only where a fault could not reach the library's
 * handler (a thread that blocks SIGSEGV or SIGBUS, a program handler that
 * blocks them) it reads through process_vm_readv(2) instead. */
long kprobes_read_nofault(void *dst, const void *src, size_t len);

/* Follows a chain of pointers as kprobes_read_nofault() reads: v = base,
 * then for each of the n hops v = the size[i] (1, 2, 4 or 8) bytes at
 * v + off[i], zero-extended.  Returns 0 with *out = v; -EFAULT when a load
 * faults or falls in the first page (a NULL pointer's field); -EINVAL for n
 * outside 0..KPROBES_CHAIN_MAX, another size, off or size NULL with n > 0,
 * out NULL.  Async-signal-safe, no lock, no allocation; one load per hop
 * and no system call where kprobes_read_nofault() makes none: for handlers
 * that fetch a program's variables through pointers at every hit. */
#define KPROBES_CHAIN_MAX 16
int kprobes_read_chain_nofault(unsigned long base, const int32_t *off, const uint8_t *size,
			       int n, uint64_t *out);

/* ---- Jprobes ---- */

/* A jprobe's entry is a function with the probed function's prototype; it
 * runs with the probed function's registers and a copy of its stack, must
 * end with jprobe_return(), and then the function runs unchanged. */
struct jprobe {
	struct kprobe kp;
	void *entry;
};

/* -EEXIST: the function already has a jprobe; otherwise as register_kprobe. */
int register_jprobe(struct jprobe *jp);
void unregister_jprobe(struct jprobe *jp);
int register_jprobes(struct jprobe **jps, int num);
void unregister_jprobes(struct jprobe **jps, int num);
int disable_jprobe(struct jprobe *jp);
int enable_jprobe(struct jprobe *jp);
/* Ends a jprobe entry function; does not return to its caller. */
void jprobe_return(void) __attribute__((noreturn));

/* Watchpoint probes: a handler after every access to a variable, through
 * the processor's debug registers (perf_event_open breakpoints with
 * synchronous SIGTRAP, Linux 5.13 or later).  Every thread of the process,
 * present and future, is watched; a forked child is watched by its own
 * copy, an exec'd program is not.  At most four per process (the debug
 * registers); see docs/api.md for what a hit costs. */
#define WPROBE_W	1	/* writes */
#define WPROBE_RW	3	/* reads and writes */

struct wprobe;
typedef void (*wprobe_handler_t)(struct wprobe *, struct pt_regs *);

struct wprobe {
	/* What: addr, or symbol_name (+ offset) of a variable — never both;
	 * "name" or "object:name". */
	void *addr;
	const char *symbol_name;
	unsigned int offset;
	unsigned int len;		/* 1, 2, 4 or 8; addr aligned to it */
	unsigned int type;		/* WPROBE_W or WPROBE_RW */
	/* Runs on the accessing thread after the access: regs->ip is the
	 * instruction after it, the variable holds the new value. */
	wprobe_handler_t handler;

	unsigned long nmissed;		/* accesses that could not run handler */
	unsigned int flags;		/* KPROBE_FLAG_DISABLED */

	/* Private to libkprobes: do not touch. */
	unsigned int __state;
	void *__reserved[2];
};

/* Arms a watchpoint; on success wp->addr holds the resolved address.
 * -EINVAL: both or neither of addr/symbol_name, a length other than 1, 2,
 * 4 or 8, an address not aligned to it, a bad type, wp already registered;
 * -ENOENT: unknown variable; -ENOSPC: no free debug register; -EOPNOTSUPP:
 * no hardware breakpoints here; -EACCES: perf events forbidden
 * (kernel.perf_event_paranoid). */
int register_wprobe(struct wprobe *wp);
/* No thread is watched when it returns, and the handler is not running. */
void unregister_wprobe(struct wprobe *wp);
int disable_wprobe(struct wprobe *wp);
int enable_wprobe(struct wprobe *wp);

/* Put fn on the blacklist: any probe inside it is refused with -EINVAL. */
void __kprobes_blacklist_add(const void *fn);
#define __KP_CAT2(a, b) a##b
#define __KP_CAT(a, b) __KP_CAT2(a, b)
#define NOKPROBE_SYMBOL(fn)						\
	static void __attribute__((constructor, used))			\
	__KP_CAT(__kprobes_nokprobe_, __LINE__)(void)			\
	{ __kprobes_blacklist_add((const void *)(fn)); }

/* The list of registered probes, one line each, as Kprobes' debugfs list:
 * "ADDRESS  TYPE  SYMBOL+0xOFF  [OBJECT]  [GONE] [DISABLED] [OPTIMIZED]";
 * watchpoints as "ADDRESS  w  SYMBOL+0xOFF  [OBJECT]  [W|RW]  [DISABLED]".
 * Returns 0 or a negative errno. */
int kprobes_list(FILE *out);

/* The global "enabled" knob: off disarms every probe without touching
 * their own disabled state; on re-arms them.  KPROBES_ENABLED=0|1. */
void kprobes_set_enabled(bool on);
bool kprobes_enabled(void);

/* The "optimization" knob (KPROBES_OPTIMIZATION=0|1). */
void kprobes_set_optimization(bool on);
bool kprobes_optimization(void);

/* ---- For tools that drive the library from inside a process ----
 * (the kprobe tool's agent, a tracer's preloaded object; see also
 * <kprobes/symbols.h>) */

/* Runs the jump optimizer now, on the calling thread, over every probe
 * waiting for its jump, rather than after the optimizer thread's delay.
 * Returns how many still wait (a thread was in the code their jump would
 * cover: the optimizer thread retries them), 0 when none.  Not from a
 * handler. */
int kprobes_optimize_now(void);

/* Why a kprobe (is_return false) or a return probe at addr is refused
 * with -EINVAL for the place itself (a short phrase such as "inside the
 * library's own code"), or NULL when the place is not the reason (the
 * instruction may still be).  The string is static. */
const char *kprobes_probe_refusal(unsigned long addr, bool is_return);

/* The calling thread's probes quiet from kprobes_quiet_begin() to
 * kprobes_quiet_end(): a probe hit in between runs no handler and counts
 * in its nmissed, as a hit inside a handler does.  For a tool's own work
 * on a program's thread (flushing its counts at exit, say) that is not the
 * program's.  Nests; async-signal-safe.  0, or -ENOMEM when the thread's
 * record could not be had (nothing is quiet then).  Call
 * kprobes_quiet_end() once for each kprobes_quiet_begin() that returned 0;
 * one without such a begin does nothing. */
int kprobes_quiet_begin(void);
void kprobes_quiet_end(void);

/* Whether tid is a thread the library runs itself (its optimizer): what
 * it hits are the library's calls, not the program's.  Async-signal-safe,
 * no lock, no system call: usable in any handler. */
bool kprobes_library_thread(pid_t tid);

/* Whether addr is an instruction boundary, decoding from start (a known
 * instruction start) without leaving [start, start + len), with the code
 * read as it was before any probe: 0; -EILSEQ: not a boundary (or code
 * that does not decode that far); -EFAULT: unreadable code; -EINVAL: len
 * 0, or addr outside the range; -ENOMEM. */
int kprobes_insn_boundary(unsigned long start, size_t len, unsigned long addr);

/* Where the function starting at func returns: its exit sites, in
 * address order, into sites[0..max).  Each is the first instruction of a
 * straight run of instructions that ends in one of the function's ways out
 * (a return instruction, or a jump out of the function: a tail call) with
 * no branch target after it and no branch or call before that end; every
 * return of the function passes exactly one site, once, and that after
 * every call the function makes.  A kprobe on each site counts or times
 * the function's returns without a return probe: no instance, no return
 * address replaced.  Unlike a return probe, a site is hit before the
 * run's last instructions (the return value may not be in its register
 * yet), a tail call returns at its jump, and returns by longjmp or an
 * exception pass no site (a return probe's handler misses those too).
 * flags: KPROBES_EXITS_JUMP, every site must be able to take a jump (a
 * breakpoint on each would cost more than a return probe);
 * KPROBES_EXITS_RETURNS, every way out must be a return instruction (no
 * tail call: a tool that times calls, or nests the called function's
 * calls in them, wants the return a return probe sees).  The number of
 * sites (0: the function never returns); -ENOENT: no function of known
 * size at func; -EINVAL: func is inside a function, bad arguments;
 * -EOPNOTSUPP: a way out ends no such run (a conditional branch out of the
 * function, an indirect jump whose targets are not known, code elsewhere
 * jumping into the function's middle, a tail call whose target comes back
 * into it), a site cannot
 * take a jump (with the flag), a way out is a tail call (with
 * KPROBES_EXITS_RETURNS); -E2BIG: more than max (or than 256); -ENOMEM,
 * -EFAULT.  On arm64 each site is a way out itself (a RET, or a B out of
 * the function).  Not from a handler. */
#define KPROBES_EXITS_JUMP	1u
#define KPROBES_EXITS_RETURNS	2u
int kprobes_exit_sites(unsigned long func, unsigned long *sites, int max, unsigned int flags);

/* For a tool leaving a process it was loaded into: ends the library's
 * optimizer thread and closes the library's descriptor of the process's
 * memory.  Registered probes keep working; the next call that needs
 * either starts it again.  Not from a handler. */
void kprobes_release_resources(void);

#ifdef __cplusplus
}
#endif

#endif /* KPROBES_H */
