/* Trace events in text, JSON Lines and Chrome Trace Event format. */
#include "output.h"
#include "consumer.h"
#include "stacks.h"

#include <inttypes.h>

#include "escape.h"
#include <math.h>
#include <string.h>

/* Per descriptor, for chrome: 0 not looked at, 1 an entry or return paired
 * with the other kind on the same function, 2 alone. */
static unsigned char pairing[KPS_MAX_PROBES];

void json_string(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);	/* bytes, not UTF-8: keep it valid */
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void output_begin(struct output *o)
{
	if (o->format == FMT_CHROME)
		fputs("{\"traceEvents\":[\n", o->f);
}

void output_end_trace(struct output *o)
{
	if (o->format == FMT_CHROME)
		fputs("\n]}\n", o->f);
	fflush(o->f);
}

/* ---- argument values ---- */

static double f64_of(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* u64, s64 and the narrower integers. */
static void decimal_value(FILE *f, enum arg_type t, uint64_t raw)
{
	uint64_t v = spec_int_value(t, raw);

	if (spec_type_is_signed(t))
		fprintf(f, "%" PRId64, (int64_t)v);
	else
		fprintf(f, "%" PRIu64, v);
}

static float f32_of(uint64_t bits)
{
	uint32_t low = (uint32_t)bits;
	float x;

	memcpy(&x, &low, sizeof(x));
	return x;
}

/* The name of an enum variable's value, NULL when it has none. */
static const char *enum_name(const struct spec_arg *a, uint64_t raw)
{
	int64_t v = (int64_t)spec_int_value(a->type, raw);

	for (int k = 0; a->enums && k < a->enums->n; k++)
		if (a->enums->values[k] == v)
			return a->enums->names[k];
	return NULL;
}

static void text_value(FILE *f, const struct trace_event *ev, int i)
{
	const struct spec_arg *a = &ev->spec->args[i];
	const char *name;

	/* A value picked by the caller's call site: none matched (or its
	 * value could not be read), as gdb says it. */
	if (a->src == ARG_SRC_UNAVAIL || (ev->faults & (1u << i) && spec_plan_has_cases(a))) {
		fputs("<optimized out>", f);
		return;
	}
	if (ev->faults & (1u << i) && a->type != ARG_STRING) {
		fputs("(fault)", f);
		return;
	}
	if (a->enums && (name = enum_name(a, ev->vals[i]))) {
		fputs(name, f);
		return;
	}
	if (spec_type_is_decimal(a->type)) {
		decimal_value(f, a->type, ev->vals[i]);
		return;
	}
	switch (a->type) {
	case ARG_X64:
		fprintf(f, "0x%" PRIx64, ev->vals[i]);
		break;
	case ARG_F64:
		fprintf(f, "%.17g", f64_of(ev->vals[i]));
		break;
	case ARG_F32:
		fprintf(f, "%.9g", (double)f32_of(ev->vals[i]));
		break;
	case ARG_STRING:
		if (!ev->str[i])
			fprintf(f, "(fault 0x%" PRIx64 ")", ev->vals[i]);
		else
			json_string(f, (const char *)ev->str[i], ev->strlen[i]);
		break;
	default:
		break;
	}
}

static void json_value(FILE *f, const struct trace_event *ev, int i)
{
	const struct spec_arg *a = &ev->spec->args[i];
	const char *name;

	/* Optimized out, or not readable: null. */
	if (a->src == ARG_SRC_UNAVAIL || (ev->faults & (1u << i) &&
					  (a->type != ARG_STRING || spec_plan_has_cases(a)))) {
		fputs("null", f);
		return;
	}
	/* An enum's value by name, as a string; one without a name stays
	 * a number. */
	if (a->enums && (name = enum_name(a, ev->vals[i]))) {
		json_string(f, name, strlen(name));
		return;
	}

	if (spec_type_is_decimal(a->type)) {
		decimal_value(f, a->type, ev->vals[i]);
		return;
	}
	switch (a->type) {
	case ARG_X64:
		fprintf(f, "\"0x%" PRIx64 "\"", ev->vals[i]);
		break;
	case ARG_F64:
		/* JSON has no NaN or infinity. */
		if (isfinite(f64_of(ev->vals[i])))
			fprintf(f, "%.17g", f64_of(ev->vals[i]));
		else
			fputs("null", f);
		break;
	case ARG_F32:
		if (isfinite(f32_of(ev->vals[i])))
			fprintf(f, "%.9g", (double)f32_of(ev->vals[i]));
		else
			fputs("null", f);
		break;
	case ARG_STRING:
		/* A pointer that could not be read: null, not a crash. */
		if (!ev->str[i])
			fputs("null", f);
		else
			json_string(f, (const char *)ev->str[i], ev->strlen[i]);
		break;
	default:
		break;
	}
}

static void json_args(FILE *f, const struct trace_event *ev)
{
	fputc('{', f);
	for (int i = 0; i < ev->spec->nargs; i++) {
		if (i)
			fputc(',', f);
		json_string(f, ev->spec->args[i].name,
			    strnlen(ev->spec->args[i].name, sizeof(ev->spec->args[i].name)));
		fputc(':', f);
		json_value(f, ev, i);
	}
	fputc('}', f);
}

/* ---- formats ---- */

static void text_event(struct output *o, const struct trace_event *ev)
{
	FILE *f = o->f;
	double t = (double)(int64_t)(ev->time_ns - o->t0) / 1e9;

	/* Names come from the target's session memory: escaped, bounded. */
	fprintf(f, "%12.6f %7d/%-7d ", t, (int)ev->pid, (int)ev->tid);
	text_field_to(f, ev->desc->name, sizeof(ev->desc->name), 0);
	for (int i = 0; i < ev->spec->nargs; i++) {
		fputc(' ', f);
		text_field_to(f, ev->spec->args[i].name, sizeof(ev->spec->args[i].name), 0);
		fputc('=', f);
		text_value(f, ev, i);
	}
	fputc('\n', f);
	stacks_print_text(f, ev);
}

static void json_event(struct output *o, const struct trace_event *ev)
{
	FILE *f = o->f;

	fprintf(f, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"probe\":", ev->time_ns,
		(int)ev->pid, (int)ev->tid);
	json_string(f, ev->desc->name, strnlen(ev->desc->name, sizeof(ev->desc->name)));
	fprintf(f, ",\"address\":\"0x%" PRIx64 "\",\"args\":", ev->desc->addr);
	json_args(f, ev);
	if (ev->nstack) {
		fputs(",\"stack\":", f);
		stacks_print_json(f, ev);
	}
	fputs("}\n", f);
}

static bool is_paired(const struct output *o, uint32_t id)
{
	const struct kps_desc *d = &o->map->desc[id];
	uint64_t n = __atomic_load_n(&o->map->hdr->ndesc, __ATOMIC_ACQUIRE);

	if (pairing[id])
		return pairing[id] == 1;
	pairing[id] = 2;
	for (uint64_t i = 0; i < n && i < KPS_MAX_PROBES; i++) {
		const struct kps_desc *e = &o->map->desc[i];

		if (__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE) && e->kind != d->kind &&
		    e->addr == d->addr && e->pid == d->pid)
			pairing[id] = 1;
	}
	return pairing[id] == 1;
}

