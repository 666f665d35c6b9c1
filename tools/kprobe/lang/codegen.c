/* Code generation: a checked program to the image of lang.h.
 *
 * Integer values live in registers (scratch variables of a block own the
 * lowest ones, temporaries are stacked above them and released at the end
 * of each statement); strings, stacks, keys and printf records live in the
 * scratch area, laid out by a bump allocator with the same discipline.
 * Loops: unroll(N) repeats its body; while() tests at the top and jumps
 * back with LOOP, which the VM pays for out of a per-run budget. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kp_arch.h"
#include "lang_int.h"

struct val {
	int reg;	/* integer-like values */
	int off;	/* scratch values (strings, stacks) */
};

struct loopctx {
	int top;
	int *breaks;
	int nbreaks;
	struct loopctx *up;
};

struct gen {
	struct prog *p;
	struct lang_insn *code;
	int n, cap;
	int reg_top, reg_hw;
	int stk_top, stk_hw;
	char *pool;
	size_t pool_len, pool_cap;
	struct loopctx *loop;
	struct lang_probe_desc *probes;
	int nprobes;
	int block;
};

static int emit(struct gen *g, int op, int dst, int a, int b, uint32_t aux, int64_t imm)
{
	if (g->n == LANG_MAX_INSNS) {
		struct loc l = { 1, 1, 2 };

		if (!g->p->failed)
			prog_error(g->p, l, "the program is too large (more than %d instructions)", LANG_MAX_INSNS);
		return -1;
	}
	if (g->n == g->cap) {
		int cap = g->cap ? g->cap * 2 : 256;
		struct lang_insn *v = realloc(g->code, sizeof(*v) * (size_t)cap);

		if (!v)
			return -1;
		g->code = v;
		g->cap = cap;
	}
	g->code[g->n] = (struct lang_insn){ (uint8_t)op, (uint8_t)dst, (uint8_t)a, (uint8_t)b, aux, imm };
	return g->n++;
}

static uint32_t pool_add(struct gen *g, const char *s, size_t len)
{
	uint32_t off;

	if (g->pool_len + len + 1 > g->pool_cap) {
		size_t cap = (g->pool_cap ? g->pool_cap * 2 : 1024) + len + 1;
		char *v = realloc(g->pool, cap);

		if (!v)
			return UINT32_MAX;
		g->pool = v;
		g->pool_cap = cap;
	}
	off = (uint32_t)g->pool_len;
	memcpy(g->pool + off, s, len);
	g->pool[off + len] = 0;
	g->pool_len += len + 1;
	return off;
}

static int tmp_reg(struct gen *g, struct loc l)
{
	if (g->reg_top == LANG_MAX_REGS) {
		if (!g->p->failed)
			prog_error(g->p, l, "expression too complex (more than %d registers)", LANG_MAX_REGS);
		return -1;
	}
	if (g->reg_top + 1 > g->reg_hw)
		g->reg_hw = g->reg_top + 1;
	return g->reg_top++;
}

static int tmp_stack(struct gen *g, int size, struct loc l)
{
	int off = g->stk_top;

	size = (size + 7) & ~7;
	if (g->stk_top + size > LANG_MAX_STACK) {
		if (!g->p->failed)
			prog_error(g->p, l, "the probe needs too much scratch space (more than %d bytes)", LANG_MAX_STACK);
		return -1;
	}
	g->stk_top += size;
	if (g->stk_top > g->stk_hw)
		g->stk_hw = g->stk_top;
	return off;
}

static int is_reg_type(const struct lang_type *t)
{
	return t->kind == LANG_T_INT || t->kind == LANG_T_USYM || t->kind == LANG_T_PROBE;
}

static int storage_size(const struct lang_type *t)
{
	switch (t->kind) {
	case LANG_T_TUPLE: return t->size;	/* its parts' */
	case LANG_T_STR: return LANG_STRLEN;
	case LANG_T_USTACK:
	case LANG_T_USTACK_PERF: return 8 + 8 * LANG_USTACK_MAX;
	case LANG_T_TIMESTAMP: return 16;
	case LANG_T_BUF: return LANG_BUF_SIZE;
	default: return 8;
	}
}

static int gen_expr(struct gen *g, struct node *n, struct val *v);
static int gen_stmts(struct gen *g, struct node *s);

/* Stores value v of type t at scratch offset off. */
static int store_val(struct gen *g, const struct lang_type *t, struct val v, int off)
{
	if (is_reg_type(t))
		return emit(g, LANG_OP_STST, 0, v.reg, 0, (uint32_t)off, 0) < 0 ? -1 : 0;
	if (v.off == off)
		return 0;
	return emit(g, LANG_OP_STCPY, 0, 0, 0, (uint32_t)off,
		    (int64_t)((uint64_t)(uint32_t)v.off | ((uint64_t)storage_size(t) << 32))) < 0 ? -1 : 0;
}

/* Builds the key of map access m in scratch; returns its offset (0 for a
 * keyless map). */
static int gen_key(struct gen *g, struct node *m)
{
	struct mapinfo *mi = &g->p->maps[m->map];
	int off, part = 0, i;

	if (!mi->d.nkeys)
		return 0;
	off = tmp_stack(g, mi->d.key_size, m->loc);
	if (off < 0)
		return -1;
	for (i = 0; i < m->nargs; i++) {
		struct val v;

		if (gen_expr(g, m->args[i], &v) || store_val(g, &m->args[i]->type, v, off + part))
			return -1;
		part += mi->d.keys[i].size;
	}
	return off;
}

static int emit_jump(struct gen *g, int op, int a)
{
	return emit(g, op, 0, a, 0, 0, 0);
}

static void patch(struct gen *g, int at, int target)
{
	g->code[at].aux = (uint32_t)target;
}

static int gen_map_read(struct gen *g, struct node *n, struct val *v)
{
	struct mapinfo *mi = &g->p->maps[n->map];
	int key = gen_key(g, n);

	if (key < 0)
		return -1;
	if (is_reg_type(&n->type)) {
		v->reg = tmp_reg(g, n->loc);
		if (v->reg < 0)
			return -1;
		return emit(g, LANG_OP_MAP_GET, v->reg, 0, n->map, (uint32_t)key, 0) < 0 ? -1 : 0;
	}
	v->off = tmp_stack(g, (int)mi->d.val_size, n->loc);
	if (v->off < 0)
		return -1;
	return emit(g, LANG_OP_MAP_GETX, 0, 0, n->map, (uint32_t)key, v->off) < 0 ? -1 : 0;
}

static int ctx_src(int builtin)
{
	switch (builtin) {
	case B_PID: return LANG_SRC_PID;
	case B_TID: return LANG_SRC_TID;
	case B_UID: return LANG_SRC_UID;
	case B_CPU: return LANG_SRC_CPU;
	case B_NSECS: return LANG_SRC_NSECS;
	case B_ELAPSED: return LANG_SRC_ELAPSED;
	case B_ARG: return LANG_SRC_ARG;
	case B_RETVAL: return LANG_SRC_RETVAL;
	case B_FUNC: return LANG_SRC_FUNC;
	case B_PROBE: return LANG_SRC_PROBE;
	case B_GID: return LANG_SRC_GID;
	case B_RAND: return LANG_SRC_RAND;
	case B_NUMAID: return LANG_SRC_NUMA;
	case B_CPID: return LANG_SRC_CPID;
	default: return 0;
	}
}

