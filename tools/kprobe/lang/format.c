/* Tool-side formatting of what the target sends: printf records, values,
 * hist/lhist labels, all as bpftrace 0.17 prints them.
 *
 * bpftrace finds conversion tokens with the pattern
 *   %-?[0-9]*(\.[0-9]+)?(s|c|d|u|o|x|X|p, with hh h l ll j z t before d..p)
 * splits the format after each token, prints each piece with snprintf and
 * one argument, and copies the text after the last token verbatim (so
 * "%%" there stays "%%").  An integer goes to snprintf as a 64-bit value:
 * without a length modifier %d prints its low 32 bits, which is what
 * happens here too, without relying on varargs type punning. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lang_int.h"

static int is_conv(char c)
{
	return c && strchr("duoxXp", c) != NULL;
}

int lang_fmt_token(const char *s, size_t from, size_t *start, size_t *end, char *conv, int *wide)
{
	size_t i;

	for (i = from; s[i]; i++) {
		size_t j = i + 1;
		int len = 0;

		if (s[i] != '%')
			continue;
		if (s[j] == '-')
			j++;
		while (s[j] >= '0' && s[j] <= '9')
			j++;
		if (s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
			j++;
			while (s[j] >= '0' && s[j] <= '9')
				j++;
		}
		/* a buf(): %r (escaped), %rx (every byte \xNN), %rh (hex
		 * bytes and spaces), as conversions 'r', 'R' and 'H' */
		if (s[j] == 'r') {
			*start = i;
			*end = j + 1 + (s[j + 1] == 'x' || s[j + 1] == 'h');
			*conv = s[j + 1] == 'x' ? 'R' : s[j + 1] == 'h' ? 'H' : 'r';
			*wide = 0;
			return 1;
		}
		if (s[j] == 's' || s[j] == 'c') {
			*start = i;
			*end = j + 1;
			*conv = s[j];
			*wide = 0;
			return 1;
		}
		if (s[j] == 'h' && s[j + 1] == 'h')
			len = 2, *wide = 0;
		else if (s[j] == 'l' && s[j + 1] == 'l')
			len = 2, *wide = 1;
		else if (s[j] == 'h')
			len = 1, *wide = 0;
		else if (s[j] == 'l' || s[j] == 'j' || s[j] == 'z' || s[j] == 't')
			len = 1, *wide = 1;
		else
			*wide = 0;
		if (is_conv(s[j + len])) {
			*start = i;
			*end = j + len + 1;
			*conv = s[j + len];
			return 1;
		}
	}
	return 0;
}

struct outbuf {
	char *p;
	size_t n, len;	/* capacity, length so far (may exceed n) */
};

static void put(struct outbuf *o, const char *s, size_t len)
{
	if (o->len < o->n) {
		size_t room = o->n - o->len;

		memcpy(o->p + o->len, s, len < room ? len : room);
	}
	o->len += len;
}

/* Text before a token goes through snprintf in bpftrace: "%%" is "%". */
static void put_printf_text(struct outbuf *o, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] == '%' && i + 1 < len && s[i + 1] == '%')
			i++;
		put(o, s + i, 1);
	}
}

/* A buf() as bpftrace prints it: with how 'r' printable bytes as they
 * are and the others as \xNN, 'R' every byte as \xNN, 'H' every byte in
 * hex, separated by spaces. */
static void put_buf(struct outbuf *o, const uint8_t *data, char how)
{
	uint64_t len;

	memcpy(&len, data, 8);
	if (len > LANG_STRLEN)
		len = LANG_STRLEN;	/* the target wrote it */
	for (uint64_t i = 0; i < len; i++) {
		uint8_t b = data[8 + i];
		char hex[8];

		if (how == 'H') {
			snprintf(hex, sizeof(hex), i ? " %02x" : "%02x", b);
			put(o, hex, strlen(hex));
		} else if (how == 'r' && b >= 0x20 && b < 0x7f) {
			put(o, (const char *)&b, 1);
		} else {
			snprintf(hex, sizeof(hex), "\\x%02x", b);
			put(o, hex, 4);
		}
	}
}

