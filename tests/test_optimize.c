/*
 * Jump optimization (issue 4): which probes take a jump and why not, the
 * code bytes before, during and after, every instruction class inside a
 * detoured region, live flags / vector / x87 / red zone state across
 * mid-function detours, float arguments across entry detours, the knob,
 * disable, post handlers arriving and leaving, pt_regs as on the
 * breakpoint path, recursion, threads and fork while optimizing, and
 * optimized return probes.
 */
#include "testutil.h"

#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <Zydis/Zydis.h>

#include "arch/x86_64/detour.h"
#include "arch/x86_64/insn.h"
#include "arch/x86_64/xol.h"
#include "arch/arch.h"
#include "core/internal.h"
#include "os/linux/threads.h"
#include "elf/symbols.h"

/* Room for the threaded tests' waits on a loaded machine, where a census
 * retries while a thread waits for a core inside a region.  (Per-test
 * timeouts made Criterion's runner leak under the sanitizers.) */
TestSuite(optimize, .timeout = 30);

/* ------------------------------------------------------------------ */
/* Assembly under test                                                 */
/* ------------------------------------------------------------------ */

/* The live-state functions: one per vector width.  in = rdi, out = rsi,
 * struct live_io.  Loads vectors, x87 (with a compare), MXCSR, the flags
 * and the red zone, runs a 10-byte probed instruction, then stores
 * everything back in an order that changes none of it. */
#define LIVE_ASM(name, LOAD, STORE)						\
	"OPTFN " name "\n"							\
	"\tpush %rbx\n"								\
	LOAD									\
	"\tfninit\n"								\
	"\tfldl 160(%rdi)\n"							\
	"\tfldl 152(%rdi)\n"							\
	"\tfldl 144(%rdi)\n"							\
	"\tfcom %st(1)\n"							\
	"\tldmxcsr 8(%rdi)\n"							\
	"\tpushq 0(%rdi)\n"							\
	"\tpopfq\n"								\
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"			\
	"\tmov 16+8*\\i(%rdi), %rax\n"						\
	"\tmov %rax, -128+8*\\i(%rsp)\n"					\
	".endr\n"								\
	".L" name "_probe:\n"							\
	"\tmovabs $0x1122334455667788, %r11\n"					\
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"			\
	"\tmov -128+8*\\i(%rsp), %rax\n"					\
	"\tmov %rax, 16+8*\\i(%rsi)\n"						\
	".endr\n"								\
	"\tfnstsw 12(%rsi)\n"							\
	"\tstmxcsr 8(%rsi)\n"							\
	"\tfstpl 144(%rsi)\n"							\
	"\tfstpl 152(%rsi)\n"							\
	"\tfstpl 160(%rsi)\n"							\
	STORE									\
	"\tpushfq\n"								\
	"\tpop %rax\n"								\
	"\tmov %rax, 0(%rsi)\n"							\
	"\tcld\n"								\
	"\tmovl $0x1f80, -4(%rsp)\n"						\
	"\tldmxcsr -4(%rsp)\n"							\
	"\tfninit\n"								\
	"\tpop %rbx\n"								\
	"\tret\n"								\
	"OPTEND " name "\n"

#define IRP16 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
#define IRP32 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
#define IRPK ".irp i,1,2,3,4,5,6,7\n"

#define LIVE_ALL \
	LIVE_ASM("opt_live_sse", \
		 IRP16 "\tmovdqu 192+64*\\i(%rdi), %xmm\\i\n.endr\n", \
		 IRP16 "\tmovdqu %xmm\\i, 192+64*\\i(%rsi)\n.endr\n") \
	LIVE_ASM("opt_live_avx", \
		 IRP16 "\tvmovdqu 192+64*\\i(%rdi), %ymm\\i\n.endr\n", \
		 IRP16 "\tvmovdqu %ymm\\i, 192+64*\\i(%rsi)\n.endr\n\tvzeroupper\n") \
	LIVE_ASM("opt_live_avx512", \
		 IRP32 "\tvmovdqu64 192+64*\\i(%rdi), %zmm\\i\n.endr\n" \
		 IRPK "\tkmovw 2240+8*\\i(%rdi), %k\\i\n.endr\n", \
		 IRP32 "\tvmovdqu64 %zmm\\i, 192+64*\\i(%rsi)\n.endr\n" \
		 IRPK "\tkmovw %k\\i, 2240+8*\\i(%rsi)\n.endr\n\tvzeroupper\n") \
	"\t.pushsection .data\n" \
	"\t.p2align 3\n" \
	"\t.globl opt_live_probe_at\n" \
	"opt_live_probe_at:\n" \
	"\t.quad .Lopt_live_sse_probe, .Lopt_live_avx_probe, .Lopt_live_avx512_probe\n" \
	"\t.popsection\n"

__asm__(
	".pushsection .text\n"
	".macro OPTFN name\n"
	"\t.text\n"
	"\t.globl \\name\n"
	"\t.type \\name, @function\n"
	"\t.p2align 4, 0xcc\n"
	"\\name:\n"
	".endm\n"
	".macro OPTEND name\n"
	"\t.size \\name, . - \\name\n"
	".endm\n"

	/* opt_normal(a, b) = a + b + 0x101
	 *   +0 push %rbp (1)  +1 mov %rsp,%rbp (3)  +4 lea 1(%rdi,%rsi),%rax (5)
	 *   +9 add $0x100,%rax (6)  +15 pop %rbp  +16 ret */
	"OPTFN opt_normal\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi,%rsi), %rax\n"
	"\tadd $0x100, %rax\n"
	"\tpop %rbp\n"
	"\tret\n"
	"OPTEND opt_normal\n"

	/* opt_call_misaligned(fn, a, b) = fn(a, b) entered with the stack
	 * 8 bytes off the ABI's alignment (as _start-like code may be) */
	"OPTFN opt_call_misaligned\n"
	"\tmov %rdi, %rax\n"
	"\tmov %rsi, %rdi\n"
	"\tmov %rdx, %rsi\n"
	"\tsub $8, %rsp\n"
	"\tcall *%rax\n"
	"\tadd $8, %rsp\n"
	"\tret\n"
	"OPTEND opt_call_misaligned\n"

	/* opt_callee_sum() = rbx + r12 + rbp: reads callee-saved registers
	 *   +0 mov %rbx,%rax (3)  +3 add %r12,%rax (3)  +6 add %rbp,%rax (3) */
	"OPTFN opt_callee_sum\n"
	"\tmov %rbx, %rax\n"
	"\tadd %r12, %rax\n"
	"\tadd %rbp, %rax\n"
	"\tret\n"
	"OPTEND opt_callee_sum\n"

	/* opt_call_callee(fn) = fn() with rbx = 1, r12 = 2, rbp = 4; the
	 * three as fn left them in bits 8+ (rbx 8, r12 16, rbp 24) */
	"OPTFN opt_call_callee\n"
	"\tpush %rbx\n"
	"\tpush %r12\n"
	"\tpush %rbp\n"
	"\tmov $1, %ebx\n"
	"\tmov $2, %r12d\n"
	"\tmov $4, %ebp\n"
	"\tcall *%rdi\n"
	"\tshl $8, %rbx\n"
	"\tadd %rbx, %rax\n"
	"\tshl $16, %r12\n"
	"\tadd %r12, %rax\n"
	"\tshl $24, %rbp\n"
	"\tadd %rbp, %rax\n"
	"\tpop %rbp\n"
	"\tpop %r12\n"
	"\tpop %rbx\n"
	"\tret\n"
	"OPTEND opt_call_callee\n"

	/* opt_alt(a, b) = a * b: where a redirecting handler sends threads */
	"OPTFN opt_alt\n"
	"\tmov %rdi, %rax\n"
	"\timul %rsi, %rax\n"
	"\tret\n"
	"OPTEND opt_alt\n"

	/* 5 bytes: lea 1(%rdi),%rax; ret */
	"OPTFN opt_short5\n"
	"\tlea 1(%rdi), %rax\n"
	"\tret\n"
	"OPTEND opt_short5\n"
	"\t.byte 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc\n"

	/* 3 bytes, then int3 padding: mov %edi,%eax; ret */
	"OPTFN opt_short3\n"
	"\tmov %edi, %eax\n"
	"\tret\n"
	"OPTEND opt_short3\n"
	"\t.byte 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc\n"

	/* 3 bytes, then nop padding */
	"\t.p2align 4, 0xcc\n"
	"\t.globl opt_short3n\n"
	"\t.type opt_short3n, @function\n"
	"opt_short3n:\n"
	"\tmov %edi, %eax\n"
	"\tret\n"
	"OPTEND opt_short3n\n"
	"\t.byte 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90\n"

	/* 3 bytes, then GCC's multi-byte NOP padding (cs nopw 0(%rax,%rax)) */
	"\t.p2align 4, 0xcc\n"
	"\t.globl opt_short3m\n"
	"\t.type opt_short3m, @function\n"
	"opt_short3m:\n"
	"\tmov %edi, %eax\n"
	"\tret\n"
	"OPTEND opt_short3m\n"
	"\t.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n"
	"\t.byte 0xcc, 0xcc, 0xcc\n"

	/* 3 bytes, and the next function right behind: no room */
	"OPTFN opt_short3x\n"
	"\tmov %edi, %eax\n"
	"\tret\n"
	"OPTEND opt_short3x\n"
	"\t.globl opt_short3x_next\n"
	"\t.type opt_short3x_next, @function\n"
	"opt_short3x_next:\n"
	"\tlea 2(%rdi), %rax\n"
	"\tret\n"
	"OPTEND opt_short3x_next\n"

	/* a call in the region of the entry */
	"OPTFN opt_has_call\n"
	"\tpush %rbx\n"
	"\tcall opt_short5\n"
	"\tpop %rbx\n"
	"\tret\n"
	"OPTEND opt_has_call\n"

	/* opt_call_ra(a) = opt_ra_callee(a): the callee records where it
	 * returns to, which must be opt_call_ra+6 optimized or not */
	"OPTFN opt_call_ra\n"
	"\tpush %rbx\n"
	"\tcall opt_ra_callee\n"
	"\tpop %rbx\n"
	"\tret\n"
	"OPTEND opt_call_ra\n"

	/* a 2-byte call at the entry: it would return inside the jump.
	 * opt_call_inside(a, fn) = fn(a) */
	"OPTFN opt_call_inside\n"
	"\tcall *%rsi\n"
	"\tret\n"
	"OPTEND opt_call_inside\n"
	"\t.byte 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc\n"

	/* a system call in the region of the entry: getpid() */
	"OPTFN opt_has_syscall\n"
	"\txor %eax, %eax\n"
	"\tmov $39, %al\n"
	"\tsyscall\n"
	"\tret\n"
	"OPTEND opt_has_syscall\n"

	/* opt_loop(a, n) = a * n (n > 0): the back-edge targets +2, inside
	 * the region of the entry (xor 2 + add 3) */
	"OPTFN opt_loop\n"
	"\txor %eax, %eax\n"
	"1:\tadd %rdi, %rax\n"
	"\tdec %rsi\n"
	"\tjnz 1b\n"
	"\tret\n"
	"OPTEND opt_loop\n"

	/* an indirect jump with no table pattern: opt_indjmp(a) = a + 5 */
	"OPTFN opt_indjmp\n"
	"\tlea 2f(%rip), %rax\n"
	"\tjmp *%rax\n"
	"\tud2\n"
	"2:\tlea 5(%rdi), %rax\n"
	"\tret\n"
	"OPTEND opt_indjmp\n"

	/* The shape of python3.11's _Py_Dealloc: a load and an indirect
	 * tail call through memory, 7 bytes in all, the jump ending the
	 * region.  opt_tail_mem(obj) = obj->type->fn(obj) */
	"OPTFN opt_tail_mem\n"
	"\tmov 8(%rdi), %rax\n"
	"\tjmp *0x30(%rax)\n"
	"OPTEND opt_tail_mem\n"
	"\t.byte 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc\n"

	/* The shape of PyObject_Free: a hook loaded at the entry, an
	 * indirect tail call through a register (no switch pattern).
	 * opt_tail_reg(a) = a ? opt_tail_hook(a) : 0 */
	"OPTFN opt_tail_reg\n"
	"\tmov opt_tail_hook(%rip), %rax\n"
	"\ttest %rdi, %rdi\n"
	"\tje 1f\n"
	"\tmov %rdi, %rsi\n"
	"\tjmp *%rax\n"
	"1:\txor %eax, %eax\n"
	"\tret\n"
	"OPTEND opt_tail_reg\n"

	/* A computed goto whose label (+2) is inside the entry's region, its
	 * address only in a data table: opt_goto_tab(n) = 3 * n (n >= 1) */
	"OPTFN opt_goto_tab\n"
	"\txor %eax, %eax\n"
	"2:\tadd $3, %rax\n"
	"\tdec %rdi\n"
	"\tjz 3f\n"
	"\tmov opt_goto_labels(%rip), %rcx\n"
	"\tjmp *%rcx\n"
	"3:\tret\n"
	"OPTEND opt_goto_tab\n"
	"\t.pushsection .data.rel.ro, \"aw\"\n"
	"\t.p2align 3\n"
	"opt_goto_labels:\n"
	"\t.quad 2b\n"
	"\t.popsection\n"

	/* Another function (as a GCC .cold part does) jumps into the
	 * entry's region, at +1: opt_xjump(a) = opt_xjump_cold(a) = a + 7 */
	"OPTFN opt_xjump\n"
	"\tpush %rbx\n"
	"1:\tlea 7(%rdi), %rax\n"
	"\tpop %rbx\n"
	"\tret\n"
	"OPTEND opt_xjump\n"
	"OPTFN opt_xjump_cold\n"
	"\tpush %rbx\n"
	"\tjmp 1b\n"
	"OPTEND opt_xjump_cold\n"

	/* opt_mid_ax(a) = a + 0x1000; +3 is the probed add (6 bytes) */
	"OPTFN opt_mid_ax\n"
	"\tmov %rdi, %rax\n"
	"\tadd $0x1000, %rax\n"
	"\tret\n"
	"OPTEND opt_mid_ax\n"

	/* Register pattern callers: set every register (and the flags) to a
	 * known value, record rsp, call the target, record the result and
	 * the flags after it.  opt_regs_target = sum of the 6 arguments. */
	".macro SETREGS\n"
	"\tmovabs $0x1111111111111111, %rbx\n"
	"\tmovabs $0x2222222222222222, %rbp\n"
	"\tmovabs $0x1212121212121212, %r12\n"
	"\tmovabs $0x1313131313131313, %r13\n"
	"\tmovabs $0x1414141414141414, %r14\n"
	"\tmovabs $0x1515151515151515, %r15\n"
	"\tmovabs $0x0101010101010101, %rdi\n"
	"\tmovabs $0x0202020202020202, %rsi\n"
	"\tmovabs $0x0303030303030303, %rdx\n"
	"\tmovabs $0x0404040404040404, %rcx\n"
	"\tmovabs $0x0808080808080808, %r8\n"
	"\tmovabs $0x0909090909090909, %r9\n"
	"\tmovabs $0x0a0a0a0a0a0a0a0a, %rax\n"
	"\tmovabs $0x1010101010101010, %r10\n"
	"\tmovabs $0x1111111111111110, %r11\n"
	".endm\n"
	".macro REGS_CALLER name, target, flags\n"
	"OPTFN \\name\n"
	"\tpush %rbp\n"
	"\tpush %rbx\n"
	"\tpush %r12\n"
	"\tpush %r13\n"
	"\tpush %r14\n"
	"\tpush %r15\n"
	"\tsub $8, %rsp\n"
	"\tpushq $\\flags\n"
	"\tpopfq\n"
	"\tSETREGS\n"
	"\tmov %rsp, opt_regs_caller_sp(%rip)\n"
	"\tcall \\target\n"
	"\tmov %rax, opt_regs_result(%rip)\n"
	"\tpushfq\n"
	"\tpopq opt_regs_flags_after(%rip)\n"
	"\tcld\n"
	"\tadd $8, %rsp\n"
	"\tpop %r15\n"
	"\tpop %r14\n"
	"\tpop %r13\n"
	"\tpop %r12\n"
	"\tpop %rbx\n"
	"\tpop %rbp\n"
	"\tret\n"
	"OPTEND \\name\n"
	".endm\n"
	"OPTFN opt_regs_target\n"
	"\tlea (%rdi,%rsi), %rax\n"
	"\tadd %rdx, %rax\n"
	"\tadd %rcx, %rax\n"
	"\tadd %r8, %rax\n"
	"\tadd %r9, %rax\n"
	"\tret\n"
	"OPTEND opt_regs_target\n"
	/* +2: a 5-byte nop, mid-function; flags are live and kept */
	"OPTFN opt_regs_mid\n"
	"\txchg %ax, %ax\n"
	"\tnopl 0x0(%rax,%rax,1)\n"
	"\tret\n"
	"OPTEND opt_regs_mid\n"
	/* entry: CF AF SF OF; mid: CF PF ZF DF OF */
	"REGS_CALLER opt_regs_call_entry, opt_regs_target, 0xa93\n"
	"REGS_CALLER opt_regs_call_mid, opt_regs_mid, 0xe47\n"

	/* Handler clobber: level 0 sse, 1 avx, 2 avx512.  Writes every
	 * vector register (and the opmasks), sets x87 and SSE exception
	 * flags and the x87 condition codes, keeps the x87 stack balanced. */
	"OPTFN opt_clobber_vec\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tsub $16, %rsp\n"
	"\tmovabs $0x5a5a5a5a5a5a5a5a, %rax\n"
	"\tmovq %rax, %xmm0\n"
	"\tpshufd $0x44, %xmm0, %xmm0\n"
	".irp i,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tmovdqa %xmm0, %xmm\\i\n"
	".endr\n"
	"\tcmp $1, %edi\n"
	"\tjb 3f\n"
	"\tja 2f\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tvcmpps $0xf, %ymm\\i, %ymm\\i, %ymm\\i\n"
	".endr\n"
	"\tjmp 3f\n"
	"2:\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
	"\tvpternlogd $0xff, %zmm\\i, %zmm\\i, %zmm\\i\n"
	".endr\n"
	".irp i,1,2,3,4,5,6,7\n"
	"\tkxnorw %k0, %k0, %k\\i\n"
	".endr\n"
	"3:\n"
	/* 1.0 / 0.0 in SSE and x87: ZE sticky flags; compares: C0..C3 */
	"\tmov $1, %eax\n"
	"\tcvtsi2sd %eax, %xmm1\n"
	"\txorpd %xmm2, %xmm2\n"
	"\tdivsd %xmm2, %xmm1\n"
	"\tfldz\n"
	"\tfld1\n"
	"\tfdivp\n"
	"\tfstp %st(0)\n"
	"\tfld1\n"
	"\tfldz\n"
	"\tfcompp\n"
	"\tleave\n"
	"\tret\n"
	"OPTEND opt_clobber_vec\n"
	/* opt_mid_cf(a) = a + CF at +4: adc $0,%rax after the probed movabs
	 * (+4, 10 bytes) sees a CF the handler sets */
	"OPTFN opt_mid_cf\n"
	"\tmov %rdi, %rax\n"
	"\tclc\n"
	"\tmovabs $0x7777777777777777, %r11\n"
	"\tadc $0, %rax\n"
	"\tret\n"
	"OPTEND opt_mid_cf\n"
	LIVE_ALL
	".popsection\n");


