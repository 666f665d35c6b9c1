/* SDT operands compiled into fetch plans by the CLI's usdt.c, per the
 * e_machine of the object holding the note: AArch64 operands as GCC and
 * other assemblers write them (the table's first rows are copied from
 * aarch64-linux-gnu-readelf -n of tests/cli/cli_usdt.c and of a file of
 * "nor" operands built at -O0 and -O2), x86-64 ones still parsed as before,
 * and bad operands refused with one line.  Links the CLI's own code. */
#include <criterion/criterion.h>
#include <link.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "usdt.h"

/* ---- what main.c provides to the CLI ---- */

void cli_warn(const char *fmt, ...)
{
	(void)fmt;
}

void cli_die(int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cr_assert_fail("the CLI gave up (status %d): %s", status, msg);
	abort();
}

unsigned long long cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* ---- helpers ---- */

/* The plan as text: "r31 +28 *4", "#7", "r3". */
static void plan_text(const struct spec_arg *a, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < a->nops && n < len; i++) {
		const struct fetch_op *op = &a->ops[i];
		const char *sp = i ? " " : "";

		switch (op->kind) {
		case FETCH_REG:
			n += (size_t)snprintf(out + n, len - n, "%sr%u", sp, op->reg);
			break;
		case FETCH_CONST:
			n += (size_t)snprintf(out + n, len - n, "%s#%lld", sp, (long long)op->k);
			break;
		case FETCH_ADD:
			n += (size_t)snprintf(out + n, len - n, "%s%+lld", sp, (long long)op->k);
			break;
		case FETCH_LOAD:
			n += (size_t)snprintf(out + n, len - n, "%s*%u", sp, op->size);
			break;
		default:
			n += (size_t)snprintf(out + n, len - n, "%s?%u", sp, op->kind);
			break;
		}
	}
}

static struct usdt_probe probe(uint16_t machine, const char *args)
{
	struct usdt_probe p;

	memset(&p, 0, sizeof(p));
	snprintf(p.provider, sizeof(p.provider), "demo");
	snprintf(p.name, sizeof(p.name), "req");
	snprintf(p.args, sizeof(p.args), "%s", args);
	p.machine = machine;
	return p;
}

/* Operand index of args compiled for machine: 0 and the plan's text and
 * type, or the error. */
static int plan(uint16_t machine, const char *args, int index, char *text, size_t len,
		uint8_t *type, char *err, size_t errlen)
{
	struct usdt_probe p = probe(machine, args);
	struct spec_arg a;
	int rc;

	memset(&a, 0, sizeof(a));
	err[0] = '\0';
	rc = usdt_arg_plan("/proc/self/exe", &p, index, &a, err, errlen);
	if (!rc) {
		plan_text(&a, text, len);
		*type = a.type;
		cr_expect_eq(a.src, ARG_SRC_PLAN);
	}
	return rc;
}

struct good {
	const char *args;
	int index;
	const char *plan;
	uint8_t type;
};

static void expect_good(uint16_t machine, const struct good *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char text[128], err[256];
		uint8_t type = 0;
		int rc = plan(machine, g[i].args, g[i].index, text, sizeof(text), &type, err,
			      sizeof(err));

		cr_expect_eq(rc, 0, "'%s' arg%d: %s", g[i].args, g[i].index, err);
		if (rc)
			continue;
		cr_expect_str_eq(text, g[i].plan, "'%s' arg%d", g[i].args, g[i].index);
		cr_expect_eq(type, g[i].type, "'%s' arg%d: type %u", g[i].args, g[i].index, type);
	}
}

/* ---- AArch64 ---- */

Test(usdt_a64, operands_from_real_notes)
{
	static const struct good g[] = {
		/* cli_usdt.c at -O2: "8@x3 -4@[sp, 28] -4@7" */
		{ "8@x3 -4@[sp, 28] -4@7", 0, "r3", ARG_U64 },
		{ "8@x3 -4@[sp, 28] -4@7", 1, "r31 +28 *4", ARG_S32 },
		{ "8@x3 -4@[sp, 28] -4@7", 2, "#7", ARG_S32 },
		/* "nor" operands at -O2 and -O0 */
		{ "8@[x0]", 0, "r0 *8", ARG_U64 },
		{ "-4@[x0, 8] -1@[x0, 12] -2@[x0, 14]", 0, "r0 +8 *4", ARG_S32 },
		{ "-4@[x0, 8] -1@[x0, 12] -2@[x0, 14]", 1, "r0 +12 *1", ARG_S8 },
		{ "-4@[x0, 8] -1@[x0, 12] -2@[x0, 14]", 2, "r0 +14 *2", ARG_S16 },
		{ "-8@[x4, -8] 8@[x5, 16]", 0, "r4 -8 *8", ARG_S64 },
		{ "-8@[x4, -8] 8@[x5, 16]", 1, "r5 +16 *8", ARG_U64 },
		{ "-4@[sp, 52] 1@[sp, 51] -2@[sp, 48]", 1, "r31 +51 *1", ARG_U8 },
		{ "-4@[sp, 52] 1@[sp, 51] -2@[sp, 48]", 2, "r31 +48 *2", ARG_S16 },
		{ "-4@-1 -4@0", 0, "#-1", ARG_S32 },
		{ "-4@-1 -4@0", 1, "#0", ARG_S32 },
		{ "-4@x1 1@x2 -2@x3", 2, "r3", ARG_S16 },
	};

	expect_good(EM_AARCH64, g, sizeof(g) / sizeof(g[0]));
}