static int narrow(struct gen *g, int reg, const struct lang_type *t);

/* sargN: the N-th word of the stack at the function's entry, past the
 * return address where the call pushed it (kp_arch.h KP_SARG_SKIP), read
 * as a pointer read is (0 where it faults). */
static int gen_stack_arg(struct gen *g, struct node *n, int reg)
{
	int off = tmp_reg(g, n->loc);

	if (off < 0 || emit(g, LANG_OP_REG, reg, 0, 0, offsetof(struct pt_regs, sp), 0) < 0 ||
	    emit(g, LANG_OP_MOVI, off, 0, 0, 0, 8 * (n->ival + KP_SARG_SKIP)) < 0 ||
	    emit(g, LANG_OP_ADD, reg, reg, off, 0, 0) < 0)
		return -1;
	return emit(g, LANG_OP_LOAD, reg, reg, 0, 8, 0) < 0 ? -1 : 0;
}

static int gen_builtin(struct gen *g, struct node *n, struct val *v)
{
	if (n->op == B_COMM) {
		v->off = tmp_stack(g, LANG_STRLEN, n->loc);
		if (v->off < 0)
			return -1;
		return emit(g, LANG_OP_COMM, 0, 0, 0, (uint32_t)v->off, 0) < 0 ? -1 : 0;
	}
	if (n->op == B_USTACK) {
		v->off = tmp_stack(g, 8 + 8 * LANG_USTACK_MAX, n->loc);
		if (v->off < 0)
			return -1;
		return emit(g, LANG_OP_USTACK, 0, 0, 0, (uint32_t)v->off, n->ival) < 0 ? -1 : 0;
	}
	v->reg = tmp_reg(g, n->loc);
	if (v->reg < 0)
		return -1;
	if (n->op == B_SARG)
		return gen_stack_arg(g, n, v->reg);
	if (emit(g, LANG_OP_CTX, v->reg, 0, 0, (uint32_t)ctx_src(n->op), n->op == B_ARG ? n->ival : 0) < 0)
		return -1;
	/* args->NAME of a narrower type: the register's low bits */
	return n->op == B_ARG && n->cast.kind == LANG_T_INT ? narrow(g, v->reg, &n->cast) : 0;
}

static int gen_string_lit(struct gen *g, const char *s, size_t len, struct loc l, struct val *v)
{
	uint32_t po = pool_add(g, s, len);

	v->off = tmp_stack(g, LANG_STRLEN, l);
	if (v->off < 0 || po == UINT32_MAX)
		return -1;
	if (emit(g, LANG_OP_STZERO, 0, 0, 0, (uint32_t)v->off, LANG_STRLEN) < 0)
		return -1;
	return emit(g, LANG_OP_STPOOL, 0, 0, 0, (uint32_t)v->off,
		    (int64_t)((uint64_t)po | ((uint64_t)len << 32))) < 0 ? -1 : 0;
}

static int alu_op(int op, int sgn)
{
	switch (op) {
	case OP_ADD: return LANG_OP_ADD;
	case OP_SUB: return LANG_OP_SUB;
	case OP_MUL: return LANG_OP_MUL;
	/* bpftrace 0.17 divides unsigned whatever the operands' signs (it
	 * warns about signed ones): -10 / 3 is 6148914691236517202 there */
	case OP_DIV: return LANG_OP_DIV;
	case OP_MOD: return LANG_OP_MOD;
	case OP_AND: return LANG_OP_AND;
	case OP_OR: return LANG_OP_OR;
	case OP_XOR: return LANG_OP_XOR;
	case OP_SHL: return LANG_OP_SHL;
	case OP_SHR: return sgn ? LANG_OP_SAR : LANG_OP_SHR;
	case OP_EQ: return LANG_OP_EQ;
	case OP_NE: return LANG_OP_NE;
	case OP_LT: return sgn ? LANG_OP_LT : LANG_OP_LTU;
	case OP_LE: return sgn ? LANG_OP_LE : LANG_OP_LEU;
	case OP_GT: return sgn ? LANG_OP_GT : LANG_OP_GTU;
	case OP_GE: return sgn ? LANG_OP_GE : LANG_OP_GEU;
	default: return -1;
	}
}

static int gen_logic(struct gen *g, struct node *n, struct val *v)
{
	struct val a, b;
	int dst = tmp_reg(g, n->loc), j1, j2;

	if (dst < 0 || gen_expr(g, n->a, &a))
		return -1;
	if (emit(g, LANG_OP_MOVI, dst, 0, 0, 0, n->op == OP_LOR) < 0)
		return -1;
	j1 = emit_jump(g, n->op == OP_LOR ? LANG_OP_JNZ : LANG_OP_JZ, a.reg);
	if (j1 < 0 || gen_expr(g, n->b, &b))
		return -1;
	if (emit(g, LANG_OP_LNOT, dst, b.reg, 0, 0, 0) < 0 || emit(g, LANG_OP_LNOT, dst, dst, 0, 0, 0) < 0)
		return -1;
	j2 = g->n;
	patch(g, j1, j2);
	v->reg = dst;
	return 0;
}

static int gen_binop(struct gen *g, struct node *n, struct val *v)
{
	struct val a, b;
	int dst, op;

	if (n->op == OP_LAND || n->op == OP_LOR)
		return gen_logic(g, n, v);
	if (gen_expr(g, n->a, &a) || gen_expr(g, n->b, &b))
		return -1;
	dst = tmp_reg(g, n->loc);
	if (dst < 0)
		return -1;
	v->reg = dst;
	if (n->a->type.kind == LANG_T_STR) {
		if (emit(g, LANG_OP_STREQ, dst, 0, LANG_STRLEN, (uint32_t)a.off, b.off) < 0)
			return -1;
		if (n->op == OP_NE && emit(g, LANG_OP_LNOT, dst, dst, 0, 0, 0) < 0)
			return -1;
		return 0;
	}
	if (n->op >= OP_EQ && n->op <= OP_GE)
		op = alu_op(n->op, n->cast.size);
	else if (n->op == OP_SHR)
		op = alu_op(n->op, n->a->type.is_signed);
	else
		op = alu_op(n->op, n->type.is_signed);
	return emit(g, op, dst, a.reg, b.reg, 0, 0) < 0 ? -1 : 0;
}

/* Narrows a register to type t (casts, reads of smaller variables). */
static int narrow(struct gen *g, int reg, const struct lang_type *t)
{
	if (t->kind != LANG_T_INT || t->size >= 8)
		return 0;
	return emit(g, t->is_signed ? LANG_OP_SEXT : LANG_OP_ZEXT, reg, reg, 0, (uint32_t)(t->size * 8), 0) < 0 ? -1 : 0;
}