long opt_normal(long a, long b);
long opt_call_misaligned(long (*fn)(long, long), long a, long b);
long opt_alt(long a, long b);
long opt_callee_sum(void);
long opt_call_callee(long (*fn)(void));
long opt_short5(long a);
long opt_short3(long a);
long opt_short3n(long a);
long opt_short3m(long a);
long opt_short3x(long a);
long opt_has_call(long a);
long opt_call_inside(long a, long (*fn)(long));
long opt_call_ra(long a);
long opt_ra_callee(long a);
long opt_has_syscall(void);
long opt_loop(long a, long n);
long opt_indjmp(long a);
long opt_tail_mem(void *obj);
long opt_tail_reg(long a);
long opt_goto_tab(long n);
long opt_xjump(long a);
long opt_xjump_cold(long a);
long opt_mid_ax(long a);
void opt_regs_call_entry(void);
void opt_regs_call_mid(void);
long opt_regs_target(long, long, long, long, long, long);
void opt_regs_mid(void);
void opt_clobber_vec(int level);
extern uintptr_t opt_live_probe_at[3];

unsigned long opt_regs_caller_sp, opt_regs_result, opt_regs_flags_after;

struct live_io {
	uint64_t flags;		/* 0 */
	uint32_t mxcsr;		/* 8 */
	uint16_t fsw;		/* 12 */
	uint16_t pad0;
	uint64_t redzone[16];	/* 16 */
	double x87[3];		/* 144 */
	uint8_t pad1[24];
	uint8_t vec[32][64];	/* 192 */
	uint64_t k[8];		/* 2240 */
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct live_io, redzone) == 16, "layout");
_Static_assert(offsetof(struct live_io, x87) == 144, "layout");
_Static_assert(offsetof(struct live_io, vec) == 192, "layout");
_Static_assert(offsetof(struct live_io, k) == 2240, "layout");

void opt_live_sse(const struct live_io *in, struct live_io *out);
void opt_live_avx(const struct live_io *in, struct live_io *out);
void opt_live_avx512(const struct live_io *in, struct live_io *out);

/* Called through volatile pointers so that the compiler neither inlines
 * nor folds them. */
static long (*volatile call_normal)(long, long) = opt_normal;
static long (*volatile call_short5)(long) = opt_short5;
static long (*volatile call_short3)(long) = opt_short3;
static long (*volatile call_short3n)(long) = opt_short3n;
static long (*volatile call_short3m)(long) = opt_short3m;
static long (*volatile call_mid_ax)(long) = opt_mid_ax;
static long (*volatile call_loop)(long, long) = opt_loop;
static long (*volatile call_indjmp)(long) = opt_indjmp;
static long (*volatile call_tail_mem)(void *) = opt_tail_mem;
static long (*volatile call_tail_reg)(long) = opt_tail_reg;
static long (*volatile call_goto_tab)(long) = opt_goto_tab;
static long (*volatile call_xjump)(long) = opt_xjump;
static long (*volatile call_xjump_cold)(long) = opt_xjump_cold;

/* What opt_tail_mem and opt_tail_reg tail-call. */
struct tail_type {
	char pad[0x30];
	long (*fn)(void *obj);
};
struct tail_obj {
	long value;
	const struct tail_type *type;
};

static long tail_target(void *obj)
{
	return ((struct tail_obj *)obj)->value * 2;
}

static long tail_hook(long a)
{
	return a + 1000;
}

long (*opt_tail_hook)(long) = tail_hook;
static const struct tail_type tail_type = { .fn = tail_target };
static long (*volatile call_has_call)(long) = opt_has_call;
static long (*volatile call_call_inside)(long, long (*)(long)) = opt_call_inside;
static long (*volatile call_call_ra)(long) = opt_call_ra;

static void *volatile ra_seen;

__attribute__((noinline, used)) long opt_ra_callee(long a)
{
	ra_seen = __builtin_return_address(0);
	return a * 3;
}
static long (*volatile call_has_syscall)(void) = opt_has_syscall;

#define NORMAL(a, b) ((a) + (b) + 0x101)

/* A C switch with dense cases: a jump table at -O2. */
long opt_switch(long x, long y);
__attribute__((noinline, noclone, used, optimize("O2"))) long opt_switch(long x, long y)
{
	switch (x) {
	case 0: return y * 3;
	case 1: return y + 7;
	case 2: return y ^ 0x55;
	case 3: return (long)((unsigned long)y << 3);
	case 4: return y - 100;
	case 5: return y * y;
	case 6: return ~y;
	case 7: return y >> 2;
	case 8: return y | 0x100;
	default: return -1;
	}
}

static long (*volatile call_switch)(long, long) = opt_switch;

static long switch_ref(long x, long y)
{
	switch (x) {
	case 0: return y * 3;
	case 1: return y + 7;
	case 2: return y ^ 0x55;
	case 3: return (long)((unsigned long)y << 3);
	case 4: return y - 100;
	case 5: return y * y;
	case 6: return ~y;
	case 7: return y >> 2;
	case 8: return y | 0x100;
	default: return -1;
	}
}

/* 8 doubles and 6 longs; its entry is an optimized probe. */
TEST_FN double opt_fargs(double a, double b, double c, double d, double e, double f, double g,
			 double h, long i, long j, long k, long l, long m, long n);
TEST_FN double opt_fargs(double a, double b, double c, double d, double e, double f, double g,
			 double h, long i, long j, long k, long l, long m, long n)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h +
	       (double)(i - 2 * j + 3 * k - 4 * l + 5 * m - 6 * n);
}

static double (*volatile call_fargs)(double, double, double, double, double, double, double,
				     double, long, long, long, long, long, long) = opt_fargs;

/* Variadic doubles: the prologue saves xmm0-7 when %al says so. */
double opt_vsum(int n, ...);
TEST_FN double opt_vsum(int n, ...)
{
	va_list ap;
	double s = 0;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		s = s * 1.5 + va_arg(ap, double);
	va_end(ap);
	return s;
}

static double (*volatile call_vsum)(int, ...) = opt_vsum;

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int vec_level(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return 2;
	if (__builtin_cpu_supports("avx"))
		return 1;
	return 0;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool is_optimized(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
}

/* Polls the flag until it is `want`, at most ms milliseconds. */
static bool wait_opt(const struct kprobe *p, bool want, int ms)
{
	double end = now_s() + ms / 1000.0;

	while (is_optimized(p) != want) {
		if (now_s() > end)
			return false;
		sleep_us(200);
	}
	return true;
}

/* Stays `want` for ms milliseconds (for "not optimized" checks: well past
 * the optimizer's batching delay). */
static bool stays_opt(const struct kprobe *p, bool want, int ms)
{
	double end = now_s() + ms / 1000.0;

	while (now_s() < end) {
		if (is_optimized(p) != want)
			return false;
		sleep_us(500);
	}
	return is_optimized(p) == want;
}

/* Waits until one of a, b is optimized. */
static bool wait_either(const struct kprobe *a, const struct kprobe *b, int ms)
{
	double end = now_s() + ms / 1000.0;

	while (!is_optimized(a) && !is_optimized(b)) {
		if (now_s() > end)
			return false;
		sleep_us(200);
	}
	return true;
}

/* Why the probepoint at addr cannot take a jump (NULL: it can, or it was
 * not analysed). */
static const char *why_at(uintptr_t addr)
{
	struct kp_probepoint *pp;
	const char *why;

	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup(addr);
	why = pp ? arch_opt_why(pp) : "no probepoint";
	pthread_mutex_unlock(&kp_registry_lock);
	return why;
}

/* What the detour keeps for p's handler (KP_OPT_SAVE_*). */
static int needs_of(const struct kprobe *p)
{
	return kp_probe_needs(p);
}

static void optimizer_flush(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_optimizer_flush();
	pthread_mutex_unlock(&kp_registry_lock);
}

/* Is addr in an executable mapping of this process? */
static bool executable_mapping(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	cr_assert_not_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi)
			found = perms[2] == 'x';
	}
	fclose(f);
	return found;
}

/* The kprobes_list line of the probe at addr, or "" */
static void list_line(uintptr_t addr, char *out, size_t outsz)
{
	char *buf = NULL, key[32], *l;
	size_t sz = 0;
	FILE *f = open_memstream(&buf, &sz);

	cr_assert_not_null(f);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	snprintf(key, sizeof(key), "%016lx", (unsigned long)addr);
	out[0] = 0;
	l = strstr(buf, key);
	if (l) {
		size_t n = strcspn(l, "\n");

		snprintf(out, outsz, "%.*s", (int)(n < outsz - 1 ? n : outsz - 1), l);
	}
	free(buf);
}

static void check_list(const struct kprobe *p)
{
	char line[256];
	bool opt = is_optimized(p);

	list_line((uintptr_t)p->addr, line, sizeof(line));
	cr_assert(line[0], "probe %p not listed", (void *)p->addr);
	/* the flag cannot change here: nothing is queued when this runs */
	cr_assert_eq(strstr(line, "[OPTIMIZED]") != NULL, opt, "list \"%s\" vs flag %d", line, opt);
}

/* Handlers.  "light" provably touches no vector state or errno, so the
 * detour skips saving them; "heavy" clobbers everything a C handler can. */
static unsigned long light_hits, light_bad_ip;

static int light_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&light_hits, 1, __ATOMIC_RELAXED);
	if (regs->ip != (unsigned long)p->addr + 1)
		__atomic_fetch_add(&light_bad_ip, 1, __ATOMIC_RELAXED);
	return 0;
}

static int empty_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

/* Never looks at regs: the detour keeps only what a C function may change. */
static unsigned long count_hits;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&count_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int clobber_level;
static volatile double heavy_in = 1.25;
static volatile double heavy_out;
static volatile long double heavy_ld = 3.0L;
static unsigned long heavy_hits, heavy_bad_ip;

static void heavy_work(void)
{
	char buf[2048];
	char *volatile vb = buf;
	double x = heavy_in;
	long double ld = heavy_ld;

	memset(vb, 0xa5, sizeof(buf));
	for (int i = 0; i < 8; i++)
		x = x * 1.0001 + (double)vb[i * 100] / 7.0;
	ld = ld / 7.0L + (long double)x;
	heavy_out = x + (double)ld;
	opt_clobber_vec(clobber_level);
}

