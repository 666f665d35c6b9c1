/*
 * A64 functions for tests/arm64/test_arm64_kprobes.c: each instruction at a
 * known offset, so a test can probe exactly the class it means (run out
 * of line, or simulated because it reads the PC or branches).
 */
	.text

	.macro FUNC name
	.globl \name
	.type \name, %function
	.p2align 4
\name:
	.endm

	.macro END name
	.size \name, . - \name
	.endm

/* long a64_add(long a, long b): a + b with a frame record.
 *   +0 stp  +4 mov x29  +8 add  +12 ldp  +16 ret */
FUNC a64_add
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	add x0, x0, x1
	ldp x29, x30, [sp], #16
	ret
END a64_add

/* long a64_add_one(long a): a leaf.  +0 add  +4 ret */
FUNC a64_add_one
	add x0, x0, #1
	ret
END a64_add_one

/* long a64_literal(void): 0x1122334455667788 by LDR (literal) at +0;
 * a64_literal_w: 0xffffffff89abcdef by LDRSW (literal) at +0. */
FUNC a64_literal
	ldr x0, 1f
	ret
	.p2align 3
1:	.quad 0x1122334455667788
END a64_literal

FUNC a64_literal_w
	ldrsw x0, 1f
	ret
	.p2align 2
1:	.word 0x89abcdef
END a64_literal_w

/* void *a64_adr(void): its own address, by ADR at +0. */
FUNC a64_adr
	adr x0, a64_adr
	ret
END a64_adr

/* void *a64_adrp(void): &a64_data, by ADRP at +0 and ADD at +4. */
FUNC a64_adrp
	adrp x0, a64_data
	add x0, x0, :lo12:a64_data
	ret
END a64_adrp

/* long a64_cbz(long x): 2 when x == 0, else 1 (CBZ at +0). */
FUNC a64_cbz
	cbz x0, 1f
	mov x0, #1
	ret
1:	mov x0, #2
	ret
END a64_cbz

/* long a64_tbnz(long x): 2 when bit 3 of x is set, else 1 (TBNZ at +0). */
FUNC a64_tbnz
	tbnz x0, #3, 1f
	mov x0, #1
	ret
1:	mov x0, #2
	ret
END a64_tbnz

/* long a64_blt(long a, long b): 2 when a < b (signed), else 1: CMP at +0,
 * B.LT at +4 (the flags come from the probed thread's pstate). */
FUNC a64_blt
	cmp x0, x1
	b.lt 1f
	mov x0, #1
	ret
1:	mov x0, #2
	ret
END a64_blt

/* long a64_b(void): 5, with a B at +4 over a mov of 7. */
FUNC a64_b
	mov x0, #5
	b 1f
	mov x0, #7
1:	ret
END a64_b

/* long a64_bl(long x): a64_add_one(x) + 1 with BL at +8. */
FUNC a64_bl
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	bl a64_add_one
	add x0, x0, #1
	ldp x29, x30, [sp], #16
	ret
END a64_bl

/* long a64_blr(long x, long (*fn)(long)): fn(x) with BLR at +8. */
FUNC a64_blr
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	mov x2, x1
	blr x2
	ldp x29, x30, [sp], #16
	ret
END a64_blr

/* long a64_xinc(long *p): ++*p by an exclusive pair; returns the new
 * value.  +0 ldxr  +4 add  +8 stxr  +12 cbnz  +16 mov  +20 ret */
FUNC a64_xinc
1:	ldxr x1, [x0]
	add x1, x1, #1
	stxr w2, x1, [x0]
	cbnz w2, 1b
	mov x0, x1
	ret
END a64_xinc

/* A BRK of the program's own, at +0: cannot be probed. */
FUNC a64_own_brk
	brk #0x123
	ret
END a64_own_brk

/* long a64_load(long *p): *p, by LDR at +0 (run out of line). */
FUNC a64_load
	ldr x0, [x0]
	ret
END a64_load

/* long a64_pac(long x): x + 3 in a PACIASP/AUTIASP frame (NOPs on a CPU
 * without pointer authentication).  +0 paciasp +4 stp ... */
FUNC a64_pac
	paciasp
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	add x0, x0, #3
	ldp x29, x30, [sp], #16
	autiasp
	ret
END a64_pac

/* long a64_bti(long x): x + 4 behind a BTI C landing pad at +0. */
FUNC a64_bti
	bti c
	add x0, x0, #4
	ret
END a64_bti

/* double a64_fdouble(double d): d + d in d0. */
FUNC a64_fdouble
	fadd d0, d0, d0
	ret
