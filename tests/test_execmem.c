/* The executable pools (src/os/linux/execmem.c) that hold detours, slots
 * and return stubs: units handed out lowest first, consecutive while a
 * pool fills (the return stubs of a probe are written in runs), a freed
 * unit handed out again before any above it, each with its metadata and
 * found again by any address inside it. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "os/linux/execmem.h"

#define UNIT 16

static struct exec_arena arena = { .unit = UNIT, .meta_size = 8 };

Test(execmem, lowest_free_unit_first)
{
	uintptr_t lo = 0x10000, hi = UINTPTR_MAX >> 17, u[300], first, again;
	void *meta;

	for (int i = 0; i < 300; i++) {
		u[i] = exec_alloc(&arena, lo, hi, &meta);
		cr_assert_neq(u[i], 0, "unit %d", i);
		cr_assert_eq(exec_meta_of(&arena, u[i] + UNIT - 1, NULL), meta, "unit %d", i);
		*(uint64_t *)meta = (uint64_t)i;
	}
	first = u[0];
	for (int i = 1; i < 300; i++)
		cr_assert_eq(u[i], first + (uintptr_t)i * UNIT, "a filling pool: consecutive units");
	exec_free(&arena, u[200]);
	exec_free(&arena, u[7]);
	exec_free(&arena, u[7]);		/* twice: nothing more */
	again = exec_alloc(&arena, lo, hi, &meta);
	cr_assert_eq(again, u[7], "the lowest free unit");
	cr_assert_eq(*(uint64_t *)meta, 0, "its metadata cleared");
	cr_assert_eq(exec_alloc(&arena, lo, hi, &meta), u[200]);
	cr_assert_eq(exec_alloc(&arena, lo, hi, &meta), u[299] + UNIT, "then above the rest");
	for (int i = 0; i < 300; i++)
		exec_free(&arena, u[i]);
	cr_assert_eq(exec_alloc(&arena, lo, hi, &meta), first, "all free: from the start");
}

/* The runs of units one write can fill (the return stubs'). */
Test(execmem, runs_of_consecutive_units)
{
	const uintptr_t a[] = { 0x1000, 0x1010, 0x1020, 0x1040, 0x1050, 0x1030 };

	cr_expect_eq(exec_run_length(a, 6, UNIT, 64), 3);
	cr_expect_eq(exec_run_length(a, 6, UNIT, 2), 2, "at most max");
	cr_expect_eq(exec_run_length(a + 3, 3, UNIT, 64), 2);
	cr_expect_eq(exec_run_length(a + 5, 1, UNIT, 64), 1);
	cr_expect_eq(exec_run_length(a, 0, UNIT, 64), 0);
}