static int heavy_pre(struct kprobe *p, struct pt_regs *regs)
{
	heavy_work();
	__atomic_fetch_add(&heavy_hits, 1, __ATOMIC_RELAXED);
	if (regs->ip != (unsigned long)p->addr + 1)
		__atomic_fetch_add(&heavy_bad_ip, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

/* "tls" writes thread-local storage (which the analysis takes for errno)
 * and nothing vector: mid-function it runs with errno kept and no
 * vector image, and the program's live vector registers must survive. */
static __thread unsigned long tls_hits;

static int tls_pre(struct kprobe *p, struct pt_regs *regs)
{
	tls_hits++;
	if (regs->ip != (unsigned long)p->addr + 1)
		__atomic_fetch_add(&heavy_bad_ip, 1, __ATOMIC_RELAXED);
	return 0;
}

static void setup(void)
{
	clobber_level = vec_level();
	kprobes_set_optimization(true);
}

static void init_probe(struct kprobe *kp, const void *addr, kprobe_pre_handler_t pre)
{
	memset(kp, 0, sizeof(*kp));
	kp->addr = (kprobe_opcode_t *)addr;
	kp->pre_handler = pre;
}

/* Instruction boundaries of a function, from its symbol. */
static int boundaries(const char *name, uintptr_t *out, int max)
{
	struct ksym sym;
	uintptr_t pc;
	int n = 0;

	cr_assert_eq(ksym_lookup_name(name, &sym), 0, "no symbol %s", name);
	cr_assert_gt(sym.size, 0);
	for (pc = sym.addr; pc < sym.addr + sym.size && n < max;) {
		int len = insn_length((const uint8_t *)pc, sym.addr + sym.size - pc);

		cr_assert_gt(len, 0, "undecodable at %s+%lu", name, pc - sym.addr);
		out[n++] = pc;
		pc += (uintptr_t)len;
	}
	return n;
}

/* ------------------------------------------------------------------ */
/* Which probes are optimized, and why not                             */
/* ------------------------------------------------------------------ */

static void expect_optimized(const char *what, const void *addr, kprobe_pre_handler_t pre)
{
	struct kprobe kp;

	init_probe(&kp, addr, pre);
	cr_assert_eq(register_kprobe(&kp), 0, "%s", what);
	cr_assert(wait_opt(&kp, true, 2000), "%s not optimized: %s", what,
		  why_at((uintptr_t)addr) ?: "(no reason given)");
	cr_expect_null(why_at((uintptr_t)addr), "%s", what);
	check_list(&kp);
	unregister_kprobe(&kp);
	cr_expect_eq(kp.flags & KPROBE_FLAG_OPTIMIZED, 0, "%s: flag kept after unregister", what);
}

/* Not optimized; why must contain `because` (NULL: not checked). */
static void expect_not_optimized(const char *what, const void *addr, const char *because)
{
	struct kprobe kp;
	const char *why;

	init_probe(&kp, addr, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0, "%s", what);
	cr_assert(stays_opt(&kp, false, 40), "%s optimized", what);
	why = why_at((uintptr_t)addr);
	if (because) {
		cr_assert_not_null(why, "%s: no reason", what);
		cr_expect(strstr(why, because), "%s: reason \"%s\", want \"%s\"", what, why, because);
	}
	check_list(&kp);
	unregister_kprobe(&kp);
}

Test(optimize, optimized_probes, .init = setup)
{
	expect_optimized("entry of a normal function", opt_normal, light_pre);
	expect_optimized("mid-function add", (char *)opt_normal + 9, light_pre);
	expect_optimized("mid-function, 2nd insn", (char *)opt_normal + 1, heavy_pre);
	expect_optimized("lea; ret (5 bytes)", opt_short5, light_pre);
	expect_optimized("3 bytes + int3 padding", opt_short3, light_pre);
	expect_optimized("3 bytes + nop padding", opt_short3n, heavy_pre);
	expect_optimized("3 bytes + multi-byte nop padding", opt_short3m, light_pre);
	expect_optimized("push; call (the call completes the region)", opt_has_call, light_pre);
	expect_optimized("the call alone", (char *)opt_has_call + 1, heavy_pre);
	expect_optimized("C function with a switch", opt_switch, light_pre);
	expect_optimized("8 doubles + 6 longs", opt_fargs, heavy_pre);
	expect_optimized("variadic", opt_vsum, heavy_pre);
	expect_optimized("mid probe of opt_mid_ax", (char *)opt_mid_ax + 3, light_pre);
	expect_optimized("register entry", opt_regs_target, light_pre);
	expect_optimized("register mid", (char *)opt_regs_mid + 2, light_pre);
	/* and they still compute right */
	cr_assert_eq(call_normal(3, 4), NORMAL(3, 4));
	cr_assert_eq(call_short5(41), 42);
	cr_assert_eq(call_short3(0x100000007L), 7);
	cr_assert_eq(call_short3n(0x100000009L), 9);
	cr_assert_eq(call_short3m(0x10000000bL), 11);
	cr_assert_eq(call_has_call(5), 6);
}

Test(optimize, not_optimized_probes, .init = setup)
{
	expect_not_optimized("call returning inside the region", opt_call_inside, "call");
	expect_not_optimized("syscall in the region", opt_has_syscall, "system call");
	expect_not_optimized("branch target in bytes 1..4", opt_loop, "branch targets the region");
	expect_not_optimized("indirect jump, unknown targets", opt_indjmp, "indirect jump");
	expect_not_optimized("3 bytes, next function behind", opt_short3x, "too short");
	expect_not_optimized("another function jumps into the region", opt_xjump,
			     "branch targets the region");
	/* a probe on the call itself, and on the syscall */
	expect_not_optimized("the syscall", (char *)opt_has_syscall + 4, "system call");
	cr_assert_eq(call_loop(7, 6), 42);
	cr_assert_eq(call_indjmp(5), 10);
	cr_assert_eq(call_xjump(5), 12);
	cr_assert_eq(call_xjump_cold(5), 12);
	cr_assert_eq(call_call_inside(5, opt_short5), 6);
	cr_assert_eq(call_has_syscall(), getpid());
}

/* Indirect tail calls: at the end of the region (copied) and further on
 * (its targets bounded by the code addresses the program holds); a
 * computed goto into the region, known from a data table, is refused. */
Test(optimize, indirect_tail_calls, .init = setup)
{
	struct tail_obj obj = { 21, &tail_type };
	struct kprobe kp;

	expect_optimized("jmp *0x30(%rax) ending the region", opt_tail_mem, light_pre);
	expect_optimized("jmp *%rax after the region", opt_tail_reg, light_pre);
	expect_not_optimized("computed goto into the region", opt_goto_tab,
			     "branch targets the region");
	cr_assert_eq(call_goto_tab(4), 12);

	/* and they behave, optimized */
	light_hits = 0;
	init_probe(&kp, opt_tail_mem, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "%s", why_at((uintptr_t)opt_tail_mem) ?: "?");
	for (long i = 0; i < 1000; i++) {
		obj.value = i;
		cr_assert_eq(call_tail_mem(&obj), 2 * i);
	}
	unregister_kprobe(&kp);
	init_probe(&kp, opt_tail_reg, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "%s", why_at((uintptr_t)opt_tail_reg) ?: "?");
	for (long i = 0; i < 1000; i++)
		cr_assert_eq(call_tail_reg(i), i ? i + 1000 : 0);
	unregister_kprobe(&kp);
	cr_assert_eq(light_hits, 2000);
	cr_assert_eq(light_bad_ip, 0);
}

/* A call that completes the region runs from the detour as "push the
 * original return address, jump": the callee returns into the original
 * code, after the call. */
Test(optimize, call_completing_the_region, .init = setup)
{
	struct kprobe kp;

	light_hits = 0;
	init_probe(&kp, opt_call_ra, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "%s", why_at((uintptr_t)opt_call_ra) ?: "?");
	for (long i = 0; i < 1000; i++) {
		ra_seen = NULL;
		cr_assert_eq(call_call_ra(i), 3 * i);
		cr_assert_eq(ra_seen, (char *)opt_call_ra + 6, "returns to %p", ra_seen);
	}
	cr_assert_eq(light_hits, 1000);
	cr_assert_eq(light_bad_ip, 0);
	unregister_kprobe(&kp);
	cr_assert_eq(call_call_ra(7), 21);
}

#define MAX_GETPID_HITS 64
static unsigned long getpid_hits;
static long getpid_tids[MAX_GETPID_HITS];

static int count_getpid(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long n = __atomic_fetch_add(&getpid_hits, 1, __ATOMIC_RELAXED);

	if (n < MAX_GETPID_HITS)
		getpid_tids[n] = syscall(SYS_gettid);
	return 0;
}

static bool is_optimizer_thread(long tid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	return !strncmp(comm, "kprobes-opt", 11);
}

/* The optimizer thread's own libc calls are not the program's: the first
 * probe of a process starts the thread, whose first call was getpid(). */
Test(optimize, optimizer_thread_calls_not_counted, .init = setup)
{
	struct kprobe kp;
	unsigned long n;

	memset(&kp, 0, sizeof(kp));
	kp.symbol_name = "libc.so.6:getpid";
	kp.pre_handler = count_getpid;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "getpid not optimized: %s",
		  why_at((uintptr_t)kp.addr) ?: "?");
	n = getpid_hits < MAX_GETPID_HITS ? getpid_hits : MAX_GETPID_HITS;
	for (unsigned long i = 0; i < n; i++)
		cr_expect(!is_optimizer_thread(getpid_tids[i]),
			  "hit %lu counted on the optimizer thread", i);
	unregister_kprobe(&kp);
}

static int jp_calls;

static long jp_entry(long a, long b)
{
	jp_calls++;
	jprobe_return();
}

Test(optimize, not_optimized_by_probe_kind, .init = setup)
{
	struct kprobe kp;
	struct jprobe jp;

	/* a post handler */
	init_probe(&kp, opt_normal, light_pre);
	kp.post_handler = count_post;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(stays_opt(&kp, false, 40));
	check_list(&kp);
	cr_assert_eq(call_normal(1, 2), NORMAL(1, 2));
	unregister_kprobe(&kp);

	/* a post handler only */
	init_probe(&kp, opt_normal, NULL);
	kp.post_handler = count_post;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(stays_opt(&kp, false, 40));
	unregister_kprobe(&kp);

	/* a jprobe */
	memset(&jp, 0, sizeof(jp));
	jp.kp.addr = (kprobe_opcode_t *)opt_normal;
	jp.entry = (void *)jp_entry;
	cr_assert_eq(register_jprobe(&jp), 0);
	cr_assert(stays_opt(&jp.kp, false, 40));
	check_list(&jp.kp);
	cr_assert_eq(call_normal(1, 2), NORMAL(1, 2));
	cr_assert_eq(jp_calls, 1);
	unregister_jprobe(&jp);

	/* a disabled probe */
	init_probe(&kp, opt_normal, light_pre);
	kp.flags = KPROBE_FLAG_DISABLED;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(stays_opt(&kp, false, 40));
	check_list(&kp);
	cr_assert_eq(enable_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "enabled probe not optimized");
	unregister_kprobe(&kp);

	/* the knob off */
	kprobes_set_optimization(false);
	init_probe(&kp, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(stays_opt(&kp, false, 40));
	check_list(&kp);
	unregister_kprobe(&kp);
	kprobes_set_optimization(true);
}

/* Two probes within 5 bytes: only one takes a jump, whatever the order;
 * when one leaves, the other is re-evaluated and optimized. */
Test(optimize, two_probes_within_five_bytes, .init = setup)
{
	struct kprobe a, b;

	for (int order = 0; order < 2; order++) {
		light_hits = 0;
		init_probe(&a, opt_normal, light_pre);
		init_probe(&b, (char *)opt_normal + 1, light_pre);
		if (order == 0) {
			cr_assert_eq(register_kprobe(&a), 0);
			cr_assert(wait_opt(&a, true, 2000));
			cr_assert_eq(register_kprobe(&b), 0);
		} else {
			cr_assert_eq(register_kprobe(&b), 0);
			cr_assert(wait_opt(&b, true, 2000));
			cr_assert_eq(register_kprobe(&a), 0);
		}
		/* let the optimizer settle */
		cr_assert(wait_either(&a, &b, 2000));
		sleep_us(20000);
		cr_assert_eq(is_optimized(&a) + is_optimized(&b), 1,
			     "order %d: a %d b %d (exactly one must be optimized)", order,
			     is_optimized(&a), is_optimized(&b));
		cr_assert(stays_opt(&a, is_optimized(&a), 30));
		cr_assert(stays_opt(&b, is_optimized(&b), 30));
		for (long i = 0; i < 100; i++)
			cr_assert_eq(call_normal(i, 1), NORMAL(i, 1));
		cr_assert_eq(light_hits, 200);
		cr_assert_eq(light_bad_ip, 0);
		check_list(&a);
		check_list(&b);

		/* the optimized one leaves: the other takes the jump now */
		struct kprobe *gone = is_optimized(&a) ? &a : &b;
		struct kprobe *stay = gone == &a ? &b : &a;

		unregister_kprobe(gone);
		cr_expect(wait_opt(stay, true, 2000),
			  "order %d: the probe at +%ld not re-optimized after its neighbour left", order,
			  (long)((char *)stay->addr - (char *)opt_normal));
		cr_assert_eq(call_normal(5, 5), NORMAL(5, 5));
		unregister_kprobe(stay);

		/* the neighbour disabled instead of unregistered (as in Kprobes,
		 * a disabled probe in the region does not keep the jump out);
		 * enabled again, its int3 must not go into the jump over it */
		for (int which = 0; which < 2; which++) {
			struct kprobe *off = which ? &a : &b, *on = which ? &b : &a;

			init_probe(&a, opt_normal, light_pre);
			init_probe(&b, (char *)opt_normal + 1, light_pre);
			cr_assert_eq(register_kprobe(order ? &a : &b), 0);
			cr_assert_eq(register_kprobe(order ? &b : &a), 0);
			cr_assert(wait_either(&a, &b, 2000));
			cr_assert_eq(disable_kprobe(off), 0);
			cr_expect(wait_opt(on, true, 2000),
				  "order %d: the probe at +%ld not optimized with its neighbour disabled",
				  order, (long)((char *)on->addr - (char *)opt_normal));
			cr_assert_eq(call_normal(5, 6), NORMAL(5, 6));
			cr_assert_eq(enable_kprobe(off), 0);
			light_hits = 0;
			for (long i = 0; i < 100; i++)
				cr_assert_eq(call_normal(i, 2), NORMAL(i, 2));
			cr_assert_eq(light_hits, 200, "order %d: %lu hits", order, light_hits);
			sleep_us(20000);
			cr_assert_leq(is_optimized(&a) + is_optimized(&b), 1);
			cr_assert_eq(call_normal(5, 7), NORMAL(5, 7));
			unregister_kprobe(&a);
			unregister_kprobe(&b);
		}
	}
}

/* The switch really is a jump table, and its entry still takes a jump. */
Test(optimize, switch_with_jump_table, .init = setup)
{
	struct ksym sym;
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	bool jmp_reg = false;
	struct kprobe kp;

	cr_assert_eq(ksym_lookup_name("opt_switch", &sym), 0);
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t off = 0; off < sym.size; off += in.length) {
		cr_assert(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, (const void *)(sym.addr + off),
							      sym.size - off, &in, ops)));
		if (in.mnemonic == ZYDIS_MNEMONIC_JMP && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER)
			jmp_reg = true;
	}
	cr_assert(jmp_reg, "opt_switch has no jmp *%%reg: no jump table to test");

	light_hits = 0;
	init_probe(&kp, opt_switch, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "switch entry not optimized: %s",
		  why_at((uintptr_t)opt_switch) ?: "?");
	for (long x = -2; x < 12; x++)
		for (long y = -3; y < 300; y += 37)
			cr_assert_eq(call_switch(x, y), switch_ref(x, y), "x %ld y %ld", x, y);
	cr_assert_eq(light_hits, 14 * 9);
	cr_assert_eq(light_bad_ip, 0);
	unregister_kprobe(&kp);
}

/* What the detour saves follows what the handler may touch. */
Test(optimize, save_decision_follows_handler, .init = setup)
{
	struct kprobe kp;

	init_probe(&kp, (char *)opt_normal + 9, heavy_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert(needs_of(&kp) & KP_OPT_SAVE_VECTOR, "heavy handler, needs %#x", needs_of(&kp));
	unregister_kprobe(&kp);
#if !defined(__SANITIZE_ADDRESS__)
	init_probe(&kp, (char *)opt_normal + 9, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(needs_of(&kp), KP_OPT_SAVE_REGS, "light handler, needs %#x", needs_of(&kp));
	unregister_kprobe(&kp);
	init_probe(&kp, (char *)opt_normal + 9, empty_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(needs_of(&kp), 0);
	unregister_kprobe(&kp);
	init_probe(&kp, (char *)opt_normal + 9, count_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(needs_of(&kp), 0, "counting handler, needs %#x", needs_of(&kp));
	unregister_kprobe(&kp);
#endif
}

/* A handler whose calls nest nine deep (the agent's program handlers
 * reach the library's unwinder that far): every level decoded, and no
 * vector state to save for it. */
volatile long deep_sink;

#define DEEP_LEVEL(n, next)                                                     \
	__attribute__((noinline, noclone)) long deep##n(long x);                \
	__attribute__((noinline, noclone)) long deep##n(long x)                 \
	{                                                                       \
		__asm__ volatile("" ::: "memory");                              \
		return next(x + n) + 1;                                         \
	}

__attribute__((noinline, noclone)) long deep9(long x);
__attribute__((noinline, noclone)) long deep9(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3;
}
DEEP_LEVEL(8, deep9)
DEEP_LEVEL(7, deep8)
DEEP_LEVEL(6, deep7)
DEEP_LEVEL(5, deep6)
DEEP_LEVEL(4, deep5)
DEEP_LEVEL(3, deep4)
DEEP_LEVEL(2, deep3)
DEEP_LEVEL(1, deep2)

static int deep_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	deep_sink += deep1(deep_sink);
	return 0;
}

Test(optimize, deep_handler_needs_no_vector_state, .init = setup)
{
#if !defined(__SANITIZE_ADDRESS__)
	cr_assert_eq(kp_code_needs((uintptr_t)deep_pre), 0, "deep handler, needs %#x",
		     kp_code_needs((uintptr_t)deep_pre));
#else
	(void)deep_pre;
	cr_skip_test("sanitizer calls in every function: nothing to prove");
#endif
}

/* A handler that unwinds its hit's stack (the kprobe tool's count by
 * stack does, through a memo): the unwinder reads the thread's record,
 * never claims one (no system call, no store through %fs), so the
 * analysis finds nothing to keep but pt_regs, as for a light handler. */
static char stack_memo_buf[KPROBES_STACK_MEMO_SIZE(8)] __attribute__((aligned(8)));
static unsigned long stack_ips[8];

static int stack_pre(struct kprobe *p, struct pt_regs *regs)
{
	int kept;

	(void)p;
	if (kprobes_stack_memo((struct kprobes_stack_memo *)stack_memo_buf, regs, stack_ips, 8,
			       &kept) < 0)
		kprobes_stack(regs, stack_ips, 8);
	return 0;
}

Test(optimize, stack_handler_keeps_the_light_level, .init = setup)
{
#if !defined(__SANITIZE_ADDRESS__)
	uint8_t need = kp_code_needs((uintptr_t)stack_pre) & ~KP_OPT_SAVE_SCRATCH;

	cr_assert_eq(need, KP_OPT_SAVE_REGS, "stack handler, needs %#x", need);
#else
	(void)stack_pre;
	cr_skip_test("sanitizer calls in every function: nothing to prove");
#endif
}

/* A handler reading arguments passed on the stack (the seventh and
 * eighth) at an optimized probe makes no system call for them: each is a
 * load whose fault the library catches (it used to be a process_vm_readv
 * per read, some 1.6 us a hit).  A seccomp filter makes that system call
 * fail with EPERM here, so a read through it would give 0. */
static volatile unsigned long stack_args_seen[2];

long stack_args8(long a, long b, long c, long d, long e, long f, long g, long h);
TEST_FN long stack_args8(long a, long b, long c, long d, long e, long f, long g, long h)
{
	__asm__ volatile("" ::: "memory");
	return a + b + c + d + e + f + g + h;
}

static int stack_args_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	stack_args_seen[0] = regs_get_kernel_argument(regs, 6);
	stack_args_seen[1] = regs_get_kernel_argument(regs, 7);
	return 0;
}

static void forbid_process_vm_readv(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	long v = 0;
	struct iovec l = { &v, sizeof(v) }, r = { &v, sizeof(v) };

	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
	cr_assert_eq(syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0), -1);
}

Test(optimize, stack_arguments_read_without_a_system_call, .init = setup)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)stack_args8, .pre_handler = stack_args_pre };

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "not optimized");
	forbid_process_vm_readv();
	for (long i = 0; i < 100; i++) {
		cr_assert_eq(stack_args8(1, 2, 3, 4, 5, 6, 700 + i, -800 - i), 21 - 100);
		cr_assert_eq(stack_args_seen[0], (unsigned long)(700 + i));
		cr_assert_eq(stack_args_seen[1], (unsigned long)(-800 - i));
	}
	unregister_kprobe(&kp);
}

/* ------------------------------------------------------------------ */
/* Code bytes before, during, after                                    */
/* ------------------------------------------------------------------ */

static void check_jump(const uint8_t *code, const char *when)
{
	int32_t rel;
	uintptr_t target;

	cr_assert_eq(code[0], 0xe9, "%s: byte 0 %#x", when, code[0]);
	memcpy(&rel, code + 1, 4);
	target = (uintptr_t)code + 5 + (intptr_t)rel;
	cr_assert(executable_mapping(target), "%s: jump target %#lx not executable", when,
		  (unsigned long)target);
}

Test(optimize, code_bytes, .init = setup)
{
	const uint8_t *code = (const uint8_t *)opt_normal;
	uint8_t orig[17];
	struct kprobe kp;

	memcpy(orig, code, sizeof(orig));
	cr_assert_eq(orig[0], 0x55);	/* push %rbp */
	cr_assert_eq(orig[9], 0x48);	/* add $0x100,%rax */
	cr_assert_eq(orig[10], 0x05);

	/* armed as a breakpoint first: int3 at byte 0, the rest untouched */
	kprobes_set_optimization(false);
	init_probe(&kp, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(code[0], 0xcc);
	cr_assert(!memcmp(code + 1, orig + 1, sizeof(orig) - 1));
	cr_assert_eq(kp.opcode, orig[0]);
	cr_assert(stays_opt(&kp, false, 30));
	cr_assert_eq(code[0], 0xcc);
	cr_assert(!memcmp(code + 1, orig + 1, sizeof(orig) - 1));
	cr_assert_eq(call_normal(1, 1), NORMAL(1, 1));

	/* the knob on: the jump, rel32 to an executable detour; bytes after
	 * the first 5 untouched */
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&kp, true, 2000));
	check_jump(code, "optimized");
	cr_assert(!memcmp(code + 5, orig + 5, sizeof(orig) - 5));
	cr_assert_eq(kp.opcode, orig[0]);
	light_hits = 0;
	cr_assert_eq(call_normal(1, 2), NORMAL(1, 2));
	cr_assert_eq(light_hits, 1);

	/* knob off again: back to int3 + original bytes 1..4 */
	kprobes_set_optimization(false);
	cr_assert_not(is_optimized(&kp));
	cr_assert_eq(code[0], 0xcc);
	cr_assert(!memcmp(code + 1, orig + 1, sizeof(orig) - 1));

	/* disabled: the original bytes */
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(disable_kprobe(&kp), 0);
	cr_assert_not(is_optimized(&kp));
	cr_assert(!memcmp(code, orig, sizeof(orig)));
	cr_assert_eq(enable_kprobe(&kp), 0);
	cr_assert(code[0] == 0xcc || code[0] == 0xe9);
	cr_assert(wait_opt(&kp, true, 2000));
	check_jump(code, "re-enabled");

	/* unregistered: the original bytes */
	unregister_kprobe(&kp);
	cr_assert(!memcmp(code, orig, sizeof(orig)));
	cr_assert_eq(kp.flags & KPROBE_FLAG_OPTIMIZED, 0);

	/* right after register_kprobe returns, before the optimizer's delay
	 * has passed: int3 at byte 0 (unless this thread was descheduled
	 * for longer than the delay) */
	init_probe(&kp, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	{
		uint8_t now0 = code[0];

		cr_assert(now0 == 0xcc || is_optimized(&kp), "byte 0 %#x right after register", now0);
	}
	cr_assert(wait_opt(&kp, true, 2000));
	check_jump(code, "optimized (2)");
	unregister_kprobe(&kp);
	cr_assert(!memcmp(code, orig, sizeof(orig)));

	/* a short function with padding: the jump covers the padding */
	memcpy(orig, (const void *)opt_short3, 8);
	init_probe(&kp, opt_short3, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	check_jump((const uint8_t *)opt_short3, "short3");
	cr_assert(!memcmp((const uint8_t *)opt_short3 + 5, orig + 5, 3));
	cr_assert_eq(call_short3(77), 77);
	unregister_kprobe(&kp);
	cr_assert(!memcmp((const void *)opt_short3, orig, 8));
}

/* ------------------------------------------------------------------ */
/* Every instruction class inside a detoured region                    */
/* ------------------------------------------------------------------ */

struct cpu_state {
	uint64_t gpr[16];	/* rax rbx rcx rdx rsi rdi rbp r8..r15 rsp */
	uint64_t flags;
	uint8_t xmm[16][16];
} __attribute__((packed));

struct run_result {
	struct cpu_state cpu;
	uint8_t mem[256];
	uint8_t data[88];
};

extern void insn_run_captured(void *fn, const struct cpu_state *in, struct cpu_state *out);
extern uint8_t insn_data[88];

static uint8_t mem[256] __attribute__((aligned(32)));
static uint8_t data_init[88];
static uint64_t rng;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void make_input(struct cpu_state *in, unsigned int seed)
{
	rng = 0x9e3779b97f4a7c15ULL * (seed + 1);
	for (int i = 0; i < 16; i++)
		in->gpr[i] = next_random() >> (next_random() % 60);
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++)
			in->xmm[i][j] = (uint8_t)next_random();
	in->gpr[5] = (uint64_t)mem;
	in->flags = 0x202 | (next_random() & 0x8d5);
}