static int add_fmt(struct gen *g, const char *fmt, size_t len, struct node **args, int nargs,
		   struct loc l, int *rec_size);

/* strftime(FMT, NS): NS and the index of FMT (a format without
 * arguments) side by side, which the tool formats. */
static int gen_strftime(struct gen *g, struct node *n, struct val *v)
{
	struct val a;
	int size, id = add_fmt(g, n->args[0]->name, n->args[0]->slen, NULL, 0, n->loc, &size), r;

	if (id < 0 || gen_expr(g, n->args[1], &a))
		return -1;
	v->off = tmp_stack(g, 16, n->loc);
	r = tmp_reg(g, n->loc);
	if (v->off < 0 || r < 0)
		return -1;
	if (emit(g, LANG_OP_STST, 0, a.reg, 0, (uint32_t)v->off, 0) < 0 ||
	    emit(g, LANG_OP_MOVI, r, 0, 0, 0, id) < 0)
		return -1;
	return emit(g, LANG_OP_STST, 0, r, 0, (uint32_t)v->off + 8, 0) < 0 ? -1 : 0;
}

static int gen_call_value(struct gen *g, struct node *n, struct val *v)
{
	struct val a, b;

	if (!strcmp(n->name, "str")) {
		if (n->post) {	/* str() of a string */
			return gen_expr(g, n->args[0], v);
		}
		if (gen_expr(g, n->args[0], &a))
			return -1;
		b.reg = 0;
		if (n->nargs == 2 && gen_expr(g, n->args[1], &b))
			return -1;
		v->off = tmp_stack(g, LANG_STRLEN, n->loc);
		if (v->off < 0)
			return -1;
		return emit(g, LANG_OP_STR, 0, a.reg, b.reg, (uint32_t)v->off,
			    n->nargs == 2 ? -1 : LANG_STRLEN) < 0 ? -1 : 0;
	}
	if (!strcmp(n->name, "usym")) {
		if (gen_expr(g, n->args[0], &a))
			return -1;
		*v = a;
		return 0;
	}
	if (!strcmp(n->name, "strncmp")) {
		int64_t len = n->args[2]->ival < LANG_STRLEN ? n->args[2]->ival : LANG_STRLEN;

		if (gen_expr(g, n->args[0], &a) || gen_expr(g, n->args[1], &b))
			return -1;
		v->reg = tmp_reg(g, n->loc);
		if (v->reg < 0 || emit(g, LANG_OP_STREQ, v->reg, 0, (int)len, (uint32_t)a.off, b.off) < 0)
			return -1;
		return emit(g, LANG_OP_LNOT, v->reg, v->reg, 0, 0, 0) < 0 ? -1 : 0;
	}
	if (!strcmp(n->name, "strftime"))
		return gen_strftime(g, n, v);
	if (!strcmp(n->name, "buf")) {
		bool str = n->args[0]->type.kind == LANG_T_STR;

		if (gen_expr(g, n->args[0], &a) || gen_expr(g, n->args[1], &b))
			return -1;
		v->off = tmp_stack(g, LANG_BUF_SIZE, n->loc);
		if (v->off < 0)
			return -1;
		return emit(g, LANG_OP_BUF, 0, str ? 0 : a.reg, b.reg, (uint32_t)v->off,
			    str ? a.off : -1) < 0 ? -1 : 0;
	}
	if (!strcmp(n->name, "reg")) {
		v->reg = tmp_reg(g, n->loc);
		if (v->reg < 0)
			return -1;
		return emit(g, LANG_OP_REG, v->reg, 0, 0, (uint32_t)n->ival, n->post) < 0 ? -1 : 0;
	}
	prog_error(g->p, n->loc, "%s() has no value", n->name);
	return -1;
}

static int gen_incdec(struct gen *g, struct node *n, struct val *v)
{
	struct node *t = n->a;
	int one = tmp_reg(g, n->loc), res = tmp_reg(g, n->loc), old;

	if (one < 0 || res < 0 || emit(g, LANG_OP_MOVI, one, 0, 0, 0, 1) < 0)
		return -1;
	if (t->kind == N_VAR) {
		int r = g->p->vars[t->var].reg;

		if (emit(g, LANG_OP_MOV, res, r, 0, 0, 0) < 0 ||
		    emit(g, n->op == OP_ADD ? LANG_OP_ADD : LANG_OP_SUB, r, r, one, 0, 0) < 0)
			return -1;
		v->reg = n->post ? res : r;
		return 0;
	}
	{
		int key = gen_key(g, t);

		old = tmp_reg(g, n->loc);
		if (key < 0 || old < 0)
			return -1;
		if (emit(g, LANG_OP_MAP_GET, old, 0, t->map, (uint32_t)key, 0) < 0 ||
		    emit(g, n->op == OP_ADD ? LANG_OP_ADD : LANG_OP_SUB, res, old, one, 0, 0) < 0 ||
		    emit(g, LANG_OP_MAP_SET, 0, res, t->map, (uint32_t)key, 0) < 0)
			return -1;
		v->reg = n->post ? old : res;
	}
	return 0;
}

/* Bytes before part k of a tuple of that shape. */
static int part_offset(const struct tuple_shape *s, int k)
{
	int off = 0;

	for (int i = 0; i < k; i++)
		off += storage_size(&s->parts[i]);
	return off;
}

/* (a, b, ...) into scratch, the parts one after the other. */
static int gen_tuple(struct gen *g, struct node *n, struct val *v)
{
	const struct tuple_shape *s = &g->p->shapes[n->type.is_signed];

	v->off = tmp_stack(g, n->type.size, n->loc);
	if (v->off < 0)
		return -1;
	for (int i = 0; i < n->nargs; i++) {
		struct lang_type t = s->parts[i];
		struct val a;

		t.size = (uint16_t)storage_size(&t);
		if (gen_expr(g, n->args[i], &a) || store_val(g, &t, a, v->off + part_offset(s, i)))
			return -1;
	}
	return 0;
}

/* EXPR.N: an integer part read into a register; any other is read where
 * it lies. */
static int gen_tuple_get(struct gen *g, struct node *n, struct val *v)
{
	const struct tuple_shape *s = &g->p->shapes[n->a->type.is_signed];
	struct val t;
	int off;

	if (gen_expr(g, n->a, &t))
		return -1;
	off = t.off + part_offset(s, (int)n->ival);
	if (!is_reg_type(&n->type)) {
		v->off = off;
		return 0;
	}
	v->reg = tmp_reg(g, n->loc);
	return v->reg < 0 || emit(g, LANG_OP_STLD, v->reg, 0, 0, (uint32_t)off, 0) < 0 ? -1 : 0;
}

