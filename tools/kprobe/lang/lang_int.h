/* The language's internals shared by its compiler passes (tool side). */
#ifndef KPROBE_LANG_INT_H
#define KPROBE_LANG_INT_H

#include "lang.h"

/* A source range: 1-based line, columns [col, col_end). */
struct loc {
	int line, col, col_end;
};

enum node_kind {
	/* expressions */
	N_INT, N_STR, N_BUILTIN, N_VAR, N_MAP, N_BINOP, N_UNOP, N_TERNARY,
	N_CALL, N_CAST, N_DEREF, N_INCDEC,
	/* statements */
	S_EXPR, S_ASSIGN, S_IF, S_UNROLL, S_WHILE, S_BREAK, S_CONTINUE, S_RETURN,
	/* EXPR->FIELD, EXPR.FIELD on a cast to a struct type of the probed
	 * object's DWARF (name: the field, op: 1 for ->): the checker turns
	 * it into address arithmetic and a load (check.c, check_field). */
	N_FIELD,
	/* (a, b, ...): args the parts; EXPR.N: a the tuple, ival N */
	N_TUPLE, N_TUPLE_GET,
};

/* Operators (token values double as them). */
enum {
	OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_AND, OP_OR, OP_XOR,
	OP_SHL, OP_SHR, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE,
	OP_LAND, OP_LOR, OP_NEG, OP_NOT, OP_LNOT,
};

/* Builtin identifiers. */
enum builtin {
	B_PID = 1, B_TID, B_UID, B_CPU, B_NSECS, B_ELAPSED, B_COMM, B_FUNC,
	B_PROBE, B_ARG, B_RETVAL, B_USTACK,
	B_GID, B_RAND, B_NUMAID, B_CPID,
	B_SARG,			/* sarg0..sarg5: ival the number */
};

/* Map-value kinds known to the checker, in lang_map_kind terms; 0 unset. */
struct node {
	int kind;
	int op;			/* operator, builtin, or assignment's compound op */
	struct loc loc;
	struct node *a, *b, *c;	/* operands; if: cond, then, else */
	struct node **args;	/* call arguments, map keys, block statements */
	int nargs;
	char *name;		/* variable/map/function name; string literal */
	size_t slen;		/* string literal length */
	int64_t ival;		/* integer literal, arg number, unroll count */
	int post;		/* N_INCDEC: postfix */
	int depth;		/* of the expression tree below, bounded */
	int none;		/* checker: bpftrace's type 'none', a value read from a
				 * map nothing assigns (or from what one was assigned) */
	uint8_t agg;		/* checker: an aggregate's value (LANG_M_COUNT...,
				 * bpftrace's types 'count', 'hist', ...): a read of
				 * such a map, or what one was assigned to */
	uint8_t unreadable;	/* checker: a read of a hist, lhist or stats map,
				 * which has no value to compute with */
	struct lang_type type;	/* set by the checker */
	struct lang_type cast;	/* N_CAST/N_DEREF target; ptr: deref size */
	int map;		/* N_MAP / map calls: map index */
	int var;		/* N_VAR: variable index */
	struct node *next;	/* statement lists */
};

struct attach {
	struct loc loc;
	char *text;		/* as written */
	int kind;		/* enum lang_probe_kind, 0: unknown */
	char *target, *func, *provider;
	uint32_t offset;
	uint64_t interval_ns;
};

struct probe {
	struct attach *att;
	int natt;
	struct node *pred;
	struct loc pred_loc;	/* "/ ... /", both slashes, as bpftrace points at it */
	struct node *body;	/* statement list */
	struct probe *next;
};

struct var {
	char *name;
	struct lang_type type;
	struct lang_type decl;	/* as first assigned, for messages */
	int reg;		/* integer variables */
	int off;		/* others: scratch offset */
	int probe;		/* scratch variables are per probe block */
	int none;		/* assigned a value of type 'none' */
	uint8_t agg;		/* assigned an aggregate's value (node.agg) */
};

struct mapinfo {
	char *name;
	struct lang_map_desc d;
	struct lang_type decl[LANG_MAX_KEY_PARTS];	/* key types as first used */
	int used_as_value;	/* read as an expression */
	int key_known, val_known;
	int sign_known;		/* a sum's sign taken from its first use */
	int none;		/* assigned only values of type 'none' (said there) */
	struct loc first;
};

/* The parts of a tuple type, which a lang_type of kind LANG_T_TUPLE names
 * by index (in its is_signed byte): equal shapes share one index. */
#define LANG_MAX_SHAPES 64
struct tuple_shape {
	int n;
	struct lang_type parts[LANG_MAX_TUPLE];	/* storage types */
};

struct fmtinfo {
	char *fmt;
	struct lang_fmt_desc d;
};

struct prog {
	const char *src;
	const char *filename;
	const struct lang_compile_opts *opts;
	struct probe *probes;
	struct var *vars;
	int nvars, cvars;
	struct mapinfo *maps;
	int nmaps, cmaps;
	struct fmtinfo *fmts;
	int nfmts, cfmts;
	struct tuple_shape shapes[LANG_MAX_SHAPES];
	int nshapes;
	struct lang_error *err;
	int failed;
	/* the checker runs: every error of a pass is reported, not only
	 * the first (the parser stops at its first) */
	bool all_errors;
	/* allocations, freed together */
	void **allocs;
	int nallocs, callocs;
};

void *prog_alloc(struct prog *p, size_t n);
char *prog_strndup(struct prog *p, const char *s, size_t n);
void prog_error(struct prog *p, struct loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* prog_error() that returns 1: `bad = prog_error_n(...)` where several
 * checks each report. */
int prog_error_n(struct prog *p, struct loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A warning, as bpftrace prints it, to opts->warning (if any). */
void prog_warning(struct prog *p, struct loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

int lang_parse(struct prog *p);
int lang_check(struct prog *p);
int lang_codegen(struct prog *p, void **image, size_t *len);

/* The next printf conversion token of s at or after from, as bpftrace's
 * pattern finds them: [*start, *end), its conversion and whether it has a
 * 64-bit length modifier.  0 when there is none. */
int lang_fmt_token(const char *s, size_t from, size_t *start, size_t *end, char *conv, int *wide);


#endif
