/* Rows of kprobes-bench defined outside kprobes_bench.c. */
#ifndef KPROBES_BENCH_H
#define KPROBES_BENCH_H

#include <stdbool.h>

/* jump_label_bench.c */
void loop_empty(long n);
void loop_jl(long n);
void loop_tp(long n);
int jl_on_setup(void);
void jl_on_teardown(void);
int tp_on_setup(void);
void tp_on_teardown(void);
double jl_toggle_us(void);

/* coverage.c: kprobes-bench --coverage OBJECT [--list] (the unoptimized
 * functions, by address in the object, and their reasons on stderr); bench_coverage_preloaded() runs
 * in the coverage library preloaded into an executable. */
int bench_coverage(const char *object, bool json, bool list);
void bench_coverage_preloaded(void);

/* stack_bench.c */
double bench_stack8(bool fp, const char **note);
double bench_stack8_memo(const char **note);
void bench_stack_tables(double *ms, double *libc_ms, double *bytes_per_kib, const char **note);

#endif