/* Runs insn_run_captured(fn, in, out) on a stack of its own, so that rsp
 * (and flags computed from it) are the same in every run. */
void opt_on_stack(void *fn, const struct cpu_state *in, struct cpu_state *out, void *stack_top);
__asm__(".pushsection .text\n"
	".globl opt_on_stack\n"
	".type opt_on_stack, @function\n"
	"opt_on_stack:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tmov %rcx, %rsp\n"
	"\tcall insn_run_captured\n"
	"\tmov %rbp, %rsp\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size opt_on_stack, . - opt_on_stack\n"
	".popsection\n");

static void *run_stack_top(void)
{
	static char *stack;
	const size_t size = 1 << 20;

	if (!stack) {
		stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		cr_assert_neq(stack, MAP_FAILED);
	}
	return stack + size - 64;
}

static void run(void *fn, const struct cpu_state *in,
					    struct run_result *r, unsigned int seed)
{
	rng = 0x51ed270b27ULL * (seed + 7);
	for (size_t i = 0; i < sizeof(mem); i++)
		mem[i] = (uint8_t)next_random();
	memcpy(insn_data, data_init, sizeof(data_init));
	memset(r, 0, sizeof(*r));
	opt_on_stack(fn, in, &r->cpu, run_stack_top());
	memcpy(r->mem, mem, sizeof(mem));
	memcpy(r->data, insn_data, sizeof(insn_data));
}

static const char *gpr_name[16] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10",
	"r11", "r12", "r13", "r14", "r15", "rsp",
};

/* entry: the probe is at a function entry, where xmm8-15 are dead by the
 * ABI (no argument lives there) and the entry detour need not keep them. */
static void compare(const char *what, const struct run_result *a, const struct run_result *b,
		    bool entry)
{
	for (int i = 0; i < 16; i++)
		cr_assert_eq(a->cpu.gpr[i], b->cpu.gpr[i], "%s: %s %#lx != %#lx", what, gpr_name[i],
			     a->cpu.gpr[i], b->cpu.gpr[i]);
	cr_assert_eq(a->cpu.flags & 0x40cd5, b->cpu.flags & 0x40cd5, "%s: flags %#lx != %#lx", what,
		     a->cpu.flags, b->cpu.flags);
	for (int i = 0; i < (entry ? 8 : 16); i++)
		cr_assert(!memcmp(a->cpu.xmm[i], b->cpu.xmm[i], 16), "%s: xmm%d differs", what, i);
	cr_assert(!memcmp(a->mem, b->mem, sizeof(a->mem)), "%s: memory differs", what);
	cr_assert(!memcmp(a->data, b->data, sizeof(a->data)), "%s: data differs", what);
}

#define MAX_B 160
#define NSEEDS 3

/*
 * Probes each instruction boundary of `name` (or of `callee`, running
 * `name`), one at a time, with a light and a heavy handler; waits until
 * optimized, runs, compares with an unprobed run.  At a function entry
 * xmm8-15 are dead by the ABI and the entry detour need not keep them:
 * they are not compared there, and abi_entry false skips the entry of a
 * function that reads them as inputs.  Returns the share of boundaries
 * optimized, in percent.
 */
static int check_opt_function(const char *name, const char *callee, bool abi_entry)
{
	uintptr_t at[MAX_B];
	struct ksym sym;
	int n, tried = 0, optimized = 0;
	struct cpu_state in[NSEEDS];
	struct run_result base[NSEEDS], probed;
	char what[160];

	cr_assert_eq(ksym_lookup_name(name, &sym), 0);
	n = boundaries(callee ? callee : name, at, MAX_B);
	memcpy(data_init, insn_data, sizeof(data_init));
	for (unsigned int s = 0; s < NSEEDS; s++) {
		make_input(&in[s], s);
		run((void *)sym.addr, &in[s], &base[s], s);
	}
	for (int i = 0; i < n; i++) {
		if (i == 0 && !abi_entry)
			continue;
		/* 0: counts only (the light level: what a C function may
		 * change), 1: reads pt_regs, 2: clobbers everything */
		for (int heavy = 0; heavy < 3; heavy++) {
			static kprobe_pre_handler_t const pres[3] = { count_pre, light_pre, heavy_pre };
			struct kprobe kp;
			const char *why;

			init_probe(&kp, (void *)at[i], pres[heavy]);
			cr_assert_eq(register_kprobe(&kp), 0, "%s+%lu", callee ?: name, at[i] - at[0]);
			tried++;
			why = why_at(at[i]);
			if (why) {
				cr_assert_not(is_optimized(&kp));
				unregister_kprobe(&kp);
				continue;
			}
			cr_assert(wait_opt(&kp, true, 2000), "%s+%lu: analysed fine but not optimized",
				  callee ?: name, at[i] - at[0]);
			optimized++;
			for (unsigned int s = 0; s < NSEEDS; s++) {
				snprintf(what, sizeof(what), "%s+%lu, %s handler, seed %u", callee ?: name,
					 at[i] - at[0], (const char *[]){ "counting", "light", "heavy" }[heavy],
					 s);
				run((void *)sym.addr, &in[s], &probed, s);
				compare(what, &base[s], &probed, i == 0);
			}
			cr_assert(is_optimized(&kp), "%s+%lu: unoptimized meanwhile", callee ?: name,
				  at[i] - at[0]);
			unregister_kprobe(&kp);
		}
	}
	cr_assert_eq(light_bad_ip, 0, "light handler saw a wrong ip");
	cr_assert_eq(heavy_bad_ip, 0, "heavy handler saw a wrong ip");
	if (optimized)
		cr_assert_gt(count_hits, 0);
	cr_log_info("%s: %d of %d optimized", callee ?: name, optimized, tried);
	return tried ? optimized * 100 / tried : 0;
}

/*
 * One probepoint, three probes whose handlers need more and more: a hit
 * starts at the light level and moves up at the second and third probe
 * (the state left alone by the first handlers is saved then).  In the
 * other order it starts at the top.  Entry and mid-function.
 */
Test(optimize, aggregate_moves_up, .init = setup)
{
	static kprobe_pre_handler_t const order[2][3] = {
		{ count_pre, light_pre, heavy_pre }, { heavy_pre, light_pre, count_pre } };
	uintptr_t at[MAX_B];
	struct ksym sym;
	struct cpu_state in;
	struct run_result base, probed;
	int n;

	cr_assert_eq(ksym_lookup_name("ic_flags", &sym), 0);
	n = boundaries("ic_flags", at, MAX_B);
	cr_assert_gt(n, 3);
	memcpy(data_init, insn_data, sizeof(data_init));
	make_input(&in, 1);
	run((void *)sym.addr, &in, &base, 1);
	for (int where = 0; where < n; where++) {
		for (int o = 0; o < 2; o++) {
			struct kprobe kp[3];
			unsigned long c0 = count_hits, l0 = light_hits, h0 = heavy_hits;
			char what[96];

			for (int k = 0; k < 3; k++) {
				init_probe(&kp[k], (void *)at[where], order[o][k]);
				cr_assert_eq(register_kprobe(&kp[k]), 0);
			}
			if (why_at(at[where])) {
				for (int k = 0; k < 3; k++)
					unregister_kprobe(&kp[k]);
				continue;
			}
			for (int k = 0; k < 3; k++)
				cr_assert(wait_opt(&kp[k], true, 2000), "ic_flags+%lu",
					  at[where] - at[0]);
			snprintf(what, sizeof(what), "ic_flags+%lu, order %d", at[where] - at[0], o);
			run((void *)sym.addr, &in, &probed, 1);
			compare(what, &base, &probed, where == 0);
			cr_assert_gt(light_hits - l0, 0, "%s: not hit", what);
			cr_assert_eq(count_hits - c0, light_hits - l0, "%s", what);
			cr_assert_eq(heavy_hits - h0, light_hits - l0, "%s", what);
			for (int k = 0; k < 3; k++)
				unregister_kprobe(&kp[k]);
		}
		if (where == 0)
			where = n / 2 - 1;	/* then one mid-function boundary */
		else
			break;
	}
	cr_assert_eq(light_bad_ip, 0);
	cr_assert_eq(heavy_bad_ip, 0);
}

/* The probe an optimized entry jumps straight into, if any. */
static struct kprobe *fast_of(const struct kprobe *p)
{
	const struct kp_probepoint *pp = p->__pp;

	return __atomic_load_n(&pp->fast, __ATOMIC_ACQUIRE);
}

static void hit_normal(int n, const char *what)
{
	for (long i = 0; i < n; i++)
		cr_assert_eq(call_normal(i, 3), NORMAL(i, 3), "%s", what);
}

/*
 * An optimized entry jumps straight into the handler of a lone, enabled
 * probe whose handler needs the light level only (the probepoint's fast
 * probe); disabled, joined by a second probe, or with a handler that reads
 * its pt_regs, it takes the generic path.  Each state is hit and counted.
 */
