/* The stack rows of kprobes-bench:
 *
 *   stack8           ns to unwind 8 frames with kprobes_stack() from the
 *                    pt_regs of an optimized probe (CFI chain, no frame
 *                    pointers)
 *   stack8_fp        the same through frames that have frame pointers and
 *                    no unwind information
 *   stack8_memo      stack8 with kprobes_stack_memo(): the same stack again,
 *                    followed from the memo (a load and a comparison per
 *                    frame instead of a rule and a chain of loads)
 *   stack_tables_ms  building the unwind tables of libc and libpython
 *   stack_tables_libc_ms  libc's alone
 *   stack_bytes      table bytes per KiB of code they cover
 *
 * The unwinding is timed inside the handler (the frames are live there):
 * the median of rounds of STACK_K calls. */
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kprobes.h>

#include "bench.h"
#include "elf/cfi.h"

#ifndef STACK_K
#define STACK_K 2000
#endif
#define STACK_ROUNDS 15

long bench_cfi_chain(long), bench_cfi_leaf(long);
long bench_fp_chain(long), bench_fp_leaf(long);

static double clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double stack_ns[STACK_ROUNDS];
static int stack_rounds, stack_depth;
static struct kprobes_stack_memo *stack_memo;	/* stack8_memo's */

static int time_stack(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long ips[8];
	double t0;
	int n = 0;

	if (stack_rounds >= STACK_ROUNDS)
		return 0;
	t0 = clock_ns();
	if (stack_memo)
		for (int i = 0; i < STACK_K; i++)
			n = kprobes_stack_memo(stack_memo, regs, ips, 8, NULL);
	else
		for (int i = 0; i < STACK_K; i++)
			n = kprobes_stack(regs, ips, 8);
	stack_ns[stack_rounds++] = (clock_ns() - t0) / STACK_K;
	stack_depth = n;
	return 0;
}

/* Median ns of kprobes_stack(8) at an optimized probe on leaf, called
 * through chain; NAN (with *note) when the probe is not optimized or the
 * unwind does not reach 8 frames. */
double bench_stack8(bool fp, const char **note)
{
	struct kprobe kp = { .addr = (void *)(fp ? bench_fp_leaf : bench_cfi_leaf),
			     .pre_handler = time_stack };
	long (*volatile chain)(long) = fp ? bench_fp_chain : bench_cfi_chain;
	bool opt = kprobes_optimization();

	kprobes_set_optimization(true);
	if (register_kprobe(&kp)) {
		*note = "register_kprobe failed";
		kprobes_set_optimization(opt);
		return NAN;
	}
	for (int i = 0; i < 5000 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++)
		usleep(1000);
	stack_rounds = 0;
	if (kp.flags & KPROBE_FLAG_OPTIMIZED)
		while (stack_rounds < STACK_ROUNDS)
			chain(1);
	unregister_kprobe(&kp);
	kprobes_set_optimization(opt);
	if (!stack_rounds) {
		*note = "the probe was not optimized";
		return NAN;
	}
	if (stack_depth < 8) {
		*note = "fewer than 8 frames";
		return NAN;
	}
	qsort(stack_ns, STACK_ROUNDS, sizeof(double), cmp_d);
	return stack_ns[STACK_ROUNDS / 2];
}

/* bench_stack8(false) with a memo. */
double bench_stack8_memo(const char **note)
{
	size_t size = KPROBES_STACK_MEMO_SIZE(8);
	double ns;

	stack_memo = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (!stack_memo || kprobes_stack_memo_init(stack_memo, size) != 8) {
		*note = "no memo";
		free(stack_memo);
		stack_memo = NULL;
		return NAN;
	}
	ns = bench_stack8(false, note);
	free(stack_memo);
	stack_memo = NULL;
	return ns;
}

/* Builds the tables of one file; ms, or NAN. */
static double tables_of(const char *path, size_t *bytes, size_t *code)
{
	struct cfi_table t;
	double t0, ms;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	Elf *elf;

	if (fd < 0)
		return NAN;
	elf_version(EV_CURRENT);
	t0 = clock_ns();
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	err = elf ? cfi_table_build(elf, &t) : -1;
	if (elf)
		elf_end(elf);
	ms = (clock_ns() - t0) / 1e6;
	close(fd);
	if (err)
		return NAN;
	*bytes += t.n * sizeof(struct cfi_row) + (t.nblocks + 1) * sizeof(uint32_t);
	*code += t.code_bytes;
	cfi_table_free(&t);
	return ms;
}

static double best_of(const char *path, int n, size_t *bytes, size_t *code)
{
	double best = NAN;

	for (int i = 0; i < n; i++) {
		size_t b = 0, c = 0;
		double ms = tables_of(path, &b, &c);

		if (isnan(ms))
			return NAN;
		if (isnan(best) || ms < best)
			best = ms;
		*bytes = b;
		*code = c;
	}
	return best;
}

/* stack_tables_ms (libc + libpython), libc alone, bytes per KiB of code. */
void bench_stack_tables(double *ms, double *libc_ms, double *bytes_per_kib, const char **note)
{
	static const char libpython[] = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
	size_t lb = 0, lc = 0, pb = 0, pc = 0;
	Dl_info di;
	double py;

	*ms = *libc_ms = *bytes_per_kib = NAN;
	if (!dladdr((void *)printf, &di) || !di.dli_fname) {
		*note = "libc not found";
		return;
	}
	*libc_ms = best_of(di.dli_fname, 5, &lb, &lc);
	py = best_of(libpython, 3, &pb, &pc);
	if (isnan(py)) {
		*note = "libpython3.11 not found";
		*bytes_per_kib = lc ? lb * 1024.0 / lc : NAN;
		return;
	}
	*ms = *libc_ms + py;
	*bytes_per_kib = (double)(lb + pb) * 1024.0 / (double)(lc + pc);
}