static int gen_expr(struct gen *g, struct node *n, struct val *v)
{
	struct val a;
	int j1, j2;

	v->reg = v->off = 0;
	switch (n->kind) {
	case N_INT:
		v->reg = tmp_reg(g, n->loc);
		return v->reg < 0 || emit(g, LANG_OP_MOVI, v->reg, 0, 0, 0, n->ival) < 0 ? -1 : 0;
	case N_STR:
		return gen_string_lit(g, n->name, n->slen, n->loc, v);
	case N_BUILTIN:
		return gen_builtin(g, n, v);
	case N_VAR: {
		struct var *var = &g->p->vars[n->var];

		if (is_reg_type(&var->type))
			v->reg = var->reg;
		else
			v->off = var->off;
		return 0;
	}
	case N_MAP:
		return gen_map_read(g, n, v);
	case N_BINOP:
		return gen_binop(g, n, v);
	case N_UNOP:
		if (gen_expr(g, n->a, &a))
			return -1;
		v->reg = tmp_reg(g, n->loc);
		return v->reg < 0 || emit(g, n->op == OP_NEG ? LANG_OP_NEG : n->op == OP_NOT ? LANG_OP_NOT : LANG_OP_LNOT,
					  v->reg, a.reg, 0, 0, 0) < 0 ? -1 : 0;
	case N_TERNARY: {
		struct val b, c;
		int is_reg = is_reg_type(&n->type);

		if (gen_expr(g, n->a, &a))
			return -1;
		if (is_reg)
			v->reg = tmp_reg(g, n->loc);
		else
			v->off = tmp_stack(g, storage_size(&n->type), n->loc);
		if (v->reg < 0 || v->off < 0)
			return -1;
		j1 = emit_jump(g, LANG_OP_JZ, a.reg);
		if (j1 < 0 || gen_expr(g, n->b, &b))
			return -1;
		if (is_reg ? emit(g, LANG_OP_MOV, v->reg, b.reg, 0, 0, 0) < 0 : store_val(g, &n->type, b, v->off))
			return -1;
		j2 = emit_jump(g, LANG_OP_JMP, 0);
		if (j2 < 0)
			return -1;
		patch(g, j1, g->n);
		if (gen_expr(g, n->c, &c))
			return -1;
		if (is_reg ? emit(g, LANG_OP_MOV, v->reg, c.reg, 0, 0, 0) < 0 : store_val(g, &n->type, c, v->off))
			return -1;
		patch(g, j2, g->n);
		return 0;
	}
	case N_CAST:
		if (gen_expr(g, n->a, &a))
			return -1;
		v->reg = tmp_reg(g, n->loc);
		if (v->reg < 0 || emit(g, LANG_OP_MOV, v->reg, a.reg, 0, 0, 0) < 0)
			return -1;
		return n->post ? 0 : narrow(g, v->reg, &n->cast);
	case N_DEREF:
		if (gen_expr(g, n->a, &a))
			return -1;
		v->reg = tmp_reg(g, n->loc);
		return v->reg < 0 || emit(g, LANG_OP_LOAD, v->reg, a.reg, 0, n->cast.size, n->cast.is_signed) < 0 ? -1 : 0;
	case N_INCDEC:
		return gen_incdec(g, n, v);
	case N_CALL:
		return gen_call_value(g, n, v);
	case N_TUPLE:
		return gen_tuple(g, n, v);
	case N_TUPLE_GET:
		return gen_tuple_get(g, n, v);
	default:
		prog_error(g->p, n->loc, "unexpected expression");
		return -1;
	}
}

static int add_fmt(struct gen *g, const char *fmt, size_t len, struct node **args, int nargs,
		   struct loc l, int *rec_size)
{
	struct prog *p = g->p;
	struct fmtinfo *f;
	int i, off = 0;

	if (p->nfmts == LANG_MAX_FMTS) {
		prog_error(p, l, "too many printf/time calls (at most %d)", LANG_MAX_FMTS);
		return -1;
	}
	if (p->nfmts == p->cfmts) {
		int cap = p->cfmts ? p->cfmts * 2 : 16;
		struct fmtinfo *v = realloc(p->fmts, sizeof(*v) * (size_t)cap);

		if (!v)
			return -1;
		p->fmts = v;
		p->cfmts = cap;
	}
	f = &p->fmts[p->nfmts];
	memset(f, 0, sizeof(*f));
	f->d.fmt = pool_add(g, fmt, len);
	if (f->d.fmt == UINT32_MAX)
		return -1;
	f->d.nargs = (uint16_t)nargs;
	for (i = 0; i < nargs; i++) {
		f->d.arg[i] = args[i]->type;
		f->d.arg[i].size = (uint16_t)storage_size(&args[i]->type);
		f->d.arg_off[i] = (uint16_t)off;
		off += f->d.arg[i].size;
	}
	f->d.rec_size = (uint16_t)off;
	*rec_size = off;
	return p->nfmts++;
}

/* The values of a tuple of shape s from part n on, in their order: a
 * tuple inside it as its own values, nest[] marking where it begins and
 * ends (LANG_NEST).  The count of values so far. */
static int flatten_tuple(const struct prog *p, const struct tuple_shape *s, struct lang_type *parts,
			 uint8_t *nest, int n)
{
	for (int i = 0; i < s->n; i++) {
		const struct lang_type *t = &s->parts[i];
		int first = n;

		if (t->kind != LANG_T_TUPLE) {
			parts[n] = *t;
			parts[n].size = (uint16_t)storage_size(t);
			nest[n++] = 0;
			continue;
		}
		/* the checker allows LANG_MAX_TUPLE values in all */
		n = flatten_tuple(p, &p->shapes[t->is_signed], parts, nest, n);
		nest[first] = (uint8_t)(nest[first] + LANG_NEST(1, 0));
		nest[n - 1] = (uint8_t)(nest[n - 1] + LANG_NEST(0, 1));
	}
	return n;
}

/* print(tuple): the tuple's bytes are the record, described as an
 * argument list of its values (more than one: a value has one). */
static int gen_print_tuple(struct gen *g, struct node *call, struct node *t)
{
	struct lang_type parts[LANG_MAX_TUPLE];
	uint8_t nest[LANG_MAX_TUPLE];
	struct fmtinfo *f;
	struct val v;
	int id, n, off = 0;

	id = add_fmt(g, "", 0, NULL, 0, call->loc, &(int){ 0 });
	if (id < 0 || gen_expr(g, t, &v))
		return -1;
	n = flatten_tuple(g->p, &g->p->shapes[t->type.is_signed], parts, nest, 0);
	f = &g->p->fmts[id];
	f->d.nargs = (uint16_t)n;
	for (int i = 0; i < n; i++) {
		f->d.arg[i] = parts[i];
		f->d.arg_off[i] = (uint16_t)off;
		f->d.nest[i] = nest[i];
		off += parts[i].size;
	}
	f->d.rec_size = t->type.size;
	return emit(g, LANG_OP_EMIT, LANG_EV_PRINT_VALUE, 0, 0, (uint32_t)id,
		    (int64_t)((uint64_t)(uint32_t)v.off | ((uint64_t)t->type.size << 32))) < 0 ? -1 : 0;
}

/* printf(fmt, args...) and print(value): a record of the arguments. */
static int gen_record(struct gen *g, struct node *call, const char *fmt, size_t fmtlen,
		      struct node **args, int nargs, int ev)
{
	int size, id = add_fmt(g, fmt, fmtlen, args, nargs, call->loc, &size), rec, i;
	struct fmtinfo *f;

