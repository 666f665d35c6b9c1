/*
 * Reading the dynamic loader's object list safely across fork().
 *
 * dl_iterate_phdr() holds a lock of the loader that glibc does not reset in
 * a fork child: a fork while another thread is inside leaves the child's
 * first dl_iterate_phdr() waiting for ever, and libkprobes calls it on
 * every registration.  So libkprobes enters the loader only under a lock of
 * its own, which its fork handler holds across fork(): no libkprobes thread
 * is inside the loader when a fork happens.  (dlopen()/dlclose() by the
 * program itself at the moment of a fork remain the program's business.)
 */
#include <pthread.h>

#include "os/linux/loader.h"
#include "os/linux/threads.h"

/* A leaf: nothing is locked under it. */
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

void kp_loader_lock(void)
{
	pthread_mutex_lock(&loader_lock);
}

void kp_loader_unlock(void)
{
	pthread_mutex_unlock(&loader_lock);
}

int kp_dl_iterate_phdr(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
		       void *arg)
{
	struct kp_thread *t = kp_lib_code_begin();
	int ret;

	/* The library's walk, on whatever thread needs it (a registration,
	 * the dlclose() interposer): a probe on dl_iterate_phdr or the
	 * mutex functions must not count it as the program's call. */
	kp_loader_lock();
	ret = dl_iterate_phdr(fn, arg);
	kp_loader_unlock();
	kp_lib_code_end(t);
	return ret;
}