Test(usdt_a64, registers_immediates_and_spacing)
{
	static const struct good g[] = {
		{ "-4@w0", 0, "r0", ARG_S32 },
		{ "4@w30 8@x30", 0, "r30", ARG_U32 },
		{ "4@w30 8@x30", 1, "r30", ARG_U64 },
		{ "8@sp", 0, "r31", ARG_U64 },
		{ "4@wsp", 0, "r31", ARG_U32 },
		{ "8@x19", 0, "r19", ARG_U64 },
		{ "4@#5", 0, "#5", ARG_U32 },
		{ "-8@#-0x10", 0, "#-16", ARG_S64 },
		{ "8@[x19,#-8]", 0, "r19 -8 *8", ARG_U64 },
		{ "8@[ x29 , #0x10 ]", 0, "r29 +16 *8", ARG_U64 },
		{ "8@[sp,0]", 0, "r31 *8", ARG_U64 },
		{ "  8@x1   -4@[sp, 4]  ", 1, "r31 +4 *4", ARG_S32 },
		/* no SIZE@: an 8-byte operand */
		{ "x7", 0, "r7", ARG_U64 },
	};

	expect_good(EM_AARCH64, g, sizeof(g) / sizeof(g[0]));
}

/* A global variable at -O2: adrp x0, g; the operand [x0, #:lo12:g]. */
long usdt_test_global;

Test(usdt_a64, lo12_of_a_symbol)
{
	char text[128], want[64], err[256];
	uint8_t type;
	int rc = plan(EM_AARCH64, "8@[x0, #:lo12:usdt_test_global]", 0, text, sizeof(text), &type,
		      err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	if ((uintptr_t)&usdt_test_global & 0xfff)
		snprintf(want, sizeof(want), "r0 +%u *8",
			 (unsigned int)((uintptr_t)&usdt_test_global & 0xfff));
	else
		snprintf(want, sizeof(want), "r0 *8");
	cr_expect_str_eq(text, want);
	/* The anchor GCC uses for file-local data is not in the symbol table:
	 * refused rather than guessed. */
	rc = plan(EM_AARCH64, "8@[x0, #:lo12:.LANCHOR0]", 0, text, sizeof(text), &type, err,
		  sizeof(err));
	cr_expect_eq(rc, -EINVAL);
	cr_expect_str_eq(err, "usdt:demo:req: cannot read its operand '8@[x0, #:lo12:.LANCHOR0]'");
}

Test(usdt_a64, bad_operands_are_refused_with_one_line)
{
	static const char *const bad[] = {
		"8@x31", "8@x32", "4@w31", "8@x01", "8@x", "8@r3", "8@%rdi", "8@$5",
		"8@-16(%rbp)", "8@[w0]", "8@[wsp, 8]", "8@[x0", "8@[x0, 8", "8@[x0]x",
		"8@[x0, x1]", "8@[x0, 8, 4]", "8@[]", "8@[x0, ]", "8@5x", "8@#", "3@x0",
		"16@x0", "8@", "@x0", "8@xzr",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128], err[256], want[300];
		uint8_t type;
		int rc = plan(EM_AARCH64, bad[i], 0, text, sizeof(text), &type, err, sizeof(err));

		cr_expect_eq(rc, -EINVAL, "'%s' gave %d (%s)", bad[i], rc, rc ? err : text);
		snprintf(want, sizeof(want), "usdt:demo:req: cannot read its operand '%s'", bad[i]);
		cr_expect_str_eq(err, want);
		cr_expect_null(strchr(err, '\n'));
	}
}

Test(usdt_a64, operand_count_keeps_brackets_whole)
{
	struct usdt_probe p = probe(EM_AARCH64, "8@x3 -4@[sp, 28] -4@7");
	char text[128], err[256];
	uint8_t type;

	cr_expect_eq(usdt_nargs(&p), 3);
	cr_expect_eq(plan(EM_AARCH64, "8@x3 -4@[sp, 28] -4@7", 3, text, sizeof(text), &type, err,
			  sizeof(err)),
		     -EINVAL);
	cr_expect_str_eq(err, "usdt:demo:req has 3 arguments (arg0..arg2): not arg3");
}

/* ---- x86-64: the same notes read as before ---- */

