/* Parsing and printing of probe specifications (see spec.h). */
#include "spec.h"
#include "kp_arch.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {
	[ARG_X64] = "x64", [ARG_U64] = "u64", [ARG_S64] = "s64", [ARG_STRING] = "string",
	[ARG_F64] = "f64", [ARG_S32] = "s32", [ARG_U32] = "u32", [ARG_S16] = "s16",
	[ARG_U16] = "u16", [ARG_S8] = "s8", [ARG_U8] = "u8", [ARG_F32] = "f32",
};

static const char *const source_exts[] = {
	"c", "h", "cc", "cp", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "C", "H",
	"S", "s", "m", "mm", "rs", "go",
};

/* Width in bits of the narrow integer types; 64 for the others. */
static unsigned int int_bits(enum arg_type t)
{
	switch (t) {
	case ARG_S32: case ARG_U32: return 32;
	case ARG_S16: case ARG_U16: return 16;
	case ARG_S8: case ARG_U8: return 8;
	default: return 64;
	}
}

bool spec_type_is_signed(enum arg_type t)
{
	return t == ARG_S64 || t == ARG_S32 || t == ARG_S16 || t == ARG_S8;
}

bool spec_type_is_decimal(enum arg_type t)
{
	return t == ARG_U64 || t == ARG_S64 || int_bits(t) < 64;
}

uint64_t spec_int_value(enum arg_type t, uint64_t raw)
{
	unsigned int shift = 64 - int_bits(t);

	if (!shift)
		return raw;
	raw <<= shift;
	return spec_type_is_signed(t) ? (uint64_t)((int64_t)raw >> shift) : raw >> shift;
}

