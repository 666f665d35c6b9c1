/* Lexer and recursive-descent parser of bpftrace's user-space subset.
 *
 * Probe names are scanned as raw text (paths hold '/' and globs '*'), the
 * rest as C-like tokens.  Errors stop at the first one and read as
 * bpftrace's ("syntax error, unexpected ..."). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang_int.h"

enum tok {
	T_EOF = 0, T_INT, T_STR, T_IDENT, T_VAR, T_POS, T_MAP,
	T_LBRACE, T_RBRACE, T_LPAREN, T_RPAREN, T_LBRACKET, T_RBRACKET,
	T_COMMA, T_SEMI, T_QUESTION, T_COLON, T_DIV,
	T_PLUS, T_MINUS, T_STAR, T_MOD, T_AMP, T_PIPE, T_CARET, T_TILDE, T_BANG,
	T_SHL, T_SHR, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_LAND, T_LOR,
	T_ASSIGN, T_OPASSIGN, T_INC, T_DEC, T_ARROW, T_DOT, T_BAD,
};

struct parser {
	struct prog *p;
	const char *s;
	size_t pos;		/* of the next character */
	int line, col;		/* of the next character */
	/* Where the current run of characters with no blank in it began:
	 * bpftrace's lexer moves a location's start only over blanks, so a
	 * token right after another one (no blank between) begins where
	 * the first of them did, and so do the nodes it starts. */
	int run_line, run_col;
	bool in_run;
	/* current token */
	enum tok t;
	struct loc loc;
	size_t start, end;	/* source bytes */
	int64_t ival;
	char *sval;
	size_t slen;
	int op;			/* T_OPASSIGN: the operator */
	int probe_index;
	int nest;		/* parser recursion */
	/* What bison's message says it expected where ++ or -- follows an
	 * expression that is neither a map, a variable nor a builtin: the
	 * token that closes the innermost construct around it ("}" in a
	 * statement, ")" in a condition, `) or ","` in arguments...). */
	const char *closer;
};

/* Nesting and expression depth are bounded, so that neither the parser
 * nor the passes after it recurse without limit on hostile input. */
#define MAX_NEST 128
#define MAX_DEPTH 256

static const char *tok_name(enum tok t)
{
	static const char *const names[] = {
		[T_EOF] = "end of file", [T_INT] = "integer", [T_STR] = "string",
		[T_IDENT] = "identifier", [T_VAR] = "variable", [T_POS] = "positional parameter",
		[T_MAP] = "map", [T_LBRACE] = "{", [T_RBRACE] = "}", [T_LPAREN] = "(",
		[T_RPAREN] = ")", [T_LBRACKET] = "[", [T_RBRACKET] = "]", [T_COMMA] = ",",
		[T_SEMI] = ";", [T_QUESTION] = "?", [T_COLON] = ":", [T_DIV] = "/",
		[T_PLUS] = "+", [T_MINUS] = "-", [T_STAR] = "*", [T_MOD] = "%",
		[T_AMP] = "&", [T_PIPE] = "|", [T_CARET] = "^", [T_TILDE] = "~",
		[T_BANG] = "!", [T_SHL] = "<<", [T_SHR] = ">>", [T_EQ] = "==",
		[T_NE] = "!=", [T_LT] = "<", [T_LE] = "<=", [T_GT] = ">", [T_GE] = ">=",
		[T_LAND] = "&&", [T_LOR] = "||", [T_ASSIGN] = "=", [T_OPASSIGN] = "compound assignment",
		[T_INC] = "++", [T_DEC] = "--", [T_ARROW] = "->", [T_DOT] = ".",
		[T_BAD] = "character",
	};
	return names[t];
}

static int peekc(struct parser *ps, size_t ahead)
{
	size_t i;

	for (i = 0; i < ahead; i++)
		if (!ps->s[ps->pos + i])
			return 0;
	return (unsigned char)ps->s[ps->pos + ahead];
}

static void advance(struct parser *ps)
{
	if (!ps->s[ps->pos])
		return;
	if (ps->s[ps->pos] == '\n') {
		ps->line++;
		ps->col = 1;
	} else {
		ps->col++;
	}
	ps->pos++;
}

/* Skips blanks and comments; a comment left open is an error. */
static int skip_space(struct parser *ps)
{
	for (;;) {
		int c = peekc(ps, 0);

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
			advance(ps);
			ps->in_run = false;
		} else if ((c == '/' && peekc(ps, 1) == '/') ||
			   (c == '#' && peekc(ps, 1) == '!' && ps->col == 1)) {
			/* a comment, or a line that starts with "#!" (an
			 * executable script's first line), which bpftrace
			 * skips too */
			while (peekc(ps, 0) && peekc(ps, 0) != '\n')
				advance(ps);
			ps->in_run = false;
		} else if (c == '/' && peekc(ps, 1) == '*') {
			ps->in_run = false;
			struct loc l = { ps->line, ps->col, ps->col + 2 };

			advance(ps);
			advance(ps);
			while (peekc(ps, 0) && !(peekc(ps, 0) == '*' && peekc(ps, 1) == '/'))
				advance(ps);
			if (!peekc(ps, 0)) {
				prog_error(ps->p, l, "unterminated comment");
				return -1;
			}
			advance(ps);
			advance(ps);
		} else {
			return 0;
		}
	}
}

static void tok_begin(struct parser *ps)
{
	if (!ps->in_run) {
		ps->run_line = ps->line;
		ps->run_col = ps->col;
		ps->in_run = true;
	}
	ps->start = ps->pos;
	ps->loc.line = ps->run_line;
	ps->loc.col = ps->run_col;
}

static void tok_finish(struct parser *ps, enum tok t)
{
	ps->t = t;
	ps->end = ps->pos;
	ps->loc.col_end = ps->loc.line == ps->line ? ps->col : ps->loc.col + 1;
	if (ps->loc.col_end <= ps->loc.col)
		ps->loc.col_end = ps->loc.col + 1;
}

/* The bytes a string literal at pos spans at most (to its closing quote,
 * the line's end or the text's), so its buffer is no larger. */
static size_t literal_span(const char *s)
{
	size_t i = 1;

	while (s[i] && s[i] != '"' && s[i] != '\n') {
		if (s[i] == '\\' && s[i + 1])
			i++;
		i++;
	}
	return i;
}