Test(usdt_x86, operands_keep_their_syntax)
{
	static const struct good g[] = {
		{ "8@%rdi -4@-20(%rbp) -4@$5", 0, "r5", ARG_U64 },
		{ "8@%rdi -4@-20(%rbp) -4@$5", 1, "r6 -20 *4", ARG_S32 },
		{ "8@%rdi -4@-20(%rbp) -4@$5", 2, "#5", ARG_S32 },
		{ "-4@%r8d", 0, "r8", ARG_S32 },
	};
	char text[128], err[256];
	uint8_t type;

	expect_good(EM_X86_64, g, sizeof(g) / sizeof(g[0]));
	/* AArch64 syntax in an x86-64 object is not an operand there. */
	cr_expect_eq(plan(EM_X86_64, "8@x3", 0, text, sizeof(text), &type, err, sizeof(err)),
		     -EINVAL);
	cr_expect_eq(plan(EM_X86_64, "-4@[sp, 28]", 0, text, sizeof(text), &type, err,
			  sizeof(err)),
		     -EINVAL);
}

static int main_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uintptr_t *)arg = (uintptr_t)info->dlpi_addr;
	return 1;	/* the first object is the program */
}

/* A global variable at -O2: SYMBOL(%rip), the symbol's link-time address
 * relative to the probe's (0 here), minus the 1 a pre_handler's ip is
 * past the probe's address. */
Test(usdt_x86, rip_relative_global_variable)
{
	char text[128], want[64], err[256];
	uintptr_t bias = 0;
	uint8_t type;
	int rc;

	dl_iterate_phdr(main_bias, &bias);
	rc = plan(EM_X86_64, "-4@usdt_test_global(%rip)", 0, text, sizeof(text), &type, err,
		  sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	snprintf(want, sizeof(want), "r16 %+lld *4",
		 (long long)((uintptr_t)&usdt_test_global - bias) - 1);
	cr_expect_str_eq(text, want);
	cr_expect_eq(type, ARG_S32);
}

/* ---- fetch plans with cases (a parameter's value at the entry, picked by
 * the caller's call site): parsed, printed back, and malformed ones
 * refused, since the agent runs a plan without checking it ---- */

Test(spec_plan, cases_read_back_as_written)
{
	static const char *const ok[] = {
		"p x=@r7+8*8r16o1?-4712r3+5?-4600#11!:s64",
		"p x=@r7*8?12r7+16*8!+8*4:s32",
		/* the return address from its slot, as a return probe's
		 * stub stands for it */
		"p x=@r7+8Rr16o1?-4712r3+5!:s64",
	};
	char err[160];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct probe_spec s;

		memset(&s, 0, sizeof(s));
		cr_assert_eq(spec_parse(ok[i], &s, err, sizeof(err)), 0, "%s: %s", ok[i], err);
		cr_assert_eq(s.args[0].src, ARG_SRC_PLAN);
		cr_assert(spec_plan_has_cases(&s.args[0]));
		cr_assert_eq(spec_format(&s), 0);
		cr_assert_str_eq(s.text, ok[i]);
	}
}

/* A C++ name's spaces belong to the PROBE word (inside its parentheses,
 * after operator), and the text around it is left as it was, at any
 * length the parser takes (the agent parses what the control channel
 * sends: a word ended by a space with nothing dropped must not move the
 * rest). */
Test(spec_plan, cxx_words_and_the_longest_text)
{
	char err[160], text[SPEC_TEXT_MAX * 2];
	struct probe_spec s;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(spec_parse("lib:f(char const*) arg1", &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(s.symbol, "f(charconst*)");
	cr_assert_eq(s.nargs, 1);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(spec_parse("operator new(unsigned long)%return", &s, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(s.symbol, "operatornew(unsignedlong)");
	cr_assert(s.is_return);
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	text[1] = ' ';
	memset(&s, 0, sizeof(s));
	cr_assert_neq(spec_parse(text, &s, err, sizeof(err)), 0, "a %zu-byte text taken",
		      strlen(text));
}

Test(spec_plan, malformed_cases_are_refused)
{
	static const char *const bad_plans[] = {
		"p x=@?5r3!:s64",		/* no key */
		"p x=@r7?5r3:s64",		/* no end of the cases */
		"p x=@r7?5!:s64",		/* a case with no value */
		"p x=@r7?5r3r4!:s64",		/* a case with two */
		"p x=@r7!:s64",			/* an end with no case */
		"p x=@r7?5r3!?6r4!:s64",	/* two groups */
		"p x=@r7r8?5r3!:s64",		/* two values before the case */
		"p x=@r7?+5r3!:s64",		/* a sign the printer never writes */
		"p x=@R:s64",			/* a return slot's address missing */
		"p x=@r7R8:s64",		/* R takes no size */
	};
	char err[160];

	for (size_t i = 0; i < sizeof(bad_plans) / sizeof(bad_plans[0]); i++) {
		struct probe_spec s;

		memset(&s, 0, sizeof(s));
		cr_assert_neq(spec_parse(bad_plans[i], &s, err, sizeof(err)), 0, "%s accepted",
			      bad_plans[i]);
	}
}