	if (id < 0)
		return -1;
	rec = tmp_stack(g, size ? size : 8, call->loc);
	if (rec < 0)
		return -1;
	for (i = 0; i < nargs; i++) {
		struct val v;

		f = &g->p->fmts[id];
		if (gen_expr(g, args[i], &v) || store_val(g, &args[i]->type, v, rec + f->d.arg_off[i]))
			return -1;
	}
	return emit(g, LANG_OP_EMIT, ev, 0, 0, (uint32_t)id,
		    (int64_t)((uint64_t)(uint32_t)rec | ((uint64_t)size << 32))) < 0 ? -1 : 0;
}

/* join(ARRAY[, DELIM]): up to LANG_JOIN_MAX pointers read from ARRAY,
 * the first NULL (or unreadable) one ending it, each string read into the
 * record after the count; the tool joins them with DELIM, the record's
 * format. */
static int gen_join(struct gen *g, struct node *n)
{
	const char *delim = n->nargs == 2 ? n->args[1]->name : " ";
	size_t dlen = n->nargs == 2 ? n->args[1]->slen : 1;
	int size, id = add_fmt(g, delim, dlen, NULL, 0, n->loc, &size), ends[LANG_JOIN_MAX];
	int rec = tmp_stack(g, LANG_JOIN_REC, n->loc), cnt = tmp_reg(g, n->loc);
	int at = tmp_reg(g, n->loc), ptr = tmp_reg(g, n->loc), eight = tmp_reg(g, n->loc);
	struct val base;

	if (id < 0 || rec < 0 || cnt < 0 || at < 0 || ptr < 0 || eight < 0 ||
	    gen_expr(g, n->args[0], &base))
		return -1;
	if (emit(g, LANG_OP_STZERO, 0, 0, 0, (uint32_t)rec, LANG_JOIN_REC) < 0 ||
	    emit(g, LANG_OP_MOV, at, base.reg, 0, 0, 0) < 0 ||
	    emit(g, LANG_OP_MOVI, eight, 0, 0, 0, 8) < 0)
		return -1;
	for (int k = 0; k < LANG_JOIN_MAX; k++) {
		if (emit(g, LANG_OP_LOAD, ptr, at, 0, 8, 0) < 0)
			return -1;
		ends[k] = emit_jump(g, LANG_OP_JZ, ptr);
		if (ends[k] < 0 ||
		    emit(g, LANG_OP_STR, 0, ptr, 0, (uint32_t)(rec + 8 + k * LANG_STRLEN), LANG_STRLEN) < 0 ||
		    emit(g, LANG_OP_MOVI, cnt, 0, 0, 0, k + 1) < 0 ||
		    emit(g, LANG_OP_STST, 0, cnt, 0, (uint32_t)rec, 0) < 0 ||
		    emit(g, LANG_OP_ADD, at, at, eight, 0, 0) < 0)
			return -1;
	}
	for (int k = 0; k < LANG_JOIN_MAX; k++)
		patch(g, ends[k], g->n);
	return emit(g, LANG_OP_EMIT, LANG_EV_JOIN, 0, 0, (uint32_t)id,
		    (int64_t)((uint64_t)(uint32_t)rec | ((uint64_t)LANG_JOIN_REC << 32))) < 0 ? -1 : 0;
}

static int gen_call_stmt(struct gen *g, struct node *n)
{
	struct val a;
	const char *f = n->name;

	if (!strcmp(f, "printf") || !strcmp(f, "cat") || !strcmp(f, "system"))
		return gen_record(g, n, n->args[0]->name, n->args[0]->slen, n->args + 1, n->nargs - 1,
				  f[0] == 'p' ? LANG_EV_PRINTF : f[0] == 'c' ? LANG_EV_CAT : LANG_EV_SYSTEM);
	if (!strcmp(f, "print")) {
		int rec, i;

		if (n->map < 0 && n->args[0]->type.kind == LANG_T_TUPLE)
			return gen_print_tuple(g, n, n->args[0]);
		if (n->map < 0)
			return gen_record(g, n, "", 0, n->args, 1, LANG_EV_PRINT_VALUE);
		rec = tmp_stack(g, 16, n->loc);
		if (rec < 0)
			return -1;
		for (i = 1; i < 3; i++) {
			if (i < n->nargs) {
				if (gen_expr(g, n->args[i], &a))
					return -1;
			} else {
				a.reg = tmp_reg(g, n->loc);
				if (a.reg < 0 || emit(g, LANG_OP_MOVI, a.reg, 0, 0, 0, i == 1 ? 0 : 1) < 0)
					return -1;
			}
			if (emit(g, LANG_OP_STST, 0, a.reg, 0, (uint32_t)(rec + 8 * (i - 1)), 0) < 0)
				return -1;
		}
		return emit(g, LANG_OP_EMIT, LANG_EV_PRINT_MAP, 0, 0, (uint32_t)n->map,
			    (int64_t)((uint64_t)(uint32_t)rec | (16ull << 32))) < 0 ? -1 : 0;
	}
	if (!strcmp(f, "clear") || !strcmp(f, "zero"))
		return emit(g, LANG_OP_EMIT, f[0] == 'c' ? LANG_EV_CLEAR : LANG_EV_ZERO, 0, 0,
			    (uint32_t)n->map, 0) < 0 ? -1 : 0;
	if (!strcmp(f, "delete")) {
		int key = gen_key(g, n->args[0]);

		return key < 0 || emit(g, LANG_OP_MAP_DEL, 0, 0, n->map, (uint32_t)key, 0) < 0 ? -1 : 0;
	}
	if (!strcmp(f, "time")) {
		const char *tf = n->nargs ? n->args[0]->name : "%H:%M:%S\n";
		size_t len = n->nargs ? n->args[0]->slen : strlen(tf);
		int size, id = add_fmt(g, tf, len, NULL, 0, n->loc, &size);

		return id < 0 || emit(g, LANG_OP_EMIT, LANG_EV_TIME, 0, 0, (uint32_t)id, 0) < 0 ? -1 : 0;
	}
	if (!strcmp(f, "exit"))
		return emit(g, LANG_OP_EXIT, 0, 0, 0, 0, 0) < 0 ? -1 : 0;
	if (!strcmp(f, "join"))
		return gen_join(g, n);
	if (!strcmp(f, "signal") || !strcmp(f, "override")) {
		if (gen_expr(g, n->args[0], &a))
			return -1;
		return emit(g, f[0] == 's' ? LANG_OP_SIGNAL : LANG_OP_OVERRIDE, 0, a.reg, 0, 0, 0) < 0 ? -1 : 0;
	}
	/* a value call as a statement: evaluate, drop */
	return gen_expr(g, n, &a);
}

/* 1 + the part of map access m's key that is the thread's own `tid` (in
 * four bytes or more, which hold any tid), 0 when none is: the part the
 * verifier checks every writer of the map keys by, to let the owner add
 * without a locked instruction (lang_image.map_tid_owned). */