static void sym_of(uint64_t addr, int with_offset, const struct lang_fmt_ops *ops, char *out, size_t n)
{
	if (ops && ops->sym && ops->sym(addr, with_offset, out, n, ops->arg) == 0)
		return;
	/* bpftrace writes an address it cannot name in hex with a 0x,
	 * and 0 as "0" */
	if (addr)
		snprintf(out, n, "0x%" PRIx64, addr);
	else
		snprintf(out, n, "0");
}

static void put_stack(struct outbuf *o, const uint8_t *data, const struct lang_fmt_ops *ops, int indent)
{
	uint64_t n, i;

	memcpy(&n, data, 8);
	if (n > LANG_USTACK_MAX)
		n = LANG_USTACK_MAX;
	put(o, "\n", 1);
	for (i = 0; i < n; i++) {
		uint64_t pc;
		char sym[512];
		int k;

		memcpy(&pc, data + 8 + 8 * i, 8);
		if (!pc)
			break;
		sym_of(pc, 1, ops, sym, sizeof(sym));
		for (k = 0; k < indent; k++)
			put(o, " ", 1);
		put(o, sym, strlen(sym));
		put(o, "\n", 1);
	}
}

/* ustack(perf), as bpftrace prints it: per frame a tab, the address in
 * hex, the symbol with its decimal offset ("0x..." without one) and the
 * object in parentheses ("[unknown]" without one). */
