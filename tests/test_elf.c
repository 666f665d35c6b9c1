/* Tests of src/elf: symbol lookup by name and address, .eh_frame bounds,
 * dlopen/dlclose tracking. Standalone: needs only src/elf, libelf and libdw. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "elf/cache.h"
#include "elf/symbols.h"

/* A function of the test executable itself. */
__attribute__((noinline)) int kp_test_target(int x);
__attribute__((noinline)) int kp_test_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

/* A function with a C++-looking name, and a plain alias to take its address
 * (GCC cannot emit "kptest::f" unquoted in C code). */
__asm__(".text\n"
	".globl \"kptest::f\"\n"
	".globl kptest_f_alias\n"
	".type \"kptest::f\", @function\n"
	".type kptest_f_alias, @function\n"
	"\"kptest::f\":\n"
	"kptest_f_alias:\n"
	"\tret\n"
	".size \"kptest::f\", . - \"kptest::f\"\n"
	".size kptest_f_alias, . - kptest_f_alias\n");
void kptest_f_alias(void);

static int data_not_code = 1;

static void *libc_handle(void)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	cr_assert_not_null(h, "libc.so.6 not loaded?");
	return h;
}

Test(elf, main_executable_function)
{
	struct ksym sym;
	char spec[512];

	cr_assert_eq(ksym_lookup_name("kp_test_target", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)&kp_test_target);
	cr_expect_gt(sym.size, 0);
	cr_expect_str_eq(sym.name, "kp_test_target");
	cr_expect(sym.is_main);
	cr_expect_not_null(strstr(sym.object, sym.basename));

	snprintf(spec, sizeof(spec), "%s:kp_test_target", sym.basename);
	cr_assert_eq(ksym_lookup_name(spec, &sym), 0, "%s", spec);
	cr_expect_eq(sym.addr, (uintptr_t)&kp_test_target);
	snprintf(spec, sizeof(spec), "%s:kp_test_target", sym.object);
	cr_assert_eq(ksym_lookup_name(spec, &sym), 0, "%s", spec);
	cr_expect_eq(sym.addr, (uintptr_t)&kp_test_target);
	cr_expect_eq(kp_test_target(1), 4);
}

Test(elf, libc_by_object_and_plain)
{
	void *libc = libc_handle();
	void *getpid_addr = dlsym(libc, "getpid");
	void *malloc_addr = dlsym(libc, "malloc");
	struct ksym sym;
	Dl_info info;

	cr_assert_eq(ksym_lookup_name("libc.so.6:getpid", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)getpid_addr);
	cr_expect_gt(sym.size, 0);
	cr_expect_str_eq(sym.basename, "libc.so.6");
	cr_expect_not(sym.is_main);
	cr_assert(dladdr(getpid_addr, &info));
	cr_expect_str_eq(sym.object, info.dli_fname);
	cr_expect_eq(sym.load_bias, (uintptr_t)info.dli_fbase);

	/* libc's own malloc, whatever a sanitizer interposes in front of it. */
	cr_assert_eq(ksym_lookup_name("libc.so.6:malloc", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)malloc_addr);

	/* Plain names follow the loader's search order. */
	cr_assert_eq(ksym_lookup_name("getpid", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)dlsym(RTLD_DEFAULT, "getpid"));
	cr_assert_eq(ksym_lookup_name("malloc", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)dlsym(RTLD_DEFAULT, "malloc"));
	dlclose(libc);
}