Test(optimize, entry_fast_probe_follows_changes, .init = setup)
{
	struct kprobe a, b;
	unsigned long c0, l0;

	init_probe(&a, opt_normal, count_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(fast_of(&a), &a);
	c0 = count_hits;
	hit_normal(100, "alone");
	cr_assert_eq(count_hits - c0, 100);

	cr_assert_eq(disable_kprobe(&a), 0);
	cr_assert_null(fast_of(&a));
	c0 = count_hits;
	hit_normal(100, "disabled");
	cr_assert_eq(count_hits, c0);
	cr_assert_eq(enable_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(fast_of(&a), &a);

	init_probe(&b, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert_null(fast_of(&a));
	cr_assert(wait_opt(&a, true, 2000) && wait_opt(&b, true, 2000));
	cr_assert_null(fast_of(&a));
	c0 = count_hits;
	l0 = light_hits;
	hit_normal(100, "two probes");
	cr_assert_eq(count_hits - c0, 100);
	cr_assert_eq(light_hits - l0, 100);
	unregister_kprobe(&b);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(fast_of(&a), &a);
	unregister_kprobe(&a);

	/* reads its pt_regs: never the fast probe, still called each hit */
	init_probe(&b, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert(wait_opt(&b, true, 2000));
	cr_assert_null(fast_of(&b));
	l0 = light_hits;
	hit_normal(100, "pt_regs handler");
	cr_assert_eq(light_hits - l0, 100);
	unregister_kprobe(&b);
	cr_assert_eq(light_bad_ip, 0);
}

static int errno_pre(struct kprobe *p, struct pt_regs *regs);

/* A function entry reached with a misaligned stack takes the detour's slow
 * path (kp_optimized_callback, everything saved, an aligned stack for the
 * handlers); handlers of every level run there, once each per hit, and
 * errno stays the program's (errno_pre changes it, and counts in
 * light_hits too). */
Test(optimize, misaligned_entry_takes_the_slow_path, .init = setup)
{
	static kprobe_pre_handler_t const pres[4] = { count_pre, light_pre, heavy_pre, errno_pre };
	struct kprobe kp[4];
	unsigned long c0 = count_hits, l0 = light_hits, h0 = heavy_hits;

	for (int k = 0; k < 4; k++) {
		init_probe(&kp[k], opt_normal, pres[k]);
		cr_assert_eq(register_kprobe(&kp[k]), 0);
	}
	for (int k = 0; k < 4; k++)
		cr_assert(wait_opt(&kp[k], true, 2000));
	for (long i = 0; i < 50; i++) {
		errno = (int)i + 1;
		cr_assert_eq(opt_call_misaligned(opt_normal, i, 2 * i), 3 * i + 0x101);
		cr_assert_eq(errno, (int)i + 1, "errno changed by a handler");
		cr_assert_eq(call_normal(i, 1), i + 0x102);
	}
	cr_assert_eq(count_hits - c0, 100);
	cr_assert_eq(light_hits - l0, 200);
	cr_assert_eq(heavy_hits - h0, 100);
	cr_assert_eq(light_bad_ip, 0);
	cr_assert_eq(heavy_bad_ip, 0);
	for (int k = 0; k < 4; k++)
		unregister_kprobe(&kp[k]);
}

Test(optimize, insn_riprel, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_riprel", NULL, true), 80);
}

Test(optimize, insn_jumps, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_jumps", NULL, true), 60);
	cr_assert_gt(light_hits, 0);
}

Test(optimize, insn_loops, .init = setup)
{
	/* loop/jrcxz are not copyable, and targets are everywhere */
	cr_assert_geq(check_opt_function("ic_loops", NULL, true), 25);
}

Test(optimize, insn_calls, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_calls", NULL, true), 25);
	cr_assert_geq(check_opt_function("ic_calls", "ic_helper_add", true), 50);
	cr_assert_geq(check_opt_function("ic_calls", "ic_helper_ret8", true), 50);
}

Test(optimize, insn_indirect_jumps, .init = setup)
{
	/* "and $3" bounds the table, not "cmp; ja": not recovered, so
	 * nothing in it may take a jump; each run still compares equal */
	cr_assert_geq(check_opt_function("ic_indjmp", NULL, true), 0);
}

Test(optimize, insn_stack_and_red_zone, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_stack", NULL, true), 80);
}

Test(optimize, insn_flags, .init = setup)
{
	/* starts with adc: the incoming CF is kept even at an entry */
	cr_assert_geq(check_opt_function("ic_flags", NULL, true), 80);
}

Test(optimize, insn_sse, .init = setup)
{
	/* ic_vector reads xmm8/xmm9, dead at an entry by the ABI */
	cr_assert_geq(check_opt_function("ic_vector", NULL, false), 80);
}

Test(optimize, insn_avx, .init = setup)
{
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		cr_skip_test("no AVX2/FMA on this CPU");
	/* vzeroupper; ret at the end is too short, padded with long nops */
	cr_assert_geq(check_opt_function("ic_avx", NULL, true), 70);
}

Test(optimize, insn_x87, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_x87", NULL, true), 70);
}

Test(optimize, insn_syscall, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_syscall", NULL, true), 40);
}

Test(optimize, insn_string, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_string", NULL, true), 70);
}

Test(optimize, insn_lock, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_lock", NULL, true), 80);
}

Test(optimize, insn_misc, .init = setup)
{
	cr_assert_geq(check_opt_function("ic_misc", NULL, true), 80);
}

/* ------------------------------------------------------------------ */
/* Live flags, vectors, x87, red zone across mid-function detours      */
/* ------------------------------------------------------------------ */

typedef void (*live_fn)(const struct live_io *, struct live_io *);

static void live_input(struct live_io *in, unsigned int seed)
{
	uint8_t *b = (uint8_t *)in;

	rng = 0xabcdef12345ULL * (seed + 3);
	for (size_t i = 0; i < sizeof(*in); i++)
		b[i] = (uint8_t)next_random();
	/* CF PF AF ZF SF DF OF, from the seed */
	in->flags = 0x202 | (next_random() & 0xcd5);
	in->mxcsr = 0x1f80;
	in->x87[0] = 1.5 + seed;
	in->x87[1] = -2.25 * (seed + 1);
	in->x87[2] = 1e300;
}

static void live_run(live_fn fn, const struct live_io *in, struct live_io *out)
{
	memset(out, 0, sizeof(*out));
	fn(in, out);
}

static void live_compare(const char *what, const struct live_io *a, const struct live_io *b,
			 int level)
{
	int nvec = level == 2 ? 32 : 16, width = level == 0 ? 16 : level == 1 ? 32 : 64;

	cr_assert_eq(a->flags & 0xcd5, b->flags & 0xcd5, "%s: flags %#lx != %#lx", what, a->flags,
		     b->flags);
	cr_assert_eq(a->mxcsr, b->mxcsr, "%s: mxcsr %#x != %#x", what, a->mxcsr, b->mxcsr);
	cr_assert_eq(a->fsw, b->fsw, "%s: x87 status word %#x != %#x", what, a->fsw, b->fsw);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(a->redzone[i], b->redzone[i], "%s: red zone -%d: %#lx != %#lx", what,
			     128 - 8 * i, a->redzone[i], b->redzone[i]);
	cr_assert(!memcmp(a->x87, b->x87, sizeof(a->x87)), "%s: x87 registers differ", what);
	for (int i = 0; i < nvec; i++)
		cr_assert(!memcmp(a->vec[i], b->vec[i], width), "%s: vector register %d differs",
			  what, i);
	if (level == 2)
		for (int i = 1; i < 8; i++)
			cr_assert_eq(a->k[i] & 0xffff, b->k[i] & 0xffff, "%s: k%d differs", what, i);
}

static void check_live(int level)
{
	static const live_fn fns[3] = { opt_live_sse, opt_live_avx, opt_live_avx512 };
	static const char *names[3] = { "sse", "avx", "avx512" };
	static struct live_io in[8], ref[8], out;
	uintptr_t at = opt_live_probe_at[level];
	char what[96];

	cr_assert_eq(*(const uint8_t *)at, 0x49, "probe site is not the movabs");
	/* the references: unprobed runs, which see their own input */
	for (unsigned int s = 0; s < 8; s++) {
		live_input(&in[s], s);
		live_run(fns[level], &in[s], &ref[s]);
		cr_assert_eq(ref[s].flags & 0xcd5, in[s].flags & 0xcd5, "flags not as set");
		cr_assert(!memcmp(ref[s].redzone, in[s].redzone, sizeof(in[s].redzone)));
	}
	for (int mode = 0; mode < 5; mode++) {
		/* 0 light optimized, 1 heavy optimized, 2 empty optimized,
		 * 3 heavy unoptimized (the breakpoint path, for reference),
		 * 4 tls optimized (errno kept, no vector image) */
		struct kprobe kp;
		unsigned long hits0 = heavy_hits + light_hits, tls0 = tls_hits;

		kprobes_set_optimization(mode != 3);
		init_probe(&kp, (void *)at, mode == 1 || mode == 3 ? heavy_pre :
					    mode == 0 ? light_pre : mode == 4 ? tls_pre : empty_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		if (mode != 3)
			cr_assert(wait_opt(&kp, true, 2000), "%s: not optimized: %s", names[level],
				  why_at(at) ?: "?");
		for (unsigned int s = 0; s < 8; s++) {
			snprintf(what, sizeof(what), "%s, %s, seed %u", names[level],
				 (const char *[]){ "light handler", "heavy handler", "empty handler",
						   "heavy handler, breakpoint", "tls handler" }[mode], s);
			live_run(fns[level], &in[s], &out);
			live_compare(what, &ref[s], &out, level);
		}
		if (mode != 2)
			cr_assert_eq(heavy_hits + light_hits - hits0 + tls_hits - tls0, 8,
				     "%s mode %d: hits", names[level], mode);
		cr_assert_eq(is_optimized(&kp), mode != 3);
		unregister_kprobe(&kp);
	}
	kprobes_set_optimization(true);
}

Test(optimize, live_state_sse, .init = setup)
{
	check_live(0);
}

Test(optimize, live_state_avx, .init = setup)
{
	if (vec_level() < 1)
		cr_skip_test("no AVX");
	check_live(1);
}

Test(optimize, live_state_avx512, .init = setup)
{
	if (vec_level() < 2)
		cr_skip_test("no AVX-512");
	check_live(2);
}

/* errno is the program's across a handler that changes it */
static int errno_pre(struct kprobe *p, struct pt_regs *regs)
{
	close(-1);
	light_hits++;
	return 0;
}

TEST_FN static long errno_user(void)
{
	errno = 1234;
	KEEP(call_normal(1, 2));
	return errno;
}

Test(optimize, errno_kept, .init = setup)
{
	for (int mode = 0; mode < 4; mode++) {
		struct kprobe kp;
		const void *addr = mode & 1 ? (char *)opt_normal + 9 : (void *)opt_normal;

		kprobes_set_optimization(mode < 2);
		init_probe(&kp, addr, errno_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		if (mode < 2)
			cr_assert(wait_opt(&kp, true, 2000));
		light_hits = 0;
		cr_assert_eq(errno_user(), 1234, "mode %d: errno changed", mode);
		cr_assert_eq(light_hits, 1);
		unregister_kprobe(&kp);
	}
}

/* ------------------------------------------------------------------ */
/* Float arguments across entry detours                                */
/* ------------------------------------------------------------------ */

static double fargs_call(int i)
{
	double d = i * 0.37;

	return call_fargs(d + 1.1, d - 2.2, d * 3.3, 4.4 / (d + 1), d + 5.5, -6.6, d * d, 8.8e10,
			  i + 1L, -(long)i * 3, 1L << 40, 7, i * 11L, -13);
}

Test(optimize, float_arguments_entry, .init = setup)
{
	double want[64], wv[64];
	struct kprobe kp;

	for (int i = 0; i < 64; i++) {
		want[i] = fargs_call(i);
		wv[i] = call_vsum(9, 1.0 * i, 2.5, -3.75, 4e-3, 5.0 * i, 6.125, 7.0, 8.5, 9.25);
	}
	for (int heavy = 0; heavy < 2; heavy++) {
		heavy_hits = light_hits = 0;
		init_probe(&kp, opt_fargs, heavy ? heavy_pre : light_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, true, 2000), "not optimized: %s", why_at((uintptr_t)opt_fargs) ?: "?");
		for (int i = 0; i < 64; i++) {
			double got = fargs_call(i);

			cr_assert(!memcmp(&got, &want[i], sizeof(got)), "i %d: %a != %a", i, got, want[i]);
		}
		cr_assert_eq(heavy ? heavy_hits : light_hits, 64);
		unregister_kprobe(&kp);

		init_probe(&kp, opt_vsum, heavy ? heavy_pre : light_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, true, 2000), "vsum not optimized: %s",
			  why_at((uintptr_t)opt_vsum) ?: "?");
		for (int i = 0; i < 64; i++) {
			double got = call_vsum(9, 1.0 * i, 2.5, -3.75, 4e-3, 5.0 * i, 6.125, 7.0, 8.5, 9.25);

			cr_assert(!memcmp(&got, &wv[i], sizeof(got)), "vsum i %d: %a != %a", i, got, wv[i]);
		}
		unregister_kprobe(&kp);
	}
}

/* ------------------------------------------------------------------ */
/* Knob, disable, post handler arriving and leaving, list, ip          */
/* ------------------------------------------------------------------ */

Test(optimize, knob_disable_post_handler, .init = setup)
{
	struct kprobe a, b, c, post;
	const uint8_t *code = (const uint8_t *)opt_normal;
	uint8_t orig[5];

	memcpy(orig, code, 5);
	init_probe(&a, opt_normal, light_pre);
	init_probe(&b, (char *)opt_normal + 9, light_pre);
	init_probe(&c, opt_short5, heavy_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert_eq(register_kprobe(&c), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert(wait_opt(&b, true, 2000));
	cr_assert(wait_opt(&c, true, 2000));
	cr_assert(kprobes_optimization());
	check_list(&a);

	/* knob off: everything unoptimized at once, bytes int3 */
	kprobes_set_optimization(false);
	cr_assert_not(kprobes_optimization());
	cr_assert_not(is_optimized(&a));
	cr_assert_not(is_optimized(&b));
	cr_assert_not(is_optimized(&c));
	cr_assert_eq(code[0], 0xcc);
	cr_assert(!memcmp(code + 1, orig + 1, 4));
	cr_assert_eq(code[9], 0xcc);
	cr_assert_eq(*(const uint8_t *)opt_short5, 0xcc);
	check_list(&a);
	check_list(&b);
	/* new probes stay unoptimized */
	struct kprobe d;

	init_probe(&d, opt_mid_ax, light_pre);
	cr_assert_eq(register_kprobe(&d), 0);
	cr_assert(stays_opt(&d, false, 40));
	cr_assert(stays_opt(&a, false, 1));
	light_hits = 0;
	cr_assert_eq(call_normal(2, 3), NORMAL(2, 3));
	cr_assert_eq(call_mid_ax(1), 0x1001);
	cr_assert_eq(light_hits, 3);

	/* knob on: all optimized again */
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert(wait_opt(&b, true, 2000));
	cr_assert(wait_opt(&c, true, 2000));
	cr_assert(wait_opt(&d, true, 2000));
	check_list(&a);
	check_list(&d);
	unregister_kprobe(&d);

	/* disable unoptimizes (and disarms), enable re-optimizes */
	cr_assert_eq(disable_kprobe(&a), 0);
	cr_assert_not(is_optimized(&a));
	cr_assert(!memcmp(code, orig, 5));
	check_list(&a);
	light_hits = 0;
	cr_assert_eq(call_normal(2, 3), NORMAL(2, 3));
	cr_assert_eq(light_hits, 1);	/* only b */
	cr_assert_eq(enable_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	check_list(&a);

	/* a post handler arriving at the same address unoptimizes; leaving
	 * re-optimizes */
	init_probe(&post, opt_normal, NULL);
	post.post_handler = count_post;
	cr_assert_eq(register_kprobe(&post), 0);
	cr_assert_not(is_optimized(&a));
	cr_assert_not(is_optimized(&post));
	cr_assert(stays_opt(&a, false, 40));
	check_list(&a);
	check_list(&post);
	light_hits = 0;
	cr_assert_eq(call_normal(4, 5), NORMAL(4, 5));
	cr_assert_eq(light_hits, 2);
	unregister_kprobe(&post);
	cr_assert(wait_opt(&a, true, 2000), "post handler left: a not re-optimized");
	check_list(&a);

	/* a disabled sibling (pre handler only) does not keep the enabled
	 * probe from its jump: as in Kprobes, an aggregate is disabled only
	 * when all of its probes are */
	init_probe(&d, opt_normal, light_pre);
	d.flags = KPROBE_FLAG_DISABLED;
	cr_assert_eq(register_kprobe(&d), 0);
	cr_expect(wait_opt(&a, true, 2000), "a disabled sibling keeps the probe unoptimized");
	light_hits = 0;
	cr_assert_eq(call_normal(4, 5), NORMAL(4, 5));
	cr_assert_eq(light_hits, 2);	/* a and b, not d */
	unregister_kprobe(&d);
	cr_assert(wait_opt(&a, true, 2000));

	/* a second pre-only probe at the same address: still optimized */
	init_probe(&d, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&d), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert(wait_opt(&d, true, 2000));
	light_hits = 0;
	cr_assert_eq(call_normal(4, 5), NORMAL(4, 5));
	cr_assert_eq(light_hits, 3);
	check_list(&d);
	unregister_kprobe(&d);
	cr_assert(wait_opt(&a, true, 2000));

	unregister_kprobe(&a);
	unregister_kprobe(&b);
	unregister_kprobe(&c);
	cr_assert(!memcmp(code, orig, 5));
}

/* The enabled knob off and on: optimized probes come back optimized. */
Test(optimize, enabled_knob, .init = setup)
{
	struct kprobe a;
	const uint8_t *code = (const uint8_t *)opt_normal;
	uint8_t orig[5];

	memcpy(orig, code, 5);
	init_probe(&a, opt_normal, light_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	kprobes_set_enabled(false);
	cr_assert_not(is_optimized(&a));
	cr_assert(!memcmp(code, orig, 5));
	check_list(&a);
	kprobes_set_enabled(true);
	cr_assert(wait_opt(&a, true, 2000));
	check_jump(code, "enabled again");
	unregister_kprobe(&a);
}

static unsigned long redirect_hits;

static int redirect_pre(struct kprobe *p, struct pt_regs *regs)
{
	redirect_hits++;
	regs->ip = (unsigned long)opt_alt;
	return 1;
}

Test(optimize, ip_change_ignored_when_optimized, .init = setup)
{
	struct kprobe kp;

	/* unoptimized: honoured, the other function runs */
	kprobes_set_optimization(false);
	init_probe(&kp, opt_normal, redirect_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(call_normal(6, 7), 42);
	cr_assert_eq(redirect_hits, 1);
	/* optimized: ignored, the original function runs */
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(call_normal(6, 7), NORMAL(6, 7));
	cr_assert_eq(redirect_hits, 2);
	unregister_kprobe(&kp);

	/* mid-function likewise */
	kprobes_set_optimization(false);
	init_probe(&kp, (char *)opt_normal + 9, redirect_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert_eq(call_normal(6, 7), NORMAL(6, 7));
	cr_assert_eq(redirect_hits, 3);
	unregister_kprobe(&kp);
}

/* ------------------------------------------------------------------ */
/* pt_regs as on the breakpoint path; register writes honoured         */
/* ------------------------------------------------------------------ */

static struct pt_regs seen_regs;
static unsigned long seen_count;

static int record_pre(struct kprobe *p, struct pt_regs *regs)
{
	seen_regs = *regs;
	seen_count++;
	heavy_work();
	return 0;
}

static void regs_run(void (*caller)(void), const void *addr, bool optimized, struct pt_regs *out,
		     unsigned long *flags_after)
{
	struct kprobe kp;

	kprobes_set_optimization(optimized);
	init_probe(&kp, addr, record_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	if (optimized)
		cr_assert(wait_opt(&kp, true, 2000), "not optimized: %s", why_at((uintptr_t)addr) ?: "?");
	else
		cr_assert_not(is_optimized(&kp));
	seen_count = 0;
	caller();
	cr_assert_eq(seen_count, 1);
	*out = seen_regs;
	*flags_after = opt_regs_flags_after;
	unregister_kprobe(&kp);
	kprobes_set_optimization(true);
}

static void regs_compare(const struct pt_regs *o, const struct pt_regs *u, unsigned long mask)
{
#define R(f) cr_expect_eq(o->f, u->f, #f ": optimized %#lx, breakpoint %#lx", o->f, u->f)
	R(r15); R(r14); R(r13); R(r12); R(bp); R(bx); R(r11); R(r10); R(r9); R(r8);
	R(ax); R(cx); R(dx); R(si); R(di); R(orig_ax); R(ip); R(cs); R(sp); R(ss);
#undef R
	cr_expect_eq(o->flags & mask, u->flags & mask, "flags: optimized %#lx, breakpoint %#lx",
		     o->flags, u->flags);
}

Test(optimize, same_pt_regs_at_entry, .init = setup)
{
	struct pt_regs o, u;
	unsigned long fo, fu;
	unsigned long sum = 0x0101010101010101UL + 0x0202020202020202UL + 0x0303030303030303UL +
			    0x0404040404040404UL + 0x0808080808080808UL + 0x0909090909090909UL;

	regs_run(opt_regs_call_entry, opt_regs_target, true, &o, &fo);
	cr_assert_eq(opt_regs_result, sum);
	regs_run(opt_regs_call_entry, opt_regs_target, false, &u, &fu);
	cr_assert_eq(opt_regs_result, sum);
	regs_compare(&o, &u, 0x8d5);
	cr_expect_eq(o.ip, (unsigned long)opt_regs_target + 1);
	cr_expect_eq(o.sp, opt_regs_caller_sp - 8);
	cr_expect_eq(o.di, 0x0101010101010101UL);
	cr_expect_eq(o.r9, 0x0909090909090909UL);
	cr_expect_eq(o.bx, 0x1111111111111111UL);
	cr_expect_eq(o.bp, 0x2222222222222222UL);
	cr_expect_eq(o.r12, 0x1212121212121212UL);
	cr_expect_eq(o.r15, 0x1515151515151515UL);
	cr_expect_eq(o.orig_ax, (unsigned long)-1);
	cr_expect_eq(o.flags & 0x8d5, 0xa93 & 0x8d5, "flags %#lx", o.flags);
	cr_expect(o.flags & 0x200, "IF clear in %#lx", o.flags);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(regs_get_kernel_argument(&o, i), regs_get_kernel_argument(&u, i));
}

Test(optimize, same_pt_regs_mid_function, .init = setup)
{
	struct pt_regs o, u;
	unsigned long fo, fu;

	regs_run(opt_regs_call_mid, (char *)opt_regs_mid + 2, true, &o, &fo);
	regs_run(opt_regs_call_mid, (char *)opt_regs_mid + 2, false, &u, &fu);
	regs_compare(&o, &u, 0xcd5);
	cr_expect_eq(o.ip, (unsigned long)opt_regs_mid + 3);
	cr_expect_eq(o.sp, opt_regs_caller_sp - 8);
	cr_expect_eq(o.flags & 0xcd5, 0xe47 & 0xcd5, "flags %#lx", o.flags);
	cr_expect_eq(o.ax, 0x0a0a0a0a0a0a0a0aUL);
	/* the flags (DF included) survive the detour */
	cr_expect_eq(fo & 0xcd5, 0xe47 & 0xcd5, "flags after, optimized: %#lx", fo);
	cr_expect_eq(fu & 0xcd5, 0xe47 & 0xcd5, "flags after, breakpoint: %#lx", fu);
}

static int set_ax_pre(struct kprobe *p, struct pt_regs *regs)
{
	regs->ax = 7;
	return 0;
}

static int set_di_pre(struct kprobe *p, struct pt_regs *regs)
{
	regs->di = 100;
	regs->si = 200;
	return 0;
}

static int set_callee_pre(struct kprobe *p, struct pt_regs *regs)
{
	regs->bx = 0x10;
	regs->r12 = 0x20;
	regs->bp = 0x40;
	return 0;
}

static int set_flags_pre(struct kprobe *p, struct pt_regs *regs)
{
	regs->flags |= 0x1;	/* CF */
	return 0;
}

long opt_mid_cf(long a);
static long (*volatile call_mid_cf)(long) = opt_mid_cf;

Test(optimize, handler_register_writes, .init = setup)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kprobe kp;

		kprobes_set_optimization(opt);
		init_probe(&kp, (char *)opt_mid_ax + 3, set_ax_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, opt, 2000));
		cr_assert_eq(call_mid_ax(1), 0x1007, "opt %d", opt);
		unregister_kprobe(&kp);

		init_probe(&kp, opt_normal, set_di_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, opt, 2000));
		cr_assert_eq(call_normal(1, 2), NORMAL(100, 200), "opt %d", opt);
		unregister_kprobe(&kp);

		/* at an entry the callee-saved registers come back from the
		 * pt_regs, not from the light level */
		init_probe(&kp, opt_callee_sum, set_callee_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, opt, 2000));
		cr_assert_eq(opt_call_callee(opt_callee_sum),
			     0x70 + (0x10L << 8) + (0x20L << 16) + (0x40L << 24), "opt %d", opt);
		unregister_kprobe(&kp);

		init_probe(&kp, (char *)opt_mid_cf + 4, set_flags_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, opt, 2000), "opt %d: %s", opt,
			  why_at((uintptr_t)kp.addr) ?: "");
		cr_assert_eq(call_mid_cf(10), 11, "opt %d: flags write", opt);
		unregister_kprobe(&kp);
		cr_assert_eq(call_mid_cf(10), 10);
	}
	kprobes_set_optimization(true);
}

/* ------------------------------------------------------------------ */
/* Recursion                                                           */
/* ------------------------------------------------------------------ */

static unsigned long rec_hits, rec_bad;

static int recurse_pre(struct kprobe *p, struct pt_regs *regs)
{
	rec_hits++;
	if (call_normal(5, 6) != NORMAL(5, 6))
		rec_bad++;
	return 0;
}

Test(optimize, recursion_counts_nmissed, .init = setup)
{
	const void *sites[2] = { opt_normal, (char *)opt_normal + 9 };

	for (int s = 0; s < 2; s++) {
		struct kprobe kp;

		init_probe(&kp, sites[s], recurse_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, true, 2000));
		rec_hits = rec_bad = 0;
		for (long i = 0; i < 1000; i++)
			cr_assert_eq(call_normal(i, 2), NORMAL(i, 2));
		cr_assert_eq(rec_hits, 1000);
		cr_assert_eq(rec_bad, 0);
		cr_assert_eq(kp.nmissed, 1000, "site %d: nmissed %lu", s, kp.nmissed);
		cr_assert(is_optimized(&kp));
		unregister_kprobe(&kp);
	}
}

/* ------------------------------------------------------------------ */
/* Threads and fork                                                    */
/* ------------------------------------------------------------------ */

static volatile int spin_stop;
static unsigned long spin_calls[4], spin_errors;

static void *spinner(void *arg)
{
	long id = (long)arg;
	unsigned long n = 0;

	while (!spin_stop) {
		long a = (long)n * 3 + id;

		if (call_normal(a, id) != NORMAL(a, id))
			__atomic_fetch_add(&spin_errors, 1, __ATOMIC_RELAXED);
		if (call_short5(a) != a + 1)
			__atomic_fetch_add(&spin_errors, 1, __ATOMIC_RELAXED);
		if (call_mid_ax(a) != a + 0x1000)
			__atomic_fetch_add(&spin_errors, 1, __ATOMIC_RELAXED);
		if (call_short3(a) != (long)(uint32_t)a)
			__atomic_fetch_add(&spin_errors, 1, __ATOMIC_RELAXED);
		n++;
	}
	spin_calls[id] = n;
	return NULL;
}

static unsigned long perm_hits, perm_mid_hits, perm_short_hits;

static int perm_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&perm_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int perm_mid_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&perm_mid_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int perm_short_pre(struct kprobe *p, struct pt_regs *regs)
{
	heavy_work();
	__atomic_fetch_add(&perm_short_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void churn_op(int op, struct kprobe *churn, struct kprobe *perm_mid)
{
	switch (op) {
	case 0:	/* a pre-only probe joins opt_normal */
		init_probe(&churn[0], opt_normal, light_pre);
		cr_assert_eq(register_kprobe(&churn[0]), 0);
		break;
	case 1:
		unregister_kprobe(&churn[0]);
		break;
	case 2:	/* a post handler arrives, and leaves */
		init_probe(&churn[1], opt_normal, NULL);
		churn[1].post_handler = count_post;
		cr_assert_eq(register_kprobe(&churn[1]), 0);
		break;
	case 3:
		unregister_kprobe(&churn[1]);
		break;
	case 4:	/* a probe inside the region of the entry */
		init_probe(&churn[2], (char *)opt_normal + 4, light_pre);
		cr_assert_eq(register_kprobe(&churn[2]), 0);
		break;
	case 5:
		unregister_kprobe(&churn[2]);
		break;
	case 6:
		kprobes_set_optimization(false);
		break;
	case 7:
		kprobes_set_optimization(true);
		break;
	case 8:
		cr_assert_eq(disable_kprobe(perm_mid), 0);
		break;
	case 9:
		cr_assert_eq(enable_kprobe(perm_mid), 0);
		break;
	}
}

Test(optimize, threads_through_changing_regions, .init = setup)
{
	enum { NT = 2 };
	pthread_t th[NT];
	/* static: a failed assertion must not leave probes on a dead stack
	 * while the spinners still run through them */
	static struct kprobe perm, perm_mid, perm_short, churn[4];
	unsigned long total = 0, ops = 0, optimizations = 0, cycles = 0;
	double end;

	init_probe(&perm, opt_normal, perm_pre);
	init_probe(&perm_mid, (char *)opt_mid_ax + 3, perm_mid_pre);
	init_probe(&perm_short, opt_short5, perm_short_pre);
	cr_assert_eq(register_kprobe(&perm), 0);
	cr_assert_eq(register_kprobe(&perm_mid), 0);
	cr_assert_eq(register_kprobe(&perm_short), 0);
	spin_stop = 0;
	for (long i = 0; i < NT; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, spinner, (void *)i), 0);

	/* The entry probe (exact hit count) is optimized and unoptimized by
	 * siblings, post handlers, probes in its region and the knob, while
	 * probes elsewhere come and go fast. */
	/* About 3 s, longer on a loaded machine until 1000 operations and 60
	 * optimizations are reached (at most 12 s, within the suite's
	 * timeout); what a machine under heavy load must reach at least is
	 * asserted below. */
	end = now_s() + 3.0;
	while (cycles < 300 && (now_s() < end || ops < 1000 || optimizations < 60) &&
	       now_s() < end + 9.0) {
		for (int op = 0; op < 10; op++) {
			churn_op(op, churn, &perm_mid);
			ops++;
			/* (Two spinners and this thread share two cores
			 * with the optimizer: a census finds a thread that
			 * waits for a core "inside", and retries; on a
			 * machine loaded by other work that takes seconds.) */
			if (op == 1 || op == 3 || op == 7) {
				cr_assert(wait_opt(&perm, true, 10000),
					  "cycle %lu op %d: entry probe not re-optimized", cycles, op);
				optimizations++;
			}
			if (op == 2 || op == 4 || op == 6)
				cr_assert_not(is_optimized(&perm), "cycle %lu op %d", cycles, op);
		}
		for (int k = 0; k < 20; k++) {
			init_probe(&churn[3], k & 1 ? (void *)opt_short3 : (void *)((char *)opt_normal + 9),
				   k & 2 ? heavy_pre : light_pre);
			cr_assert_eq(register_kprobe(&churn[3]), 0);
			unregister_kprobe(&churn[3]);
			ops += 2;
		}
		cycles++;
	}
	cr_assert(wait_opt(&perm, true, 2000));
	cr_assert(wait_opt(&perm_short, true, 2000));
	sleep_us(20000);
	spin_stop = 1;
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NT; i++)
		total += spin_calls[i];
	cr_log_info("%lu operations, %lu optimizations of the entry probe, %lu calls", ops,
		    optimizations, total);
	cr_assert_eq(spin_errors, 0, "%lu wrong results", spin_errors);
	cr_assert_eq(perm_hits, total, "entry probe: %lu hits for %lu calls", perm_hits, total);
	cr_assert_eq(perm_short_hits, total, "short probe: %lu hits for %lu calls", perm_short_hits,
		     total);
	cr_assert_leq(perm_mid_hits, total);
	cr_assert_geq(ops, 400, "only %lu operations", ops);
	cr_assert_geq(optimizations, 30, "only %lu optimizations", optimizations);
	cr_assert_eq(perm.nmissed, 0);
	unregister_kprobe(&perm);
	unregister_kprobe(&perm_mid);
	unregister_kprobe(&perm_short);
	cr_assert_eq(call_normal(1, 1), NORMAL(1, 1));
}

/* Probes registered, optimized and unregistered over and over on the
 * same addresses while threads run through them. */
Test(optimize, threads_register_optimize_unregister_loop, .init = setup)
{
	enum { NT = 2, MIN_ROUNDS = 10 };
	pthread_t th[NT];
	static struct kprobe kp;
	double start = now_s(), end = start + 2.5;
	unsigned long rounds = 0, total = 0;

	spin_stop = 0;
	light_hits = 0;
	for (long i = 0; i < NT; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, spinner, (void *)i), 0);
	/* About 2.5 s; on a loaded machine (a census retries while a thread
	 * waits for a core in the region or the slot) longer, until the
	 * minimum number of rounds is reached, at most 12 s. */
	while (rounds < 1000 && (now_s() < end || rounds < MIN_ROUNDS) && now_s() < start + 12) {
		static const int offs[4] = { 0, 9, 1, 4 };

		init_probe(&kp, (char *)opt_normal + offs[rounds % 4], light_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert(wait_opt(&kp, true, 3000), "round %lu not optimized", rounds);
		unregister_kprobe(&kp);
		rounds++;
	}
	spin_stop = 1;
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NT; i++)
		total += spin_calls[i];
	cr_log_info("%lu rounds", rounds);
	cr_assert_eq(spin_errors, 0);
	cr_assert_leq(light_hits, total);
	/* each optimization waits for the optimizer's delay, and for a retry
	 * when a spinning thread sat in the region or the slot */
	cr_assert_geq(rounds, MIN_ROUNDS, "only %lu rounds in %.1f s", rounds, now_s() - start);
}

/* kp_optimizer_flush() (behind kprobes_optimize_now(), which the kprobe agent calls)
 * from a thread other than the optimizer: the jump goes in at once, and
 * the census does not wait for libkprobes' own optimizer thread, which
 * blocks every signal. */
Test(optimize, flush_from_another_thread, .init = setup)
{
	pthread_t th;
	double worst = 0;

	spin_stop = 0;
	cr_assert_eq(pthread_create(&th, NULL, spinner, (void *)0), 0);
	for (int round = 0; round < 6; round++) {
		static struct kprobe kp;
		double t0, dt;

		init_probe(&kp, round & 1 ? (void *)opt_short5 : (void *)opt_normal, light_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		/* a census may find the spinning thread in the region or the
		 * slot (it traps on every call until the jump is in): retry */
		for (int pass = 0; pass < 20 && !is_optimized(&kp); pass++) {
			if (pass)
				sleep_us(1000);
			t0 = now_s();
			optimizer_flush();
			dt = now_s() - t0;
			worst = dt > worst ? dt : worst;
			cr_assert_lt(dt, 0.5, "round %d: a flush took %.0f ms (optimized: %d)", round,
				     dt * 1e3, is_optimized(&kp));
		}
		cr_assert(wait_opt(&kp, true, 2000));
		unregister_kprobe(&kp);
	}
	spin_stop = 1;
	pthread_join(th, NULL);
	cr_expect_lt(worst, 0.2, "a flush took %.0f ms", worst * 1e3);
}

static unsigned long fork_hits;

static int fork_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&fork_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(optimize, fork_while_optimizing, .init = setup)
{
	pthread_t th;
	int failures = 0;
	static struct kprobe kp, kp2 __attribute__((unused));

	/* Start the optimizer thread first: ASan's allocator (gcc 12) is not
	 * fork-safe, and a fork while that thread initializes can leave the
	 * child's allocator locked. */
	init_probe(&kp, opt_short5, fork_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	unregister_kprobe(&kp);
	spin_stop = 0;
	cr_assert_eq(pthread_create(&th, NULL, spinner, (void *)0), 0);
	for (int round = 0; round < 24; round++) {
		pid_t pid;
		int status;

		init_probe(&kp, round & 1 ? (void *)opt_short5 : (void *)((char *)opt_normal + 9),
			   fork_pre);
		cr_assert_eq(register_kprobe(&kp), 0);
		/* fork before, around and after the optimizer's pass */
		sleep_us((round % 10) * 1000);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			unsigned long h0 = fork_hits;
			int bad = 0;

			for (long i = 0; i < 2000; i++) {
				if (call_short5(i) != i + 1 || call_normal(i, 3) != NORMAL(i, 3))
					bad = 1;
			}
			if (fork_hits - h0 != 2000)
				_exit(3);
			/* the child optimizes on its own (its new optimizer
			 * thread: not under ASan, whose allocator can be left
			 * locked by a fork and deadlock pthread_create) */
#if !defined(__SANITIZE_ADDRESS__)
			init_probe(&kp2, (void *)opt_mid_ax, fork_pre);
			if (register_kprobe(&kp2))
				_exit(4);
			if (!wait_opt(&kp2, true, 2000))
				_exit(5);
			if (call_mid_ax(5) != 0x1005)
				bad = 1;
			unregister_kprobe(&kp2);
#endif
			unregister_kprobe(&kp);
			if (call_short5(1) != 2)
				bad = 1;
			_exit(bad ? 2 : 0);
		}
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failures++;
			cr_log_error("round %d: child status %#x", round, status);
		}
		cr_assert(wait_opt(&kp, true, 2000));
		unregister_kprobe(&kp);
	}
	spin_stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(failures, 0);
	cr_assert_eq(spin_errors, 0);
}

/* ------------------------------------------------------------------ */
/* Optimized return probes                                             */
/* ------------------------------------------------------------------ */

static unsigned long rp_entries, rp_returns, rp_bad;
static long rp_expect;

static int rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	heavy_work();
	rp_entries++;
	return 0;
}

static int rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	rp_returns++;
	if ((long)regs_return_value(regs) != rp_expect)
		rp_bad++;
	heavy_work();
	return 0;
}

Test(optimize, kretprobe_optimized_entry, .init = setup)
{
	struct kretprobe rp;
	double want[32];

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	rp.entry_handler = rp_entry;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "return probe entry not optimized");
	check_list(&rp.kp);
	for (long i = 0; i < 20000; i++) {
		rp_expect = NORMAL(i, -7);
		cr_assert_eq(call_normal(i, -7), rp_expect);
	}
	cr_assert_eq(rp_entries, 20000);
	cr_assert_eq(rp_returns, 20000);
	cr_assert_eq(rp_bad, 0);
	cr_assert_eq(rp.nmissed, 0);
	cr_assert_eq(rp.kp.nmissed, 0);
	cr_assert(is_optimized(&rp.kp));
	unregister_kretprobe(&rp);
	cr_assert_eq(rp.kp.flags & KPROBE_FLAG_OPTIMIZED, 0);

	/* a double result through the trampoline, handlers clobbering xmm */
	for (int i = 0; i < 32; i++)
		want[i] = fargs_call(i);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_fargs;
	rp.handler = rp_ret;
	rp.entry_handler = rp_entry;
	rp_entries = rp_returns = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "fargs return probe not optimized");
	for (int i = 0; i < 32; i++) {
		double got = fargs_call(i);

		cr_assert(!memcmp(&got, &want[i], sizeof(got)), "i %d: %a != %a", i, got, want[i]);
	}
	cr_assert_eq(rp_entries, 32);
	cr_assert_eq(rp_returns, 32);
	unregister_kretprobe(&rp);

	/* knob off: same counts on the breakpoint path */
	kprobes_set_optimization(false);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	rp.entry_handler = rp_entry;
	rp_entries = rp_returns = rp_bad = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(stays_opt(&rp.kp, false, 20));
	for (long i = 0; i < 100; i++) {
		rp_expect = NORMAL(i, 1);
		cr_assert_eq(call_normal(i, 1), rp_expect);
	}
	cr_assert_eq(rp_entries, 100);
	cr_assert_eq(rp_returns, 100);
	cr_assert_eq(rp_bad, 0);
	kprobes_set_optimization(true);
	cr_assert(wait_opt(&rp.kp, true, 2000));
	unregister_kretprobe(&rp);
}

