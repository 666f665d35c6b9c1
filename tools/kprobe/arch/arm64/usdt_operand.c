/* SDT operands in AArch64 assembler syntax, as GCC writes them into the
 * notes of <sys/sdt.h> (constraint "nor"): a register (x3, w1, sp), an
 * immediate (7, -1, or #7 as some assemblers print it), or memory
 * [BASE] / [BASE, OFF] with BASE an x register or sp and OFF a signed
 * number (optionally #-prefixed) or #:lo12:SYMBOL, the low 12 bits of a
 * symbol's address added to a base an adrp loaded with its page (a global
 * variable at -O2; the load bias keeps page offsets, so the link-time
 * symbol's low bits are the run-time ones).  Compiled into fetch plans naming
 * registers by their AArch64 DWARF numbers (x0..x30 are 0..30, sp 31), the
 * numbering the arm64 agent's KP_DWARF_REG_OFFSETS reads.  Built into the
 * tool on every host so that the notes of an arm64 object parse the same
 * wherever the tool runs. */
#include "usdt.h"

#include "elf_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define A64_DWARF_SP 31

static int a64_put(struct spec_arg *a, enum fetch_kind kind, uint8_t reg, int64_t k,
		   uint8_t size)
{
	struct fetch_op *op;

	if (a->nops == SPEC_MAX_OPS)
		return -EINVAL;
	op = &a->ops[a->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)kind;
	op->reg = reg;
	op->k = k;
	op->size = size;
	return 0;
}

/* The DWARF number of register s (len bytes): xN or wN (N 0..30), sp, or
 * wsp; -1 for anything else (xzr reads as the immediate 0 in GCC's
 * output, so it never names a register here). */
static int a64_reg_number(const char *s, size_t len)
{
	char buf[8], *end;
	long n;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (!strcmp(buf, "sp") || !strcmp(buf, "wsp"))
		return A64_DWARF_SP;
	if ((buf[0] != 'x' && buf[0] != 'w') || !isdigit((unsigned char)buf[1]))
		return -1;
	/* No leading zeros: "x01" is not a register name. */
	if (buf[1] == '0' && buf[2])
		return -1;
	n = strtol(buf + 1, &end, 10);
	if (*end || n < 0 || n > 30)
		return -1;
	return (int)n;
}

/* A signed number at s (an optional '#' first) filling all of s. */
static int a64_number(const char *s, int64_t *v)
{
	char *end;

	if (*s == '#')
		s++;
	if (!*s || (!isdigit((unsigned char)*s) && *s != '-' && *s != '+'))
		return -EINVAL;
	errno = 0;
	*v = strtoll(s, &end, 0);
	return *end || errno ? -EINVAL : 0;
}

static const char *skip_spaces(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* OFF of [BASE, OFF]: a number or #:lo12:SYMBOL (of the object at path). */
static int a64_offset(const char *path, const char *s, int64_t *off)
{
	static const char lo12[] = "#:lo12:";
	uint64_t value;

	if (strncmp(s, lo12, sizeof(lo12) - 1))
		return a64_number(s, off);
	if (!path || elf_file_address_symbol(path, s + sizeof(lo12) - 1, &value))
		return -EINVAL;
	*off = (int64_t)(value & 0xfff);
	return 0;
}

/* [BASE] or [BASE, OFF]: the address, then a load of size bytes. */
static int a64_memory(const char *path, const char *s, struct spec_arg *a, unsigned int size)
{
	const char *close = strchr(s, ']'), *comma, *p = skip_spaces(s + 1), *q;
	int64_t off = 0;
	char num[128];
	int r;

	if (!close || close[1])
		return -EINVAL;
	comma = memchr(p, ',', (size_t)(close - p));
	q = comma ? comma : close;
	while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
		q--;
	r = a64_reg_number(p, (size_t)(q - p));
	/* The base is a 64-bit register: w registers (and wsp) do not
	 * address memory. */
	if (r < 0 || p[0] == 'w')
		return -EINVAL;
	if (comma) {
		p = skip_spaces(comma + 1);
		q = close;
		while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		if ((size_t)(q - p) >= sizeof(num))
			return -EINVAL;
		memcpy(num, p, (size_t)(q - p));
		num[q - p] = '\0';
		if (a64_offset(path, num, &off))
			return -EINVAL;
	}
	if (a64_put(a, FETCH_REG, (uint8_t)r, 0, 0) ||
	    (off && a64_put(a, FETCH_ADD, 0, off, 0)) ||
	    a64_put(a, FETCH_LOAD, 0, 0, (uint8_t)size))
		return -EINVAL;
	return 0;
}

int usdt_a64_operand(const char *path, const char *op, unsigned int size, struct spec_arg *a)
{
	int64_t v;
	int r;

	if (op[0] == '[')
		return a64_memory(path, op, a, size);
	if (op[0] == '#' || op[0] == '-' || op[0] == '+' || isdigit((unsigned char)op[0])) {
		if (a64_number(op, &v))
			return -EINVAL;
		return a64_put(a, FETCH_CONST, 0, v, 0);
	}
	r = a64_reg_number(op, strlen(op));
	if (r < 0)
		return -EINVAL;
	return a64_put(a, FETCH_REG, (uint8_t)r, 0, 0);
}
