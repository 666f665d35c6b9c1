/* `kprobe load MODULE.so [ARG...]`: the Kprobes module model.
 *
 * The agent dlopens the module, calls its kprobe_module_init(argc, argv)
 * once and its kprobe_module_exit() once when the session ends (the tool
 * detaches or stops, or the process exits).  The module's handlers print
 * with kprobe_printk(), which formats into a buffer on the stack and puts
 * the line into the calling thread's ring of the session memory, where the
 * tool reads it like a trace event.
 *
 * The module resolves libkprobes' calls and kprobe_printk against the
 * agent: an agent injected with -p PID was loaded without RTLD_GLOBAL, so
 * it first makes its own symbols global (the program then sees them too,
 * as it would after dlopen(..., RTLD_GLOBAL) of libkprobes).  A module
 * linked with -lkprobes would drag in a second copy of the library, which
 * knows nothing of the agent's probes: such a module is refused.
 *
 * After its exit the module is unloaded (dlclose), as rmmod unloads a
 * kernel module: unregistering a probe waits until none of its handlers
 * runs, so once exit has unregistered them, no thread is in the module's
 * code.  A module whose init fails is unloaded at once: init must undo
 * what it did.  The next session loads it afresh, its data initialised. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kprobes/module.h>

#include "agent.h"

typedef int (*module_init_t)(int, char **);
typedef void (*module_exit_t)(void);

static module_exit_t module_exit_fn;	/* set while a module's init has succeeded */
static void *module_handle;
static bool at_exit_set;

static void module_at_exit(void);

/* ---- kprobe_printk: a small async-signal-safe formatter ---- */

struct fmt_out {
	char *buf;
	size_t len, cap;
};

static void put_char(struct fmt_out *o, char c)
{
	if (o->len < o->cap)
		o->buf[o->len] = c;
	o->len++;
}

static void put_padded(struct fmt_out *o, const char *s, size_t n, int width, bool left,
		       char pad)
{
	int fill = width > (int)n ? width - (int)n : 0;

	if (!left && pad == '0' && n && (s[0] == '-')) {
		/* The sign goes before the zeros. */
		put_char(o, '-');
		s++;
		n--;
	}
	for (; !left && fill > 0; fill--)
		put_char(o, pad);
	for (size_t i = 0; i < n; i++)
		put_char(o, s[i]);
	for (; left && fill > 0; fill--)
		put_char(o, ' ');
}

/* Digits of v in base (lower or upper case) into the end of tmp; returns
 * where they start. */
static char *format_unsigned(unsigned long long v, unsigned int base, bool upper, char *end)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char *p = end;

	do {
		*--p = digits[v % base];
		v /= base;
	} while (v);
	return p;
}

enum length { LEN_INT, LEN_CHAR, LEN_SHORT, LEN_LONG, LEN_LLONG, LEN_SIZE };

static enum length parse_length(const char **f)
{
	const char *p = *f;
	enum length l = LEN_INT;

	if (p[0] == 'h' && p[1] == 'h') {
		l = LEN_CHAR;
		p += 2;
	} else if (p[0] == 'h') {
		l = LEN_SHORT;
		p++;
	} else if (p[0] == 'l' && p[1] == 'l') {
		l = LEN_LLONG;
		p += 2;
	} else if (p[0] == 'l' || p[0] == 'j' || p[0] == 't') {
		l = LEN_LONG;
		p++;
	} else if (p[0] == 'z') {
		l = LEN_SIZE;
		p++;
	}
	*f = p;
	return l;
}

static long long signed_arg(va_list *ap, enum length l)
{
	switch (l) {
	case LEN_CHAR:
		return (signed char)va_arg(*ap, int);
	case LEN_SHORT:
		return (short)va_arg(*ap, int);
	case LEN_LONG:
	case LEN_SIZE:
		return va_arg(*ap, long);
	case LEN_LLONG:
		return va_arg(*ap, long long);
	default:
		return va_arg(*ap, int);
	}
}

