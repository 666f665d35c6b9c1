/* kprobes-bench --coverage OBJECT: the share of an ELF object's function
 * entries that jump optimization takes, and how many stay unoptimized for
 * each reason the optimizer gives (arch_opt_check(), the same analysis a
 * registered probe goes through).
 *
 * OBJECT is measured where it is loaded: in this process when it already
 * is (libc.so.6) or when dlopen() can load it (a shared library); an
 * executable is started with the coverage library preloaded
 * (libkprobes-coverage.so, next to kprobes-bench), which measures it in its
 * constructor, before the program's own code runs, writes the report into
 * a pipe and exits. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch/arch.h"
#include "bench.h"
#include "core/internal.h"
#include "elf/symbols.h"

#define MAX_REASONS 32
#define ENV_FD "KPROBES_BENCH_COVERAGE_FD"
#define ENV_MODE "KPROBES_BENCH_COVERAGE_MODE"

struct func {
	uintptr_t addr;
	size_t size;
	const char *name;	/* first name seen at addr (points into the cache) */
	uintptr_t bias;		/* the object's load bias */
};

struct tally {
	struct func *fn;
	size_t nfn, cap;
	long total, ok;
	long nfde;		/* of which known only from .eh_frame */
	const char *why[MAX_REASONS];
	long count[MAX_REASONS];
	int nwhy;
};

