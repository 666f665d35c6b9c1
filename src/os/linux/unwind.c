/*
 * Unwinders and return probes.  A return-probed frame's return address is
 * its instance's return stub, whose unwind information lets a forced unwind
 * (pthread_cancel) step through (the architecture's return stubs).  Where the
 * unwinder can be intercepted these interposers still put the real return
 * addresses back: for a while (backtraces, which would otherwise list the
 * stub as a frame), or for good when the frames are being left (a C++
 * exception being raised, pthread_exit).  A C++ exception needs these
 * interposers: the stubs' unwind information alone does not carry it
 * through a return-probed frame.  A left frame's return handler does not
 * run, as for a longjmp.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <unwind.h>

#include "os/linux/loader.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

#define KP_EXPORT __attribute__((visibility("default")))

char kp_unwind_interposers;

/* The library's work inside the program's call (kp_lib_code_begin()). */
static void unhijack(bool release)
{
	void (*fn)(bool) = kp_os_upcall_get(ret_unhijack);
	struct kp_thread *t;

	if (!fn)
		return;
	t = kp_lib_code_begin();
	fn(release);
	kp_lib_code_end(t);
}

static void rehijack(void)
{
	void (*fn)(void) = kp_os_upcall_get(ret_rehijack);
	struct kp_thread *t;

	if (!fn)
		return;
	t = kp_lib_code_begin();
	fn();
	kp_lib_code_end(t);
}

static void *next_fn(const char *name)
{
	struct kp_thread *t = kp_lib_code_begin();
	void *fn = kp_next_symbol(name, "libgcc_s.so.1");

	kp_lib_code_end(t);
	if (!fn)
		abort();
	return fn;
}

KP_EXPORT _Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception *e)
{
	static _Unwind_Reason_Code (*real)(struct _Unwind_Exception *);

	if (!real)
		real = next_fn("_Unwind_RaiseException");
	unhijack(false);
	return real(e);
}

KP_EXPORT _Unwind_Reason_Code _Unwind_Resume_or_Rethrow(struct _Unwind_Exception *e)
{
	static _Unwind_Reason_Code (*real)(struct _Unwind_Exception *);

	if (!real)
		real = next_fn("_Unwind_Resume_or_Rethrow");
	unhijack(false);
	return real(e);
}


/* The exception is caught in the frame whose CFA phase 1 recorded
 * (libgcc: private_2): frames below it are gone, the others return
 * normally through the trampoline again. */
/* The C++ runtime's entry (no C header declares it). */
void *__cxa_begin_catch(void *e);

KP_EXPORT void *__cxa_begin_catch(void *e)
{
	static void *(*real)(void *);
	void (*after_catch)(uintptr_t);
	void *r;

	if (!real)
		real = next_fn("__cxa_begin_catch");
	r = real(e);
	after_catch = kp_os_upcall_get(ret_after_catch);
	if (after_catch) {
		struct kp_thread *t = kp_lib_code_begin();

		after_catch(((struct _Unwind_Exception *)e)->private_2);
		kp_lib_code_end(t);
	}
	return r;
}

KP_EXPORT _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn fn, void *arg)
{
	static _Unwind_Reason_Code (*real)(_Unwind_Trace_Fn, void *);
	_Unwind_Reason_Code r;

	if (!real)
		real = next_fn("_Unwind_Backtrace");
	unhijack(false);
	r = real(fn, arg);
	rehijack();
	return r;
}

KP_EXPORT int backtrace(void **buf, int size)
{
	static int (*real)(void **, int);
	int n;

	if (!real)
		real = next_fn("backtrace");
	unhijack(false);
	n = real(buf, size);
	rehijack();
	return n;
}

KP_EXPORT void pthread_exit(void *ret)
{
	static void (*real)(void *) __attribute__((noreturn));

	if (!real)
		real = next_fn("pthread_exit");
	unhijack(true);
	real(ret);
}
