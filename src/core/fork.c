/*
 * fork(): no lock of libkprobes may be inherited held.
 *
 * The child has only the forking thread; a lock another thread held at the
 * fork would stay held there for ever, and the child's first registration
 * (or symbol lookup, or loader walk) would wait on it.  So every lock a
 * thread can hold outside the hit path is taken before the fork, by one
 * handler, in the one order in which they nest, and released in parent and
 * child:
 *
 *   unwind tables -> static keys -> registry -> blacklist -> symbol cache
 *   -> static-key object list -> loader -> program signal handlers
 *
 * The loader lock also keeps libkprobes' threads out of the dynamic
 * loader during the fork, whose own lock glibc does not reset in the
 * child (see os/linux/loader.c).  One handler, not one per lock: the
 * order in which separate handlers run depends on when each was
 * registered.
 */
#include <pthread.h>

#include "core/internal.h"
#include "core/jump_label.h"
#include "core/stack.h"
#include "core/wprobe.h"
#include "elf/symbols.h"
#include "os/linux/loader.h"
#include "os/linux/signals.h"
#include "os/linux/threads.h"

static void fork_prepare(void)
{
	struct kp_thread *t = kp_lib_code_begin();

	kp_stack_fork_lock();
	kp_jl_lock();
	pthread_mutex_lock(&kp_registry_lock);
	kp_blacklist_lock();
	ksym_lock();
	kp_jl_scan_lock();
	kp_loader_lock();
	kp_sig_fork_lock();
	kp_lib_code_end(t);
}

static void fork_parent(void)
{
	struct kp_thread *t = kp_lib_code_begin();

	kp_sig_fork_unlock();
	kp_loader_unlock();
	kp_jl_scan_unlock();
	ksym_unlock();
	kp_blacklist_unlock();
	pthread_mutex_unlock(&kp_registry_lock);
	kp_jl_unlock();
	kp_stack_fork_unlock();
	kp_lib_code_end(t);
}

static void fork_child(void)
{
	struct kp_thread *t = kp_lib_code_begin();

	kp_sig_fork_unlock();
	kp_loader_unlock();
	kp_jl_scan_unlock();
	ksym_after_fork_child();
	kp_blacklist_unlock();
	kp_wprobe_after_fork_child();
	pthread_mutex_unlock(&kp_registry_lock);
	kp_jl_unlock();
	kp_stack_fork_unlock();
	kp_optimizer_after_fork_child();
	arch_after_fork_child();
	kp_lib_code_end(t);
}

/* Each handler runs on the forking thread, inside the program's fork():
 * the locks it takes (pthread_mutex_lock() and the like) are the
 * library's calls, not the program's (kp_lib_code_begin()). */
static void fork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* At initialization, and from the first use of a static key (which may
 * come first). */
void kp_fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fork_register);
}