static int lex_string(struct parser *ps)
{
	char *buf = prog_alloc(ps->p, literal_span(ps->s + ps->pos) + 1);
	size_t n = 0;

	if (!buf)
		return -1;
	advance(ps);	/* " */
	for (;;) {
		int c = peekc(ps, 0);

		if (!c || c == '\n') {
			tok_finish(ps, T_STR);
			prog_error(ps->p, ps->loc, "unterminated string");
			return -1;
		}
		advance(ps);
		if (c == '"')
			break;
		if (c != '\\') {
			buf[n++] = (char)c;
			continue;
		}
		c = peekc(ps, 0);
		advance(ps);
		switch (c) {
		case 'n': buf[n++] = '\n'; break;
		case 't': buf[n++] = '\t'; break;
		case 'r': buf[n++] = '\r'; break;
		case '\\': buf[n++] = '\\'; break;
		case '"': buf[n++] = '"'; break;
		case '\'': buf[n++] = '\''; break;
		case 'x': {
			int v = 0, k;

			for (k = 0; k < 2 && isxdigit(peekc(ps, 0)); k++) {
				int d = peekc(ps, 0);

				v = v * 16 + (isdigit(d) ? d - '0' : (tolower(d) - 'a' + 10));
				advance(ps);
			}
			buf[n++] = (char)v;
			break;
		}
		default:
			if (c >= '0' && c <= '7') {
				int v = c - '0', k;

				for (k = 0; k < 2 && peekc(ps, 0) >= '0' && peekc(ps, 0) <= '7'; k++) {
					v = v * 8 + peekc(ps, 0) - '0';
					advance(ps);
				}
				buf[n++] = (char)v;
			} else {
				tok_finish(ps, T_STR);
				prog_error(ps->p, ps->loc, "invalid escape character '\\%c'", c ? c : ' ');
				return -1;
			}
		}
	}
	buf[n] = 0;
	ps->sval = buf;
	ps->slen = n;
	tok_finish(ps, T_STR);
	return 0;
}

/* The end of a run of digits and underscores at p, which ends with a
 * digit ("1__0" is ten; in "100_" the underscore is not the number's). */
static const char *digit_run(const char *p)
{
	const char *end = p;

	while (isdigit((unsigned char)*p) || *p == '_') {
		if (isdigit((unsigned char)*p))
			end = p + 1;
		p++;
	}
	return end;
}

/* The digits of [b, e) without underscores, into buf; false if too long. */
static bool plain_digits(const char *b, const char *e, char *buf, size_t len)
{
	size_t n = 0;

	for (; b < e; b++) {
		if (*b == '_')
			continue;
		if (n + 1 >= len)
			return false;
		buf[n++] = *b;
	}
	buf[n] = 0;
	return true;
}

/* A decimal literal as bpftrace reads it: digits with underscores
 * between them, an optional exponent (1e6: one digit, then at most 16),
 * a leading 0 for octal.  e is past the literal. */
static int decimal_value(struct parser *ps, const char *b, const char **e, unsigned long long *v)
{
	const char *m = digit_run(b), *x = NULL;
	char digits[64], exp[64], *end;
	unsigned long long coef, pw;

	*e = m;
	if ((*m == 'e' || *m == 'E') && isdigit((unsigned char)m[1]))
		*e = digit_run(x = m + 1);
	if (!plain_digits(b, m, digits, sizeof(digits)) ||
	    (x && !plain_digits(x, *e, exp, sizeof(exp))))
		return -ERANGE;
	if (!x) {
		errno = 0;
		*v = strtoull(digits, &end, 0);
		if (errno == ERANGE)
			return -ERANGE;
		return *end ? -EINVAL : 0;
	}
	coef = strtoull(digits, NULL, 10);
	pw = strtoull(exp, NULL, 10);
	if (coef > 9) {
		ps->ival = (int64_t)coef;
		return -EDOM;
	}
	if (pw > 16) {
		ps->ival = (int64_t)pw;
		return -EOVERFLOW;
	}
	for (*v = coef; pw; pw--)
		*v *= 10;
	return 0;
}

static int lex_number(struct parser *ps)
{
	const char *b = ps->s + ps->pos;
	const char *e;
	unsigned long long v = 0;
	int err = 0;

	if (b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) {
		errno = 0;
		v = strtoull(b, (char **)&e, 16);
		if (e == b + 1) {
			/* "0x" alone: bpftrace reads an identifier */
			e = b;
			while (isalnum((unsigned char)*e) || *e == '_')
				e++;
			while (ps->s + ps->pos < e)
				advance(ps);
			tok_finish(ps, T_IDENT);
			ps->sval = prog_strndup(ps->p, b, (size_t)(e - b));
			return ps->sval ? 0 : -1;
		}
		if (errno == ERANGE)
			err = -ERANGE;
	} else {
		err = decimal_value(ps, b, &e, &v);
	}
	while (ps->s + ps->pos < e)
		advance(ps);
	/* what an identifier may continue with: not a number's */
	if (!err && (isalpha(peekc(ps, 0)) || peekc(ps, 0) == '_')) {
		while (isalnum(peekc(ps, 0)) || peekc(ps, 0) == '_')
			advance(ps);
		err = -ERANGE;
	}
	tok_finish(ps, T_INT);
	switch (err) {
	case 0:
		ps->ival = (int64_t)v;
		return 0;
	case -EDOM:
		prog_error(ps->p, ps->loc, "Coefficient part of scientific literal must be in range "
			   "(0,9), got: %lld", (long long)ps->ival);
		return -1;
	case -EOVERFLOW:
		prog_error(ps->p, ps->loc, "Exponent will overflow integer range: %lld",
			   (long long)ps->ival);
		return -1;
	case -EINVAL:
		prog_error(ps->p, ps->loc, "Found trailing non-numeric characters");
		return -1;
	default:
		prog_error(ps->p, ps->loc, "invalid integer literal");
		return -1;
	}
}

static int lex_word(struct parser *ps, enum tok t)
{
	size_t b = ps->pos;

	while (isalnum(peekc(ps, 0)) || peekc(ps, 0) == '_')
		advance(ps);
	ps->sval = prog_strndup(ps->p, ps->s + b, ps->pos - b);
	if (!ps->sval)
		return -1;
	tok_finish(ps, t);
	return 0;
}

struct punct {
	const char *text;
	enum tok t;
	int op;
};