static unsigned long long unsigned_arg(va_list *ap, enum length l)
{
	switch (l) {
	case LEN_CHAR:
		return (unsigned char)va_arg(*ap, unsigned int);
	case LEN_SHORT:
		return (unsigned short)va_arg(*ap, unsigned int);
	case LEN_LONG:
	case LEN_SIZE:
		return va_arg(*ap, unsigned long);
	case LEN_LLONG:
		return va_arg(*ap, unsigned long long);
	default:
		return va_arg(*ap, unsigned int);
	}
}

/* One conversion after '%' (flags, width and precision already read). */
static void format_one(struct fmt_out *o, char conv, enum length l, va_list *ap, int width,
		       int prec, bool left, char pad)
{
	char tmp[32], *end = tmp + sizeof(tmp), *p;
	const char *s;
	size_t n;

	switch (conv) {
	case 'd':
	case 'i': {
		long long v = signed_arg(ap, l);
		unsigned long long mag = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

		p = format_unsigned(mag, 10, false, end);
		if (v < 0)
			*--p = '-';
		put_padded(o, p, (size_t)(end - p), width, left, pad);
		return;
	}
	case 'u':
	case 'x':
	case 'X':
	case 'o':
		p = format_unsigned(unsigned_arg(ap, l), conv == 'u' ? 10 : conv == 'o' ? 8 : 16,
				    conv == 'X', end);
		put_padded(o, p, (size_t)(end - p), width, left, pad);
		return;
	case 'p':
		p = format_unsigned((unsigned long long)(uintptr_t)va_arg(*ap, void *), 16, false,
				    end);
		*--p = 'x';
		*--p = '0';
		put_padded(o, p, (size_t)(end - p), width, left, ' ');
		return;
	case 'c':
		tmp[0] = (char)va_arg(*ap, int);
		put_padded(o, tmp, 1, width, left, ' ');
		return;
	case 's':
		s = va_arg(*ap, const char *);
		if (!s)
			s = "(null)";
		/* A bounded scan: the precision, or what fits the line. */
		for (n = 0; (prec < 0 || n < (size_t)prec) && n < KPROBE_PRINTK_MAX && s[n]; n++)
			;
		put_padded(o, s, n, width, left, ' ');
		return;
	case '%':
		put_char(o, '%');
		return;
	default:
		/* Unknown: print it as written, consume nothing. */
		put_char(o, '%');
		put_char(o, conv);
		return;
	}
}

static int read_number(const char **f, va_list *ap)
{
	int v = 0;

	if (**f == '*') {
		(*f)++;
		return va_arg(*ap, int);
	}
	while (**f >= '0' && **f <= '9') {
		if (v < 100000)
			v = v * 10 + (**f - '0');
		(*f)++;
	}
	return v;
}

/* The formatted length (what fits is in buf, not terminated). */
static size_t format_line(char *buf, size_t cap, const char *fmt, va_list *ap)
{
	struct fmt_out o = { buf, 0, cap };

	for (const char *f = fmt; *f; f++) {
		bool left = false;
		char pad = ' ';
		int width, prec = -1;
		enum length l;

		if (*f != '%') {
			put_char(&o, *f);
			continue;
		}
		f++;
		for (;; f++) {
			if (*f == '-')
				left = true;
			else if (*f == '0')
				pad = '0';
			else if (*f != '+' && *f != ' ' && *f != '#')
				break;
		}
		width = read_number(&f, ap);
		if (width < 0) {
			left = true;
			width = -width;
		}
		if (width > KPROBE_PRINTK_MAX)
			width = KPROBE_PRINTK_MAX;
		if (*f == '.') {
			f++;
			prec = read_number(&f, ap);
		}
		l = parse_length(&f);
		if (!*f)
			break;
		format_one(&o, *f, l, ap, width, prec, left, left ? ' ' : pad);
	}
	return o.len < cap ? o.len : cap;
}

AGENT_EXPORT int kprobe_printk(const char *fmt, ...)
{
	char line[KPROBE_PRINTK_MAX];
	va_list ap;
	size_t n;

	if (!fmt)
		return -1;
	va_start(ap, fmt);
	n = format_line(line, sizeof(line), fmt, &ap);
	va_end(ap);
	/* One record is one line: the tool adds the newline. */
	if (n && line[n - 1] == '\n')
		n--;
	return agent_emit_text(line, (uint32_t)n);
}

/* ---- loading ---- */

