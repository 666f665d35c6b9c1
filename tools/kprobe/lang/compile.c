/* lang_compile: parse, check, generate; errors formatted as bpftrace's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang_int.h"

void *prog_alloc(struct prog *p, size_t n)
{
	void *m;

	if (p->nallocs == p->callocs) {
		int cap = p->callocs ? p->callocs * 2 : 64;
		void **v = realloc(p->allocs, sizeof(*v) * (size_t)cap);

		if (!v)
			return NULL;
		p->allocs = v;
		p->callocs = cap;
	}
	m = calloc(1, n ? n : 1);
	if (m)
		p->allocs[p->nallocs++] = m;
	return m;
}

char *prog_strndup(struct prog *p, const char *s, size_t n)
{
	char *d = prog_alloc(p, n + 1);

	if (d)
		memcpy(d, s, n);
	return d;
}

/* The source line of loc, without its newline. */
static void source_line(const char *src, int line, const char **b, size_t *len)
{
	const char *s = src;
	int l;

	for (l = 1; l < line && *s; s++)
		if (*s == '\n')
			l++;
	*b = s;
	*len = strcspn(s, "\n");
}

/* bpftrace prints each tab of a source line as this many spaces. */
#define ERR_TAB_WIDTH 4

/* Appends the len bytes of line at text[o], tabs as spaces, and a newline;
 * returns the new offset (text stays terminated within size). */
static size_t put_source_line(char *text, size_t size, size_t o, const char *line, size_t len)
{
	size_t i;
	int w;

	if (o >= size)
		return size - 1;
	for (i = 0; i < len && o + 2 < size; i++) {
		if (line[i] != '\t') {
			text[o++] = line[i];
			continue;
		}
		for (w = 0; w < ERR_TAB_WIDTH && o + 2 < size; w++)
			text[o++] = ' ';
	}
	text[o++] = '\n';
	text[o] = 0;
	return o;
}

/* A diagnostic as bpftrace prints it (what: "ERROR", "WARNING") into
 * e: the message, the source line, and the underline. */
static void diagnostic(const struct prog *p, struct lang_error *e, struct loc loc,
		       const char *what, const char *fmt, va_list ap)
{
	const char *lb;
	size_t ll, o;
	int i;

	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	e->line = loc.line;
	e->col = loc.col;
	/* 1:1-1 is the empty place bpftrace gives some errors (an if()'s
	 * condition): no mark under the line */
	if (loc.line == 1 && loc.col == 1 && loc.col_end == 1)
		e->col_end = 1;
	else
		e->col_end = loc.col_end > loc.col ? loc.col_end : loc.col + 1;
	source_line(p->src, loc.line, &lb, &ll);
	o = (size_t)snprintf(e->text, sizeof(e->text), "%s:%d:%d-%d: %s: %s\n",
			     p->filename, e->line, e->col, e->col_end, what, e->msg);
	o = put_source_line(e->text, sizeof(e->text), o, lb, ll);
	/* The underline: one mark per printed column of the characters before
	 * col (spaces) and from col to col_end (tildes). */
	for (i = 1; i < e->col_end && o + 2 < sizeof(e->text); i++) {
		char mark = i < e->col ? ' ' : '~';
		int w = (size_t)i <= ll && lb[i - 1] == '\t' ? ERR_TAB_WIDTH : 1;

		while (w-- > 0 && o + 2 < sizeof(e->text))
			e->text[o++] = mark;
	}
	if (o + 1 < sizeof(e->text)) {
		e->text[o++] = '\n';
		e->text[o] = 0;
	} else {
		e->text[sizeof(e->text) - 1] = 0;
	}
}

/* At most this many errors after the first, and the same one only once
 * (a statement checked in both passes). */
#define MAX_MORE_ERRORS 16

static void more_error(struct prog *p, struct loc loc, const char *fmt, va_list ap)
{
	struct lang_error *e = p->err, x;
	size_t have = strlen(e->more), len;

	if (e->nmore >= MAX_MORE_ERRORS)
		return;
	diagnostic(p, &x, loc, "ERROR", fmt, ap);
	len = strlen(x.text);
	if (!strcmp(x.text, e->text) || strstr(e->more, x.text) || have + len >= sizeof(e->more))
		return;
	memcpy(e->more + have, x.text, len + 1);
	e->nmore++;
}

static void report(struct prog *p, struct loc loc, const char *fmt, va_list ap)
{
	if (p->err && !p->failed)
		diagnostic(p, p->err, loc, "ERROR", fmt, ap);
	else if (p->err && p->all_errors)
		more_error(p, loc, fmt, ap);
	p->failed++;
}

void prog_error(struct prog *p, struct loc loc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(p, loc, fmt, ap);
	va_end(ap);
}

int prog_error_n(struct prog *p, struct loc loc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(p, loc, fmt, ap);
	va_end(ap);
	return 1;
}

void prog_warning(struct prog *p, struct loc loc, const char *fmt, ...)
{
	struct lang_error w;
	va_list ap;

	if (!p->opts || !p->opts->warning)
		return;
	va_start(ap, fmt);
	diagnostic(p, &w, loc, "WARNING", fmt, ap);
	va_end(ap);
	p->opts->warning(w.text, p->opts->param_arg);
}

static void prog_free(struct prog *p)
{
	int i;

	for (i = 0; i < p->nallocs; i++)
		free(p->allocs[i]);
	free(p->allocs);
	free(p->vars);
	free(p->maps);
	free(p->fmts);
}

int lang_compile(const char *src, const struct lang_compile_opts *opts,
		 void **image_out, size_t *len_out, struct lang_error *err)
{
	static const struct lang_compile_opts defaults = { .filename = "stdin" };
	struct lang_error dummy;
	struct prog p = { 0 };
	int r;

	if (!src || !image_out || !len_out)
		return -EINVAL;
	if (!opts)
		opts = &defaults;
	if (!err)
		err = &dummy;
	memset(err, 0, sizeof(*err));
	p.src = src;
	p.filename = opts->filename ? opts->filename : "stdin";
	p.opts = opts;
	p.err = err;
	if (opts->nparams < 0 || (opts->nparams && !opts->params)) {
		prog_free(&p);
		return -EINVAL;
	}
	r = lang_parse(&p);
	if (!r)
		r = lang_check(&p);
	if (!r)
		r = lang_codegen(&p, image_out, len_out);
	if (r && p.failed)
		r = -EINVAL;
	else if (r)
		r = -ENOMEM;
	prog_free(&p);
	return r;
}