const char *spec_type_name(enum arg_type t)
{
	return (unsigned int)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "?";
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static bool is_ident(const char *s, size_t len)
{
	if (!len || !is_ident_start((unsigned char)s[0]))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

/* "arg1".."arg6" or "retval": its source, or -1. */
static int arg_source(const char *s, size_t len)
{
	if (len == 6 && !strncmp(s, "retval", 6))
		return ARG_SRC_RETVAL;
	if (len >= 4 && !strncmp(s, "arg", 3)) {
		for (size_t i = 3; i < len; i++)
			if (!isdigit((unsigned char)s[i]))
				return -1;
		return 100;	/* an argN, number checked by the caller */
	}
	return -1;
}

/* A program variable expression: [*...]NAME followed by ->FIELD, .FIELD
 * and [N]; or $params, $vars. */
static bool is_var_expr(const char *s, size_t len)
{
	size_t i = 0;

	if ((len == 7 && !strncmp(s, "$params", 7)) || (len == 5 && !strncmp(s, "$vars", 5)))
		return true;
	while (i < len && s[i] == '*')
		i++;
	if (i == len || !is_ident_start((unsigned char)s[i]))
		return false;
	while (i < len) {
		if (isalnum((unsigned char)s[i]) || s[i] == '_') {
			i++;
		} else if (s[i] == '.' && i + 1 < len && is_ident_start((unsigned char)s[i + 1])) {
			i++;
		} else if (s[i] == ':' && i + 2 < len && s[i + 1] == ':' &&
			   is_ident_start((unsigned char)s[i + 2])) {
			i += 2;	/* a C++ qualified name: ns::var, Class::member */
		} else if (s[i] == '-' && i + 2 < len && s[i + 1] == '>' &&
			   is_ident_start((unsigned char)s[i + 2])) {
			i += 2;
		} else if (s[i] == '[') {
			size_t j = i + 1;

			while (j < len && isdigit((unsigned char)s[j]))
				j++;
			if (j == i + 1 || j >= len || s[j] != ']')
				return false;
			i = j + 1;
		} else {
			return false;
		}
	}
	return true;
}

/* An argument's name: an identifier, or for a variable the expression's
 * own characters. */
static bool is_arg_name(const char *s, size_t len)
{
	if (is_ident(s, len))
		return true;
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_$.->[]*:", s[i]))
			return false;
	return true;
}

/* The ':' before an ARG's TYPE, past any "::" of a C++ name; NULL. */
static const char *type_colon(const char *src)
{
	for (const char *c = strchr(src, ':'); c; c = strchr(c + 2, ':'))
		if (c[1] != ':')
			return c;
	return NULL;
}

bool spec_token_is_arg(const char *tok)
{
	const char *eq = strchr(tok, '=');
	const char *src = eq ? eq + 1 : tok;
	const char *colon = type_colon(src);
	size_t len = colon ? (size_t)(colon - src) : strlen(src);

	if (eq && !is_arg_name(tok, (size_t)(eq - tok)))
		return false;
	if (arg_source(src, len) >= 0)
		return true;
	/* Without NAME=, a bare word is a probe (a symbol may look like a
	 * variable), except $params and $vars. */
	if (!eq)
		return len && src[0] == '$' && is_var_expr(src, len);
	return src[0] == '@' || is_var_expr(src, len);
}

/* Whether a plan keeps its stack within bounds and leaves one value:
 * the agent runs it without checking. */
static int plan_check(const struct spec_arg *a)
{
	int depth = 0;
	bool in_cases = false, joined = false;

	for (int i = 0; i < a->nops; i++) {
		switch (a->ops[i].kind) {
		case FETCH_CASE:
			/* the key, or the previous case's value */
			if (joined || depth != 1)
				return -EINVAL;
			in_cases = true;
			depth = 0;
			break;
		case FETCH_JOIN:
			if (!in_cases || joined || depth != 1)
				return -EINVAL;
			joined = true;
			break;
		case FETCH_REG:
		case FETCH_VREG:
		case FETCH_CONST:
			if (++depth > SPEC_PLAN_DEPTH)
				return -EINVAL;
			break;
		case FETCH_BINOP:
			if (--depth < 1)
				return -EINVAL;
			break;
		default:
			if (depth < 1)
				return -EINVAL;
		}
	}
	return depth == 1 && in_cases == joined ? 0 : -EINVAL;
}

bool spec_plan_has_cases(const struct spec_arg *a)
{
	if (a->src != ARG_SRC_PLAN)
		return false;
	for (int i = 0; i < a->nops && i < SPEC_MAX_OPS; i++)
		if (a->ops[i].kind == FETCH_JOIN)
			return true;
	return false;
}

void spec_plan_compile(struct spec_arg *a)
{
	struct fetch_chain c;
	int64_t pending = 0;

	memset(&a->chain, 0, sizeof(a->chain));
	if (a->src != ARG_SRC_PLAN || !a->nops || a->ops[0].kind != FETCH_REG ||
	    a->ops[0].reg > KP_DWARF_PC)
		return;
	memset(&c, 0, sizeof(c));
	c.reg = a->ops[0].reg;
	for (int i = 1; i < a->nops; i++) {
		const struct fetch_op *op = &a->ops[i];

		if (op->kind == FETCH_ADD) {
			/* a far offset: the general plan (no overflow here:
			 * both within 32 bits before the sum) */
			if (op->k < INT32_MIN || op->k > INT32_MAX)
				return;
			pending += op->k;
			if (pending < INT32_MIN || pending > INT32_MAX)
				return;
		} else if (op->kind == FETCH_LOAD && c.nhops < SPEC_MAX_HOPS) {
			c.add[c.nhops] = (int32_t)pending;
			c.size[c.nhops++] = op->size;
			pending = 0;
		} else {
			return;	/* constants, operators: the general plan */
		}
	}
	c.last = (int32_t)pending;
	c.ok = 1;
	a->chain = c;
}

/* "@PLAN" (see spec.h) into a's ops; -EINVAL when malformed. */
static int parse_plan(const char *p, size_t len, struct spec_arg *a)
{
	const char *end = p + len;

	a->nops = 0;
	if (len == 1 && *p == '-') {
		a->src = ARG_SRC_UNAVAIL;
		return 0;
	}
	a->src = ARG_SRC_PLAN;
	while (p < end) {
		struct fetch_op *op;
		char c = *p++;
		char *num_end;
		long long k;

		if (a->nops == SPEC_MAX_OPS || !c || !strchr("rv#+-*o?!R", c))
			return -EINVAL;
		if (c == '!' || c == 'R') {
			op = &a->ops[a->nops++];
			memset(op, 0, sizeof(*op));
			op->kind = c == '!' ? FETCH_JOIN : FETCH_RET_ADDR;
			continue;
		}
		if (p >= end)
			return -EINVAL;
		errno = 0;
		k = strtoll(p, &num_end, 10);
		if (errno || num_end == p || num_end > end ||
		    (c != '#' && c != '?' && *p == '-') || (c != '#' && *p == '+'))
			return -EINVAL;
		p = num_end;
		op = &a->ops[a->nops++];
		memset(op, 0, sizeof(*op));
		switch (c) {
		case 'r':
			if (k < 0 || k > KP_DWARF_PC)
				return -EINVAL;
			op->kind = FETCH_REG;
			op->reg = (uint8_t)k;
			break;
		case 'v':
			if (k < 0 || k > SPEC_MAX_VREG)
				return -EINVAL;
			op->kind = FETCH_VREG;
			op->reg = (uint8_t)k;
			break;
		case '#':
			op->kind = FETCH_CONST;
			op->k = k;
			break;
		case '?':
			op->kind = FETCH_CASE;
			op->k = k;
			break;
		case 'o':
			if (k < 0 || k >= BINOP_COUNT)
				return -EINVAL;
			op->kind = FETCH_BINOP;
			op->k = k;
			break;
		case '+':
		case '-':
			op->kind = FETCH_ADD;
			op->k = c == '-' ? -k : k;
			break;
		default:
			if (k != 1 && k != 2 && k != 4 && k != 8)
				return -EINVAL;
			op->kind = FETCH_LOAD;
			op->size = (uint8_t)k;
			break;
		}
	}
	if (plan_check(a))
		return -EINVAL;
	spec_plan_compile(a);
	return 0;
}

static int parse_type(const char *s, enum arg_type *t)
{
	for (unsigned int i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (!strcmp(s, type_names[i])) {
			*t = (enum arg_type)i;
			return 0;
		}
	return -EINVAL;
}

/* Where the agent can read a floating-point value: the vector registers
 * at a function's first instruction (where the ABI puts the arguments),
 * xmm0 at its return, or a tracepoint's packed argument. */
static bool f64_readable(const struct probe_spec *s, int source)
{
	if (s->kind == SPEC_TRACEPOINT)
		return true;
	if (source == ARG_SRC_RETVAL)
		return s->is_return;
	return s->kind == SPEC_SYMBOL && !s->offset && !s->is_return;
}

/* An ARG that names a program variable or carries a fetch plan. */
static int add_var_arg(struct probe_spec *s, const char *tok, const char *src, size_t srclen,
		       bool typed, enum arg_type type, char *err, size_t errlen)
{
	const char *eq = strchr(tok, '=');
	struct spec_arg *a = &s->args[s->nargs];

	memset(a, 0, sizeof(*a));
	if (src[0] == '@') {
		if (parse_plan(src + 1, srclen - 1, a))
			return fail(err, errlen, "bad fetch plan in '%s'", tok);
		if (!eq)
			return fail(err, errlen, "a fetch plan needs a NAME=: '%s'", tok);
	} else {
		if (!is_var_expr(src, srclen))
			return fail(err, errlen, "bad argument '%s' (expected arg1..arg6, retval or a "
				    "variable: NAME, NAME->FIELD, NAME.FIELD, NAME[N], *NAME)", tok);
		if (srclen >= SPEC_EXPR_MAX)
			return fail(err, errlen, "expression too long in '%s'", tok);
		a->src = ARG_SRC_VAR;
		snprintf(a->expr, sizeof(a->expr), "%.*s", (int)srclen, src);
	}
	if (s->kind == SPEC_TRACEPOINT)
		return fail(err, errlen, "'%s': a tracepoint's arguments are arg1.. or its own names",
			    tok);
	if (s->kind == SPEC_USDT && src[0] != '@' &&
	    (strncmp(src, "arg", 3) || arg_source(src, srclen) != 100))
		return fail(err, errlen, "'%s': an SDT probe's arguments are arg0, arg1, ...", tok);
	if (!eq && srclen >= SPEC_NAME_MAX)
		return fail(err, errlen, "'%s' is too long to name the value: give NAME=", tok);
	snprintf(a->name, sizeof(a->name), "%.*s", (int)(eq ? (size_t)(eq - tok) : srclen),
		 eq ? tok : src);
	a->type = (uint8_t)type;
	a->typed = typed;
	s->nargs++;
	return 0;
}

int spec_add_arg(struct probe_spec *s, const char *tok, char *err, size_t errlen)
{
	const char *eq = strchr(tok, '=');
	const char *src = eq ? eq + 1 : tok;
	const char *colon = type_colon(src);
	size_t srclen = colon ? (size_t)(colon - src) : strlen(src);
	struct spec_arg *a;
	enum arg_type type = ARG_X64;
	int source;

	if (s->nargs == SPEC_MAX_ARGS)
		return fail(err, errlen, "too many arguments for one probe (at most %d): '%s'",
			    SPEC_MAX_ARGS, tok);
	if (eq && !is_arg_name(tok, (size_t)(eq - tok)))
		return fail(err, errlen, "bad argument name in '%s'", tok);
	if (eq && (size_t)(eq - tok) >= SPEC_NAME_MAX)
		return fail(err, errlen, "argument name too long in '%s'", tok);
	if (colon && parse_type(colon + 1, &type))
		return fail(err, errlen, "bad type in '%s' (expected u64, s64, x64, u32, s32, u16, s16, "
			    "u8, s8, f64, f32 or string)", tok);
	source = arg_source(src, srclen);
	if (source < 0 || (source == 100 && s->kind == SPEC_USDT))
		return add_var_arg(s, tok, src, srclen, colon != NULL, type, err, errlen);
	if (eq && !is_ident(tok, (size_t)(eq - tok)))
		return fail(err, errlen, "bad argument name in '%s'", tok);
	if (type == ARG_F32 && source != ARG_SRC_RETVAL)
		return fail(err, errlen, "'%s': f32 is for variables and retval; argN takes f64", tok);
	if (source == 100) {
		long n = strtol(src + 3, NULL, 10);
		long max = type == ARG_F64 ? SPEC_MAX_FP_ARG : SPEC_MAX_INT_ARG;

		if (n < 1 || n > max || srclen > 4)
			return fail(err, errlen, "bad argument '%s': only arg1..arg%ld exist%s", tok,
				    max, type == ARG_F64 ? " for f64" : "");
		source = (int)n - 1;
	}
	if (source == ARG_SRC_RETVAL && !s->is_return)
		return fail(err, errlen, "'%s': retval needs a %%return probe", tok);
	if ((type == ARG_F64 || type == ARG_F32) && !f64_readable(s, source))
		return fail(err, errlen, "'%s': argN:f64 is read at a function's entry (a SYMBOL "
			    "without +OFFSET or %%return) or from a tracepoint", tok);
	a = &s->args[s->nargs++];
	memset(a, 0, sizeof(*a));
	if (eq)
		snprintf(a->name, sizeof(a->name), "%.*s", (int)(eq - tok), tok);
	else
		snprintf(a->name, sizeof(a->name), "%.*s", (int)srclen, src);
	a->src = (uint8_t)source;
	a->type = (uint8_t)type;
	a->typed = colon != NULL;
	return 0;
}

static bool has_source_ext(const char *file, size_t len)
{
	const char *dot = NULL;

	for (size_t i = 0; i < len; i++) {
		if (file[i] == '/')
			dot = NULL;
		else if (file[i] == '.')
			dot = file + i;
	}
	if (!dot || dot == file)
		return false;
	for (unsigned int i = 0; i < sizeof(source_exts) / sizeof(source_exts[0]); i++)
		if (strlen(source_exts[i]) == (size_t)(file + len - dot - 1) &&
		    !strncmp(dot + 1, source_exts[i], (size_t)(file + len - dot - 1)))
			return true;
	return false;
}

/* "FILE.c:LINE": fills s and returns true. */
static bool parse_line_spec(const char *tok, struct probe_spec *s)
{
	const char *colon = strrchr(tok, ':');
	char *end;
	unsigned long line;

	if (!colon || colon == tok || !isdigit((unsigned char)colon[1]))
		return false;
	line = strtoul(colon + 1, &end, 10);
	if (*end || !line || line > 10000000 || !has_source_ext(tok, (size_t)(colon - tok)))
		return false;
	if ((size_t)(colon - tok) >= sizeof(s->symbol))
		return false;
	s->kind = SPEC_LINE;
	snprintf(s->symbol, sizeof(s->symbol), "%.*s", (int)(colon - tok), tok);
	s->line = (unsigned int)line;
	return true;
}

/* The ':' that separates OBJECT from SYMBOL: the first one not part of a
 * C++ "::". */
static const char *object_colon(const char *tok)
{
	for (const char *p = strchr(tok, ':'); p; p = strchr(p + 1, ':')) {
		if (p[1] == ':') {
			p++;
			continue;
		}
		if (p > tok && p[-1] == ':')
			continue;
		return p;
	}
	return NULL;
}

static bool valid_symbol_char(int c)
{
	return isalnum(c) || strchr("_.$@:<>~,*?[]!-^()&", c);
}

static int parse_symbol(const char *sym, struct probe_spec *s, const char *tok,
			char *err, size_t errlen)
{
	const char *plus = strchr(sym, '+');
	size_t len = plus ? (size_t)(plus - sym) : strlen(sym);
	char *end;

	if (!len)
		return fail(err, errlen, "missing symbol in probe '%s'", tok);
	if (len >= sizeof(s->symbol))
		return fail(err, errlen, "symbol too long in probe '%s'", tok);
	if (len > 2 && sym[0] == '0' && (sym[1] == 'x' || sym[1] == 'X')) {
		if (plus)
			return fail(err, errlen, "an address takes no +OFFSET: '%s'", tok);
		errno = 0;
		s->address = strtoull(sym + 2, &end, 16);
		if (*end || errno || end == sym + 2)
			return fail(err, errlen, "bad address in probe '%s'", tok);
		s->kind = SPEC_ADDRESS;
		return 0;
	}
	if (isdigit((unsigned char)sym[0]))
		return fail(err, errlen, "bad symbol in probe '%s'", tok);
	for (size_t i = 0; i < len; i++)
		if (!valid_symbol_char((unsigned char)sym[i]))
			return fail(err, errlen, "bad character '%c' in probe '%s'", sym[i], tok);
	s->kind = SPEC_SYMBOL;
	memcpy(s->symbol, sym, len);
	s->symbol[len] = '\0';
	if (plus) {
		const char *num = plus + 1;

		errno = 0;
		if (!isdigit((unsigned char)*num))
			return fail(err, errlen, "bad offset in probe '%s'", tok);
		s->offset = strtoul(num, &end, 0);
		if (*end || errno)
			return fail(err, errlen, "bad offset in probe '%s'", tok);
	}
	return 0;
}

/* "tp:PROVIDER:NAME": C identifiers, or globs of them. */
static int parse_tracepoint(const char *tok, struct probe_spec *s, char *err, size_t errlen)
{
	const char *rest = tok + 3, *colon = strchr(rest, ':');

	if (!colon || colon == rest || !colon[1] || strchr(colon + 1, ':'))
		return fail(err, errlen, "bad tracepoint '%s' (expected tp:PROVIDER:NAME)", tok);
	for (const char *p = rest; *p; p++)
		if (p != colon && !isalnum((unsigned char)*p) && !strchr("_*?[]!-^", *p))
			return fail(err, errlen, "bad character '%c' in tracepoint '%s'", *p, tok);
	if (strlen(rest) >= sizeof(s->symbol))
		return fail(err, errlen, "tracepoint name too long: '%s'", tok);
	s->kind = SPEC_TRACEPOINT;
	snprintf(s->symbol, sizeof(s->symbol), "%s", rest);
	return 0;
}

/* "usdt:[OBJECT:]PROVIDER:NAME": names or globs of them. */
static int parse_usdt(const char *tok, struct probe_spec *s, char *err, size_t errlen)
{
	const char *rest = tok + 5, *last = strrchr(rest, ':'), *mid;

	if (!last || last == rest || !last[1])
		return fail(err, errlen, "bad SDT probe '%s' (expected usdt:[OBJECT:]PROVIDER:NAME)",
			    tok);
	for (mid = last - 1; mid > rest && *mid != ':'; mid--)
		;
	if (*mid == ':') {
		if ((size_t)(mid - rest) >= sizeof(s->object))
			return fail(err, errlen, "object name too long in probe '%s'", tok);
		snprintf(s->object, sizeof(s->object), "%.*s", (int)(mid - rest), rest);
		rest = mid + 1;
	}
	for (const char *p = rest; *p; p++)
		if (p != last && !isalnum((unsigned char)*p) && !strchr("_*?[]!-^.", *p))
			return fail(err, errlen, "bad character '%c' in SDT probe '%s'", *p, tok);
	if (strlen(rest) >= sizeof(s->symbol) || last == rest)
		return fail(err, errlen, "bad SDT probe '%s'", tok);
	s->kind = SPEC_USDT;
	memcpy(s->symbol, rest, strlen(rest) + 1);
	return 0;
}

int spec_parse_location(const char *tok, struct probe_spec *s, char *err, size_t errlen)
{
	char buf[SPEC_TEXT_MAX];
	const char *colon, *sym;
	char *pct;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!*tok)
		return fail(err, errlen, "empty probe");
	if (strlen(tok) >= sizeof(buf))
		return fail(err, errlen, "probe too long: '%.40s...'", tok);
	if (strpbrk(tok, " \t\n"))
		return fail(err, errlen, "bad probe '%s'", tok);
	snprintf(buf, sizeof(buf), "%s", tok);
	pct = strchr(buf, '%');
	if (pct && !strncmp(pct, "%sem=0x", 7)) {
		char *end;

		errno = 0;
		s->semaphore = strtoull(pct + 7, &end, 16);
		if (*end || errno || end == pct + 7 || !s->semaphore)
			return fail(err, errlen, "bad semaphore in probe '%s'", tok);
		*pct = '\0';
		pct = NULL;
	}
	if (pct) {
		if (strcmp(pct, "%return"))
			return fail(err, errlen, "bad suffix '%s' in probe '%s' (only %%return)",
				    pct, tok);
		*pct = '\0';
		s->is_return = true;
	}
	if (!strncmp(buf, "usdt:", 5)) {
		if (s->is_return)
			return fail(err, errlen, "%%return needs a function, not an SDT probe: '%s'",
				    tok);
		return parse_usdt(buf, s, err, errlen);
	}
	if (!strncmp(buf, "tp:", 3)) {
		if (s->is_return)
			return fail(err, errlen, "%%return needs a function, not a tracepoint: '%s'",
				    tok);
		return parse_tracepoint(buf, s, err, errlen);
	}
	if (parse_line_spec(buf, s)) {
		if (s->is_return)
			return fail(err, errlen, "%%return needs a function, not a line: '%s'", tok);
		return 0;
	}
	colon = object_colon(buf);
	sym = buf;
	if (colon) {
		if (colon == buf)
			return fail(err, errlen, "missing object before ':' in probe '%s'", tok);
		if ((size_t)(colon - buf) >= sizeof(s->object))
			return fail(err, errlen, "object name too long in probe '%s'", tok);
		snprintf(s->object, sizeof(s->object), "%.*s", (int)(colon - buf), buf);
		sym = colon + 1;
	}
	rc = parse_symbol(sym, s, tok, err, errlen);
	if (rc)
		return rc;
	if (s->semaphore && s->kind != SPEC_ADDRESS)
		return fail(err, errlen, "%%sem= goes with an OBJECT:0xADDRESS: '%s'", tok);
	if (s->is_return && (s->offset || s->kind == SPEC_ADDRESS))
		return fail(err, errlen, "%%return needs a function entry: '%s'", tok);
	return 0;
}

/* Whether [start, end) ends with the C++ keyword operator. */
static bool ends_with_operator(const char *start, const char *end)
{
	return end - start >= 8 && !strncmp(end - 8, "operator", 8) &&
	       (end - 8 == start || (!isalnum((unsigned char)end[-9]) && end[-9] != '_'));
}

/* A C++ name with its signature may hold spaces ("f(char const*)",
 * "operator new(unsigned long)"), which the matching of C++ names
 * ignores: the probe's first word runs on through the spaces inside
 * parentheses and after "operator", and they are dropped, in place. */
static void join_cxx_name(char *buf)
{
	char *r = buf, *w = buf;
	int depth = 0;

	while (*r == ' ' || *r == '\t' || *r == '\n')
		r++;
	for (; *r; r++) {
		bool space = *r == ' ' || *r == '\t' || *r == '\n';

		if (space && !depth && !ends_with_operator(buf, w))
			break;
		if (*r == '(')
			depth++;
		else if (*r == ')' && depth)
			depth--;
		if (!space)
			*w++ = *r;
	}
	/* the rest from the space that ended the word (w never passes r) */
	memmove(w, r, strlen(r) + 1);
}

int spec_parse(const char *text, struct probe_spec *s, char *err, size_t errlen)
{
	char buf[SPEC_TEXT_MAX * 2];
	char *save = NULL, *tok;
	int rc;

	if (strlen(text) >= sizeof(buf))
		return fail(err, errlen, "probe too long: '%.40s...'", text);
	snprintf(buf, sizeof(buf), "%s", text);
	join_cxx_name(buf);
	tok = strtok_r(buf, " \t\n", &save);
	if (!tok)
		return fail(err, errlen, "empty probe");
	rc = spec_parse_location(tok, s, err, errlen);
	while (!rc && (tok = strtok_r(NULL, " \t\n", &save)))
		rc = spec_add_arg(s, tok, err, errlen);
	if (!rc && spec_format(s))
		rc = spec_too_long(s, err, errlen);
	return rc;
}

int spec_too_long(const struct probe_spec *s, char *err, size_t errlen)
{
	return fail(err, errlen, "probe too long: '%.60s...' (at most %d characters with its "
		    "arguments)", s->text, SPEC_TEXT_MAX - 1);
}

int spec_format(struct probe_spec *s)
{
	char *p = s->text, *end = s->text + sizeof(s->text);

#define PUT(...) p += snprintf(p, p < end ? (size_t)(end - p) : 0, __VA_ARGS__)
	if (s->object[0])
		PUT("%s:", s->object);
	switch (s->kind) {
	case SPEC_SYMBOL:
		PUT("%s", s->symbol);
		if (s->offset)
			PUT("+0x%lx", s->offset);
		break;
	case SPEC_ADDRESS:
		PUT("0x%lx", (unsigned long)s->address);
		break;
	case SPEC_LINE:
		PUT("%s:%u", s->symbol, s->line);
		break;
	case SPEC_TRACEPOINT:
		PUT("tp:%s", s->symbol);
		break;
	case SPEC_USDT:
		/* usdt:OBJECT:PROVIDER:NAME, the object after the prefix. */
		p = s->text;
		PUT("usdt:%s%s%s", s->object, s->object[0] ? ":" : "", s->symbol);
		break;
	}
	if (s->semaphore)
		PUT("%%sem=0x%lx", (unsigned long)s->semaphore);
	if (s->is_return)
		PUT("%%return");
	for (int i = 0; i < s->nargs; i++) {
		const struct spec_arg *a = &s->args[i];

		if (a->src == ARG_SRC_RETVAL) {
			PUT(" %s=retval:%s", a->name, spec_type_name(a->type));
		} else if (a->src == ARG_SRC_VAR) {
			PUT(" %s=%s", a->name, a->expr);
			if (a->typed)
				PUT(":%s", spec_type_name(a->type));
		} else if (a->src == ARG_SRC_UNAVAIL) {
			PUT(" %s=@-:%s", a->name, spec_type_name(a->type));
		} else if (a->src == ARG_SRC_PLAN) {
			PUT(" %s=@", a->name);
			for (int k = 0; k < a->nops; k++) {
				const struct fetch_op *op = &a->ops[k];

				if (op->kind == FETCH_REG)
					PUT("r%u", op->reg);
				else if (op->kind == FETCH_VREG)
					PUT("v%u", op->reg);
				else if (op->kind == FETCH_CONST)
					PUT("#%lld", (long long)op->k);
				else if (op->kind == FETCH_ADD && op->k < 0)
					PUT("-%llu", 0ull - (unsigned long long)op->k);
				else if (op->kind == FETCH_ADD)
					PUT("+%lld", (long long)op->k);
				else if (op->kind == FETCH_BINOP)
					PUT("o%lld", (long long)op->k);
				else if (op->kind == FETCH_CASE)
					PUT("?%lld", (long long)op->k);
				else if (op->kind == FETCH_JOIN)
					PUT("!");
				else if (op->kind == FETCH_RET_ADDR)
					PUT("R");
				else
					PUT("*%u", op->size);
			}
			PUT(":%s", spec_type_name(a->type));
		} else
			PUT(" %s=arg%u:%s", a->name, a->src + 1u, spec_type_name(a->type));
	}
#undef PUT
	/* A cut text would lose arguments, and the agent would read back a
	 * probe different from the one asked for. */
	return p < end ? 0 : -ENAMETOOLONG;
}

bool spec_has_vars(const struct probe_spec *s)
{
	for (int i = 0; i < s->nargs; i++)
		if (s->args[i].src == ARG_SRC_VAR)
			return true;
	return false;
}

bool spec_is_glob(const struct probe_spec *s)
{
	return (s->kind == SPEC_SYMBOL || s->kind == SPEC_TRACEPOINT || s->kind == SPEC_USDT) &&
	       strpbrk(s->symbol, "*?[") != NULL;
}