/* A return probe without an entry handler at an optimized entry takes the
 * fast path (no struct pt_regs, the instance set up from the return
 * address's slot): exact counts and results, recursion, and frames left by
 * longjmp dropped at the next entry. */
static jmp_buf rp_jb;
long opt_rp_rec(long n, long jump);
/* through a pointer: a direct self-call could become a loop */
static long (*volatile call_rp_rec)(long, long) = opt_rp_rec;

__attribute__((noinline, used)) long opt_rp_rec(long n, long jump)
{
	__asm__ volatile("" : "+r"(n));
	if (n == 0) {
		if (jump)
			longjmp(rp_jb, 1);
		return 0;
	}
	return call_rp_rec(n - 1, jump) + n;
}

static int rp_count_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	rp_returns++;
	return 0;
}

Test(optimize, kretprobe_fast_entry, .init = setup)
{
	struct kretprobe rp;

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	rp_returns = rp_bad = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "return probe entry not optimized");
	cr_assert_eq(fast_of(&rp.kp), &rp.kp, "no fast path for a return probe");
	for (long i = 0; i < 20000; i++) {
		rp_expect = NORMAL(i, 5);
		cr_assert_eq(call_normal(i, 5), rp_expect);
	}
	cr_assert_eq(rp_returns, 20000);
	cr_assert_eq(rp_bad, 0);
	cr_assert_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);

	/* an entry handler needs the registers: no fast path */
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	rp.entry_handler = rp_entry;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_null(fast_of(&rp.kp));
	unregister_kretprobe(&rp);

	/* recursion, and frames a longjmp left */
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)opt_rp_rec;
	rp.handler = rp_count_ret;
	rp.maxactive = 64;
	rp_returns = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "opt_rp_rec not optimized");
	cr_assert_eq(fast_of(&rp.kp), &rp.kp);
	for (int round = 0; round < 200; round++) {
		if (!setjmp(rp_jb))
			call_rp_rec(10, 1);	/* 11 frames left without returning */
		cr_assert_eq(call_rp_rec(10, 0), 55);
	}
	cr_assert_eq(rp_returns, 200 * 11, "%lu returns", rp_returns);
	cr_assert_eq(rp.nmissed, 0, "%lu missed: stale instances were not dropped", rp.nmissed);
	unregister_kretprobe(&rp);
}

/* A light kprobe and a return probe without an entry handler on one
 * function (a tool counting or recording its entry and return): the return
 * probe's set-up runs the kprobe's handler first, still on the fast path;
 * both run once per call, and the pair follows the kprobe's changes. */
Test(optimize, kretprobe_fast_entry_after_light_kprobe, .init = setup)
{
	struct kretprobe rp;
	struct kprobe kp;

	memset(&rp, 0, sizeof(rp));
	memset(&kp, 0, sizeof(kp));
	kp.addr = (kprobe_opcode_t *)opt_normal;
	kp.pre_handler = count_pre;
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	rp_returns = rp_bad = 0;
	count_hits = 0;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "not optimized");
	cr_assert_eq(fast_of(&rp.kp), &rp.kp, "no fast path for the pair");
	for (long i = 0; i < 20000; i++) {
		rp_expect = NORMAL(i, 5);
		cr_assert_eq(call_normal(i, 5), rp_expect);
	}
	cr_assert_eq(count_hits, 20000);
	cr_assert_eq(rp_returns, 20000);
	cr_assert_eq(rp_bad, 0);

	/* The kprobe disabled: no pair (the handler loop skips it). */
	cr_assert_eq(disable_kprobe(&kp), 0);
	cr_assert_null(fast_of(&rp.kp));
	for (long i = 0; i < 1000; i++) {
		rp_expect = NORMAL(i, 5);
		cr_assert_eq(call_normal(i, 5), rp_expect);
	}
	cr_assert_eq(count_hits, 20000);
	cr_assert_eq(rp_returns, 21000);
	cr_assert_eq(enable_kprobe(&kp), 0);
	cr_assert_eq(fast_of(&rp.kp), &rp.kp);
	for (long i = 0; i < 1000; i++) {
		rp_expect = NORMAL(i, 5);
		cr_assert_eq(call_normal(i, 5), rp_expect);
	}
	cr_assert_eq(count_hits, 21000);
	cr_assert_eq(rp_returns, 22000);
	cr_assert_eq(rp_bad, 0);
	cr_assert_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);
	unregister_kprobe(&kp);

	/* A kprobe that needs its pt_regs: no pair. */
	memset(&rp, 0, sizeof(rp));
	memset(&kp, 0, sizeof(kp));
	kp.addr = (kprobe_opcode_t *)opt_normal;
	kp.pre_handler = light_pre;
	rp.kp.addr = (kprobe_opcode_t *)opt_normal;
	rp.handler = rp_ret;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_null(fast_of(&rp.kp));
	unregister_kretprobe(&rp);
	unregister_kprobe(&kp);
}

