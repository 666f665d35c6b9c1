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
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- objects that stay mapped while code is rewritten ---- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */

	for (; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static bool covers(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= lo && addr - lo < ph->p_memsz)
			return true;
	}
	return false;
}

struct id_search {
	uintptr_t addr;
	struct kp_object_id *id;
};

static int find_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct id_search *s = arg;

	(void)size;
	if (!covers(info, s->addr))
		return 0;
	s->id->base = info->dlpi_addr;
	s->id->phdr = info->dlpi_phdr;
	s->id->name_hash = name_hash(info->dlpi_name);
	s->id->known = true;
	return 1;
}

int kp_object_id_of(uintptr_t addr, struct kp_object_id *id)
{
	struct id_search s = { addr, id };

	id->known = false;
	return kp_dl_iterate_phdr(find_id, &s) ? 0 : -ENOENT;
}

static int same_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	const struct kp_object_id *id = arg;

	(void)size;
	return info->dlpi_addr == id->base && info->dlpi_phdr == id->phdr &&
	       name_hash(info->dlpi_name) == id->name_hash;
}

bool kp_object_loaded(const struct kp_object_id *id)
{
	/* The loader's lock is recursive: this walk nests in the pinning one. */
	return !id || !id->known || dl_iterate_phdr(same_object, (void *)id);
}

struct pinned_call {
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static int call_pinned(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pinned_call *c = arg;

	(void)info;
	(void)size;
	c->ret = c->fn(c->arg);
	return 1;	/* once: the lock is what was wanted */
}

int kp_objects_pinned(int (*fn)(void *arg), void *arg)
{
	struct pinned_call c = { fn, arg, 0 };
	struct kp_thread *t = kp_lib_code_begin();

	/* The loader's own lock, not loader_lock: the caller holds a lock
	 * fork() takes, so no fork child can inherit it held; and fn may
	 * look objects up itself (kp_object_loaded()). */
	if (!dl_iterate_phdr(call_pinned, &c))
		c.ret = fn(arg);	/* no object at all: nothing to pin */
	kp_lib_code_end(t);
	return c.ret;
}

struct gone_walk {
	struct kp_gone *g;
	int n;
	const struct kp_object_id *(*object)(const void *ctx, int i);
	const void *ctx;
};

static int mark_gone(void *arg)
{
	const struct gone_walk *w = arg;

	for (int i = 0; i < w->n; i++)
		if (!kp_object_loaded(w->object(w->ctx, i)))
			w->g->bits[i >> 3] |= (uint8_t)(1u << (i & 7));
	return 0;
}

int kp_objects_gone(struct kp_gone *g, int n,
		    const struct kp_object_id *(*object)(const void *ctx, int i), const void *ctx)
{
	size_t bytes = ((size_t)(n > 0 ? n : 0) + 7) / 8;
	struct gone_walk w = { g, n, object, ctx };

	g->bits = g->small;
	if (bytes > sizeof(g->small))
		g->bits = calloc(bytes, 1);
	else
		memset(g->small, 0, sizeof(g->small));
	if (!g->bits)
		return -ENOMEM;
	kp_objects_pinned(mark_gone, &w);
	return 0;
}

void kp_objects_gone_free(struct kp_gone *g)
{
	if (g->bits != g->small)
		free(g->bits);
	g->bits = NULL;
}
