/*
 * What the kprobe tool (both sides: the CLI and the agent) knows of arm64:
 * the counter its time stamps use, the spin-wait hint, the processor
 * number, the registers arguments, return values and DWARF register
 * numbers live in.  The same names as tools/kprobe/arch/x86_64/kp_arch.h.
 */
#ifndef KPROBE_ARCH_H
#define KPROBE_ARCH_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#include <kprobes.h>

#define KP_ARCH_NAME "arm64"

/* glibc's thread control block (struct pthread) ends at the thread
 * pointer, the TLS blocks follow it (TLS variant I). */
#define KP_TCB_BELOW_TP 1

/* Every instruction is one word. */
#define KP_MAX_INSN_LEN 4

/* The generic timer's virtual count (CNTVCT_EL0), which Linux lets user
 * space read: one rate (CNTFRQ_EL0) on every CPU by the architecture, so
 * it serves as the x86-64 build's invariant TSC does.  Macros, as on
 * x86-64, so that code of any target options can use them. */
#define kp_cycles()                                                            \
	({                                                                       \
		uint64_t kp__v;                                                  \
		__asm__ volatile("mrs %0, cntvct_el0" : "=r"(kp__v));            \
		kp__v;                                                           \
	})

static inline uint64_t kp_cycles_per_sec(void)
{
	uint64_t f;

	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
	return f;
}

/* The generic timer is invariant by the architecture. */
#define KP_CYCLES_ALWAYS_INVARIANT 1

/* Ticks a full ring is waited for at most: four seconds. */
static inline uint64_t kp_cycles_wait_limit(void)
{
	uint64_t f = kp_cycles_per_sec();

	return (f ? f : 1000000000ull) * 4;
}

#define kp_cpu_relax() __asm__ volatile("yield" ::: "memory")

/* The processor the thread runs on: the cpu_id the kernel keeps in the
 * thread's rseq area, which glibc registers (arm64 has no rdtscp and no
 * vDSO getcpu); sched_getcpu(), a system call, only when glibc was told
 * not to register it. */
#define kp_cpu_id()                                                            \
	(__rseq_size >= 8 ?                                                      \
	 __atomic_load_n(&((const struct rseq *)((char *)__builtin_thread_pointer() + \
						   __rseq_offset))->cpu_id,      \
			 __ATOMIC_RELAXED) & 0xfff :                             \
	 (unsigned int)sched_getcpu() & 0xfff)

/* A system call without libc (no errno, no PLT): the hit path's.  The
 * number in x8, the arguments in x0..x5, the result in x0. */
static inline long kp_raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

/* Owns a cache line before it is written. */
#define kp_prefetch_write(p) __asm__ volatile("prfm pstl1keep, %0" : : "Q"(*(p)))

/* sargN at a function's entry is the word at sp + 8 * (N + this):
 * the return address is in the link register. */
#define KP_SARG_SKIP 0

/* reg("NAME") in programs: bpftrace's register names for arm64, in the
 * order of struct pt_regs' words (x0..x30, sp, pc, pstate), and the one
 * that is the instruction pointer. */
#define KP_REG_NAMES                                                           \
	"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10",     \
	"r11", "r12", "r13", "r14", "r15", "r16", "r17", "r18", "r19", "r20",   \
	"r21", "r22", "r23", "r24", "r25", "r26", "r27", "r28", "r29", "r30",   \
	"sp", "pc", "pstate"
#define KP_REG_IP "pc"
/* The trap reports the breakpoint's own address: no bias. */
#define KP_PROBE_IP_BIAS 0

/* pt_regs offsets of the AAPCS64 integer argument registers the tool
 * reads (arg1..arg6: x0..x5) and of the return value's (x0). */
#define KP_ARG_REG_OFFSETS                                                     \
	offsetof(struct pt_regs, regs[0]), offsetof(struct pt_regs, regs[1]),    \
	offsetof(struct pt_regs, regs[2]), offsetof(struct pt_regs, regs[3]),    \
	offsetof(struct pt_regs, regs[4]), offsetof(struct pt_regs, regs[5])
#define KP_RET_REG_OFFSET offsetof(struct pt_regs, regs[0])
/* The same by a constant index, as a plain field access. */
#define KP_ARG_REG(r, n) ((r)->regs[n])