static int tid_key_part(const struct mapinfo *mi, const struct node *m)
{
	for (int i = 0; i < m->nargs && i < mi->d.nkeys; i++)
		if (m->args[i]->kind == N_BUILTIN && m->args[i]->op == B_TID &&
		    mi->d.keys[i].size >= 4)
			return i + 1;
	return 0;
}

static int gen_assign(struct gen *g, struct node *s)
{
	struct node *lhs = s->a, *rhs = s->b;
	struct val v;

	if (lhs->kind == N_MAP) {
		struct mapinfo *mi = &g->p->maps[lhs->map];
		int key;

		if (rhs->kind == N_CALL && rhs->map >= 0 && rhs->type.kind == LANG_T_NONE &&
		    mi->d.kind >= LANG_M_COUNT) {
			v.reg = 0;
			if (rhs->nargs && gen_expr(g, rhs->args[0], &v))
				return -1;
			key = gen_key(g, lhs);
			return key < 0 || emit(g, LANG_OP_MAP_AGG, 0, v.reg, lhs->map, (uint32_t)key,
					       tid_key_part(mi, lhs)) < 0 ? -1 : 0;
		}
		if (gen_expr(g, rhs, &v))
			return -1;
		key = gen_key(g, lhs);
		if (key < 0)
			return -1;
		if (s->op) {
			int old = tmp_reg(g, s->loc), res = tmp_reg(g, s->loc);

			if (old < 0 || res < 0 ||
			    emit(g, LANG_OP_MAP_GET, old, 0, lhs->map, (uint32_t)key, 0) < 0 ||
			    emit(g, alu_op(s->op, mi->d.val.is_signed), res, old, v.reg, 0, 0) < 0)
				return -1;
			v.reg = res;
		}
		if (is_reg_type(&rhs->type))
			return emit(g, LANG_OP_MAP_SET, 0, v.reg, lhs->map, (uint32_t)key, 0) < 0 ? -1 : 0;
		return emit(g, LANG_OP_MAP_SETX, 0, 0, lhs->map, (uint32_t)key, v.off) < 0 ? -1 : 0;
	}
	{
		struct var *var = &g->p->vars[lhs->var];

		if (gen_expr(g, rhs, &v))
			return -1;
		if (s->op) {
			int res = tmp_reg(g, s->loc);

			if (res < 0 || emit(g, alu_op(s->op, var->type.is_signed), res, var->reg, v.reg, 0, 0) < 0)
				return -1;
			v.reg = res;
		}
		if (is_reg_type(&var->type))
			return emit(g, LANG_OP_MOV, var->reg, v.reg, 0, 0, 0) < 0 ? -1 : 0;
		if (rhs->type.kind == LANG_T_STR && rhs->type.size < LANG_STRLEN && v.off != var->off)
			return store_val(g, &var->type, v, var->off);
		return store_val(g, &var->type, v, var->off);
	}
}

static int gen_stmt(struct gen *g, struct node *s)
{
	int reg_top = g->reg_top, stk_top = g->stk_top, r = 0, j1, j2, i;
	struct val v;

	switch (s->kind) {
	case S_EXPR:
		r = s->a->kind == N_CALL ? gen_call_stmt(g, s->a) : gen_expr(g, s->a, &v);
		break;
	case S_ASSIGN:
		r = gen_assign(g, s);
		break;
	case S_IF:
		if (gen_expr(g, s->a, &v))
			return -1;
		g->reg_top = reg_top;
		j1 = emit_jump(g, LANG_OP_JZ, v.reg);
		if (j1 < 0 || gen_stmts(g, s->b))
			return -1;
		if (s->c) {
			j2 = emit_jump(g, LANG_OP_JMP, 0);
			if (j2 < 0)
				return -1;
			patch(g, j1, g->n);
			if (s->c->kind == S_IF ? gen_stmt(g, s->c) : gen_stmts(g, s->c))
				return -1;
			patch(g, j2, g->n);
		} else {
			patch(g, j1, g->n);
		}
		break;
	case S_UNROLL:
		for (i = 0; i < s->ival && !r; i++)
			r = gen_stmts(g, s->b);
		break;
	case S_WHILE: {
		struct loopctx lc = { .top = g->n, .up = g->loop };
		int ok;

		if (gen_expr(g, s->a, &v))
			return -1;
		g->reg_top = reg_top;
		j1 = emit_jump(g, LANG_OP_JZ, v.reg);
		g->loop = &lc;
		ok = j1 >= 0 && !gen_stmts(g, s->b);
		g->loop = lc.up;
		if (ok)
			ok = emit(g, LANG_OP_LOOP, 0, 0, 0, (uint32_t)lc.top, 0) >= 0;
		if (ok) {
			patch(g, j1, g->n);
			for (i = 0; i < lc.nbreaks; i++)
				patch(g, lc.breaks[i], g->n);
		}
		free(lc.breaks);
		if (!ok)
			return -1;
		break;
	}
	case S_BREAK: {
		struct loopctx *lc = g->loop;
		int *nb = realloc(lc->breaks, sizeof(int) * (size_t)(lc->nbreaks + 1));

		if (!nb)
			return -1;
		lc->breaks = nb;
		j1 = emit_jump(g, LANG_OP_JMP, 0);
		if (j1 < 0)
			return -1;
		lc->breaks[lc->nbreaks++] = j1;
		break;
	}
	case S_CONTINUE:
		r = emit(g, LANG_OP_LOOP, 0, 0, 0, (uint32_t)g->loop->top, 0) < 0 ? -1 : 0;
		break;
	case S_RETURN:	/* the probe's run ends here, as at its last RET */
		r = emit(g, LANG_OP_RET, 0, 0, 0, 0, 0) < 0 ? -1 : 0;
		break;
	default:
		r = -1;
	}
	g->reg_top = reg_top;
	g->stk_top = stk_top;
	return r;
}

static int gen_stmts(struct gen *g, struct node *s)
{
	for (; s; s = s->next)
		if (gen_stmt(g, s))
			return -1;
	return 0;
}

/* ---- fast forms ---- */

static int fast_src_of(struct node *n, uint8_t *src, uint8_t *arg)
{
	if (n->kind != N_BUILTIN)
		return 0;
	switch (n->op) {
	case B_PID: case B_TID: case B_UID: case B_CPU: case B_NSECS: case B_ELAPSED:
	case B_RETVAL: case B_FUNC: case B_PROBE: case B_ARG:
		if (n->op == B_ARG && n->cast.kind == LANG_T_INT && n->cast.size < 8)
			return 0;	/* args->NAME narrowed: the interpreter's */
		*src = (uint8_t)ctx_src(n->op);
		*arg = n->op == B_ARG ? (uint8_t)n->ival : 0;
		return 1;
	default:
		return 0;
	}
}

/* n is @m[src]: an integer map with one 8-byte key, read by a fast
 * source. */
static int keyed_int_map(struct gen *g, struct node *n, uint8_t *src, uint8_t *arg)
{
	const struct mapinfo *mi;

	if (n->kind != N_MAP || n->nargs != 1)
		return 0;
	mi = &g->p->maps[n->map];
	return mi->d.kind == LANG_M_INT && mi->d.nkeys == 1 && mi->d.key_size == 8 &&
	       fast_src_of(n->args[0], src, arg);
}

