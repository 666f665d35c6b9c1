/* The A64 functions of helpers_a64.S, probed by the arm64 suites. */
#ifndef KP_TESTS_ARM64_HELPERS_A64_H
#define KP_TESTS_ARM64_HELPERS_A64_H

#include "kprobes.h"

long a64_add(long a, long b);
long a64_add_one(long a);
long a64_literal(void);
long a64_literal_w(void);
void *a64_adr(void);
void *a64_adrp(void);
long a64_cbz(long x);
long a64_tbnz(long x);
long a64_blt(long a, long b);
long a64_b(void);
long a64_bl(long x);
long a64_blr(long x, long (*fn)(long));
long a64_xinc(long *p);
void a64_own_brk(void);
long a64_load(long *p);
long a64_pac(long x);
long a64_bti(long x);
double a64_fdouble(double d);
long a64_regs_kept(void);
long a64_add_one_keeps(long x);
void a64_clobber_scratch(void);
extern long a64_data;

/* The instruction at offset off of fn. */
#define AT(fn, off) ((kprobe_opcode_t *)((char *)(fn) + (off)))

#endif