static const struct punct puncts[] = {
	{ "<<=", T_OPASSIGN, OP_SHL }, { ">>=", T_OPASSIGN, OP_SHR },
	{ "+=", T_OPASSIGN, OP_ADD }, { "-=", T_OPASSIGN, OP_SUB },
	{ "*=", T_OPASSIGN, OP_MUL }, { "/=", T_OPASSIGN, OP_DIV },
	{ "%=", T_OPASSIGN, OP_MOD }, { "&=", T_OPASSIGN, OP_AND },
	{ "|=", T_OPASSIGN, OP_OR }, { "^=", T_OPASSIGN, OP_XOR },
	{ "<<", T_SHL, 0 }, { ">>", T_SHR, 0 }, { "==", T_EQ, 0 }, { "!=", T_NE, 0 },
	{ "<=", T_LE, 0 }, { ">=", T_GE, 0 }, { "&&", T_LAND, 0 }, { "||", T_LOR, 0 },
	{ "++", T_INC, 0 }, { "--", T_DEC, 0 }, { "->", T_ARROW, 0 }, { ".", T_DOT, 0 },
	{ "{", T_LBRACE, 0 }, { "}", T_RBRACE, 0 }, { "(", T_LPAREN, 0 }, { ")", T_RPAREN, 0 },
	{ "[", T_LBRACKET, 0 }, { "]", T_RBRACKET, 0 }, { ",", T_COMMA, 0 }, { ";", T_SEMI, 0 },
	{ "?", T_QUESTION, 0 }, { ":", T_COLON, 0 }, { "/", T_DIV, 0 }, { "+", T_PLUS, 0 },
	{ "-", T_MINUS, 0 }, { "*", T_STAR, 0 }, { "%", T_MOD, 0 }, { "&", T_AMP, 0 },
	{ "|", T_PIPE, 0 }, { "^", T_CARET, 0 }, { "~", T_TILDE, 0 }, { "!", T_BANG, 0 },
	{ "<", T_LT, 0 }, { ">", T_GT, 0 }, { "=", T_ASSIGN, 0 },
};

/* Reads the next token into ps. */
static int next(struct parser *ps)
{
	int c;
	size_t i;

	ps->sval = NULL;
	if (skip_space(ps))
		return -1;
	tok_begin(ps);
	c = peekc(ps, 0);
	if (!c) {
		ps->loc.line = ps->line;	/* the end itself, not its run */
		ps->loc.col = ps->col;
		tok_finish(ps, T_EOF);
		if (ps->loc.col > 1) {
			ps->loc.col--;
			ps->loc.col_end = ps->loc.col + 1;
		}
		return 0;
	}
	if (c == '"')
		return lex_string(ps);
	if (isdigit(c))
		return lex_number(ps);
	if (isalpha(c) || c == '_')
		return lex_word(ps, T_IDENT);
	if (c == '$') {
		advance(ps);
		if (isdigit(peekc(ps, 0))) {
			size_t b = ps->pos;

			while (isdigit(peekc(ps, 0)))
				advance(ps);
			ps->ival = strtol(ps->s + b, NULL, 10);
			tok_finish(ps, T_POS);
			return 0;
		}
		if (peekc(ps, 0) == '#') {	/* $#: how many positional parameters */
			advance(ps);
			ps->ival = ps->p->opts ? ps->p->opts->nparams : 0;
			tok_finish(ps, T_INT);
			return 0;
		}
		if (!isalpha(peekc(ps, 0)) && peekc(ps, 0) != '_') {
			tok_finish(ps, T_BAD);
			prog_error(ps->p, ps->loc, "syntax error, unexpected $");
			return -1;
		}
		return lex_word(ps, T_VAR);
	}
	if (c == '@') {
		advance(ps);
		return lex_word(ps, T_MAP);
	}
	for (i = 0; i < sizeof(puncts) / sizeof(puncts[0]); i++) {
		size_t n = strlen(puncts[i].text);

		if (!strncmp(ps->s + ps->pos, puncts[i].text, n)) {
			while (n--)
				advance(ps);
			ps->op = puncts[i].op;
			tok_finish(ps, puncts[i].t);
			return 0;
		}
	}
	advance(ps);
	tok_finish(ps, T_BAD);
	prog_error(ps->p, ps->loc, "syntax error, unexpected %c", c);
	return -1;
}

/* Whether word is one of the words of list ("a|b|c"); a '#' in the list
 * stands for any digit. */
static bool word_in(const char *word, const char *list)
{
	for (const char *l = list; *l;) {
		const char *w = word;

		while (*l && *l != '|' && *w && (*l == *w || (*l == '#' && isdigit((unsigned char)*w)))) {
			l++;
			w++;
		}
		if (!*w && (!*l || *l == '|'))
			return true;
		while (*l && *l != '|')
			l++;
		if (*l)
			l++;
	}
	return false;
}

/* What bpftrace's lexer calls the current token in its messages: an
 * identifier that names a builtin or a function is one of those. */
static const char *tok_word(const struct parser *ps)
{
	static const char builtins[] =
		"arg#|args|cgroup|comm|cpid|numaid|cpu|ctx|curtask|elapsed|func|gid|nsecs|pid|"
		"probe|rand|retval|sarg#|tid|uid|username";
	static const char calls[] =
		"avg|buf|cat|cgroupid|clear|count|delete|exit|hist|join|kaddr|kptr|ksym|lhist|"
		"macaddr|max|min|ntop|override|print|printf|cgroup_path|reg|signal|sizeof|stats|"
		"str|strerror|strftime|strncmp|strcontains|sum|system|time|uaddr|uptr|usym|zero|"
		"path|unwatch|bswap|skboutput|pton|debugf";

	if (ps->t == T_IDENT && ps->sval) {
		if (word_in(ps->sval, builtins))
			return "builtin";
		if (word_in(ps->sval, calls))
			return "call";
		if (word_in(ps->sval, "kstack|ustack"))
			return "call_builtin";
	}
	return tok_name(ps->t);
}

static int unexpected(struct parser *ps, const char *expecting)
{
	if (ps->t == T_BAD)
		return -1;
	if (expecting)
		prog_error(ps->p, ps->loc, "syntax error, unexpected %s, expecting %s",
			   tok_word(ps), expecting);
	else
		prog_error(ps->p, ps->loc, "syntax error, unexpected %s", tok_word(ps));
	return -1;
}

static struct node *new_node(struct parser *ps, int kind, struct loc loc)
{
	struct node *n = prog_alloc(ps->p, sizeof(*n));

	if (n) {
		n->kind = kind;
		n->loc = loc;
		n->map = -1;
		n->var = -1;
	}
	return n;
}