/* n is @m[src] with the same map and source. */
static int same_keyed_map(struct gen *g, struct node *n, int map, uint8_t src, uint8_t arg)
{
	uint8_t s2, a2;

	return n && keyed_int_map(g, n, &s2, &a2) && n->map == map && s2 == src && a2 == arg;
}

/* The latency pattern's return half:
 *   /@s[K]/ { @h = hist(nsecs - @s[K]); delete(@s[K]); } */
static void find_delta_hist(struct gen *g, struct probe *pr, struct lang_probe_desc *d)
{
	struct node *pred = pr->pred, *s1 = pr->body, *s2, *h, *call, *sub, *del;
	uint8_t src, arg, vsrc, varg;

	if (!keyed_int_map(g, pred, &src, &arg) || !s1 || !(s2 = s1->next) || s2->next ||
	    s1->kind != S_ASSIGN || s1->op || s2->kind != S_EXPR)
		return;
	h = s1->a;
	call = s1->b;
	del = s2->a;
	if (h->kind != N_MAP || h->nargs || g->p->maps[h->map].d.kind != LANG_M_HIST ||
	    call->kind != N_CALL || strcmp(call->name, "hist") || call->nargs != 1)
		return;
	sub = call->args[0];
	if (sub->kind != N_BINOP || sub->op != OP_SUB || !fast_src_of(sub->a, &vsrc, &varg) ||
	    vsrc != LANG_SRC_NSECS || !same_keyed_map(g, sub->b, pred->map, src, arg))
		return;
	if (del->kind != N_CALL || strcmp(del->name, "delete") || del->nargs != 1 ||
	    !same_keyed_map(g, del->args[0], pred->map, src, arg))
		return;
	d->fast = LANG_FAST_DELTA_HIST;
	d->fast_map = (uint8_t)h->map;
	d->fast_map2 = (uint8_t)pred->map;
	d->fast_src = src;
	d->fast_arg = arg;
	d->fast_src2 = vsrc;
}

/* A filter /src CMP integer/ on a source read without memory access:
 * into d's filter fields. */
static int find_fast_pred(struct node *pred, struct lang_probe_desc *d)
{
	uint8_t src, arg;
	int op;

	if (pred->kind != N_BINOP || pred->op < OP_EQ || pred->op > OP_GE ||
	    !fast_src_of(pred->a, &src, &arg) || pred->b->kind != N_INT ||
	    (op = alu_op(pred->op, pred->cast.size)) < 0)
		return 0;
	d->pred = 1;
	d->pred_src = src;
	d->pred_arg = arg;
	d->fast_cmp = (uint8_t)op;
	d->fast_imm = pred->b->ival;
	return 1;
}

/* @x = count(), @[src] = count(), @x = hist(src) as the whole body s. */
static void find_fast_aggregation(struct gen *g, struct node *s, struct lang_probe_desc *d)
{
	struct node *m = s->a, *call = s->b;
	struct mapinfo *mi = &g->p->maps[m->map];

	if (call->kind != N_CALL)
		return;
	if (mi->d.kind == LANG_M_COUNT && !strcmp(call->name, "count")) {
		if (!m->nargs) {
			d->fast = LANG_FAST_COUNT_KEYLESS;
			d->fast_map = (uint8_t)m->map;
		} else if (m->nargs == 1 && fast_src_of(m->args[0], &d->fast_src, &d->fast_arg)) {
			d->fast = LANG_FAST_COUNT_KEY;
			d->fast_map = (uint8_t)m->map;
		}
	} else if (mi->d.kind == LANG_M_HIST && !strcmp(call->name, "hist") && !m->nargs &&
		   fast_src_of(call->args[0], &d->fast_src, &d->fast_arg)) {
		d->fast = LANG_FAST_HIST;
		d->fast_map = (uint8_t)m->map;
	}
}

static void find_fast(struct gen *g, struct probe *pr, struct lang_probe_desc *d)
{
	struct node *s = pr->body, *pred = pr->pred;
	bool one_assign = s && !s->next && s->kind == S_ASSIGN && !s->op && s->a->kind == N_MAP;

	if (pred && pred->kind == N_MAP) {
		find_delta_hist(g, pr, d);
		return;
	}
	if (pred) {
		/* a filter in front of an aggregation, or of any body */
		if (!find_fast_pred(pred, d))
			return;
		if (one_assign)
			find_fast_aggregation(g, s, d);
		if (d->fast == LANG_FAST_NONE)
			d->fast = LANG_FAST_PRED_ONLY;
		return;
	}
	if (!one_assign)
		return;
	{
		uint8_t src, arg, vsrc, varg;

		/* @s[K] = nsecs, the latency pattern's entry half */
		if (keyed_int_map(g, s->a, &src, &arg) && fast_src_of(s->b, &vsrc, &varg) &&
		    vsrc == LANG_SRC_NSECS) {
			d->fast = LANG_FAST_STORE_KEY;
			d->fast_map = (uint8_t)s->a->map;
			d->fast_src = src;
			d->fast_arg = arg;
			d->fast_src2 = vsrc;
			return;
		}
	}
	find_fast_aggregation(g, s, d);
}