Test(elf, unknown_names_and_objects)
{
	struct ksym sym;

	cr_expect_eq(ksym_lookup_name("kp_no_such_function", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("libc.so.6:kp_no_such_function", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("libnosuch.so.7:malloc", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("/lib/nosuch/libc.so.6:malloc", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("libc.so.6:", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("", &sym), -ENOENT);
	/* A data symbol is no function. */
	cr_expect_eq(ksym_lookup_name("environ", &sym), -ENOENT);
}

Test(elf, cxx_names_are_not_split)
{
	struct ksym sym;
	char spec[512];

	cr_assert_eq(ksym_lookup_name("kptest::f", &sym), 0);
	cr_expect_eq(sym.addr, (uintptr_t)&kptest_f_alias);
	cr_expect(sym.is_main);
	cr_expect_eq(ksym_lookup_name("kptest:f", &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_name("kptest::", &sym), -ENOENT);

	/* An object-qualified C++ name splits at the object, not the last ':'. */
	cr_assert_eq(ksym_lookup_name("kptest_f_alias", &sym), 0);
	snprintf(spec, sizeof(spec), "%s:kptest::f", sym.basename);
	cr_assert_eq(ksym_lookup_name(spec, &sym), 0, "%s", spec);
	cr_expect_eq(sym.addr, (uintptr_t)&kptest_f_alias);
	/* The name lookup finds every alias. */
	cr_expect_eq(ksym_lookup_name("libc.so.6:__getpid", &sym), 0);
}

Test(elf, lookup_addr_inside_function)
{
	uintptr_t fn = (uintptr_t)&kp_test_target;
	void *libc = libc_handle();
	uintptr_t pid = (uintptr_t)dlsym(libc, "getpid");
	struct ksym sym;

	cr_assert_eq(ksym_lookup_addr(fn + 3, &sym), 0);
	cr_expect_eq(sym.addr, fn);
	cr_expect_str_eq(sym.name, "kp_test_target");
	cr_expect(sym.is_main);

	/* Of the aliases getpid/__getpid, the one without underscores. */
	cr_assert_eq(ksym_lookup_addr(pid + 1, &sym), 0);
	cr_expect_eq(sym.addr, pid);
	cr_expect_str_eq(sym.name, "getpid");
	cr_expect_str_eq(sym.basename, "libc.so.6");

	cr_expect_eq(ksym_lookup_addr(1, &sym), -ENOENT);
	cr_expect_eq(ksym_lookup_addr((uintptr_t)&data_not_code, &sym), -ENOENT);
	dlclose(libc);
}

Test(elf, object_of)
{
	uintptr_t fn = (uintptr_t)&kp_test_target;
	struct ksym sym;

	cr_assert_eq(ksym_object_of(fn, &sym), 0);
	cr_expect(sym.is_main);
	cr_expect_null(sym.name);
	cr_expect(sym.addr <= fn && fn < sym.addr + sym.size);

	cr_assert_eq(ksym_object_of((uintptr_t)&getpid, &sym), 0);
	cr_expect_str_eq(sym.basename, "libc.so.6");

	cr_expect_eq(ksym_object_of((uintptr_t)&data_not_code, &sym), -ENOENT);
	cr_expect_eq(ksym_object_of(0, &sym), -ENOENT);
}

Test(elf, eh_frame_bounds_of_main_function)
{
	uintptr_t fn = (uintptr_t)&kp_test_target;
	struct ksym by_sym, by_fde;

	cr_assert_eq(ksym_lookup_addr(fn, &by_sym), 0);
	cr_assert_eq(ksym_lookup_fde(fn + 3, &by_fde), 0);
	cr_expect_eq(by_fde.addr, fn);
	cr_expect_eq(by_fde.size, by_sym.size);
	/* A symbol starts where the FDE does, so the function is named. */
	cr_expect_str_eq(by_fde.name, "kp_test_target");
}

struct fde_check {
	size_t sized, covered, exact;
};

static int check_fde(const struct ksym *sym, void *arg)
{
	struct fde_check *c = arg;
	struct ksym fde;

	if (!sym->size)
		return 0;
	c->sized++;
	if (ksym_lookup_fde(sym->addr, &fde))
		return 0;
	c->covered++;
	cr_expect(fde.addr <= sym->addr && sym->addr < fde.addr + fde.size,
		  "%s: FDE %#lx+%zu", sym->name, (unsigned long)fde.addr, fde.size);
	if (fde.addr == sym->addr && fde.size == sym->size)
		c->exact++;
	return 0;
}

/* libc has no .symtab here but sized .dynsym entries: for almost all of them
 * the FDE found from the address alone must give the same bounds. */
Test(elf, eh_frame_bounds_agree_with_libc_symbols)
{
	struct fde_check c = { 0 };
	void *libc = libc_handle();
	uintptr_t pid = (uintptr_t)dlsym(libc, "getpid");
	struct ksym sym, fde;

	cr_assert_eq(ksym_foreach("libc.so.6", NULL, check_fde, &c), 0);
	cr_log_info("libc: %zu sized, %zu with FDE, %zu exact", c.sized, c.covered, c.exact);
	cr_expect_gt(c.sized, 1000);
	cr_expect_geq(c.exact * 10, c.sized * 9, "%zu of %zu", c.exact, c.sized);

	cr_assert_eq(ksym_lookup_addr(pid, &sym), 0);
	cr_assert_eq(ksym_lookup_fde(pid + 2, &fde), 0);
	cr_expect_eq(fde.addr, sym.addr);
	cr_expect_eq(fde.size, sym.size);
	dlclose(libc);
}

/* A library this process has not loaded, with one function in it. */
struct spare_lib {
	const char *name;
	const char *func;
};

static const struct spare_lib *find_spare_lib(void)
{
	static const struct spare_lib libs[] = {
		{ "libm.so.6", "cbrt" },
		{ "libz.so.1", "zlibVersion" },
		{ "libbz2.so.1.0", "BZ2_bzlibVersion" },
		{ "libexpat.so.1", "XML_ExpatVersion" },
		{ "libuuid.so.1", "uuid_generate" },
		{ "libgmp.so.10", "__gmpz_init" },
	};

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i].name, RTLD_LAZY | RTLD_NOLOAD);

		if (h) {
			dlclose(h);
			continue;
		}
		h = dlopen(libs[i].name, RTLD_LAZY);
		if (!h)
			continue;
		dlclose(h);
		if (!dlopen(libs[i].name, RTLD_LAZY | RTLD_NOLOAD))
			return &libs[i];
	}
	return NULL;
}

Test(elf, dlopen_dlclose_tracked)
{
	const struct spare_lib *lib = find_spare_lib();
	struct ksym sym;
	char spec[128];
	uintptr_t addr;
	void *h;

	if (!lib)
		cr_skip_test("no unloadable spare library on this machine");
	snprintf(spec, sizeof(spec), "%s:%s", lib->name, lib->func);
	cr_assert_eq(ksym_lookup_name(spec, &sym), -ENOENT, "%s before dlopen", spec);

	h = dlopen(lib->name, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "%s", dlerror());
	addr = (uintptr_t)dlsym(h, lib->func);
	cr_assert_eq(ksym_lookup_name(spec, &sym), 0, "%s after dlopen", spec);
	cr_expect_eq(sym.addr, addr);
	cr_expect_str_eq(sym.basename, lib->name);
	cr_assert_eq(ksym_lookup_addr(addr + 1, &sym), 0);
	cr_expect_str_eq(sym.name, lib->func);

	dlclose(h);
	if (dlopen(lib->name, RTLD_LAZY | RTLD_NOLOAD))
		cr_skip_test("%s stayed loaded after dlclose", lib->name);
	cr_expect_eq(ksym_lookup_name(spec, &sym), -ENOENT, "%s after dlclose", spec);
	cr_expect_eq(ksym_lookup_addr(addr, &sym), -ENOENT);
	cr_expect_eq(ksym_object_of(addr, &sym), -ENOENT);
	/* Everything else is still there. */
	cr_expect_eq(ksym_lookup_name("kp_test_target", &sym), 0);
	cr_expect_eq(ksym_lookup_name("libc.so.6:getpid", &sym), 0);
}

struct glob_count {
	size_t n;
	bool bad;
};

static int count_str(const struct ksym *sym, void *arg)
{
	struct glob_count *c = arg;

	c->n++;
	if (strncmp(sym->name, "str", 3) || strcmp(sym->basename, "libc.so.6"))
		c->bad = true;
	return 0;
}

static int stop_at_first(const struct ksym *sym, void *arg)
{
	struct ksym again;

	/* Callbacks may look symbols up themselves. */
	cr_expect_eq(ksym_lookup_name("kp_test_target", &again), 0);
	++*(int *)arg;
	return 42;
}

Test(elf, foreach_glob)
{
	struct glob_count c = { 0 };
	int calls = 0;

	cr_assert_eq(ksym_foreach("libc.so.6", "str*", count_str, &c), 0);
	cr_expect_gt(c.n, 10);
	cr_expect_not(c.bad);

	c = (struct glob_count){ 0 };
	cr_assert_eq(ksym_foreach(NULL, "kp_test_targe?", count_str, &c), 0);
	cr_expect_eq(c.n, 1);

	cr_expect_eq(ksym_foreach(NULL, "*", stop_at_first, &calls), 42);
	cr_expect_eq(calls, 1);
	cr_expect_eq(ksym_foreach("libnosuch.so", "*", stop_at_first, &calls), 0);
	cr_expect_eq(calls, 1);
}

/* The vDSO's clock_gettime, by the name the kernel gives it there. */
#if defined(__aarch64__)
#define VDSO_CLOCK_GETTIME "linux-vdso.so.1:__kernel_clock_gettime"
#else
#define VDSO_CLOCK_GETTIME "linux-vdso.so.1:__vdso_clock_gettime"
#endif

Test(elf, vdso)
{
	struct ksym sym, fn;

	if (!getauxval(AT_SYSINFO_EHDR))
		cr_skip_test("no vDSO");
	cr_assert_eq(ksym_lookup_name(VDSO_CLOCK_GETTIME, &sym), 0);
	cr_assert_eq(ksym_object_of(sym.addr, &fn), 0);
	cr_expect_str_eq(fn.basename, "linux-vdso.so.1");
	cr_assert_eq(ksym_lookup_addr(sym.addr + 1, &fn), 0);
	cr_expect_eq(fn.addr, sym.addr);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

Test(elf, ten_thousand_lookups)
{
	static const char *const names[] = {
		"kp_test_target", "getpid", "libc.so.6:malloc", "strlen", "kptest::f",
	};
	struct ksym sym;
	double start, elapsed;

	cr_assert_eq(ksym_lookup_name("getpid", &sym), 0); /* loads the tables */
	start = now();
	for (int i = 0; i < 10000; i++)
		cr_assert_eq(ksym_lookup_name(names[i % 5], &sym), 0);
	elapsed = now() - start;
	cr_log_info("10000 name lookups: %.1f ms", elapsed * 1e3);
	cr_expect_lt(elapsed, 1.0);
}

static void *lookup_loop(void *arg)
{
	struct ksym sym;

	for (int i = 0; i < 2000; i++) {
		if (ksym_lookup_name("kp_test_target", &sym) ||
		    sym.addr != (uintptr_t)&kp_test_target ||
		    ksym_lookup_addr((uintptr_t)&kp_test_target + 1, &sym))
			return (void *)1;
		ksym_lookup_name("cbrt", &sym);
	}
	return NULL;
}

Test(elf, concurrent_callers_and_dlopen)
{
	const struct spare_lib *lib = find_spare_lib();
	pthread_t threads[4];
	void *ret;

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&threads[i], NULL, lookup_loop, NULL), 0);
	for (int i = 0; lib && i < 50; i++) {
		void *h = dlopen(lib->name, RTLD_NOW | RTLD_LOCAL);

		ksym_refresh();
		if (h)
			dlclose(h);
	}
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(pthread_join(threads[i], &ret), 0);
		cr_expect_null(ret);
	}
}