END a64_fdouble

/* long a64_regs_kept(void): sets x1-x15, x18 and x19-x28 to known values
 * and the flags to N, calls a64_add_one_keeps(1), and returns 0 only when all
 * of them came back as they were: what a probe or a return probe on
 * a64_add_one_keeps must leave alone. */
FUNC a64_regs_kept
	stp x29, x30, [sp, #-96]!
	mov x29, sp
	stp x19, x20, [sp, #16]
	stp x21, x22, [sp, #32]
	stp x23, x24, [sp, #48]
	stp x25, x26, [sp, #64]
	stp x27, x28, [sp, #80]
	mov x1, #0x101
	mov x2, #0x102
	mov x3, #0x103
	mov x4, #0x104
	mov x5, #0x105
	mov x6, #0x106
	mov x7, #0x107
	mov x8, #0x108
	mov x18, #0x118
	mov x9, #0x109
	mov x10, #0x110
	mov x11, #0x111
	mov x12, #0x112
	mov x13, #0x113
	mov x14, #0x114
	mov x15, #0x115
	mov x19, #0x119
	mov x20, #0x120
	mov x21, #0x121
	mov x22, #0x122
	mov x23, #0x123
	mov x24, #0x124
	mov x25, #0x125
	mov x26, #0x126
	mov x27, #0x127
	mov x28, #0x128
	mov x0, #1
	mov x16, #1
	cmp x16, #2		/* NZCV = N: 1000 */
	bl a64_add_one_keeps
	mrs x16, nzcv
	mov x0, #0
	mov x17, #0x80000000
	cmp x16, x17
	cinc x0, x0, ne
	cmp x1, #0x101
	cinc x0, x0, ne
	cmp x2, #0x102
	cinc x0, x0, ne
	cmp x3, #0x103
	cinc x0, x0, ne
	cmp x4, #0x104
	cinc x0, x0, ne
	cmp x5, #0x105
	cinc x0, x0, ne
	cmp x6, #0x106
	cinc x0, x0, ne
	cmp x7, #0x107
	cinc x0, x0, ne
	cmp x8, #0x108
	cinc x0, x0, ne
	cmp x18, #0x118
	cinc x0, x0, ne
	cmp x9, #0x109
	cinc x0, x0, ne
	cmp x10, #0x110
	cinc x0, x0, ne
	cmp x11, #0x111
	cinc x0, x0, ne
	cmp x12, #0x112
	cinc x0, x0, ne
	cmp x13, #0x113
	cinc x0, x0, ne
	cmp x14, #0x114
	cinc x0, x0, ne
	cmp x15, #0x115
	cinc x0, x0, ne
	cmp x19, #0x119
	cinc x0, x0, ne
	cmp x20, #0x120
	cinc x0, x0, ne
	cmp x21, #0x121
	cinc x0, x0, ne
	cmp x22, #0x122
	cinc x0, x0, ne
	cmp x23, #0x123
	cinc x0, x0, ne
	cmp x24, #0x124
	cinc x0, x0, ne
	cmp x25, #0x125
	cinc x0, x0, ne
	cmp x26, #0x126
	cinc x0, x0, ne
	cmp x27, #0x127
	cinc x0, x0, ne
	cmp x28, #0x128
	cinc x0, x0, ne
	ldp x19, x20, [sp, #16]
	ldp x21, x22, [sp, #32]
	ldp x23, x24, [sp, #48]
	ldp x25, x26, [sp, #64]
	ldp x27, x28, [sp, #80]
	ldp x29, x30, [sp], #96
	ret
END a64_regs_kept

/* void a64_clobber_scratch(void): writes x0-x18, as any function may;
 * what a return handler that calls it makes the trampoline keep. */
FUNC a64_clobber_scratch
	mov x0, #0xdead
	mov x1, x0
	mov x2, x0
	mov x3, x0
	mov x4, x0
	mov x5, x0
	mov x6, x0
	mov x7, x0
	mov x8, x0
	mov x9, x0
	mov x10, x0
	mov x11, x0
	mov x12, x0
	mov x13, x0
	mov x14, x0
	mov x15, x0
	mov x16, x0
	mov x17, x0
	mov x18, x0
	ret
END a64_clobber_scratch

/* A leaf that touches nothing but x0: a64_regs_kept's callee.
 * +0 add  +4 ret */
FUNC a64_add_one_keeps
	add x0, x0, #1
	ret
END a64_add_one_keeps

	.data
	.p2align 3
	.globl a64_data
a64_data:
	.quad 42

	.section .note.GNU-stack, "", %progbits
