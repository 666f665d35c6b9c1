/*
 * fork(): no lock of libkprobes may be inherited held.
 *
 * The child has only the forking thread; a lock another thread held at the
 * fork would stay held there for ever, and the child's first registration
 * (or symbol lookup, or loader walk) would wait on it.  So every lock a
 * thread can hold outside the hit path is taken before the fork, in the
 * one order in which they nest, and released in parent and child:
 *
 *   registry  ->  blacklist  ->  symbol cache  ->  loader
 *
 * The loader lock also keeps libkprobes' threads out of the dynamic
 * loader during the fork, whose own lock glibc does not reset in the
 * child (see os/linux/loader.c).  Prepare handlers run in the reverse
 * order of registration: the static-key lock, registered later and taken
 * around registry operations, is taken before these.
 */
#include <pthread.h>

#include "core/internal.h"
#include "elf/symbols.h"
#include "os/linux/loader.h"

static void fork_prepare(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_blacklist_lock();
	ksym_lock();
	kp_loader_lock();
}

static void fork_parent(void)
{
	kp_loader_unlock();
	ksym_unlock();
	kp_blacklist_unlock();
	pthread_mutex_unlock(&kp_registry_lock);
}

static void fork_child(void)
{
	kp_loader_unlock();
	ksym_after_fork_child();
	kp_blacklist_unlock();
	pthread_mutex_unlock(&kp_registry_lock);
	kp_optimizer_after_fork_child();
}

void kp_fork_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