/* Sets n's depth from its operands; an error past MAX_DEPTH. */
static int deepen(struct parser *ps, struct node *n)
{
	struct node *kids[3] = { n->a, n->b, n->c };
	int d = 0, i;

	for (i = 0; i < 3; i++)
		if (kids[i] && kids[i]->depth > d)
			d = kids[i]->depth;
	for (i = 0; i < n->nargs; i++)
		if (n->args[i]->depth > d)
			d = n->args[i]->depth;
	n->depth = d + 1;
	if (n->depth > MAX_DEPTH) {
		prog_error(ps->p, n->loc, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
		return -1;
	}
	return 0;
}

static int enter(struct parser *ps)
{
	if (++ps->nest > MAX_NEST) {
		prog_error(ps->p, ps->loc, "program nested too deeply (more than %d levels)", MAX_NEST);
		return -1;
	}
	return 0;
}

static struct loc span(struct loc a, struct loc b)
{
	struct loc l = a;

	if (b.line == a.line && b.col_end > a.col_end)
		l.col_end = b.col_end;
	return l;
}

/* Appends n to the list args/nargs of parent. */
#define MAX_ARGS 64

static int add_arg(struct parser *ps, struct node *parent, struct node *n)
{
	struct node **v;

	if (parent->nargs == MAX_ARGS) {
		prog_error(ps->p, n->loc, "too many arguments (at most %d)", MAX_ARGS);
		return -1;
	}
	v = prog_alloc(ps->p, sizeof(*v) * (size_t)(parent->nargs + 1));
	if (!v)
		return -1;
	if (parent->nargs)
		memcpy(v, parent->args, sizeof(*v) * (size_t)parent->nargs);
	v[parent->nargs++] = n;
	parent->args = v;
	return 0;
}

static struct node *parse_expr(struct parser *ps);
static struct node *parse_block(struct parser *ps);

/* Type names of casts: int8..int64, uint8..uint64, optionally with '*'. */
static int type_of_name(const char *s, struct lang_type *t)
{
	static const struct { const char *n; int size, sgn; } types[] = {
		{ "int8", 1, 1 }, { "int16", 2, 1 }, { "int32", 4, 1 }, { "int64", 8, 1 },
		{ "uint8", 1, 0 }, { "uint16", 2, 0 }, { "uint32", 4, 0 }, { "uint64", 8, 0 },
		{ "char", 1, 1 }, { "short", 2, 1 }, { "int", 4, 1 }, { "long", 8, 1 },
		{ "bool", 1, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(s, types[i].n)) {
			t->kind = LANG_T_INT;
			t->size = (uint16_t)types[i].size;
			t->is_signed = (uint8_t)types[i].sgn;
			return 1;
		}
	return 0;
}

/* Whether "( IDENT" starts a cast: IDENT names a type followed by '*' or ')'. */
static int at_cast(struct parser *ps)
{
	size_t i = ps->pos;
	struct lang_type t;
	char name[16];
	size_t n = 0;

	while (ps->s[i] == ' ' || ps->s[i] == '\t')
		i++;
	while ((isalnum((unsigned char)ps->s[i]) || ps->s[i] == '_') && n < sizeof(name) - 1)
		name[n++] = ps->s[i++];
	name[n] = 0;
	if (n == 6 && !strcmp(name, "struct") && (ps->s[i] == ' ' || ps->s[i] == '\t')) {
		/* (struct NAME *): a struct type of the probed object */
		while (ps->s[i] == ' ' || ps->s[i] == '\t')
			i++;
		if (!isalpha((unsigned char)ps->s[i]) && ps->s[i] != '_')
			return 0;
		while (isalnum((unsigned char)ps->s[i]) || ps->s[i] == '_')
			i++;
		while (ps->s[i] == ' ' || ps->s[i] == '\t')
			i++;
		return ps->s[i] == '*';
	}
	if (!n || !type_of_name(name, &t))
		return 0;
	while (ps->s[i] == ' ' || ps->s[i] == '\t')
		i++;
	return ps->s[i] == '*' || ps->s[i] == ')';
}

static struct node *parse_call_args(struct parser *ps, struct node *n)
{
	const char *closer = ps->closer;

	if (next(ps))	/* ( */
		return NULL;
	ps->closer = ") or \",\"";
	if (ps->t != T_RPAREN) {
		for (;;) {
			struct node *a = parse_expr(ps);

			if (!a || add_arg(ps, n, a))
				return NULL;
			if (ps->t == T_COMMA) {
				if (next(ps))
					return NULL;
				continue;
			}
			break;
		}
	}
	ps->closer = closer;
	if (ps->t != T_RPAREN) {
		unexpected(ps, NULL);
		return NULL;
	}
	n->loc = span(n->loc, ps->loc);
	if (next(ps))
		return NULL;
	return n;
}

/* (first, ...): at the first comma. */
static struct node *parse_tuple(struct parser *ps, struct loc open, struct node *first)
{
	struct node *n = new_node(ps, N_TUPLE, open);
	const char *closer = ps->closer;

	if (!n || add_arg(ps, n, first))
		return NULL;
	ps->closer = ") or \",\"";
	while (ps->t == T_COMMA) {
		struct node *a;

		if (next(ps))
			return NULL;
		a = parse_expr(ps);
		if (!a || add_arg(ps, n, a))
			return NULL;
	}
	ps->closer = closer;
	if (ps->t != T_RPAREN) {
		unexpected(ps, ")");
		return NULL;
	}
	n->loc = span(open, ps->loc);
	return next(ps) ? NULL : n;
}

static struct node *parse_map(struct parser *ps)
{
	struct node *n = new_node(ps, N_MAP, ps->loc);
	const char *closer;

	if (!n)
		return NULL;
	n->name = prog_alloc(ps->p, strlen(ps->sval) + 2);
	if (!n->name)
		return NULL;
	n->name[0] = '@';
	strcpy(n->name + 1, ps->sval);
	if (next(ps))
		return NULL;
	if (ps->t != T_LBRACKET)
		return n;
	if (next(ps))
		return NULL;
	closer = ps->closer;
	ps->closer = "] or \",\"";
	for (;;) {
		struct node *k = parse_expr(ps);

		if (!k || add_arg(ps, n, k))
			return NULL;
		if (ps->t == T_COMMA) {
			if (next(ps))
				return NULL;
			continue;
		}
		break;
	}
	ps->closer = closer;
	if (ps->t != T_RBRACKET) {
		unexpected(ps, NULL);
		return NULL;
	}
	n->loc = span(n->loc, ps->loc);
	if (next(ps))
		return NULL;
	return n;
}

/* args->NAME (bpftrace 0.17's form) or args.NAME: a parameter of the
 * probed function by name, resolved by the checker from DWARF.  n is the
 * "args" identifier; it becomes an N_BUILTIN with op -2 and the name. */
static struct node *parse_args_field(struct parser *ps, struct node *n)
{
	if (next(ps))	/* -> or . */
		return NULL;
	if (ps->t != T_IDENT) {
		unexpected(ps, "identifier");
		return NULL;
	}
	n->op = -2;
	n->name = ps->sval;
	n->loc = span(n->loc, ps->loc);
	return next(ps) ? NULL : n;
}

static struct node *parse_primary(struct parser *ps)
{
	struct node *n;

	switch (ps->t) {
	case T_INT:
		n = new_node(ps, N_INT, ps->loc);
		if (!n)
			return NULL;
		n->ival = ps->ival;
		return next(ps) ? NULL : n;
	case T_STR:
		n = new_node(ps, N_STR, ps->loc);
		if (!n)
			return NULL;
		n->name = ps->sval;
		n->slen = ps->slen;
		return next(ps) ? NULL : n;
	case T_POS:
		n = new_node(ps, N_BUILTIN, ps->loc);
		if (!n)
			return NULL;
		n->op = -1;	/* positional: resolved by the checker */
		n->ival = ps->ival;
		return next(ps) ? NULL : n;
	case T_VAR:
		n = new_node(ps, N_VAR, ps->loc);
		if (!n)
			return NULL;
		n->name = ps->sval;
		return next(ps) ? NULL : n;
	case T_MAP:
		return parse_map(ps);
	case T_IDENT:
		n = new_node(ps, N_BUILTIN, ps->loc);
		if (!n)
			return NULL;
		n->name = ps->sval;
		if (next(ps))
			return NULL;
		if (ps->t == T_LPAREN) {
			n->kind = N_CALL;
			n->slen = (size_t)n->loc.col_end;	/* end of the name */
			return parse_call_args(ps, n);
		}
		if (!strcmp(n->name, "args") && (ps->t == T_ARROW || ps->t == T_DOT))
			return parse_args_field(ps, n);
		return n;
	case T_LPAREN: {
		struct loc l = ps->loc;
		const char *closer = ps->closer;

		if (next(ps))
			return NULL;
		ps->closer = ") or \",\"";
		n = parse_expr(ps);
		ps->closer = closer;
		if (!n)
			return NULL;
		if (ps->t == T_COMMA)
			return parse_tuple(ps, l, n);
		if (ps->t != T_RPAREN) {
			unexpected(ps, ")");
			return NULL;
		}
		return next(ps) ? NULL : n;
	}
	default:
		unexpected(ps, NULL);
		return NULL;
	}
}

static struct node *parse_postfix(struct parser *ps)
{
	struct node *n = parse_primary(ps);

	while (n && (ps->t == T_INC || ps->t == T_DEC)) {
		struct node *m;

		/* bpftrace's grammar has ++ and -- after a map, a variable or
		 * an identifier only: anything else is a syntax error */
		if (n->kind != N_VAR && n->kind != N_MAP &&
		    (n->kind != N_BUILTIN || n->op == -1)) {
			prog_error(ps->p, span(n->loc, ps->loc),
				   "syntax error, unexpected %s, expecting %s",
				   ps->t == T_INC ? "++" : "--", ps->closer ? ps->closer : "}");
			return NULL;
		}
		m = new_node(ps, N_INCDEC, span(n->loc, ps->loc));
		if (!m)
			return NULL;
		m->op = ps->t == T_INC ? OP_ADD : OP_SUB;
		m->post = 1;
		m->a = n;
		n = m;
		if (deepen(ps, n))
			return NULL;
		if (next(ps))
			return NULL;
	}
	/* Fields, after a cast to a struct type (the checker says where
	 * else they make no sense). */
	while (n && (ps->t == T_ARROW || ps->t == T_DOT)) {
		struct node *m = new_node(ps, N_FIELD, n->loc);

		if (!m)
			return NULL;
		m->op = ps->t == T_ARROW;
		m->a = n;
		if (next(ps))
			return NULL;
		if (!m->op && ps->t == T_INT) {		/* a tuple's part */
			m->kind = N_TUPLE_GET;
			m->ival = ps->ival;
			m->loc = span(n->loc, ps->loc);
			n = m;
			if (deepen(ps, n) || next(ps))
				return NULL;
			continue;
		}
		if (ps->t != T_IDENT) {
			unexpected(ps, "identifier");
			return NULL;
		}
		m->name = ps->sval;
		m->loc = span(n->loc, ps->loc);
		n = m;
		if (deepen(ps, n) || next(ps))
			return NULL;
	}
	if (n && ps->t == T_LBRACKET) {
		prog_error(ps->p, ps->loc, "array indexing is not supported");
		return NULL;
	}
	if (n && ps->t == T_IDENT && n->kind == N_BUILTIN) {
		unexpected(ps, NULL);
		return NULL;
	}
	return n;
}

static struct node *parse_unary_in(struct parser *ps);

static struct node *parse_unary(struct parser *ps)
{
	struct node *n;

	if (enter(ps))
		return NULL;
	n = parse_unary_in(ps);
	ps->nest--;
	if (n && deepen(ps, n))
		return NULL;
	return n;
}

static struct node *parse_unary_in(struct parser *ps)
{
	struct loc l = ps->loc;
	struct node *n, *a;
	int op;

	switch (ps->t) {
	case T_MINUS: op = OP_NEG; break;
	case T_TILDE: op = OP_NOT; break;
	case T_BANG: op = OP_LNOT; break;
	case T_STAR:
		if (next(ps))
			return NULL;
		a = parse_unary(ps);
		if (!a)
			return NULL;
		n = new_node(ps, N_DEREF, span(l, a->loc));
		if (n)
			n->a = a;
		return n;
	case T_INC:
	case T_DEC:
		op = ps->t == T_INC ? OP_ADD : OP_SUB;
		if (next(ps))
			return NULL;
		/* as after it: a map, a variable or an identifier */
		if (ps->t != T_VAR && ps->t != T_MAP && ps->t != T_IDENT) {
			unexpected(ps, NULL);
			return NULL;
		}
		a = parse_unary(ps);
		if (!a)
			return NULL;
		n = new_node(ps, N_INCDEC, span(l, a->loc));
		if (n) {
			n->op = op;
			n->a = a;
		}
		return n;
	case T_LPAREN:
		if (at_cast(ps)) {
			struct lang_type t = { 0 };
			char *sname = NULL;
			struct loc tl;
			int ptr = 0;

			if (next(ps))
				return NULL;
			if (!strcmp(ps->sval, "struct")) {
				if (next(ps))
					return NULL;
				sname = ps->sval;
				t.kind = LANG_T_INT;
				t.size = 8;	/* *p reads a word, as for any pointer */
			} else {
				type_of_name(ps->sval, &t);
			}
			if (next(ps))
				return NULL;
			while (ps->t == T_STAR) {
				ptr++;
				if (next(ps))
					return NULL;
			}
			if (ps->t != T_RPAREN) {
				unexpected(ps, ")");
				return NULL;
			}
			tl = span(l, ps->loc);	/* "(TYPE)", where bpftrace points */
			if (next(ps))
				return NULL;
			a = parse_unary(ps);
			if (!a)
				return NULL;
			if (ptr > 1) {
				prog_error(ps->p, l, "pointers to pointers are not supported");
				return NULL;
			}
			n = new_node(ps, N_CAST, span(l, a->loc));
			if (!n)
				return NULL;
			n->a = a;
			n->cast = t;
			n->post = ptr;	/* a pointer cast: the deref size is cast.size */
			n->name = sname;	/* a struct type's name, or NULL */
			n->ival = tl.line == l.line ? tl.col_end : 0;
			return n;
		}
		return parse_postfix(ps);
	default:
		return parse_postfix(ps);
	}
	if (next(ps))
		return NULL;
	a = parse_unary(ps);
	if (!a)
		return NULL;
	n = new_node(ps, N_UNOP, l);
	if (n) {
		n->op = op;
		n->a = a;
	}
	return n;
}

/* Binary operators by precedence level, lowest first. */
struct binop {
	enum tok t;
	int op;
	int level;
};

static const struct binop binops[] = {
	{ T_LOR, OP_LOR, 1 }, { T_LAND, OP_LAND, 2 }, { T_PIPE, OP_OR, 3 },
	{ T_CARET, OP_XOR, 4 }, { T_AMP, OP_AND, 5 },
	{ T_EQ, OP_EQ, 6 }, { T_NE, OP_NE, 6 },
	{ T_LT, OP_LT, 7 }, { T_LE, OP_LE, 7 }, { T_GT, OP_GT, 7 }, { T_GE, OP_GE, 7 },
	{ T_SHL, OP_SHL, 8 }, { T_SHR, OP_SHR, 8 },
	{ T_PLUS, OP_ADD, 9 }, { T_MINUS, OP_SUB, 9 },
	{ T_STAR, OP_MUL, 10 }, { T_DIV, OP_DIV, 10 }, { T_MOD, OP_MOD, 10 },
};

static const struct binop *binop_of(enum tok t)
{
	size_t i;

	for (i = 0; i < sizeof(binops) / sizeof(binops[0]); i++)
		if (binops[i].t == t)
			return &binops[i];
	return NULL;
}

/* In a predicate the closing '/' is not a division. */
static struct node *parse_binary(struct parser *ps, int level, int in_pred)
{
	struct node *l;

	if (level > 10)
		return parse_unary(ps);
	l = parse_binary(ps, level + 1, in_pred);
	while (l) {
		const struct binop *b = binop_of(ps->t);
		struct loc oploc = ps->loc;
		struct node *r, *n;

		if (!b || b->level != level || (in_pred && ps->t == T_DIV))
			break;
		if (next(ps))
			return NULL;
		r = parse_binary(ps, level + 1, in_pred);
		if (!r)
			return NULL;
		n = new_node(ps, N_BINOP, span(l->loc, r->loc));
		if (!n)
			return NULL;
		n->op = b->op;
		n->a = l;
		n->b = r;
		n->c = (struct node *)NULL;
		n->ival = ((int64_t)oploc.col << 32) | (uint32_t)oploc.col_end;
		if (deepen(ps, n))
			return NULL;
		l = n;
	}
	return l;
}

static struct node *parse_ternary_in(struct parser *ps, int in_pred);

static struct node *parse_ternary(struct parser *ps, int in_pred)
{
	struct node *n;

	if (enter(ps))
		return NULL;
	n = parse_ternary_in(ps, in_pred);
	ps->nest--;
	if (n && deepen(ps, n))
		return NULL;
	return n;
}

static struct node *parse_ternary_in(struct parser *ps, int in_pred)
{
	struct node *c = parse_binary(ps, 1, in_pred), *a, *b, *n;

	const char *closer = ps->closer;

	if (!c || ps->t != T_QUESTION)
		return c;
	if (next(ps))
		return NULL;
	ps->closer = ":";
	a = parse_ternary(ps, in_pred);
	ps->closer = closer;
	if (!a)
		return NULL;
	if (ps->t != T_COLON) {
		unexpected(ps, ":");
		return NULL;
	}
	if (next(ps))
		return NULL;
	b = parse_ternary(ps, in_pred);
	if (!b)
		return NULL;
	n = new_node(ps, N_TERNARY, span(c->loc, b->loc));
	if (n) {
		n->a = c;
		n->b = a;
		n->c = b;
	}
	return n;
}

static struct node *parse_expr(struct parser *ps)
{
	struct node *n;

	if (enter(ps))
		return NULL;
	n = parse_ternary(ps, 0);
	ps->nest--;
	if (n && deepen(ps, n))
		return NULL;
	return n;
}

static struct node *parse_paren_cond(struct parser *ps)
{
	struct node *c;

	if (ps->t != T_LPAREN) {
		unexpected(ps, "(");
		return NULL;
	}
	const char *closer = ps->closer;

	if (next(ps))
		return NULL;
	ps->closer = ")";
	c = parse_expr(ps);
	ps->closer = closer;
	if (!c)
		return NULL;
	if (ps->t != T_RPAREN) {
		unexpected(ps, ")");
		return NULL;
	}
	return next(ps) ? NULL : c;
}

static struct node *parse_stmt(struct parser *ps)
{
	struct loc l = ps->loc;
	struct node *n, *e;

	if (ps->t == T_IDENT && !strcmp(ps->sval, "if")) {
		n = new_node(ps, S_IF, l);
		if (!n || next(ps))
			return NULL;
		n->a = parse_paren_cond(ps);
		if (!n->a)
			return NULL;
		n->b = parse_block(ps);
		if (!n->b && ps->p->failed)
			return NULL;
		if (ps->t == T_IDENT && !strcmp(ps->sval, "else")) {
			if (next(ps))
				return NULL;
			if (ps->t == T_IDENT && !strcmp(ps->sval, "if")) {
				if (enter(ps))
					return NULL;
				n->c = parse_stmt(ps);
				ps->nest--;
				if (!n->c)
					return NULL;
			} else {
				n->c = parse_block(ps);
				if (!n->c && ps->p->failed)
					return NULL;
				if (!n->c) {
					/* an empty else: keep a marker-free NULL */
				}
			}
		}
		return n;
	}
	/* bpftrace 0.17 has no for loop: its parser's own words */
	if (ps->t == T_IDENT && !strcmp(ps->sval, "for")) {
		prog_error(ps->p, ps->loc, "syntax error, unexpected for, expecting }");
		return NULL;
	}
	if (ps->t == T_IDENT && (!strcmp(ps->sval, "unroll") || !strcmp(ps->sval, "while"))) {
		int unroll = ps->sval[0] == 'u';

		n = new_node(ps, unroll ? S_UNROLL : S_WHILE, l);
		if (!n || next(ps))
			return NULL;
		if (unroll) {
			if (ps->t != T_LPAREN)
				return unexpected(ps, "("), NULL;
			if (next(ps))
				return NULL;
			if (ps->t != T_INT && ps->t != T_POS)
				return unexpected(ps, "integer"), NULL;
			n->ival = ps->ival;
			n->post = ps->t == T_POS;
			if (next(ps))
				return NULL;
			if (ps->t != T_RPAREN)
				return unexpected(ps, ")"), NULL;
			n->loc = span(l, ps->loc);
			if (next(ps))
				return NULL;
		} else {
			n->a = parse_paren_cond(ps);
			if (!n->a)
				return NULL;
		}
		n->b = parse_block(ps);
		if (!n->b && ps->p->failed)
			return NULL;
		return n;
	}
	if (ps->t == T_IDENT && (!strcmp(ps->sval, "break") || !strcmp(ps->sval, "continue"))) {
		n = new_node(ps, ps->sval[0] == 'b' ? S_BREAK : S_CONTINUE, l);
		if (!n || next(ps))
			return NULL;
		return n;
	}
	if (ps->t == T_IDENT && !strcmp(ps->sval, "return")) {	/* ends this probe's run */
		n = new_node(ps, S_RETURN, l);
		if (!n || next(ps))
			return NULL;
		return n;
	}
	if (ps->t == T_LBRACE) {
		prog_error(ps->p, l, "syntax error, unexpected {");
		return NULL;
	}
	e = parse_expr(ps);
	if (!e)
		return NULL;
	if (ps->t == T_ASSIGN || ps->t == T_OPASSIGN) {
		int op = ps->t == T_OPASSIGN ? ps->op : 0;
		struct loc eq = ps->loc;

		if (e->kind != N_MAP && e->kind != N_VAR) {
			unexpected(ps, NULL);
			return NULL;
		}
		if (next(ps))
			return NULL;
		n = new_node(ps, S_ASSIGN, e->loc);
		if (!n)
			return NULL;
		n->a = e;
		n->op = op;
		n->ival = ((int64_t)eq.col << 32) | (uint32_t)eq.col_end;
		n->b = parse_expr(ps);
		if (!n->b)
			return NULL;
		return n;
	}
	n = new_node(ps, S_EXPR, e->loc);
	if (n)
		n->a = e;
	return n;
}

/* { stmt; stmt; ... }: returns the list (NULL for an empty block, with
 * ps->p->failed telling an error apart). */
static struct node *parse_block_at(struct parser *ps, int top);

static struct node *parse_block(struct parser *ps)
{
	return parse_block_at(ps, 0);
}

/* A probe's body ends with its '}': the next probe is scanned raw. */
static struct node *parse_block_in(struct parser *ps, int top);

static struct node *parse_block_at(struct parser *ps, int top)
{
	struct node *n;

	if (enter(ps))
		return NULL;
	n = parse_block_in(ps, top);
	ps->nest--;
	return n;
}

static struct node *parse_block_in(struct parser *ps, int top)
{
	struct node *head = NULL, **tail = &head;

	if (ps->t != T_LBRACE) {
		unexpected(ps, "{");
		return NULL;
	}
	if (next(ps))
		return NULL;
	while (ps->t != T_RBRACE) {
		struct node *s;
		int needs_semi;

		if (ps->t == T_EOF) {
			unexpected(ps, "}");
			return NULL;
		}
		if (ps->t == T_SEMI) {
			if (next(ps))
				return NULL;
			continue;
		}
		s = parse_stmt(ps);
		if (!s)
			return NULL;
		*tail = s;
		tail = &s->next;
		needs_semi = s->kind != S_IF && s->kind != S_UNROLL && s->kind != S_WHILE;
		if (ps->t == T_SEMI) {
			if (next(ps))
				return NULL;
		} else if (ps->t != T_RBRACE && needs_semi) {
			unexpected(ps, "}");
			return NULL;
		}
	}
	if (!top && next(ps))
		return NULL;
	return head;
}

/* ---- probes ---- */

static int probe_char(int c)
{
	return c && !isspace(c) && c != ',' && c != '{';
}

static int parse_uint(const char *s, uint64_t *out)
{
	char *e;

	if (!*s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*out = strtoull(s, &e, 0);
	return *e || errno ? -1 : 0;
}

/* Splits a probe's text into its parts; unknown kinds are the checker's
 * to report. */
static int parse_attach(struct parser *ps, struct attach *a)
{
	char *parts[5] = { 0 };
	int n = 0;
	char *s = prog_strndup(ps->p, a->text, strlen(a->text));
	const char *kind;

	if (!s)
		return -1;
	/* fields split on ':' outside quotes, and the quotes taken out (a
	 * path holds no ':' in practice; a C++ name quoted may) */
	parts[n++] = s;
	for (char *r = s, *w = s; ; r++) {
		if (*r == '"') {
			for (r++; *r && *r != '"'; r++)
				*w++ = *r;
			continue;
		}
		if (*r == ':' && n < 5) {
			*w++ = 0;
			parts[n++] = w;
			continue;
		}
		*w++ = *r;
		if (!*r)
			break;
	}
	kind = parts[0];
	a->target = a->func = a->provider = "";
	if (!strcmp(kind, "BEGIN") && n == 1) {
		a->kind = LANG_P_BEGIN;
	} else if (!strcmp(kind, "END") && n == 1) {
		a->kind = LANG_P_END;
	} else if ((!strcmp(kind, "uprobe") || !strcmp(kind, "u") ||
		    !strcmp(kind, "uretprobe") || !strcmp(kind, "ur")) && n == 3) {
		char *plus = strchr(parts[2], '+');

		a->kind = !strcmp(kind, "uretprobe") || !strcmp(kind, "ur") ?
			  LANG_P_URETPROBE : LANG_P_UPROBE;
		a->target = parts[1];
		if (plus) {
			uint64_t off;

			*plus = 0;
			if (parse_uint(plus + 1, &off) || off > UINT32_MAX) {
				prog_error(ps->p, a->loc, "invalid offset in probe: %s", a->text);
				return -1;
			}
			if (a->kind == LANG_P_URETPROBE) {
				prog_error(ps->p, a->loc, "uretprobe can not take an offset");
				return -1;
			}
			a->offset = (uint32_t)off;
		}
		a->func = parts[2];
		if (!*a->target || !*a->func) {
			prog_error(ps->p, a->loc, "invalid probe: %s", a->text);
			return -1;
		}
	} else if ((!strcmp(kind, "usdt") || !strcmp(kind, "U")) && (n == 3 || n == 4)) {
		a->kind = LANG_P_USDT;
		a->target = parts[1];
		a->provider = n == 4 ? parts[2] : "";
		a->func = parts[n - 1];
	} else if ((!strcmp(kind, "interval") || !strcmp(kind, "i")) && n == 3) {
		uint64_t v, mul;

		if (!strcmp(parts[1], "s"))
			mul = 1000000000ull;
		else if (!strcmp(parts[1], "ms"))
			mul = 1000000ull;
		else if (!strcmp(parts[1], "us"))
			mul = 1000ull;
		else if (!strcmp(parts[1], "hz"))
			mul = 0;
		else {
			prog_error(ps->p, a->loc, "interval probe unit not supported: %s", parts[1]);
			return -1;
		}
		if (parse_uint(parts[2], &v) || !v || (mul && v > UINT64_MAX / mul)) {
			prog_error(ps->p, a->loc, "interval probe needs a positive count: %s", a->text);
			return -1;
		}
		a->kind = LANG_P_INTERVAL;
		a->interval_ns = mul ? v * mul : 1000000000ull / (v ? v : 1);
		if (!a->interval_ns)
			a->interval_ns = 1;
	} else if (n == 2 && (strchr(kind, '/') || strchr(kind, '.'))) {
		/* the PROBE syntax of `kprobe count`: OBJ:FUNC */
		a->kind = LANG_P_UPROBE;
		a->target = parts[0];
		a->func = parts[1];
	} else {
		a->kind = 0;	/* the checker names it */
		a->target = parts[0];
	}
	return 0;
}

static int parse_probe(struct parser *ps, struct probe **out)
{
	struct probe *pr = prog_alloc(ps->p, sizeof(*pr));
	int cap = 0;

	if (!pr)
		return -1;
	for (;;) {
		struct attach *a;
		size_t b;
		int bline, bcol;

		if (skip_space(ps))
			return -1;
		tok_begin(ps);
		b = ps->pos;
		bline = ps->line;
		bcol = ps->col;
		/* a quoted part may hold anything but a quote (bpftrace's
		 * uprobe:lib:"ns::f(int, char)") */
		while (probe_char(peekc(ps, 0))) {
			if (peekc(ps, 0) != '"') {
				advance(ps);
				continue;
			}
			advance(ps);
			while (peekc(ps, 0) && peekc(ps, 0) != '"')
				advance(ps);
			if (!peekc(ps, 0)) {
				tok_finish(ps, T_IDENT);
				prog_error(ps->p, ps->loc, "unterminated string");
				return -1;
			}
			advance(ps);
		}
		tok_finish(ps, T_IDENT);
		if (ps->pos == b || !(isalnum((unsigned char)ps->s[b]) || ps->s[b] == '/' ||
				      ps->s[b] == '.' || ps->s[b] == '_' || ps->s[b] == '*')) {
			/* back to where the probe would have begun (its run may
			 * have begun before: "};" is one, as bpftrace's lexer
			 * locates it) */
			ps->pos = b;
			ps->line = bline;
			ps->col = bcol;
			if (next(ps))
				return -1;
			return unexpected(ps, "{");
		}
		if (pr->natt == cap) {
			struct attach *v;

			cap = cap ? cap * 2 : 4;
			v = prog_alloc(ps->p, sizeof(*v) * (size_t)cap);
			if (!v)
				return -1;
			if (pr->natt)
				memcpy(v, pr->att, sizeof(*v) * (size_t)pr->natt);
			pr->att = v;
		}
		a = &pr->att[pr->natt++];
		a->loc = ps->loc;
		a->text = prog_strndup(ps->p, ps->s + b, ps->pos - b);
		if (!a->text || parse_attach(ps, a))
			return -1;
		if (next(ps))
			return -1;
		if (ps->t != T_COMMA)
			break;
	}
	if (ps->t == T_DIV) {
		pr->pred_loc = ps->loc;
		if (next(ps))
			return -1;
		ps->closer = "end predicate";
		pr->pred = parse_ternary(ps, 1);
		ps->closer = NULL;
		if (!pr->pred)
			return -1;
		if (ps->t != T_DIV)
			return unexpected(ps, "/");
		if (ps->loc.line == pr->pred_loc.line)
			pr->pred_loc.col_end = ps->loc.col_end;
		else
			pr->pred_loc = pr->pred->loc;
		if (next(ps))
			return -1;
	}
	if (ps->t != T_LBRACE) {
		if (ps->t == T_EOF)
			prog_error(ps->p, pr->att[pr->natt - 1].loc, "unexpected end of file, expected {");
		else
			unexpected(ps, "{");
		return -1;
	}
	pr->body = parse_block_at(ps, 1);
	if (!pr->body && ps->p->failed)
		return -1;
	*out = pr;
	return 0;
}

int lang_parse(struct prog *p)
{
	struct parser ps = { .p = p, .s = p->src, .line = 1, .col = 1 };
	struct probe **tail = &p->probes;

	for (;;) {
		struct probe *pr;

		if (skip_space(&ps))
			return -1;
		if (!peekc(&ps, 0))
			break;
		if (peekc(&ps, 0) == '#') {
			tok_begin(&ps);
			while (peekc(&ps, 0) && peekc(&ps, 0) != '\n')
				advance(&ps);
			tok_finish(&ps, T_BAD);
			prog_error(p, ps.loc, "#include and preprocessor directives are not supported");
			return -1;
		}
		if (!strncmp(ps.s + ps.pos, "struct", 6) && !isalnum(peekc(&ps, 6)) &&
		    peekc(&ps, 6) != '_') {
			tok_begin(&ps);
			for (int k = 0; k < 6; k++)
				advance(&ps);
			tok_finish(&ps, T_BAD);
			prog_error(p, ps.loc, "struct definitions are not supported (casts to the "
				   "probed object's DWARF struct types are)");
			return -1;
		}
		if (parse_probe(&ps, &pr))
			return -1;
		*tail = pr;
		tail = &pr->next;
		ps.probe_index++;
	}
	if (!p->probes) {
		struct loc l = { ps.line, ps.col, ps.col + 1 };

		prog_error(p, l, "No probes to attach");
		return -1;
	}
	return 0;
}