static int gen_probe(struct gen *g, struct probe *pr)
{
	int start = g->n, j = -1, i, nv = 0;
	struct val v;

	g->reg_top = 0;
	g->stk_top = 0;
	/* the block's variables: integers in the lowest registers */
	for (i = 0; i < g->p->nvars; i++) {
		struct var *var = &g->p->vars[i];

		if (var->probe != g->block)
			continue;
		if (is_reg_type(&var->type)) {
			var->reg = tmp_reg(g, pr->att[0].loc);
			if (var->reg < 0 || emit(g, LANG_OP_MOVI, var->reg, 0, 0, 0, 0) < 0)
				return -1;
		} else {
			var->off = tmp_stack(g, storage_size(&var->type), pr->att[0].loc);
			if (var->off < 0 ||
			    emit(g, LANG_OP_STZERO, 0, 0, 0, (uint32_t)var->off, storage_size(&var->type)) < 0)
				return -1;
		}
		nv++;
	}
	(void)nv;
	if (pr->pred) {
		int rt = g->reg_top, st = g->stk_top;

		if (gen_expr(g, pr->pred, &v))
			return -1;
		j = emit_jump(g, LANG_OP_JZ, v.reg);
		if (j < 0)
			return -1;
		g->reg_top = rt;
		g->stk_top = st;
	}
	if (gen_stmts(g, pr->body))
		return -1;
	if (j >= 0)
		patch(g, j, g->n);
	if (emit(g, LANG_OP_RET, 0, 0, 0, 0, 0) < 0)
		return -1;
	for (i = 0; i < pr->natt; i++) {
		struct attach *a = &pr->att[i];
		struct lang_probe_desc *d;
		struct lang_probe_desc *nv2;

		if (g->nprobes == LANG_MAX_PROBES) {
			prog_error(g->p, a->loc, "too many probes (at most %d)", LANG_MAX_PROBES);
			return -1;
		}
		nv2 = realloc(g->probes, sizeof(*nv2) * (size_t)(g->nprobes + 1));
		if (!nv2)
			return -1;
		g->probes = nv2;
		d = &g->probes[g->nprobes++];
		memset(d, 0, sizeof(*d));
		d->kind = (uint8_t)a->kind;
		d->target = pool_add(g, a->target, strlen(a->target));
		d->func = pool_add(g, a->func, strlen(a->func));
		d->provider = pool_add(g, a->provider, strlen(a->provider));
		d->text = pool_add(g, a->text, strlen(a->text));
		if (d->target == UINT32_MAX || d->func == UINT32_MAX || d->provider == UINT32_MAX ||
		    d->text == UINT32_MAX)
			return -1;
		d->offset = a->offset;
		d->interval_ns = a->interval_ns;
		d->code = (uint32_t)start;
		d->ncode = (uint32_t)(g->n - start);
		find_fast(g, pr, d);
	}
	return 0;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* A tuple map's parts at their storage sizes; the value's size. */
static uint32_t set_vparts(const struct prog *p, struct lang_map_desc *d)
{
	d->nvparts = (uint8_t)flatten_tuple(p, &p->shapes[d->val.is_signed], d->vparts, d->vnest, 0);
	d->val.is_signed = 0;	/* the image names no shape */
	return d->val.size;
}

static void finish_maps(struct gen *g)
{
	struct prog *p = g->p;
	uint32_t max_keys = p->opts->map_keys ? p->opts->map_keys : LANG_DEFAULT_MAP_KEYS;
	int i, k;

	for (i = 0; i < p->nmaps; i++) {
		struct lang_map_desc *d = &p->maps[i].d;
		uint32_t ks = 0;

		d->name = pool_add(g, p->maps[i].name, strlen(p->maps[i].name));
		for (k = 0; k < d->nkeys; k++)
			ks += d->keys[k].size;
		d->key_size = (uint16_t)ks;
		d->max_keys = d->nkeys ? max_keys : 1;
		switch (d->kind) {
		case LANG_M_TUPLE: d->val_size = set_vparts(p, d); break;
		case LANG_M_STR: d->val_size = LANG_STRLEN; break;
		case LANG_M_USTACK: d->val_size = 8 + 8 * LANG_USTACK_MAX; break;
		case LANG_M_AVG: case LANG_M_STATS: case LANG_M_TIMESTAMP: d->val_size = 16; break;
		case LANG_M_BUF: d->val_size = LANG_BUF_SIZE; break;
		case LANG_M_HIST: d->val_size = 8 * LANG_HIST_BUCKETS; break;
		case LANG_M_LHIST:
			d->val_size = 8 * lang_lhist_nbuckets(d->lhist_min, d->lhist_max, d->lhist_step);
			break;
		default: d->val_size = 8; break;
		}
		if (d->kind != LANG_M_INT && d->kind != LANG_M_STR && d->kind != LANG_M_USTACK &&
		    d->kind != LANG_M_USYM && d->kind != LANG_M_PROBE && d->kind != LANG_M_TUPLE &&
		    d->kind != LANG_M_TIMESTAMP && d->kind != LANG_M_BUF) {
			/* a sum keeps the sign of its values (check.c) */
			d->val.kind = LANG_T_INT;
			d->val.size = 8;
			if (d->kind != LANG_M_SUM || !p->maps[i].sign_known)
				d->val.is_signed = d->kind != LANG_M_COUNT;
		}
	}
}

int lang_codegen(struct prog *p, void **image, size_t *len)
{
	struct gen g = { .p = p };
	struct lang_image_hdr h = { 0 };
	struct probe *pr;
	size_t off, total;
	uint8_t *img;
	int i;

	/* the key layout is needed by the code */
	for (i = 0; i < p->nmaps; i++) {
		struct lang_map_desc *d = &p->maps[i].d;
		uint32_t ks = 0;
		int k;

		for (k = 0; k < d->nkeys; k++)
			ks += d->keys[k].size;
		d->key_size = (uint16_t)ks;
		d->val_size = d->kind == LANG_M_STR ? LANG_STRLEN :
			      d->kind == LANG_M_USTACK ? 8 + 8 * LANG_USTACK_MAX :
			      d->kind == LANG_M_TUPLE ? d->val.size :
			      d->kind == LANG_M_TIMESTAMP ? 16 :
			      d->kind == LANG_M_BUF ? LANG_BUF_SIZE : 8;
	}
	pool_add(&g, "", 0);
	for (pr = p->probes; pr; pr = pr->next, g.block++)
		if (gen_probe(&g, pr))
			goto fail;
	finish_maps(&g);
	if (g.pool_len > LANG_MAX_POOL) {
		struct loc l = { 1, 1, 2 };

		prog_error(p, l, "the program's strings are too large");
		goto fail;
	}
	h.magic = LANG_MAGIC;
	h.version = LANG_VERSION;
	h.nregs = (uint16_t)(g.reg_hw ? g.reg_hw : 1);
	h.stack_size = (uint32_t)(g.stk_hw ? g.stk_hw : 8);
	h.nprobes = (uint32_t)g.nprobes;
	h.nmaps = (uint32_t)p->nmaps;
	h.nfmts = (uint32_t)p->nfmts;
	h.ninsns = (uint32_t)g.n;
	h.pool_len = (uint32_t)g.pool_len;
	total = align8(sizeof(h)) + align8(sizeof(struct lang_probe_desc) * h.nprobes) +
		align8(sizeof(struct lang_map_desc) * h.nmaps) +
		align8(sizeof(struct lang_fmt_desc) * h.nfmts) +
		sizeof(struct lang_insn) * h.ninsns + align8(h.pool_len);
	h.total_len = (uint32_t)total;
	img = calloc(1, total);
	if (!img)
		goto fail;
	off = 0;
	memcpy(img, &h, sizeof(h));
	off += align8(sizeof(h));
	memcpy(img + off, g.probes, sizeof(struct lang_probe_desc) * h.nprobes);
	off += align8(sizeof(struct lang_probe_desc) * h.nprobes);
	for (i = 0; i < p->nmaps; i++)
		memcpy(img + off + sizeof(struct lang_map_desc) * (size_t)i, &p->maps[i].d, sizeof(struct lang_map_desc));
	off += align8(sizeof(struct lang_map_desc) * h.nmaps);
	for (i = 0; i < p->nfmts; i++)
		memcpy(img + off + sizeof(struct lang_fmt_desc) * (size_t)i, &p->fmts[i].d, sizeof(struct lang_fmt_desc));
	off += align8(sizeof(struct lang_fmt_desc) * h.nfmts);
	memcpy(img + off, g.code, sizeof(struct lang_insn) * h.ninsns);
	off += sizeof(struct lang_insn) * h.ninsns;
	memcpy(img + off, g.pool, g.pool_len);
	*image = img;
	*len = total;
	free(g.code);
	free(g.pool);
	free(g.probes);
	return 0;
fail:
	free(g.code);
	free(g.pool);
	free(g.probes);
	return p->failed ? -EINVAL : -ENOMEM;
}
