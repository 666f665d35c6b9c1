/* The probed functions.  Those with mid-function sites are written in
 * assembly so that the probe offsets are instruction boundaries whatever
 * the compiler does, and so that the interesting cases are certain to be
 * there: live flags and vector registers across a probe, a RIP-relative
 * operand, a branch target inside an optimization region, recursion.
 */
#include <errno.h>

#include "soak_probes.h"

/*   st_leaf(x) = 2x + 1
 *   +0  lea 1(%rdi,%rdi,1),%rax (5)   +5 ret
 *
 *   st_loop(n) = sum over i < n of (i odd ? 3i : i)
 *   +0  xor %eax,%eax      +2  xor %ecx,%ecx     +4  test %rdi,%rdi
 *   +7  jle done
 *   +9  top: mov %rcx,%rdx +12 test $1,%cl       +15 je even
 *   +17 lea (%rdx,%rdx,2),%rdx  (odd iterations only; the 5 bytes from
 *       here would cover the branch target +21: never jump-optimized)
 *   +21 even: add %rdx,%rax     +24 inc %rcx     +27 cmp %rdi,%rcx
 *   +30 mov %rdx,%r8  +33 mov %r8,%rdx   (the flags of the cmp are live
 *       across a probe at +30)
 *   +36 jl top        +38 done: ret, then int3 padding
 *
 *   st_rec(n) = n <= 1 ? n + 1 : st_rec(n - 1) + st_rec(n - 2)
 *   +0 cmp $1,%rdi  +4 jg 1f  +6 lea 1(%rdi),%rax  +10 ret  +11 1: ...
 *
 *   st_vec(out, in): out[0..1] = in[0..1] * in[0..1] + 1.0
 *   +0 movupd (%rsi),%xmm0  +4 movapd %xmm0,%xmm1  +8 mulpd %xmm1,%xmm0
 *   +12 addpd one(%rip),%xmm0 (8)  +20 movupd %xmm0,(%rdi)  +24 ret
 *   (xmm0 and xmm1 are live across a probe at +8; +12 is RIP-relative)
 *
 *   ch_mid(x) = ((x + 3) * 2) ^ 1
 *   +0 mov %rdi,%rax  +3 add $3,%rax  +7 add %rax,%rax  +10 xor $1,%rax
 *   +14 ret   (close sites: optimization regions overlap)
 */
__asm__(".text\n"
	".p2align 4, 0xcc\n"
	".globl st_leaf\n.type st_leaf,@function\n"
	"st_leaf:\n"
	"\tlea 1(%rdi,%rdi,1), %rax\n"
	"\tret\n"
	".size st_leaf, .-st_leaf\n"
	".p2align 4, 0xcc\n"

	".globl st_loop\n.type st_loop,@function\n"
	"st_loop:\n"
	"\txor %eax, %eax\n"
	"\txor %ecx, %ecx\n"
	"\ttest %rdi, %rdi\n"
	"\tjle 3f\n"
	"1:\tmov %rcx, %rdx\n"
	"\ttest $1, %cl\n"
	"\tje 2f\n"
	"\tlea (%rdx,%rdx,2), %rdx\n"
	"2:\tadd %rdx, %rax\n"
	"\tinc %rcx\n"
	"\tcmp %rdi, %rcx\n"
	"\tmov %rdx, %r8\n"
	"\tmov %r8, %rdx\n"
	"\tjl 1b\n"
	"3:\tret\n"
	".size st_loop, .-st_loop\n"
	".p2align 4, 0xcc\n"

	".globl st_rec\n.type st_rec,@function\n"
	"st_rec:\n"
	"\tcmp $1, %rdi\n"
	"\tjg 1f\n"
	"\tlea 1(%rdi), %rax\n"
	"\tret\n"
	"1:\tpush %rbx\n"
	"\tpush %r12\n"
	"\tpush %r12\n"		/* keeps the stack 16-byte aligned at the calls */
	"\tmov %rdi, %rbx\n"
	"\tlea -1(%rdi), %rdi\n"
	"\tcall st_rec\n"
	"\tmov %rax, %r12\n"
	"\tlea -2(%rbx), %rdi\n"
	"\tcall st_rec\n"
	"\tadd %r12, %rax\n"
	"\tpop %r12\n"
	"\tpop %r12\n"
	"\tpop %rbx\n"
	"\tret\n"
	".size st_rec, .-st_rec\n"
	".p2align 4, 0xcc\n"

	".globl st_vec\n.type st_vec,@function\n"
	"st_vec:\n"
	"\tmovupd (%rsi), %xmm0\n"
	"\tmovapd %xmm0, %xmm1\n"
	"\tmulpd %xmm1, %xmm0\n"
	"\taddpd st_vec_one(%rip), %xmm0\n"
	"\tmovupd %xmm0, (%rdi)\n"
	"\tret\n"
	".size st_vec, .-st_vec\n"
	".p2align 4, 0xcc\n"

	".globl ch_mid\n.type ch_mid,@function\n"
	"ch_mid:\n"
	"\tmov %rdi, %rax\n"
	"\tadd $3, %rax\n"
	"\tadd %rax, %rax\n"
	"\txor $1, %rax\n"
	"\tret\n"
	".size ch_mid, .-ch_mid\n"
	".p2align 4, 0xcc\n"

	".section .rodata\n"
	".p2align 4\n"
	"st_vec_one: .double 1.0, 1.0\n"
	".text\n");

/* The C ones: an entry with floating-point arguments live, a function with
 * stack arguments (jprobe), plain leaves for the churn. */
NOINLINE double st_fdot(double a, double b, double c, double d)
{
	return a * b + c * d;
}

NOINLINE long st_jp(long a, long b, long c, long d, long e, long f, long g, long h)
{
	__asm__ volatile("" : "+r"(a));
	return a + b + c + d + e + f + g + h;
}