/* DWARF register numbers a fetch plan may read (AArch64 DWARF: x0..x30 are
 * 0..30, sp 31), and 32, the pc. */
#define KP_DWARF_PC 32
/* The stack pointer's DWARF number: a caller's is the callee's CFA. */
#define KP_DWARF_SP 31
/* kprobes_vector_reg() works in a return handler registered with
 * KPROBE_FLAG_VECTOR_REGS (d0: a double's return value). */
#define KP_RETURN_VECTOR_REGS 1
/* The DWARF number of v0 (v1..v31 follow). */
#define KP_DWARF_VREG0 64
#define KP_DWARF_REG_OFFSETS                                                   \
	offsetof(struct pt_regs, regs[0]), offsetof(struct pt_regs, regs[1]),    \
	offsetof(struct pt_regs, regs[2]), offsetof(struct pt_regs, regs[3]),    \
	offsetof(struct pt_regs, regs[4]), offsetof(struct pt_regs, regs[5]),    \
	offsetof(struct pt_regs, regs[6]), offsetof(struct pt_regs, regs[7]),    \
	offsetof(struct pt_regs, regs[8]), offsetof(struct pt_regs, regs[9]),    \
	offsetof(struct pt_regs, regs[10]), offsetof(struct pt_regs, regs[11]),  \
	offsetof(struct pt_regs, regs[12]), offsetof(struct pt_regs, regs[13]),  \
	offsetof(struct pt_regs, regs[14]), offsetof(struct pt_regs, regs[15]),  \
	offsetof(struct pt_regs, regs[16]), offsetof(struct pt_regs, regs[17]),  \
	offsetof(struct pt_regs, regs[18]), offsetof(struct pt_regs, regs[19]),  \
	offsetof(struct pt_regs, regs[20]), offsetof(struct pt_regs, regs[21]),  \
	offsetof(struct pt_regs, regs[22]), offsetof(struct pt_regs, regs[23]),  \
	offsetof(struct pt_regs, regs[24]), offsetof(struct pt_regs, regs[25]),  \
	offsetof(struct pt_regs, regs[26]), offsetof(struct pt_regs, regs[27]),  \
	offsetof(struct pt_regs, regs[28]), offsetof(struct pt_regs, regs[29]),  \
	offsetof(struct pt_regs, regs[30]), offsetof(struct pt_regs, sp),        \
	offsetof(struct pt_regs, pc)

/* An entry point that hands a return handler the float return value
 * (d0) as its third argument (x2), then branches to target: libkprobes'
 * return path calls handlers with the FP/SIMD registers as the function
 * left them, so v0 holds its value when the handler is entered. */
#define KP_F64_RETURN_ENTRY(name, target)                                      \
	".p2align 4\n"                                                           \
	".hidden " #name "\n"                                                    \
	".type " #name ", %function\n"                                           \
	#name ":\n"                                                              \
	"	fmov x2, d0\n"                                                        \
	"	b " #target "\n"                                                      \
	".size " #name ", .-" #name "\n"

/* Returns v from the function entered at regs without running it: the
 * return address is in the link register at the first instruction. */
static inline void kp_override_return(struct pt_regs *regs, uint64_t v, uint64_t ret)
{
	(void)ret;
	regs->regs[0] = v;
	regs->pc = regs->regs[30];
}

/* The return address is in x30 at the entry, not in memory. */
#define KP_RET_ADDR_ON_STACK 0

/* The relocations that fill a GOT slot with a function's address (a
 * PLT call's and a data reference's): the injected agent points the
 * program's slots for the signal functions at the library's interposers
 * (agent_interpose.c, with <elf.h>). */
#define KP_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define KP_R_GLOB_DAT R_AARCH64_GLOB_DAT

/* Debian's multiarch directory name: where the system's libraries are
 * (/lib/KP_MULTIARCH, /usr/lib/KP_MULTIARCH). */
#define KP_MULTIARCH "aarch64-linux-gnu"
/* The flags of this ABI's 64-bit libraries in the loader's cache
 * (ldconfig's FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64). */
#define KP_LDCACHE_FLAGS 0x0a03

#endif
