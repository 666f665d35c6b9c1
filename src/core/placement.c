/*
 * Probes that cannot be placed safely, and why.
 *
 * A return probe takes the return address from the slot at the stack
 * pointer when the function is entered.  On a function that is not called
 * (the program's entry point, where that slot holds argc) it overwrites
 * what is there, and on a function that never returns its instance is
 * never given back; both are refused.  Functions the dynamic loader and
 * libc run only while the process starts, before any code of the program
 * (or of a preloaded agent) runs, can never be hit: a probe on them is
 * refused too rather than silently counting nothing.
 */
#include <elf.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "core/internal.h"
#include "elf/symbols.h"
#include "os/linux/memory.h"

/* Run once, while the process starts: the dynamic loader's start-up and
 * libc's initialization before any constructor of the program. */
static const char *const startup_only[] = {
	"_dl_start", "_dl_start_final", "_dl_sysdep_start", "dl_main", "_dl_start_user",
	"__libc_init_first", "__libc_early_init", "__libc_init_secure",
	"_dl_relocate_static_pie", "_dl_non_dynamic_init", "__libc_setup_tls", "_dl_aux_init",
};

/* Do not return to their caller (C, POSIX, glibc, the C++ runtime). */
static const char *const no_return[] = {
	"exit", "_exit", "_Exit", "quick_exit", "abort", "pthread_exit",
	"longjmp", "_longjmp", "siglongjmp", "__longjmp_chk", "__libc_siglongjmp",
	"__libc_longjmp",
	"__assert_fail", "__assert_perror_fail", "__assert",
	"__stack_chk_fail", "__stack_chk_fail_local", "__fortify_fail", "__chk_fail",
	"__libc_fatal", "__libc_start_main", "__libc_start_call_main",
	"err", "errx", "verr", "verrx",
	"__cxa_throw", "__cxa_rethrow", "_Unwind_Resume", "__cxa_bad_cast",
	"__cxa_bad_typeid", "__cxa_pure_virtual", "__cxa_deleted_virtual",
	"_ZSt9terminatev", "__cxa_call_terminate", "__cxa_call_unexpected",
};

#define N_STARTUP (sizeof(startup_only) / sizeof(startup_only[0]))
#define N_NORETURN (sizeof(no_return) / sizeof(no_return[0]))
#define NAMES_CACHED 8

/* The addresses those names have in one object, looked up once per
 * object (by every alias: a function may be listed under any of them). */
struct object_names {
	char path[256];
	uintptr_t bias;
	uintptr_t startup[N_STARTUP];
	uintptr_t noreturn[N_NORETURN];
	uintptr_t entry;	/* _start: crt1's entry point, by convention */
};

static struct object_names cache[NAMES_CACHED];
static unsigned int cache_next;

static uintptr_t address_in(const char *path, const char *name)
{
	char spec[512];
	struct ksym s;

	snprintf(spec, sizeof(spec), "%s:%s", path, name);
	return ksym_lookup_name(spec, &s) == 0 && !strcmp(s.object, path) ? s.addr : 0;
}

static const struct object_names *names_of(const struct ksym *obj)
{
	struct object_names *c;

	if (!obj->object || strlen(obj->object) >= sizeof(c->path))
		return NULL;
	for (unsigned int i = 0; i < NAMES_CACHED; i++)
		if (cache[i].path[0] && cache[i].bias == obj->load_bias &&
		    !strcmp(cache[i].path, obj->object))
			return &cache[i];
	c = &cache[cache_next++ % NAMES_CACHED];
	strcpy(c->path, obj->object);
	c->bias = obj->load_bias;
	for (size_t i = 0; i < N_STARTUP; i++)
		c->startup[i] = address_in(c->path, startup_only[i]);
	for (size_t i = 0; i < N_NORETURN; i++)
		c->noreturn[i] = address_in(c->path, no_return[i]);
	c->entry = address_in(c->path, "_start");
	return c;
}

static bool listed(const uintptr_t *addrs, size_t n, uintptr_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addrs[i] == addr)
			return true;
	return false;
}

/* The function fn and its cold part, decoded: see arch_code_never_returns. */
static bool never_returns(const struct ksym *fn)
{
	uintptr_t r[2][2] = { { fn->addr, fn->addr + fn->size } };
	char spec[512];
	struct ksym cold;
	int n = 1;

	if (!fn->size)
		return false;
	if (fn->name && fn->object) {
		snprintf(spec, sizeof(spec), "%s:%s.cold", fn->object, fn->name);
		if (ksym_lookup_name(spec, &cold) == 0 && cold.size) {
			r[1][0] = cold.addr;
			r[1][1] = cold.addr + cold.size;
			n++;
		}
	}
	return arch_code_never_returns((const uintptr_t (*)[2])r, n);
}

/* The dynamic loader's own entry point (where the kernel starts a
 * dynamically linked program), from its ELF header. */
static uintptr_t loader_entry(void)
{
	static uintptr_t entry;
	static bool known;
	uintptr_t base = getauxval(AT_BASE);
	Elf64_Ehdr eh;

	if (known)
		return entry;
	known = true;
	if (base && kp_mem_read_nofault(base, &eh, sizeof(eh)) == 0 &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_entry)
		entry = base + eh.e_entry;
	return entry;
}

const char *kp_placement_refusal(uintptr_t addr, enum kp_type type, const struct ksym *fn,
				 bool have_fn)
{
	const struct object_names *names = NULL;
	struct ksym obj;

	if (addr == loader_entry())
		return "the dynamic loader's entry point runs before any probe can be armed";
	if (ksym_object_of(addr, &obj) == 0)
		names = names_of(&obj);
	if (names && listed(names->startup, N_STARTUP, addr))
		return "runs only while the process starts, before any probe can be armed";
	if (type != KP_TYPE_KPROBE && !(have_fn && fn->addr == addr))
		return "not the entry of a function of known size";
	if (type != KP_TYPE_KRETPROBE)
		return NULL;
	if (addr == getauxval(AT_ENTRY) || (names && names->entry == addr))
		return "the program's entry point is not called: a return probe would "
		       "overwrite argc";
	if (names && listed(names->noreturn, N_NORETURN, addr))
		return "the function does not return to its caller";
	if (have_fn && fn->addr == addr && never_returns(fn))
		return "the function never returns (no return or jump out of it)";
	return NULL;
}

const char *kp_probe_refusal(uintptr_t addr, bool is_return)
{
	struct ksym fn;
	bool have_fn;
	const char *why;

	pthread_mutex_lock(&kp_registry_lock);
	have_fn = ksym_lookup_addr(addr, &fn) == 0;
	why = kp_placement_refusal(addr, is_return ? KP_TYPE_KRETPROBE : KP_TYPE_KPROBE, &fn,
				   have_fn);
	pthread_mutex_unlock(&kp_registry_lock);
	return why;
}