NOINLINE long ch_a(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5 + 2;
}

NOINLINE long ch_b(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x ^ 0x55;
}

NOINLINE long ch_ret(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 7;
}

NOINLINE long ch_jp(long a, long b, long c)
{
	__asm__ volatile("" : "+r"(a));
	return a * b - c;
}

long loop_partial[LOOP_MAX + 2];
long rec_result[REC_MAX + 1];
long rec_calls[REC_MAX + 1];

#define F(fn) ((void *)(fn))
#define ANY { ~0u, ~0u }

struct site sites[NSITES] = {
	[S_LEAF0]      = { "st_leaf+0",   F(st_leaf),  0, F_LEAF,  M_CALLS, { 5, 5 } },
	[S_LEAF_RET]   = { "st_leaf+5",   F(st_leaf),  5, F_LEAF,  M_CALLS, ANY },
	[S_LOOP0]      = { "st_loop+0",   F(st_loop),  0, F_LOOP,  M_CALLS, { 2, 2 } },
	[S_LOOP_TOP]   = { "st_loop+9",   F(st_loop),  9, F_LOOP,  M_ITERS, { 12, 12 } },
	[S_LOOP_ODD]   = { "st_loop+17",  F(st_loop), 17, F_LOOP,  M_ODDS,  { 21, 21 } },
	[S_LOOP_EVEN]  = { "st_loop+21",  F(st_loop), 21, F_LOOP,  M_ITERS, { 24, 24 } },
	[S_LOOP_FLAGS] = { "st_loop+30",  F(st_loop), 30, F_LOOP,  M_ITERS, { 33, 33 } },
	[S_LOOP_RET]   = { "st_loop+38",  F(st_loop), 38, F_LOOP,  M_CALLS, ANY },
	[S_REC0]       = { "st_rec+0",    F(st_rec),   0, F_REC,   M_CALLS, { 4, 4 } },
	[S_VEC_MUL]    = { "st_vec+8",    F(st_vec),   8, F_VEC,   M_CALLS, { 12, 12 } },
	[S_VEC_RIP]    = { "st_vec+12",   F(st_vec),  12, F_VEC,   M_CALLS, { 20, 20 } },
	[S_FDOT0]      = { "st_fdot+0",   F(st_fdot),  0, F_FDOT,  M_CALLS, ANY },
	[S_JP0]        = { "st_jp+0",     F(st_jp),    0, F_JP,    M_CALLS, ANY },
	[S_CHA0]       = { "ch_a+0",      F(ch_a),     0, F_CHA,   M_CALLS, ANY },
	[S_CHB0]       = { "ch_b+0",      F(ch_b),     0, F_CHB,   M_CALLS, ANY },
	[S_CHMID0]     = { "ch_mid+0",    F(ch_mid),   0, F_CHMID, M_CALLS, { 3, 3 } },
	[S_CHMID3]     = { "ch_mid+3",    F(ch_mid),   3, F_CHMID, M_CALLS, { 7, 7 } },
	[S_CHMID7]     = { "ch_mid+7",    F(ch_mid),   7, F_CHMID, M_CALLS, { 10, 10 } },
	[S_CHMID10]    = { "ch_mid+10",   F(ch_mid),  10, F_CHMID, M_CALLS, { 14, 14 } },
	[S_CHMID14]    = { "ch_mid+14",   F(ch_mid),  14, F_CHMID, M_CALLS, ANY },
	[S_CHRET0]     = { "ch_ret+0",    F(ch_ret),   0, F_CHRET, M_CALLS, ANY },
	[S_CHJP0]      = { "ch_jp+0",     F(ch_jp),    0, F_CHJP,  M_CALLS, ANY },
};

/* Expected results and how many times each site is reached per call. */
void targets_init(void)
{
	loop_partial[0] = 0;
	for (int i = 0; i <= LOOP_MAX; i++)
		loop_partial[i + 1] = loop_partial[i] + (i & 1 ? 3L * i : i);
	for (int n = 0; n <= REC_MAX; n++) {
		rec_result[n] = n <= 1 ? n + 1 : rec_result[n - 1] + rec_result[n - 2];
		rec_calls[n] = n <= 1 ? 1 : 1 + rec_calls[n - 1] + rec_calls[n - 2];
	}
}

/* Called by the heavy handlers: a handler that writes every vector register
 * and errno, so that the detour and the trap path must restore them. */
NOINLINE void clobber_vector_and_errno(void)
{
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1\n\t"
			 "pcmpeqd %%xmm2, %%xmm2\n\tpcmpeqd %%xmm3, %%xmm3\n\t"
			 "pcmpeqd %%xmm4, %%xmm4\n\tpcmpeqd %%xmm5, %%xmm5\n\t"
			 "pcmpeqd %%xmm6, %%xmm6\n\tpcmpeqd %%xmm7, %%xmm7\n\t"
			 "pcmpeqd %%xmm8, %%xmm8\n\tpcmpeqd %%xmm15, %%xmm15"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
			 "xmm7", "xmm8", "xmm15");
	errno = EDOM;
}

/* The churn jprobe on st_fdot: its entry gets the floating-point
 * arguments, so it lives here rather than with the integer-only handlers. */
double churn_jp_fdot(double a, double b, double c, double d)
{
	struct cprobe *cp = churn_jprobe_fdot;

	if (__atomic_load_n(&cp->state, __ATOMIC_ACQUIRE) == C_IDLE)
		anomaly(A_AFTER_UNREG, cp->idx, cp->site);
	if (b != a + 1 || c != a + 2 || d != a + 3)
		anomaly(A_BAD_REGS, S_FDOT0, (long)a);
	add(&cp->hits, 1);
	jprobe_return();
}