static void put_stack_perf(struct outbuf *o, const uint8_t *data, const struct lang_fmt_ops *ops)
{
	uint64_t n;

	memcpy(&n, data, 8);
	if (n > LANG_USTACK_MAX)
		n = LANG_USTACK_MAX;
	put(o, "\n", 1);
	for (uint64_t i = 0; i < n; i++) {
		char sym[512], obj[512], line[1100];
		uint64_t pc;
		int len;

		memcpy(&pc, data + 8 + 8 * i, 8);
		if (!pc)
			break;
		sym_of(pc, 1, ops, sym, sizeof(sym));
		if (!ops || !ops->object || ops->object(pc, obj, sizeof(obj), ops->arg))
			snprintf(obj, sizeof(obj), "[unknown]");
		len = snprintf(line, sizeof(line), "\t%" PRIx64 " %s (%s)\n", pc, sym, obj);
		put(o, line, len < 0 ? 0 : (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
}

/* A value as a string: what %s prints, and what map printing uses. */
static void value_text(struct outbuf *o, const struct lang_type *t, const uint8_t *data,
		       const struct lang_fmt_ops *ops)
{
	char buf[512];
	uint64_t v = 0;

	if (t->kind != LANG_T_STR && t->kind != LANG_T_USTACK && t->kind != LANG_T_USTACK_PERF)
		memcpy(&v, data, 8);
	switch (t->kind) {
	case LANG_T_INT:
		if (t->is_signed)
			snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
		else
			snprintf(buf, sizeof(buf), "%" PRIu64, v);
		break;
	case LANG_T_STR:
		put(o, (const char *)data, strnlen((const char *)data, t->size ? t->size : LANG_STRLEN));
		return;
	case LANG_T_USTACK:
		put_stack(o, data, ops, 8);
		return;
	case LANG_T_USTACK_PERF:
		put_stack_perf(o, data, ops);
		return;
	case LANG_T_USYM:
		sym_of(v, 0, ops, buf, sizeof(buf));
		break;
	case LANG_T_PROBE:
		if (!ops || !ops->probe_name || ops->probe_name(v, buf, sizeof(buf), ops->arg))
			snprintf(buf, sizeof(buf), "%" PRIu64, v);
		break;
	case LANG_T_BUF:
		put_buf(o, data, 'r');
		return;
	case LANG_T_TIMESTAMP: {
		uint32_t fmt;

		memcpy(&fmt, (const uint8_t *)data + 8, 4);
		if (!ops || !ops->strftime || ops->strftime(v, fmt, buf, sizeof(buf), ops->arg) <= 0)
			snprintf(buf, sizeof(buf), "(?)");
		break;
	}
	default:
		buf[0] = 0;
	}
	put(o, buf, strlen(buf));
}

int lang_strftime(const char *fmt, int64_t wall_ns, char *out, size_t outlen)
{
	char f[512], usec[8];
	time_t secs = (time_t)(wall_ns / 1000000000);
	struct tm tm;
	size_t k = 0, n;

	if (!outlen || !localtime_r(&secs, &tm))
		return -1;
	snprintf(usec, sizeof(usec), "%06ld", (long)(wall_ns % 1000000000 / 1000));
	/* %f, which strftime does not know, first: "%%f" stays as it is */
	for (size_t i = 0; fmt[i] && k + 8 < sizeof(f); i++) {
		if (fmt[i] == '%' && fmt[i + 1] == '%') {
			f[k++] = fmt[i++];
			f[k++] = fmt[i];
		} else if (fmt[i] == '%' && fmt[i + 1] == 'f') {
			memcpy(f + k, usec, 6);
			k += 6;
			i++;
		} else {
			f[k++] = fmt[i];
		}
	}
	f[k] = 0;
	n = strftime(out, outlen, f, &tm);
	if (!n) {
		out[0] = 0;
		return -1;
	}
	return (int)n;
}

ssize_t lang_format_value(const struct lang_type *t, const void *data,
			  const struct lang_fmt_ops *ops, char *out, size_t outlen)
{
	struct outbuf o = { out, outlen ? outlen - 1 : 0, 0 };

	if (!t || !data || !out || !outlen)
		return -EINVAL;
	value_text(&o, t, data, ops);
	out[o.len < o.n ? o.len : o.n] = 0;
	return (ssize_t)(o.len < o.n ? o.len : o.n);
}

/* One token with its argument. */
static void put_token(struct outbuf *o, const char *tok, size_t toklen, char conv, int wide,
		      const struct lang_type *t, const uint8_t *data, const struct lang_fmt_ops *ops)
{
	char spec[32], buf[1024];
	size_t k = 0, i;
	uint64_t v = 0;
	int r;

	/* flags, width and precision as written; the length modifier is ours */
	for (i = 0; i < toklen && k < sizeof(spec) - 4; i++) {
		char c = tok[i];

		if (c == 'h' || c == 'l' || c == 'j' || c == 'z' || c == 't' || c == conv)
			continue;
		spec[k++] = c;
	}
	if (conv == 'r' || conv == 'R' || conv == 'H') {
		/* bpftrace prints a buffer token with flags or a width as
		 * written (its argument consumed) */
		if (toklen != (conv == 'r' ? 2u : 3u))
			put(o, tok, toklen);
		else if (t->kind == LANG_T_BUF)
			put_buf(o, data, conv);
		return;
	}
	if (conv == 's') {
		struct outbuf so = { buf, sizeof(buf) - 1, 0 };
		char *text;

		value_text(&so, t, data, ops);
		buf[so.len < so.n ? so.len : so.n] = 0;
		text = buf;
		spec[k++] = 's';
		spec[k] = 0;
		r = snprintf(NULL, 0, spec, text);
		if (r > 0) {
			char big[4096];

			snprintf(big, sizeof(big), spec, text);
			put(o, big, (size_t)r < sizeof(big) - 1 ? (size_t)r : sizeof(big) - 1);
		}
		return;
	}
	memcpy(&v, data, 8);
	if (conv == 'p') {
		spec[k++] = 'p';
		spec[k] = 0;
		r = snprintf(buf, sizeof(buf), spec, (void *)(uintptr_t)v);
	} else if (conv == 'c') {
		spec[k++] = 'c';
		spec[k] = 0;
		r = snprintf(buf, sizeof(buf), spec, (int)(uint32_t)v);
	} else if (wide) {
		spec[k++] = 'l';
		spec[k++] = 'l';
		spec[k++] = conv;
		spec[k] = 0;
		r = conv == 'd' ? snprintf(buf, sizeof(buf), spec, (long long)v) :
		    snprintf(buf, sizeof(buf), spec, (unsigned long long)v);
	} else {
		/* keep h/hh: printf narrows the int itself */
		const char *m = tok + toklen - 1;
		int hh = 0;

		while (m > tok && (m[-1] == 'h')) {
			hh++;
			m--;
		}
		while (hh-- > 0)
			spec[k++] = 'h';
		spec[k++] = conv;
		spec[k] = 0;
		r = conv == 'd' ? snprintf(buf, sizeof(buf), spec, (int)(uint32_t)v) :
		    snprintf(buf, sizeof(buf), spec, (unsigned int)(uint32_t)v);
	}
	if (r > 0)
		put(o, buf, (size_t)r < sizeof(buf) - 1 ? (size_t)r : sizeof(buf) - 1);
}

ssize_t lang_format_printf(const struct lang_image *img, uint32_t fmt, const void *rec, size_t len,
			   const struct lang_fmt_ops *ops, char *out, size_t outlen)
{
	const struct lang_fmt_desc *d;
	struct outbuf o = { out, outlen ? outlen - 1 : 0, 0 };
	const char *s;
	size_t pos = 0, start, end;
	unsigned i;
	char conv;
	int wide;

	if (!img || !img->hdr || !out || !outlen || fmt >= img->hdr->nfmts)
		return -EINVAL;
	d = &img->fmts[fmt];
	if (len != d->rec_size || (d->rec_size && !rec))
		return -EINVAL;
	s = lang_image_str(img, d->fmt);
	for (i = 0; i < d->nargs; i++) {
		if (!lang_fmt_token(s, pos, &start, &end, &conv, &wide))
			break;
		put_printf_text(&o, s + pos, start - pos);
		put_token(&o, s + start, end - start, conv, wide, &d->arg[i],
			  (const uint8_t *)rec + d->arg_off[i], ops);
		pos = end;
	}
	put(&o, s + pos, strlen(s + pos));
	out[o.len < o.n ? o.len : o.n] = 0;
	return (ssize_t)(o.len < o.n ? o.len : o.n);
}

/* ---- hist and lhist labels (bpftrace's hist_index_label and
 * lhist_index_label) ---- */

static void power_label(int power, char *out, size_t n)
{
	static const char suffix[] = { 0, 'K', 'M', 'G', 'T' };
	int s = power >= 40 ? 4 : power >= 30 ? 3 : power >= 20 ? 2 : power >= 10 ? 1 : 0;

	power -= 10 * s;
	if (s)
		snprintf(out, n, "%d%c", 1 << power, suffix[s]);
	else
		snprintf(out, n, "%d", 1 << power);
}

void lang_hist_label(unsigned i, char *out, size_t outlen)
{
	char a[32], b[32];

	if (i == 0)
		snprintf(out, outlen, "(..., 0)");
	else if (i == 1)
		snprintf(out, outlen, "[0]");
	else if (i == 2)
		snprintf(out, outlen, "[1]");
	else {
		power_label((int)i - 2, a, sizeof(a));
		power_label((int)i - 1, b, sizeof(b));
		snprintf(out, outlen, "[%s, %s)", a, b);
	}
}

static void number_label(int64_t v, char *out, size_t n)
{
	/* bpftrace computes these in int */
	int x = (int)v;

	if (x == 0)
		snprintf(out, n, "0");
	else if (x % 1048576 == 0)
		snprintf(out, n, "%dM", x / 1048576);
	else if (x % 1024 == 0)
		snprintf(out, n, "%dK", x / 1024);
	else
		snprintf(out, n, "%d", x);
}

void lang_lhist_label(unsigned i, int64_t min, int64_t max, int64_t step, char *out, size_t outlen)
{
	unsigned buckets = step > 0 ? (unsigned)((max - min) / step) : 0;
	char a[32], b[32];

	if (i == 0) {
		number_label(min, a, sizeof(a));
		snprintf(out, outlen, "(..., %s)", a);
	} else if (i == buckets + 1) {
		number_label(max, a, sizeof(a));
		snprintf(out, outlen, "[%s, ...)", a);
	} else {
		number_label((int64_t)(i - 1) * step + min, a, sizeof(a));
		number_label((int64_t)i * step + min, b, sizeof(b));
		snprintf(out, outlen, "[%s, %s)", a, b);
	}
}