/* The function's name: the probe name without "%return". */
static void function_name(const struct kps_desc *d, char *buf, size_t len)
{
	size_t n = strnlen(d->name, sizeof(d->name));
	const char *pct = memmem(d->name, n, "%return", 7);

	snprintf(buf, len, "%.*s", (int)(pct ? pct - d->name : (long)n), d->name);
}

static void chrome_record(struct output *o, const struct trace_event *ev, char ph,
			  uint64_t ns, bool with_args)
{
	FILE *f = o->f;
	char name[128];

	function_name(ev->desc, name, sizeof(name));
	fputs(o->nevents++ ? ",\n" : "", f);
	fputs("{\"name\":", f);
	json_string(f, name, strlen(name));
	fprintf(f, ",\"cat\":\"kprobe\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d", ph,
		(double)(int64_t)(ns - o->t0) / 1e3, (int)ev->pid, (int)ev->tid);
	if (ph == 'i')
		fputs(",\"s\":\"t\"", f);
	if (with_args) {
		fputs(",\"args\":", f);
		json_args(f, ev);
	}
	if (with_args && ev->nstack) {
		fputs(",\"stack\":", f);
		stacks_print_json(f, ev);
	}
	fputc('}', f);
}

/* Entries and returns of one function become "B"/"E" pairs: a return
 * carries its entry time, so a return probe alone makes both; with an
 * entry probe on the same function, that entry is the "B".  Entries of
 * other points are instant events. */
static void chrome_event(struct output *o, const struct trace_event *ev)
{
	bool paired = is_paired(o, ev->desc_id);

	if (ev->type == EV_ENTRY) {
		chrome_record(o, ev, paired ? 'B' : 'i', ev->time_ns, true);
		return;
	}
	if (!paired)
		chrome_record(o, ev, 'B', ev->entry_ns, false);
	chrome_record(o, ev, 'E', ev->time_ns, true);
}

/* A line a loaded module printed: as it is in text (control characters
 * shown as '?'), one JSON object per line in JSON. */
static void text_line(struct output *o, const struct trace_event *ev)
{
	char line[KPS_TEXT_MAX + 1];

	consumer_copy_text(line, sizeof(line), (const char *)ev->text, ev->textlen);
	if (o->format == FMT_JSON) {
		fprintf(o->f, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"text\":",
			ev->time_ns, (int)ev->pid, (int)ev->tid);
		json_string(o->f, line, strlen(line));
		fputs("}\n", o->f);
		return;
	}
	fprintf(o->f, "%s\n", line);
}

void output_event(struct output *o, const struct trace_event *ev)
{
	if (ev->type == EV_TEXT) {
		text_line(o, ev);
		return;
	}
	if (ev->type == EV_PROG) {
		if (o->prog_event)
			o->prog_event(o->prog_arg, ev);
		return;
	}
	switch (o->format) {
	case FMT_TEXT:
	case FMT_FOLDED:	/* count only: no events */
		text_event(o, ev);
		break;
	case FMT_JSON:
		json_event(o, ev);
		break;
	case FMT_CHROME:
		chrome_event(o, ev);
		break;
	}
}

void output_value_text(FILE *f, const struct trace_event *ev, int i)
{
	text_value(f, ev, i);
}

void output_value_json(FILE *f, const struct trace_event *ev, int i)
{
	json_value(f, ev, i);
}
