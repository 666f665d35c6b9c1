/*
 * What the kprobe tool (both sides: the CLI and the agent) knows of
 * x86-64: the cycle counter its time stamps use, the spin-wait hint, the
 * processor number, the registers arguments, return values and DWARF
 * register numbers live in.  The build puts tools/kprobe/arch/<arch>/ on
 * the include path; the arm64 counterpart has the same names.
 */
#ifndef KPROBE_ARCH_H
#define KPROBE_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include <kprobes.h>

#define KP_ARCH_NAME "x86_64"

/* glibc's thread control block (struct pthread) is at and above the
 * thread pointer (TLS variant II). */
#define KP_TCB_BELOW_TP 0

/* The longest instruction, in bytes. */
#define KP_MAX_INSN_LEN 15

/* The TSC: the time stamps' clock where the CLI finds it invariant.
 * These three are macros, not inline functions: handlers compiled for the
 * general registers only use them, and an always_inline function of
 * other target options cannot be inlined there. */
#define kp_cycles() ((uint64_t)__builtin_ia32_rdtsc())

/* Whether kp_cycles() is invariant by the architecture; on x86-64 the
 * CLI asks /proc/cpuinfo (constant_tsc and nonstop_tsc). */
#define KP_CYCLES_ALWAYS_INVARIANT 0

/* Cycles a full ring is waited for at most: a few seconds at any TSC
 * rate. */
static inline uint64_t kp_cycles_wait_limit(void)
{
	return 8000000000ull;
}

#define kp_cpu_relax() __builtin_ia32_pause()

/* The processor the thread runs on: rdtscp's TSC_AUX, where Linux keeps
 * it (no system call). */
#define kp_cpu_id()                                                            \
	({                                                                       \
		unsigned int kp__aux = 0;                                        \
		__builtin_ia32_rdtscp(&kp__aux);                                 \
		kp__aux & 0xfff;                                                 \
	})

/* A system call without libc (no errno, no PLT): the hit path's. */
static inline long kp_raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* Owns a cache line before it is written. */
#define kp_prefetch_write(p) __asm__ volatile("prefetchw %0" : : "m"(*(p)))

/* sargN at a function's entry is the word at sp + 8 * (N + this):
 * the call pushed the return address there. */
#define KP_SARG_SKIP 1

/* reg("NAME") in programs: bpftrace's register names for this
 * architecture, in the order of struct pt_regs' fields (the name at index
 * i is the word at 8 * i), and the one that is the instruction pointer. */
#define KP_REG_NAMES                                                           \
	"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", \
	"cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss"
#define KP_REG_IP "ip"
/* At a probe the instruction pointer is past the breakpoint, as after an
 * int3, for every way a hit is taken (kprobes.h): reg("ip") at an entry
 * is that less this, the probed address, as uprobes report it. */
#define KP_PROBE_IP_BIAS 1

/* pt_regs offsets of the SysV integer argument registers (arg1..arg6:
 * rdi, rsi, rdx, rcx, r8, r9) and of the return value's (rax). */
#define KP_ARG_REG_OFFSETS                                                     \
	offsetof(struct pt_regs, di), offsetof(struct pt_regs, si),              \
	offsetof(struct pt_regs, dx), offsetof(struct pt_regs, cx),              \
	offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9)
#define KP_RET_REG_OFFSET offsetof(struct pt_regs, ax)
/* The same by a constant index, as a plain field access. */
#define KP_ARG_REG(r, n) KP_ARG_REG_##n(r)
#define KP_ARG_REG_0(r) ((r)->di)
#define KP_ARG_REG_1(r) ((r)->si)
#define KP_ARG_REG_2(r) ((r)->dx)
#define KP_ARG_REG_3(r) ((r)->cx)
#define KP_ARG_REG_4(r) ((r)->r8)
#define KP_ARG_REG_5(r) ((r)->r9)

/* DWARF register numbers a fetch plan may read (x86-64 psABI numbering:
 * rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15), and the return
 * address column 16, which at a probe is the instruction pointer. */
#define KP_DWARF_PC 16
/* The stack pointer's DWARF number: a caller's is the callee's CFA. */
#define KP_DWARF_SP 7
/* kprobes_vector_reg() works in a return handler (a return probe
 * registered with KPROBE_FLAG_VECTOR_REGS): xmm0 at the return. */
#define KP_RETURN_VECTOR_REGS 1
/* The DWARF number of xmm0 (xmm1..xmm15 follow). */
#define KP_DWARF_VREG0 17
#define KP_DWARF_REG_OFFSETS                                                   \
	offsetof(struct pt_regs, ax), offsetof(struct pt_regs, dx),              \
	offsetof(struct pt_regs, cx), offsetof(struct pt_regs, bx),              \
	offsetof(struct pt_regs, si), offsetof(struct pt_regs, di),              \
	offsetof(struct pt_regs, bp), offsetof(struct pt_regs, sp),              \
	offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9),              \
	offsetof(struct pt_regs, r10), offsetof(struct pt_regs, r11),            \
	offsetof(struct pt_regs, r12), offsetof(struct pt_regs, r13),            \
	offsetof(struct pt_regs, r14), offsetof(struct pt_regs, r15),            \
	offsetof(struct pt_regs, ip)

/* An entry point that hands a return handler the float return value
 * (xmm0's low 64 bits) as its third argument, then tail-calls target:
 * libkprobes' return path uses general registers only, so xmm0 still
 * holds the function's value when the handler is entered. */
#define KP_F64_RETURN_ENTRY(name, target)                                      \
	".p2align 4\n"                                                           \
	".hidden " #name "\n"                                                    \
	".type " #name ", @function\n"                                           \
	#name ":\n"                                                              \
	"	movq %xmm0, %rdx\n"                                                   \
	"	jmp " #target "\n"                                                    \
	".size " #name ", .-" #name "\n"

/* Returns v from the function entered at regs without running it: the
 * return address is on top of the stack at the first instruction.  ret is
 * that word, read by the caller fault-safely from *sp. */
static inline void kp_override_return(struct pt_regs *regs, uint64_t v, uint64_t ret)
{
	regs->ax = v;
	regs->ip = ret;
	regs->sp += 8;
}

/* Whether the return address is in memory at the entry (at sp): then
 * kp_override_return() needs it read first. */
#define KP_RET_ADDR_ON_STACK 1

/* The relocations that fill a GOT slot with a function's address (a
 * PLT call's and a data reference's): the injected agent points the
 * program's slots for the signal functions at the library's interposers
 * (agent_interpose.c, with <elf.h>). */
#define KP_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define KP_R_GLOB_DAT R_X86_64_GLOB_DAT

/* Debian's multiarch directory name: where the system's libraries are
 * (/lib/KP_MULTIARCH, /usr/lib/KP_MULTIARCH). */
#define KP_MULTIARCH "x86_64-linux-gnu"
/* The flags of this ABI's 64-bit libraries in the loader's cache
 * (ldconfig's FLAG_ELF_LIBC6 | FLAG_X8664_LIB64). */
#define KP_LDCACHE_FLAGS 0x0303

#endif
