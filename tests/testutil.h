/* Shared helpers for the libkprobes test suite. */
#ifndef KP_TESTUTIL_H
#define KP_TESTUTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <kprobes.h>
#include <string.h>

#include "slowdown.h"

/* A function the compiler cannot inline, fold or clone. */
#define TEST_FN __attribute__((noinline, noclone, used))

/* Keeps a value alive across an asm barrier. */
#define KEEP(x) __asm__ volatile("" : : "r"(x) : "memory")

#endif