static int push_func(struct tally *t, const struct ksym *sym)
{
	if (t->nfn == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct func *n = realloc(t->fn, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->fn = n;
		t->cap = cap;
	}
	t->fn[t->nfn++] = (struct func){ sym->addr, sym->size, sym->name, sym->load_bias };
	return 0;
}

static int collect_one(const struct ksym *sym, void *arg)
{
	return sym->size ? push_func(arg, sym) : 0;
}

/* The functions known only from .eh_frame (a stripped executable's
 * internal functions, .cold parts): the executable segment of the object,
 * walked from function to function. */
static int collect_fde_only(struct tally *t, uintptr_t anchor)
{
	struct ksym seg, k;
	int err = 0;

	if (t->nfn)
		anchor = t->fn[0].addr;
	if (!anchor || ksym_object_of(anchor, &seg))
		return 0;
	for (uintptr_t a = seg.addr; !err && a < seg.addr + seg.size;) {
		if (ksym_lookup_addr(a, &k) || !k.size) {
			a++;
			continue;
		}
		if (k.addr == a && !k.name) {
			err = push_func(t, &k);
			t->nfde++;
		}
		a = k.addr + k.size > a ? k.addr + k.size : a + 1;
	}
	return err;
}

static int cmp_func(const void *a, const void *b)
{
	const struct func *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* Every function symbol of object, once per address (aliases share one
 * entry; the largest size wins, as the symbol cache's lookup does). */
static int collect(const char *object, uintptr_t anchor, struct tally *t)
{
	size_t n = 0;
	int err = ksym_foreach(object, "*", collect_one, t);

	if (!err)
		err = collect_fde_only(t, anchor);
	if (err)
		return err;
	qsort(t->fn, t->nfn, sizeof(*t->fn), cmp_func);
	for (size_t i = 0; i < t->nfn; i++)
		if (!n || t->fn[n - 1].addr != t->fn[i].addr)
			t->fn[n++] = t->fn[i];
	t->nfn = n;
	return 0;
}

/* As the registry computes it for a probe: bytes after the function that
 * belong to no other function (alignment padding). */
static size_t padding_after(uintptr_t end)
{
	struct ksym other;
	size_t n = 0;

	while (n < 4 && ksym_lookup_addr(end + n, &other) == -ENOENT)
		n++;
	return n;
}

static void count_why(struct tally *t, const char *why)
{
	int i;

	for (i = 0; i < t->nwhy; i++)
		if (!strcmp(t->why[i], why))
			break;
	if (i == t->nwhy && t->nwhy < MAX_REASONS)
		t->why[t->nwhy++] = why;
	if (i < t->nwhy)
		t->count[i]++;
}

static void analyse(struct tally *t, FILE *list)
{
	for (size_t i = 0; i < t->nfn; i++) {
		const struct func *f = &t->fn[i];
		const char *why = arch_opt_check(f->addr, f->addr, f->size,
						 padding_after(f->addr + f->size));

		t->total++;
		if (!why) {
			t->ok++;
			continue;
		}
		count_why(t, why);
		if (list)
			fprintf(list, "  %#10lx  %-40s %5zu bytes  %s\n", (unsigned long)(f->addr - f->bias),
				f->name ? f->name : "(.eh_frame)", f->size, why);
	}
}

/* Most frequent reason first. */
static void sort_reasons(struct tally *t)
{
	for (int i = 1; i < t->nwhy; i++)
		for (int j = i; j > 0 && t->count[j] > t->count[j - 1]; j--) {
			long c = t->count[j];
			const char *w = t->why[j];

			t->count[j] = t->count[j - 1];
			t->why[j] = t->why[j - 1];
			t->count[j - 1] = c;
			t->why[j - 1] = w;
		}
}

static void report(FILE *out, const char *object, const struct tally *t, bool json)
{
	if (json) {
		fprintf(out, "{\"object\":\"%s\",\"functions\":%ld,\"eh_frame_only\":%ld,\"optimizable\":%ld,\"share\":%.4f,\"reasons\":{",
			object, t->total, t->nfde, t->ok, (double)t->ok / (double)t->total);
		for (int i = 0; i < t->nwhy; i++)
			fprintf(out, "%s\"%s\":%ld", i ? "," : "", t->why[i], t->count[i]);
		fprintf(out, "}}\n");
		return;
	}
	fprintf(out, "%s: %ld of %ld function entries can be jump-optimized (%.1f%%; %ld with a symbol, %ld from .eh_frame only)\n",
		object, t->ok, t->total, 100.0 * (double)t->ok / (double)t->total,
		t->total - t->nfde, t->nfde);
	for (int i = 0; i < t->nwhy; i++)
		fprintf(out, "  %6ld  %s\n", t->count[i], t->why[i]);
}

/* Measures object if it is loaded here: 0, or -ENOENT (no functions).
 * anchor: an address in its code, for an object without symbols (0: none
 * known). */
static int measure_loaded(const char *object, uintptr_t anchor, const char *label, bool json,
			  bool list, FILE *out)
{
	struct tally t;
	int err;

	memset(&t, 0, sizeof(t));
	err = collect(object, anchor, &t);
	if (!err && !t.nfn)
		err = -ENOENT;
	if (!err) {
		analyse(&t, list ? stderr : NULL);
		sort_reasons(&t);
		report(out, label, &t, json);
	}
	free(t.fn);
	return err;
}

/* An ELF executable file: path as given, or found in PATH (skipping
 * wrappers that are not ELF, such as version-manager shims). */
static bool find_elf_executable(const char *name, char *path, size_t size)
{
	const char *dirs = strchr(name, '/') ? "" : getenv("PATH");
	char magic[4];

	if (!dirs)
		dirs = "/usr/bin:/bin";
	for (const char *d = dirs;; d++) {
		size_t len = strcspn(d, ":");
		int fd;

		if (snprintf(path, size, "%.*s%s%s", (int)len, d, len ? "/" : "", name) < (int)size &&
		    access(path, X_OK) == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			bool elf = read(fd, magic, 4) == 4 && !memcmp(magic, "\177ELF", 4);

			close(fd);
			if (elf)
				return true;
		}
		d += len;
		if (!*d)
			return false;
	}
}

static int coverage_library(char *path, size_t size)
{
	ssize_t len = readlink("/proc/self/exe", path, size - 1);
	char *slash;

	if (len <= 0)
		return -errno;
	path[len] = 0;
	slash = strrchr(path, '/');
	if (!slash || snprintf(slash + 1, size - (size_t)(slash + 1 - path),
			       "libkprobes-coverage.so") >= (int)(size - (size_t)(slash + 1 - path)))
		return -ENAMETOOLONG;
	return access(path, R_OK) ? -errno : 0;
}

/* Runs exe with the coverage library preloaded; copies its report to stdout. */
static int measure_executable(const char *exe, bool json, bool list)
{
	char lib[PATH_MAX], fdstr[16], buf[4096];
	int pipefd[2], status, got = 0;
	ssize_t n;
	pid_t pid;

	if (coverage_library(lib, sizeof(lib))) {
		fprintf(stderr, "kprobes-bench: %s not found (make build/libkprobes-coverage.so)\n", lib);
		return 2;
	}
	if (pipe(pipefd))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		close(pipefd[0]);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		snprintf(fdstr, sizeof(fdstr), "%d", pipefd[1]);
		setenv(ENV_FD, fdstr, 1);
		setenv(ENV_MODE, json ? (list ? "json,list" : "json") : (list ? "list" : ""), 1);
		setenv("LD_PRELOAD", lib, 1);
		execl(exe, exe, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			got += (int)fwrite(buf, 1, (size_t)n, stdout);
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (!got || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "kprobes-bench: %s did not report its coverage (status %#x)\n", exe, status);
		return 2;
	}
	return 0;
}

int bench_coverage(const char *object, bool json, bool list)
{
	char exe[PATH_MAX];

	if (measure_loaded(object, 0, object, json, list, stdout) == 0)
		return 0;
	/* A library: load it here (RTLD_LAZY: nothing of it runs but its
	 * constructors), then measure. */
	if (dlopen(object, RTLD_LAZY | RTLD_LOCAL)) {
		ksym_refresh();
		if (measure_loaded(object, 0, object, json, list, stdout) == 0)
			return 0;
	}
	if (find_elf_executable(object, exe, sizeof(exe)))
		return measure_executable(exe, json, list);
	fprintf(stderr, "kprobes-bench: no functions found in %s (not loaded, not loadable: %s)\n",
		object, dlerror() ? : "not an executable");
	return 2;
}

/* In the preloaded library: measures the main executable, reports through
 * the inherited pipe, exits before the program runs. */
void bench_coverage_preloaded(void)
{
	const char *fdstr = getenv(ENV_FD), *mode = getenv(ENV_MODE);
	char exe[PATH_MAX], *base;
	ssize_t len;
	FILE *out;
	int err;

	if (!fdstr || !mode)
		return;
	out = fdopen(atoi(fdstr), "w");
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (!out || len <= 0)
		_exit(2);
	exe[len] = 0;
	base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	kp_init();
	err = measure_loaded(exe, getauxval(AT_ENTRY), base, strstr(mode, "json") != NULL,
			     strstr(mode, "list") != NULL, out);
	if (err)
		fprintf(stderr, "kprobes-bench: no functions found in %s: %s\n", exe, strerror(-err));
	fclose(out);
	_exit(err ? 2 : 0);
}
