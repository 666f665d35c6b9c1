/* Probes on an object that dlclose() unloads become [GONE]; they can still
 * be unregistered, and other code is not mistaken for them. */
#include "testutil.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int hits;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	return 0;
}

/* build/tests/libkpgone.so (tests/dl/), next to this binary's directory. */
static const char *gone_lib(void)
{
	static char path[PATH_MAX];
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = 0;
	snprintf(path, sizeof(path), "%s/../tests/libkpgone.so", dirname(exe));
	cr_assert_eq(access(path, R_OK), 0, "%s missing (make it)", path);
	return path;
}

Test(gone, dlclose_marks_probes_gone)
{
	const char *lib = gone_lib();
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	long (*cube)(long);
	struct kprobe kp = { .symbol_name = "libkpgone.so:kpgone_cube", .pre_handler = count_hit };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	cr_assert_not_null(h, "%s", dlerror());
	cube = (long (*)(long))dlsym(h, "kpgone_cube");
	cr_assert_not_null(cube);

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(cube(3), 27);
	cr_assert_eq(hits, 1);
	cr_assert_eq(dlclose(h), 0);
	/* nothing else holds it: it is gone */
	cr_assert_null(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), "%s stays loaded", lib);
	cr_assert(kp.flags & KPROBE_FLAG_GONE, "flags %#x", kp.flags);
	cr_assert(!(kp.flags & KPROBE_FLAG_OPTIMIZED));
	f = open_memstream(&buf, &len);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	cr_assert_not_null(strstr(buf, "kpgone_cube+0x0  [libkpgone.so]  [GONE]"), "list: %s", buf);
	free(buf);
	unregister_kprobe(&kp);
	/* loading it again works, unprobed */
	h = dlopen(lib, RTLD_NOW);
	cr_assert_not_null(h);
	cube = (long (*)(long))dlsym(h, "kpgone_cube");
	cr_assert_eq(cube(4), 64);
	cr_assert_eq(hits, 1);
	dlclose(h);
}

/* Code in anonymous executable memory (a JIT's) belongs to no object: an
 * object unloaded elsewhere must not take its probes for gone, which
 * would leave their breakpoints with no probe behind them. */
Test(gone, anonymous_code_outlives_other_objects_unloading)
{
#if defined(__x86_64__)
	/* mov eax, 42; ret */
	static const unsigned char code[] = { 0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3 };
#elif defined(__aarch64__)
	/* mov w0, #42; ret */
	static const uint32_t code[] = { 0x52800540, 0xd65f03c0 };
#endif
	const char *lib = gone_lib();
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kprobe kp = { .pre_handler = count_hit };
	int (*fn)(void);
	void *h;

	cr_assert_neq(page, MAP_FAILED);
	memset(page, 0xcc, 4096);
	memcpy(page, code, sizeof(code));
	__builtin___clear_cache((char *)page, (char *)page + sizeof(code));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC), 0);
	fn = (int (*)(void))page;
	kp.addr = (kprobe_opcode_t *)page;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(fn(), 42);
	cr_assert_eq(hits, 1);
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "%s", dlerror());
	cr_assert_eq(dlclose(h), 0);
	kprobes_optimize_now();
	cr_assert(!(kp.flags & KPROBE_FLAG_GONE), "flags %#x", kp.flags);
	cr_assert_eq(fn(), 42);
	cr_assert_eq(hits, 2);
	unregister_kprobe(&kp);
	cr_assert_eq(fn(), 42);
	cr_assert_eq(hits, 2);
	munmap(page, 4096);
}

/* dlclose() unmaps an object before its interposer tells the registry,
 * and the range may be mapped again at once (a heap arena, another
 * object).  A rewrite meanwhile (here: unregistering, which puts the
 * original code back; optimizing or disabling alike) must not write into
 * what is mapped there now.  The window is opened on purpose by calling
 * libc's dlclose() directly. */
static void rewrite_after_unmap(bool optimized)
{
	int (*libc_dlclose)(void *) = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	const char *lib = gone_lib();
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	struct kprobe kp = { .symbol_name = "libkpgone.so:kpgone_cube", .pre_handler = count_hit };
	uintptr_t at, page;
	unsigned char *map;

	cr_assert_not_null(libc_dlclose);
	cr_assert_not_null(h, "%s", dlerror());
	kprobes_set_optimization(optimized);
	cr_assert_eq(register_kprobe(&kp), 0);
	kprobes_optimize_now();
	cr_assert_eq(!!(kp.flags & KPROBE_FLAG_OPTIMIZED), optimized, "flags %#x", kp.flags);
	at = (uintptr_t)kp.addr;
	page = at & ~(uintptr_t)4095;
	cr_assert_eq(libc_dlclose(h), 0);
	map = mmap((void *)page, 8192, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (map == MAP_FAILED)
		cr_skip("the unloaded object's range was mapped again meanwhile: %m");
	cr_assert_eq((uintptr_t)map, page);
	memset(map, 0x5a, 8192);
	unregister_kprobe(&kp);
	for (int i = 0; i < 8192; i++)
		cr_assert_eq(map[i], 0x5a, "byte %#lx of the new mapping written (probe at %#lx)",
			     page + i, at);
	munmap(map, 8192);
	kprobes_set_optimization(true);
}

Test(gone, a_breakpoint_removed_after_the_unmap_writes_nothing)
{
	rewrite_after_unmap(false);
}

Test(gone, a_jump_removed_after_the_unmap_writes_nothing)
{
	rewrite_after_unmap(true);
}
