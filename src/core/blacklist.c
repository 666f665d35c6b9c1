/* Addresses that must never be probed: libkprobes itself (the trap path
 * must not trap), the signal return trampoline, and NOKPROBE_SYMBOL()s. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>

#include "core/internal.h"
#include "elf/symbols.h"
#include "os/linux/sys.h"
#include "os/linux/threads.h"

#define MAX_NOKPROBE 4096

static const void *nokprobe[MAX_NOKPROBE];
static int nnokprobe;
static pthread_mutex_t nokprobe_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t restorer;

/* For the fork handlers (src/core/fork.c). */
void kp_blacklist_lock(void)
{
	pthread_mutex_lock(&nokprobe_lock);
}

void kp_blacklist_unlock(void)
{
	pthread_mutex_unlock(&nokprobe_lock);
}

KP_EXPORT void __kprobes_blacklist_add(const void *fn)
{
	pthread_mutex_lock(&nokprobe_lock);
	if (nnokprobe < MAX_NOKPROBE)
		nokprobe[nnokprobe++] = fn;
	pthread_mutex_unlock(&nokprobe_lock);
}

/* The kernel's copy of our SIGTRAP action names the restorer that every
 * handler returns through (libc's __restore_rt). */
static uintptr_t find_restorer(void)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ksa;

	if (kp_syscall6(SYS_rt_sigaction, SIGTRAP, 0, (long)&ksa, 8, 0, 0))
		return 0;
	return (uintptr_t)ksa.restorer;
}

/* Code a new thread runs before glibc restores its signal mask (all
 * signals blocked): a breakpoint there would make the kernel kill the
 * process.  __ctype_init, clone and setjmp by name; start_thread is local
 * to libc, so a short-lived thread reports it (its return address).  And
 * what an exiting thread calls after glibc blocked every signal (its
 * start_thread gives the stack back: advise_stack_range calls
 * getpagesize and madvise): where a probe is jump-optimized no trap is
 * taken, but a breakpoint (arm64, or before the optimizer ran) kills. */
#define NBLOCKED 7
static uintptr_t blocked_window[NBLOCKED];

static void *report_caller(void *arg)
{
	*(uintptr_t *)arg = (uintptr_t)__builtin_return_address(0);
	return NULL;
}

static void find_blocked_window(void)
{
	struct ksym s;
	pthread_t t;

	if (ksym_lookup_name("libc.so.6:__ctype_init", &s) == 0)
		blocked_window[0] = s.addr;
	if (ksym_lookup_name("libc.so.6:clone", &s) == 0)
		blocked_window[1] = s.addr;
	/* start_thread sets up its cancellation buffer with setjmp before
	 * it restores the mask. */
	if (ksym_lookup_name("libc.so.6:_setjmp", &s) == 0)
		blocked_window[2] = s.addr;
	if (ksym_lookup_name("libc.so.6:__sigsetjmp", &s) == 0)
		blocked_window[3] = s.addr;
	if (ksym_lookup_name("libc.so.6:getpagesize", &s) == 0)
		blocked_window[5] = s.addr;
	if (ksym_lookup_name("libc.so.6:madvise", &s) == 0)
		blocked_window[6] = s.addr;
	if (pthread_create(&t, NULL, report_caller, &blocked_window[4]) == 0)
		pthread_join(t, NULL);
}

void kp_blacklist_init(void)
{
	find_blocked_window();
	restorer = find_restorer();
	arch_trap_path_range(&kp_handler_text[0][0], &kp_handler_text[0][1]);
	kp_handler_text[1][0] = restorer;
	kp_handler_text[1][1] = restorer ? restorer + 16 : 0;
}

static bool in_function_of(uintptr_t addr, uintptr_t fn)
{
	struct ksym sym;

	if (addr == fn)
		return true;
	if (ksym_lookup_addr(fn, &sym))
		return false;
	return addr >= sym.addr && addr < sym.addr + (sym.size ? sym.size : 1);
}

bool kp_blacklisted(uintptr_t addr)
{
	uintptr_t lo, hi;
	bool hit = false;

	arch_trap_path_range(&lo, &hi);
	if (lo && addr >= lo && addr < hi)
		return true;
	if (restorer && in_function_of(addr, restorer))
		return true;
	for (int i = 0; i < NBLOCKED; i++)
		if (blocked_window[i] && in_function_of(addr, blocked_window[i]))
			return true;
	pthread_mutex_lock(&nokprobe_lock);
	for (int i = 0; i < nnokprobe && !hit; i++)
		hit = in_function_of(addr, (uintptr_t)nokprobe[i]);
	pthread_mutex_unlock(&nokprobe_lock);
	return hit;
}