/* ---- return probes whose function is called from the instance's stub ---- */

/* The first bytes of an entry detour's exit, after its call (D+6): the
 * continuing exit reads the thread record through %fs, the plain one from
 * the stack. */
static bool detour_continues(const struct kprobe *p)
{
	const struct kp_probepoint *pp = p->__pp;
	static const uint8_t mov_fs[] = { 0x64, 0x48, 0x8b, 0x04, 0x25 };

	return pp->ainsn.opt && pp->ainsn.opt->detour &&
	       !memcmp((const void *)(pp->ainsn.opt->detour + 6), mov_fs, sizeof(mov_fs));
}

TEST_FN long rs_many(long a, long b, long c, long d, long e, long f, long g, long h, double x,
		     double y);
TEST_FN long rs_many(long a, long b, long c, long d, long e, long f, long g, long h, double x,
		     double y)
{
	long r = a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + (long)(x * 4 + y);

	__asm__ volatile("" : "+r"(r));
	return r;
}

static long (*volatile call_rs_many)(long, long, long, long, long, long, long, long, double,
				     double) = rs_many;

static long rs_expect(long i)
{
	return i + 2 * 2 + 3 * 3 + 4 * 4 + 5 * 5 + 6 * 6 + 7 * (i * 3) + 8 * (i ^ 5) +
	       (long)((double)i * 4 + 0.5);
}

static long rs_returns, rs_bad;
static long rs_want;

static int rs_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	rs_returns++;
	if ((long)regs->ax != rs_want)
		rs_bad++;
	return 0;
}

static void *rs_bt[32];
static int rs_bt_n;
static void *rs_real_ra;

long rs_bt_fn(long x);
TEST_FN long rs_bt_fn(long x)
{
	rs_bt_n = backtrace(rs_bt, 32);
	if (!rs_real_ra)
		rs_real_ra = __builtin_return_address(0);
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static long (*volatile call_rs_bt)(long) = rs_bt_fn;

long rs_bt_caller(long x);
TEST_FN long rs_bt_caller(long x)
{
	long r = call_rs_bt(x);

	__asm__ volatile("" : "+r"(r));
	return r * 2;
}

Test(optimize, kretprobe_called_from_stub, .init = setup)
{
	struct kretprobe rp;

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)rs_many;
	rp.handler = rs_ret;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "rs_many not optimized");
	cr_assert_eq(fast_of(&rp.kp), &rp.kp);
	cr_assert(detour_continues(&rp.kp), "a return probe's detour without the continuing exit");
	/* stack arguments and float arguments see the frame they would */
	for (long i = 0; i < 20000; i++) {
		rs_want = rs_expect(i);
		cr_assert_eq(call_rs_many(i, 2, 3, 4, 5, 6, i * 3, i ^ 5, (double)i, 0.5), rs_want,
			     "i=%ld", i);
	}
	cr_assert_eq(rs_returns, 20000);
	cr_assert_eq(rs_bad, 0);
	cr_assert_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);

	/* unwinding from inside goes through the stub to the real caller */
	cr_assert_eq(rs_bt_caller(1), 4);
	cr_assert_not_null(rs_real_ra);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)rs_bt_fn;
	rp.handler = rp_count_ret;
	rp_returns = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "rs_bt_fn not optimized");
	cr_assert(detour_continues(&rp.kp));
	for (long x = 0; x < 50; x++) {
		bool seen = false;

		rs_bt_n = 0;
		cr_assert_eq(rs_bt_caller(x), (x + 1) * 2);
		for (int i = 0; i < rs_bt_n; i++)
			seen |= rs_bt[i] == rs_real_ra;
		cr_assert(seen, "x=%ld: the real caller is not in the backtrace", x);
	}
	cr_assert_eq(rp_returns, 50);
	unregister_kretprobe(&rp);
}

/* A return probe joining a detour built for a kprobe (a plain exit) still
 * works once it has the fast path: the function is then not called from
 * the stub. */
Test(optimize, kretprobe_fast_entry_on_plain_detour, .init = setup)
{
	struct kretprobe rp;
	struct kprobe kp;

	init_probe(&kp, (void *)rs_many, light_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000), "rs_many not optimized");
	cr_assert_not(detour_continues(&kp), "a kprobe's detour with the continuing exit");
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)rs_many;
	rp.handler = rs_ret;
	rs_returns = rs_bad = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	unregister_kprobe(&kp);
	cr_assert(wait_opt(&rp.kp, true, 2000));
	cr_assert_eq(fast_of(&rp.kp), &rp.kp);
	cr_assert_not(detour_continues(&rp.kp));
	for (long i = 0; i < 5000; i++) {
		rs_want = rs_expect(i);
		cr_assert_eq(call_rs_many(i, 2, 3, 4, 5, 6, i * 3, i ^ 5, (double)i, 0.5), rs_want);
	}
	cr_assert_eq(rs_returns, 5000);
	cr_assert_eq(rs_bad, 0);
	unregister_kretprobe(&rp);
}

/* A thread between a detour's exit and the stub's call into the detour is
 * bound for it: a census counts it as inside. */
static uintptr_t rs_ret_loc(int i, void *arg)
{
	return (uintptr_t)arg + 8 * (uintptr_t)i;
}

Test(optimize, census_counts_stub_entries_as_inside)
{
	static uintptr_t locs[2];
	struct ret_stubs *rs;
	uintptr_t ret;

	pthread_mutex_lock(&kp_registry_lock);
	rs = arch_ret_stubs_create(2, rs_ret_loc, locs);
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_not_null(rs);
	for (int i = 0; i < 2; i++) {
		ret = arch_ret_stub(rs, i);
		cr_assert(arch_ip_bound_for_detour(ret - 9), "stub entry");
		cr_assert(arch_ip_bound_for_detour(ret - 4), "the stub's call");
		cr_assert_not(arch_ip_bound_for_detour(ret), "the return point");
	}
	cr_assert_not(arch_ip_bound_for_detour((uintptr_t)rs_many));
	arch_ret_stubs_destroy(rs);
}

/* ---- the return probe's assembly fast paths ---- */

/* kr_asm_regs and kr_asm_regs_caller (tests/helpers/regs_asm.S): a
 * function that returns with every caller-saved register and flag set,
 * and a caller that relies on them.  The return handlers count and record
 * where they were called from: rf_narrow changes rax rcx rdx rsi rdi and
 * the flags, rf_wide r8-r11 as well. */
__asm__(
	"OPTFN rf_narrow\n"
	"\tlock incq rf_hits(%rip)\n"
	"\tmov (%rsp), %rax\n"
	"\tmov %rax, rf_handler_ra(%rip)\n"
	"\tmov $-1, %rcx\n\tmov $-1, %rdx\n\tmov $-1, %rsi\n\tmov $-1, %rdi\n"
	"\txor %eax, %eax\n"
	"\tret\n"
	"OPTEND rf_narrow\n"

	"OPTFN rf_wide\n"
	"\tlock incq rf_hits(%rip)\n"
	"\tmov (%rsp), %rax\n"
	"\tmov %rax, rf_handler_ra(%rip)\n"
	"\tmov $-1, %rcx\n\tmov $-1, %rdx\n\tmov $-1, %rsi\n\tmov $-1, %rdi\n"
	"\tmov $-1, %r8\n\tmov $-1, %r9\n\tmov $-1, %r10\n\tmov $-1, %r11\n"
	"\txor %eax, %eax\n"
	"\tret\n"
	"OPTEND rf_wide\n");

void kr_asm_regs(void);
void kr_asm_regs_caller(void);
extern unsigned long kr_regs_out[16];
extern const unsigned long kr_regs_want[16];
int rf_narrow(struct kretprobe_instance *ri, struct pt_regs *regs);
int rf_wide(struct kretprobe_instance *ri, struct pt_regs *regs);
unsigned long rf_hits;
uintptr_t rf_handler_ra;

/* Is ra inside the return trampoline (the function, by its symbol)? */
static bool in_trampoline(uintptr_t ra)
{
	uintptr_t start;
	size_t size;

	cr_assert_eq(kp_function_bounds(arch_kretprobe_trampoline(), &start, &size), 0);
	return ra > start && ra < start + size;
}

/* Every register and flag reaches the caller as the function left it,
 * over the optimized entry's and the trampoline's fast paths, with a
 * handler that leaves r8-r11 alone (not saved then) and one that does not;
 * the handlers are called from the trampoline itself (its fast path). */
Test(optimize, kretprobe_fast_paths_keep_every_register, .init = setup)
{
	const unsigned long *want = kr_regs_want;
	kretprobe_handler_t handlers[2] = { rf_narrow, rf_wide };

	cr_assert_eq(kp_code_needs((uintptr_t)rf_narrow), 0, "narrow: %#x",
		     kp_code_needs((uintptr_t)rf_narrow));
	cr_assert_eq(kp_code_needs((uintptr_t)rf_wide), KP_OPT_SAVE_SCRATCH, "wide: %#x",
		     kp_code_needs((uintptr_t)rf_wide));
	for (int h = 0; h < 2; h++) {
		struct kretprobe rp;

		memset(&rp, 0, sizeof(rp));
		rp.kp.addr = (kprobe_opcode_t *)kr_asm_regs;
		rp.handler = handlers[h];
		rf_hits = 0;
		cr_assert_eq(register_kretprobe(&rp), 0);
		cr_assert(wait_opt(&rp.kp, true, 2000), "kr_asm_regs not optimized");
		cr_assert(detour_continues(&rp.kp));
		for (int round = 0; round < 50; round++) {
			memset(kr_regs_out, 0, sizeof(kr_regs_out));
			rf_handler_ra = 0;
			kr_asm_regs_caller();
			cr_assert_eq(kr_regs_out[0] & 0x8d5, want[0], "h%d: flags %#lx", h, kr_regs_out[0]);
			cr_assert_eq(kr_regs_out[0] & 0x400, 0, "DF set");
			for (int i = 1; i < 16; i++)
				cr_assert_eq(kr_regs_out[i], want[i], "h%d round %d: reg %d: %#lx", h, round,
					     i, kr_regs_out[i]);
			cr_assert(in_trampoline(rf_handler_ra),
				  "h%d: handler not called by the trampoline's fast path", h);
		}
		cr_assert_eq(rf_hits, 50);
		cr_assert_eq(rp.nmissed, 0);
		unregister_kretprobe(&rp);
	}
}

/* A fork child's instances cached by its parent name the parent's thread:
 * the entry's fast path leaves them to the generic one, which makes them
 * the child's (ri->task is the child's). */
static pid_t rf_task;
static long rf_task_hits;

static int rf_task_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	rf_task = ri->task;
	rf_task_hits++;
	return 0;
}

Test(optimize, kretprobe_fast_entry_in_fork_child, .init = setup)
{
	struct kretprobe rp;
	int status;
	pid_t pid;

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)rs_many;
	rp.handler = rf_task_ret;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "rs_many not optimized");
	cr_assert(detour_continues(&rp.kp));
	for (long i = 0; i < 100; i++)
		cr_assert_eq(call_rs_many(i, 2, 3, 4, 5, 6, i * 3, i ^ 5, (double)i, 0.5),
			     rs_expect(i));
	cr_assert_eq(rf_task, getpid());
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		bool ok = true;

		rf_task_hits = 0;
		for (long i = 0; i < 100; i++) {
			ok &= call_rs_many(i, 2, 3, 4, 5, 6, i * 3, i ^ 5, (double)i, 0.5) ==
			      rs_expect(i);
			ok &= rf_task == getpid();
		}
		_exit(ok && rf_task_hits == 100 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x", status);
	unregister_kretprobe(&rp);
}

/* A return handler that reads its struct pt_regs gets the complete one on
 * the trampoline's fast path too; its changes to general registers reach
 * the caller, its changes to ip and flags do not. */
static unsigned long rf_seen_ax, rf_seen_bx, rf_seen_ip, rf_seen_sp, rf_seen_flags;

/* (Not instrumented in the sanitizer build: the calls it would get make
 * the handler need everything saved, which is the general path.) */
__attribute__((no_sanitize_address, no_sanitize_undefined))
static int rf_regs_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	rf_handler_ra = (uintptr_t)__builtin_return_address(0);
	rf_seen_ax = regs->ax;
	rf_seen_bx = regs->bx;
	rf_seen_ip = regs->ip;
	rf_seen_sp = regs->sp;
	rf_seen_flags = regs->flags;
	regs->ax = 0x1234;
	regs->r9 = 0x5678;
	regs->bx = 0x9abc;
	regs->ip = 0;
	regs->flags = 0x202;
	rf_hits++;
	return 0;
}

Test(optimize, kretprobe_fast_path_pt_regs_handler, .init = setup)
{
	unsigned long want[16];
	struct kretprobe rp;

	/* as the function left them, but for what the handler changed */
	memcpy(want, kr_regs_want, sizeof(want));
	want[1] = 0x1234;	/* rax */
	want[7] = 0x5678;	/* r9 */
	want[10] = 0x9abc;	/* rbx */

	cr_assert(kp_code_needs((uintptr_t)rf_regs_ret) & KP_OPT_SAVE_REGS);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)kr_asm_regs;
	rp.handler = rf_regs_ret;
	rf_hits = 0;
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert(wait_opt(&rp.kp, true, 2000), "kr_asm_regs not optimized");
	for (int round = 0; round < 20; round++) {
		memset(kr_regs_out, 0, sizeof(kr_regs_out));
		kr_asm_regs_caller();
		cr_assert_eq(kr_regs_out[0] & 0x8d5, want[0], "flags %#lx", kr_regs_out[0]);
		for (int i = 1; i < 16; i++)
			cr_assert_eq(kr_regs_out[i], want[i], "round %d: reg %d: %#lx", round, i, kr_regs_out[i]);
		cr_assert_eq(rf_seen_ax, 0x1111111111111101);
		cr_assert_eq(rf_seen_bx, 0x0aaaaaaaaaaaaa0a);
		cr_assert_eq(rf_seen_flags & 0x8d5, 0x8d5, "pt_regs flags %#lx", rf_seen_flags);
		cr_assert_not_null(rf_seen_ip);
		cr_assert_eq(*(uint8_t *)(rf_seen_ip - 5), 0xe8, "ip is not after a call");
		cr_assert(rf_seen_sp > (unsigned long)&round - 4096 && rf_seen_sp < (unsigned long)&round);
		cr_assert(in_trampoline(rf_handler_ra),
			  "round %d: handler not called by the trampoline's fast path", round);
	}
	cr_assert_eq(rf_hits, 20);
	unregister_kretprobe(&rp);
}

/* ---- a thread stopped in a retired slot ---- */

/* A thread that trapped on a probe and was stopped by a signal handler
 * right after, in the probe's out-of-line slot, goes on from there to the
 * instruction after the probed one, inside a later probe's region when
 * the probe is gone and another one is put at the same address: no jump
 * may be installed under it until it has left. */
__asm__(
	"OPTFN rs_park_fn\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi), %rax\n"
	"\tpop %rbp\n"
	"\tret\n"
	"OPTEND rs_park_fn\n");

long rs_park_fn(long x);

static long (*volatile rs_park_call)(long) = rs_park_fn;
static uintptr_t rs_park_slot;
static volatile int rs_park_armed, rs_parked, rs_park_release, rs_park_stop;
static volatile long rs_park_bad, rs_park_calls;

static void rs_park_on_signal(int sig, siginfo_t *info, void *ctx)
{
	uintptr_t ip = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];

	(void)sig;
	(void)info;
	if (!rs_park_armed || ip < rs_park_slot || ip >= rs_park_slot + XOL_SLOT_SIZE)
		return;
	rs_park_armed = 0;
	rs_parked = 1;
	while (!rs_park_release)
		__builtin_ia32_pause();
}

static void *rs_park_hammer(void *arg)
{
	(void)arg;
	for (long i = 0; !rs_park_stop; i++) {
		if (rs_park_call(i) != i + 1)
			rs_park_bad++;
		rs_park_calls++;
	}
	return NULL;
}

static int rs_park_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	return 0;
}

Test(optimize, no_jump_under_a_thread_stopped_in_a_retired_slot)
{
	struct sigaction sa = { .sa_sigaction = rs_park_on_signal, .sa_flags = SA_SIGINFO };
	struct kprobe a = { .addr = (kprobe_opcode_t *)rs_park_fn, .pre_handler = rs_park_pre };
	struct kprobe b = { .addr = (kprobe_opcode_t *)rs_park_fn, .pre_handler = rs_park_pre };
	struct kp_probepoint *pp;
	pthread_t hammer;
	double end;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&a), 0);
	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup((uintptr_t)rs_park_fn);
	rs_park_slot = pp && pp->ainsn.slot ? pp->ainsn.slot->code : 0;
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_neq(rs_park_slot, 0, "no out-of-line slot");
	rs_park_armed = 1;
	cr_assert_eq(pthread_create(&hammer, NULL, rs_park_hammer, NULL), 0);
	/* A signal that arrives while the thread is in the trap handler
	 * (which blocks it) is delivered as the thread enters the slot. */
	end = now_s() + 5;
	while (!rs_parked && now_s() < end) {
		pthread_kill(hammer, SIGUSR1);
		sleep_us(50);
	}
	if (!rs_parked) {
		rs_park_armed = 0;
		rs_park_stop = 1;
		pthread_join(hammer, NULL);
		unregister_kprobe(&a);
		kprobes_set_optimization(true);
		cr_skip_test("the thread was never stopped in the slot within 5 s");
	}
	unregister_kprobe(&a);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_expect(stays_opt(&b, false, 1000),
		  "a jump was installed while a thread in a retired slot was bound for its region");
	rs_park_release = 1;
	cr_expect(wait_opt(&b, true, 5000), "not optimized once the thread left the slot");
	rs_park_stop = 1;
	pthread_join(hammer, NULL);
	cr_expect_eq(rs_park_bad, 0);
	cr_expect_gt(rs_park_calls, 0);
	unregister_kprobe(&b);
}