/* Makes the agent's symbols (libkprobes, kprobe_printk) global, so the
 * module binds to this copy of the library. */
static int export_agent(char *err, size_t errlen)
{
	Dl_info info;
	void *self;

	if (!dladdr((void *)export_agent, &info) || !info.dli_fname) {
		snprintf(err, errlen, "cannot find the agent's own path");
		return -ENOENT;
	}
	self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
	if (!self) {
		snprintf(err, errlen, "cannot make the agent's symbols global: %s", dlerror());
		return -ENOENT;
	}
	/* RTLD_NOLOAD took a reference; the agent is never unloaded anyway. */
	return 0;
}

/* Whether the module pulled in a library called libkprobes.so*: a second
 * copy of the library, which would patch code behind the agent's back. */
static int second_library(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	const char *base = slash ? slash + 1 : info->dlpi_name;

	(void)size;
	(void)data;
	return base && !strncmp(base, "libkprobes.so", 13);
}

static int call_init(module_init_t init, const struct session_config *cfg, char *err,
		     size_t errlen)
{
	char **argv = calloc((size_t)cfg->nmodargs + 2, sizeof(*argv));
	int rc;

	if (!argv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	argv[0] = cfg->module;
	for (int i = 0; i < cfg->nmodargs; i++)
		argv[i + 1] = cfg->modargs[i];
	rc = init(cfg->nmodargs + 1, argv);
	free(argv);
	if (rc < 0 && rc > -4096)
		snprintf(err, errlen, "%s: kprobe_module_init failed: %s", cfg->module,
			 strerror(-rc));
	else if (rc)
		snprintf(err, errlen, "%s: kprobe_module_init returned %d", cfg->module, rc);
	return rc ? (rc < 0 && rc > -4096 ? rc : -EINVAL) : 0;
}

int agent_module_load(const struct session_config *cfg, char *err, size_t errlen)
{
	module_init_t init;
	module_exit_t fini;
	void *h;
	int rc;

	if (module_exit_fn) {
		snprintf(err, errlen, "a module is already loaded in process %d", getpid());
		return -EBUSY;
	}
	rc = export_agent(err, errlen);
	if (rc)
		return rc;
	if (dl_iterate_phdr(second_library, NULL)) {
		snprintf(err, errlen, "process %d already has libkprobes.so: a module runs on "
			 "the agent's copy only", getpid());
		return -EEXIST;
	}
	h = dlopen(cfg->module, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load %s: %s", cfg->module, dlerror());
		return -ENOENT;
	}
	if (dl_iterate_phdr(second_library, NULL)) {
		/* Its constructors ran; it cannot be unloaded safely either. */
		snprintf(err, errlen, "%s is linked with libkprobes: build it without "
			 "-lkprobes (the agent provides the library)", cfg->module);
		dlclose(h);
		return -EINVAL;
	}
	init = (module_init_t)dlsym(h, "kprobe_module_init");
	fini = (module_exit_t)dlsym(h, "kprobe_module_exit");
	if (!init || !fini) {
		snprintf(err, errlen, "%s does not export %s", cfg->module,
			 !init ? "kprobe_module_init" : "kprobe_module_exit");
		dlclose(h);
		return -ENOENT;
	}
	rc = call_init(init, cfg, err, errlen);
	if (rc) {
		dlclose(h);
		return rc;
	}
	module_handle = h;
	__atomic_store_n(&module_exit_fn, fini, __ATOMIC_RELEASE);
	if (!at_exit_set)
		at_exit_set = atexit(module_at_exit) == 0;
	return 0;
}

void agent_module_unload(void)
{
	module_exit_t fini = __atomic_exchange_n(&module_exit_fn, NULL, __ATOMIC_ACQ_REL);

	if (!fini)
		return;
	fini();
	dlclose(module_handle);
	module_handle = NULL;
}

/* The process exits with the session still on: the module's exit runs
 * while the session memory is there to take its last lines, and before
 * any destructor (exit() runs atexit functions first, the loader's
 * finalization of every object last).  No dlclose then. */
static void module_at_exit(void)
{
	module_exit_t fini = __atomic_exchange_n(&module_exit_fn, NULL, __ATOMIC_ACQ_REL);

	if (fini)
		fini();
}