/* ------------------------------------------------------------------ */
/* The args level (function entries) and the mid-function fast path   */
/* ------------------------------------------------------------------ */

#define NOSAN __attribute__((no_sanitize("address", "undefined")))

long opt_args6(long a, long b, long c, long d, long e, long f);
TEST_FN long opt_args6(long a, long b, long c, long d, long e, long f)
{
	__asm__ volatile("" : "+r"(a), "+r"(f));
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}

static long (*volatile call_args6)(long, long, long, long, long, long) = opt_args6;

#define ARGS6(a) ((a) + 2 * ((a) + 1) + 3 * ((a) + 2) + 4 * ((a) + 3) + 5 * ((a) + 4) + 6 * ((a) + 5))

static unsigned long args_good, args_bad;

/* Reads its arguments from pt_regs and nothing else (the promise of
 * KPROBE_FLAG_ARGS_ONLY): each call passes a, a+1, ..., a+5. */
static NOSAN int args_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long a = regs->di;

	if (regs->si == a + 1 && regs->dx == a + 2 && regs->cx == a + 3 && regs->r8 == a + 4 &&
	    regs->r9 == a + 5)
		__atomic_fetch_add(&args_good, 1, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&args_bad, 1, __ATOMIC_RELAXED);
	return 0;
}

static struct kprobe *afast_of(const struct kprobe *p)
{
	const struct kp_probepoint *pp = p->__pp;

	return __atomic_load_n(&pp->afast, __ATOMIC_ACQUIRE);
}

static void call_args_checked(long n, long base, const char *what)
{
	for (long i = 0; i < n; i++)
		cr_assert_eq(call_args6(base + i, base + i + 1, base + i + 2, base + i + 3,
					base + i + 4, base + i + 5),
			     ARGS6(base + i), "%s", what);
}

/*
 * A lone probe at a function entry whose handler reads only argument
 * registers, registered with KPROBE_FLAG_ARGS_ONLY, is the probepoint's
 * args probe: the optimized entry jumps into it with the light level as
 * its pt_regs.  It sees every argument; joined by another probe,
 * disabled, or registered without the flag, it gets a complete pt_regs
 * and sees the same.
 */
Test(optimize, args_level_at_entry, .init = setup)
{
	struct kprobe a, b;
	unsigned long g0;

	init_probe(&a, opt_args6, args_pre);
	a.flags = KPROBE_FLAG_ARGS_ONLY;
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(afast_of(&a), &a, "not served at the args level");
	cr_assert_null(fast_of(&a));
	cr_assert_eq(needs_of(&a), KP_OPT_SAVE_REGS | KP_OPT_ARGS);
	g0 = args_good;
	call_args_checked(1000, 7, "args level");
	cr_assert_eq(args_good - g0, 1000);

	init_probe(&b, opt_args6, count_pre);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert_null(afast_of(&a));
	cr_assert(wait_opt(&b, true, 2000));
	g0 = args_good;
	call_args_checked(500, -3, "with a second probe");
	cr_assert_eq(args_good - g0, 500);
	unregister_kprobe(&b);
	cr_assert_eq(afast_of(&a), &a);

	cr_assert_eq(disable_kprobe(&a), 0);
	cr_assert_null(afast_of(&a));
	g0 = args_good;
	call_args_checked(100, 1, "disabled");
	cr_assert_eq(args_good, g0);
	cr_assert_eq(enable_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(afast_of(&a), &a);
	unregister_kprobe(&a);

	/* without the flag: the analysis alone, a complete pt_regs */
	init_probe(&a, opt_args6, args_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_null(afast_of(&a));
	cr_assert_eq(needs_of(&a) & KP_OPT_ARGS, 0);
	g0 = args_good;
	call_args_checked(100, 1 << 20, "no flag");
	cr_assert_eq(args_good - g0, 100);
	unregister_kprobe(&a);
	cr_assert_eq(args_bad, 0);
}

/* Threads calling the function while signals land on them, their handler
 * calling it too (a hit inside a hit's handler is missed, counted in
 * nmissed): every hit sees its own arguments. */
static volatile int astorm_stop;
static unsigned long astorm_calls, astorm_sig_calls, astorm_errors;

static void on_args_signal(int sig)
{
	long a = (long)__atomic_fetch_add(&astorm_sig_calls, 1, __ATOMIC_RELAXED) * 11 + 5;

	if (call_args6(a, a + 1, a + 2, a + 3, a + 4, a + 5) != ARGS6(a))
		__atomic_fetch_add(&astorm_errors, 1, __ATOMIC_RELAXED);
}

static void *args_caller(void *arg)
{
	long id = (long)arg;
	unsigned long n = 0;

	while (!__atomic_load_n(&astorm_stop, __ATOMIC_ACQUIRE)) {
		long a = (long)n * 7 + id * 1000003;

		if (call_args6(a, a + 1, a + 2, a + 3, a + 4, a + 5) != ARGS6(a))
			__atomic_fetch_add(&astorm_errors, 1, __ATOMIC_RELAXED);
		n++;
	}
	__atomic_fetch_add(&astorm_calls, n, __ATOMIC_RELAXED);
	return NULL;
}

Test(optimize, args_level_threads_and_signals, .init = setup)
{
	struct sigaction sa = { .sa_handler = on_args_signal };
	struct kprobe a;
	pthread_t th[4];
	double end;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	init_probe(&a, opt_args6, args_pre);
	a.flags = KPROBE_FLAG_ARGS_ONLY;
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(afast_of(&a), &a);
	args_good = args_bad = 0;
	for (long i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, args_caller, (void *)i), 0);
	end = now_s() + 0.5;
	while (now_s() < end) {
		for (int i = 0; i < 4; i++)
			pthread_kill(th[i], SIGUSR2);
		sleep_us(100);
	}
	__atomic_store_n(&astorm_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	signal(SIGUSR2, SIG_IGN);
	cr_assert(is_optimized(&a));
	unregister_kprobe(&a);
	cr_log_info("%lu calls, %lu from signal handlers, %lu missed", astorm_calls,
		    astorm_sig_calls, a.nmissed);
	cr_assert_eq(astorm_errors, 0, "a call returned a wrong value");
	cr_assert_eq(args_bad, 0, "a handler saw wrong arguments");
	cr_assert_gt(astorm_sig_calls, 0);
	cr_assert_eq(args_good + a.nmissed, astorm_calls + astorm_sig_calls);
}

/* At the args level the program's registers, flags and vector argument
 * registers are what they were, and the handler saw the arguments the
 * instruction runner loaded (rdi rsi rdx rcx r8 r9: gpr 5 4 3 2 7 8). */
static volatile unsigned long argrec[6], argrec_hits;

static NOSAN int argrec_pre(struct kprobe *p, struct pt_regs *regs)
{
	argrec[0] = regs->di;
	argrec[1] = regs->si;
	argrec[2] = regs->dx;
	argrec[3] = regs->cx;
	argrec[4] = regs->r8;
	argrec[5] = regs->r9;
	argrec_hits++;
	return 0;
}

Test(optimize, args_level_keeps_every_register, .init = setup)
{
	static const char *const fns[] = { "ic_flags", "ic_riprel", "ic_stack" };
	static const int gpr_of_arg[6] = { 5, 4, 3, 2, 7, 8 };
	int tested = 0;

	memcpy(data_init, insn_data, sizeof(data_init));
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		struct ksym sym;
		struct kprobe kp;

		struct cpu_state in[NSEEDS];
		struct run_result base[NSEEDS];

		if (ksym_lookup_name(fns[f], &sym))
			continue;
		for (unsigned int s = 0; s < NSEEDS; s++) {
			make_input(&in[s], s + 40);
			run((void *)sym.addr, &in[s], &base[s], s);
		}
		init_probe(&kp, (void *)sym.addr, argrec_pre);
		kp.flags = KPROBE_FLAG_ARGS_ONLY;
		cr_assert_eq(register_kprobe(&kp), 0);
		if (!wait_opt(&kp, true, 2000)) {
			unregister_kprobe(&kp);
			continue;
		}
		cr_assert_eq(afast_of(&kp), &kp, "%s", fns[f]);
		for (unsigned int s = 0; s < NSEEDS; s++) {
			struct run_result probed;
			unsigned long h0;
			char what[96];

			h0 = argrec_hits;
			run((void *)sym.addr, &in[s], &probed, s);
			snprintf(what, sizeof(what), "%s entry, args level, seed %u", fns[f], s);
			cr_assert_eq(argrec_hits - h0, 1, "%s: not hit once", what);
			compare(what, &base[s], &probed, true);
			for (int i = 0; i < 6; i++)
				cr_assert_eq(argrec[i], in[s].gpr[gpr_of_arg[i]],
					     "%s: argument %d %#lx != %#lx", what, i, argrec[i],
					     in[s].gpr[gpr_of_arg[i]]);
		}
		unregister_kprobe(&kp);
		tested++;
	}
	cr_assert_gt(tested, 0, "no function entry was optimized");
}

/* The shared code a detour calls. */
static uintptr_t detour_common_of(const struct kprobe *p)
{
	const struct kp_probepoint *pp = p->__pp;
	uintptr_t c;

	cr_assert(pp->ainsn.opt && pp->ainsn.opt->detour);
	memcpy(&c, (const void *)(pp->ainsn.opt->detour + 120), sizeof(c));
	return c;
}

extern char kp_opt_midf_xsave[], kp_opt_midf_fxsave[];

static bool mid_fast(const struct kprobe *p)
{
	uintptr_t c = detour_common_of(p);

	return c == (uintptr_t)kp_opt_midf_xsave || c == (uintptr_t)kp_opt_midf_fxsave;
}

/*
 * A mid-function detour built for a lone light probe takes the fast path
 * (the handler jumped into, returning to the detour's own exit); joined
 * by a probe that reads its pt_regs it hands over to the general code,
 * and back when that one leaves.  Every hit counted, pt_regs right.
 */
Test(optimize, mid_function_fast_path, .init = setup)
{
	const void *mid = (const char *)opt_normal + 9;
	struct kprobe a, b;
	unsigned long c0, l0;

	init_probe(&a, mid, count_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert_eq(fast_of(&a), &a);
	cr_assert(mid_fast(&a), "the detour does not take the mid-function fast path");
	c0 = count_hits;
	hit_normal(1000, "fast");
	cr_assert_eq(count_hits - c0, 1000);

	init_probe(&b, mid, light_pre);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert(wait_opt(&a, true, 2000) && wait_opt(&b, true, 2000));
	cr_assert_null(fast_of(&a));
	c0 = count_hits;
	l0 = light_hits;
	hit_normal(1000, "handed over");
	cr_assert_eq(count_hits - c0, 1000);
	cr_assert_eq(light_hits - l0, 1000);
	unregister_kprobe(&b);
	cr_assert_eq(fast_of(&a), &a);
	c0 = count_hits;
	hit_normal(1000, "fast again");
	cr_assert_eq(count_hits - c0, 1000);
	unregister_kprobe(&a);
	cr_assert_eq(light_bad_ip, 0);
}

/* Every mid-function boundary of a few instruction classes: a light
 * probe first (the fast path), then probes that need more joining it
 * (handed over to the general path): the program's state is kept both
 * ways. */
Test(optimize, mid_function_fast_detour_joined, .init = setup)
{
	static const char *const fns[] = { "ic_flags", "ic_stack", "ic_sse" };
	int fast = 0;

	memcpy(data_init, insn_data, sizeof(data_init));
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		uintptr_t at[MAX_B];
		struct ksym sym;
		struct cpu_state in;
		struct run_result base, probed;
		int n;

		if (ksym_lookup_name(fns[f], &sym))
			continue;
		n = boundaries(fns[f], at, MAX_B);
		make_input(&in, 3);
		run((void *)sym.addr, &in, &base, 3);
		for (int i = 1; i < n; i++) {
			struct kprobe kp[3];
			unsigned long c0 = count_hits, l0 = light_hits, h0 = heavy_hits;
			char what[96];

			init_probe(&kp[0], (void *)at[i], count_pre);
			cr_assert_eq(register_kprobe(&kp[0]), 0);
			if (why_at(at[i]) || !wait_opt(&kp[0], true, 2000)) {
				unregister_kprobe(&kp[0]);
				continue;
			}
			snprintf(what, sizeof(what), "%s+%lu", fns[f], at[i] - at[0]);
			/* (a copy too long for the fast exit's detour: the
			 * general one) */
			fast += mid_fast(&kp[0]);
			run((void *)sym.addr, &in, &probed, 3);
			compare(what, &base, &probed, false);
			init_probe(&kp[1], (void *)at[i], light_pre);
			init_probe(&kp[2], (void *)at[i], heavy_pre);
			cr_assert_eq(register_kprobe(&kp[1]), 0);
			cr_assert_eq(register_kprobe(&kp[2]), 0);
			cr_assert(wait_opt(&kp[1], true, 2000) && wait_opt(&kp[2], true, 2000), "%s", what);
			run((void *)sym.addr, &in, &probed, 3);
			compare(what, &base, &probed, false);
			cr_assert_eq(count_hits - c0, 2, "%s", what);
			cr_assert_eq(light_hits - l0, 1, "%s", what);
			cr_assert_eq(heavy_hits - h0, 1, "%s", what);
			for (int k = 0; k < 3; k++)
				unregister_kprobe(&kp[k]);
		}
	}
	cr_assert_gt(fast, 0);
	cr_assert_eq(light_bad_ip, 0);
	cr_assert_eq(heavy_bad_ip, 0);
}

/* A mid-function site reached with DF and AC set: the handler runs with
 * both clear (the general path), the program gets them back. */
__asm__(".pushsection .text\n"
	".globl opt_mid_df_ac\n"
	".type opt_mid_df_ac, @function\n"
	"opt_mid_df_ac:\n"
	"\tpushfq\n"
	"\torl $0x40400, (%rsp)\n"
	"\tpopfq\n"
	"\tmov %rdi, %rax\n"
	".globl opt_mid_df_ac_site\n"
	"opt_mid_df_ac_site:\n"
	"\tadd $0x1234567, %rax\n"
	"\tpushfq\n"
	"\tpop %rdx\n"
	"\tpushfq\n"
	"\tandl $~0x40400, (%rsp)\n"
	"\tpopfq\n"
	"\tmov %rdx, (%rsi)\n"
	"\tret\n"
	".size opt_mid_df_ac, . - opt_mid_df_ac\n"
	".popsection\n");
long opt_mid_df_ac(long x, unsigned long *flags_after);
extern char opt_mid_df_ac_site[];

static unsigned long dfac_hits, dfac_bad;

static NOSAN int dfac_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (__builtin_ia32_readeflags_u64() & 0x40400)
		__atomic_fetch_add(&dfac_bad, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&dfac_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(optimize, mid_function_fast_path_df_ac, .init = setup)
{
	struct kprobe kp;

	init_probe(&kp, opt_mid_df_ac_site, dfac_pre);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, true, 2000));
	cr_assert(mid_fast(&kp));
	for (long i = 0; i < 100; i++) {
		unsigned long fl = 0;

		cr_assert_eq(opt_mid_df_ac(i, &fl), i + 0x1234567);
		cr_assert_eq(fl & 0x40400, 0x40400, "flags after the site %#lx", fl);
	}
	unregister_kprobe(&kp);
	cr_assert_eq(dfac_hits, 100);
	cr_assert_eq(dfac_bad, 0, "a handler ran with DF or AC set");
}

/* The mid-function fast path under threads and signals whose handlers
 * hit the same site (a hit inside a hit's handler is missed and counted):
 * every call's result right, every hit counted or missed. */
static volatile int mstorm_stop;
static unsigned long mstorm_calls, mstorm_sig_calls, mstorm_errors;

static void on_mid_signal(int sig)
{
	long a = (long)__atomic_fetch_add(&mstorm_sig_calls, 1, __ATOMIC_RELAXED);

	if (call_normal(a, 3) != NORMAL(a, 3))
		__atomic_fetch_add(&mstorm_errors, 1, __ATOMIC_RELAXED);
}

static void *mid_caller(void *arg)
{
	long id = (long)arg;
	unsigned long n = 0;

	while (!__atomic_load_n(&mstorm_stop, __ATOMIC_ACQUIRE)) {
		long a = (long)n * 5 + id;

		if (call_normal(a, id) != NORMAL(a, id))
			__atomic_fetch_add(&mstorm_errors, 1, __ATOMIC_RELAXED);
		n++;
	}
	__atomic_fetch_add(&mstorm_calls, n, __ATOMIC_RELAXED);
	return NULL;
}

Test(optimize, mid_function_fast_path_threads_and_signals, .init = setup)
{
	struct sigaction sa = { .sa_handler = on_mid_signal };
	struct kprobe a;
	pthread_t th[4];
	unsigned long c0;
	double end;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	init_probe(&a, (const char *)opt_normal + 9, count_pre);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert(wait_opt(&a, true, 2000));
	cr_assert(mid_fast(&a));
	c0 = count_hits;
	for (long i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, mid_caller, (void *)i), 0);
	end = now_s() + 0.5;
	while (now_s() < end) {
		for (int i = 0; i < 4; i++)
			pthread_kill(th[i], SIGUSR2);
		sleep_us(100);
	}
	__atomic_store_n(&mstorm_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	signal(SIGUSR2, SIG_IGN);
	cr_assert(is_optimized(&a));
	unregister_kprobe(&a);
	cr_log_info("%lu calls, %lu from signal handlers, %lu missed", mstorm_calls,
		    mstorm_sig_calls, a.nmissed);
	cr_assert_eq(mstorm_errors, 0, "a call returned a wrong value");
	cr_assert_gt(mstorm_sig_calls, 0);
	cr_assert_eq(count_hits - c0 + a.nmissed, mstorm_calls + mstorm_sig_calls);
}
