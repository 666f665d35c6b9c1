/*
 * Static tracepoints: finding the descriptors, attaching handlers, and the
 * dispatch a site calls once its key is on.
 *
 * A descriptor's handler list is an immutable array replaced as a whole
 * under kp_jl_key_lock; the dispatch reads it inside a read-side section,
 * so a replaced array is freed after a grace period, as probes are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/jump_label.h"
#include "kprobes/tracepoint.h"
#include "os/linux/threads.h"

struct tp_handler {
	kprobes_tp_handler_t fn;
	void *data;
};

struct tp_handlers {
	int n;
	struct tp_handler h[];
};

/* Called from a site (program code, any thread, maybe a signal handler). */
static void tp_dispatch(struct kprobes_tracepoint *tp, const uint64_t *args)
{
	struct kp_thread *t = kp_thread_current();
	const struct tp_handlers *hs;
	int saved_errno;

	if (!t || t->in_handler) {
		__atomic_fetch_add(&tp->nmissed, 1, __ATOMIC_RELAXED);
		return;
	}
	kp_read_enter(t);
	t->in_handler++;
	saved_errno = errno;
	hs = __atomic_load_n((struct tp_handlers **)&tp->__handlers, __ATOMIC_ACQUIRE);
	for (int i = 0; hs && i < hs->n; i++)
		hs->h[i].fn(tp, args, hs->h[i].data);
	errno = saved_errno;
	t->in_handler--;
	kp_read_exit(t);
}

static bool tp_valid(const struct kprobes_tracepoint *tp)
{
	return tp && tp->__magic == KPROBES_TP_MAGIC;
}

static int find_handler(const struct tp_handlers *hs, kprobes_tp_handler_t fn, void *data)
{
	for (int i = 0; hs && i < hs->n; i++)
		if (hs->h[i].fn == fn && hs->h[i].data == data)
			return i;
	return -1;
}

/* The list without entry skip (-1: none) and with (fn, data) added when
 * fn is not NULL. */
static struct tp_handlers *list_copy(const struct tp_handlers *old, int skip,
				     kprobes_tp_handler_t fn, void *data)
{
	int n = old ? old->n : 0;
	struct tp_handlers *hs = malloc(sizeof(*hs) + (size_t)(n + 1) * sizeof(hs->h[0]));

	if (!hs)
		return NULL;
	hs->n = 0;
	for (int i = 0; i < n; i++)
		if (i != skip)
			hs->h[hs->n++] = old->h[i];
	if (fn)
		hs->h[hs->n++] = (struct tp_handler){ fn, data };
	return hs;
}

/* Publishes hs (NULL when empty) and frees the old list once no dispatch
 * can be reading it. */
static void list_replace(struct kprobes_tracepoint *tp, struct tp_handlers *hs)
{
	struct tp_handlers *old = tp->__handlers;

	if (hs && !hs->n) {
		free(hs);
		hs = NULL;
	}
	__atomic_store_n((struct tp_handlers **)&tp->__handlers, hs, __ATOMIC_RELEASE);
	kp_synchronize();
	free(old);
}

KP_EXPORT int kprobes_tracepoint_attach(struct kprobes_tracepoint *tp, kprobes_tp_handler_t fn,
					void *data)
{
	struct tp_handlers *hs, *old;
	int err;

	if (!tp_valid(tp) || !fn)
		return -EINVAL;
	err = kp_init();
	if (err)
		return err;
	kp_jl_lock();
	if (find_handler(tp->__handlers, fn, data) >= 0) {
		err = -EEXIST;
		goto out;
	}
	hs = list_copy(tp->__handlers, -1, fn, data);
	if (!hs) {
		err = -ENOMEM;
		goto out;
	}
	/* The sites on only once the handler is in place; on failure the
	 * old list goes back (still owned here: not freed before). */
	__atomic_store_n(&tp->__dispatch, tp_dispatch, __ATOMIC_RELEASE);
	old = tp->__handlers;
	__atomic_store_n((struct tp_handlers **)&tp->__handlers, hs, __ATOMIC_RELEASE);
	err = kp_jl_key_set(&tp->key.key, tp->key.key.enabled + 1);
	if (err) {
		__atomic_store_n((struct tp_handlers **)&tp->__handlers, old, __ATOMIC_RELEASE);
		kp_synchronize();
		free(hs);
		goto out;
	}
	kp_synchronize();
	free(old);
out:
	kp_jl_unlock();
	return err;
}

KP_EXPORT int kprobes_tracepoint_detach(struct kprobes_tracepoint *tp, kprobes_tp_handler_t fn,
					void *data)
{
	struct tp_handlers *hs;
	int err = 0, i;

	if (!tp_valid(tp) || !fn)
		return -EINVAL;
	kp_jl_lock();
	i = find_handler(tp->__handlers, fn, data);
	if (i < 0) {
		err = -ENOENT;
		goto out;
	}
	hs = list_copy(tp->__handlers, i, NULL, NULL);
	if (!hs) {
		err = -ENOMEM;
		goto out;
	}
	/* The sites off first, then the handler out (and waited for).  If
	 * the sites cannot be rewritten, the handler stays attached. */
	if (tp->key.key.enabled > 0) {
		err = kp_jl_key_set(&tp->key.key, tp->key.key.enabled - 1);
		if (err) {
			free(hs);
			goto out;
		}
	}
	list_replace(tp, hs);
out:
	kp_jl_unlock();
	return err;
}

KP_EXPORT int kprobes_tracepoint_foreach(int (*fn)(struct kprobes_tracepoint *tp,
						   const char *object, void *arg), void *arg)
{
	struct kp_jl_object *const *objs;
	unsigned int n;
	int ret = kp_jl_refresh();

	if (ret)
		return ret;
	n = kp_jl_objects(&objs);
	for (unsigned int i = 0; i < n && !ret; i++) {
		if (!__atomic_load_n(&objs[i]->live, __ATOMIC_ACQUIRE))
			continue;
		for (size_t j = 0; j < objs[i]->ntps && !ret; j++)
			if (tp_valid(&objs[i]->tps[j]))
				ret = fn(&objs[i]->tps[j], objs[i]->path, arg);
	}
	return ret;
}

struct find_arg {
	const char *provider, *name;
	struct kprobes_tracepoint *found;
};

static int find_one(struct kprobes_tracepoint *tp, const char *object, void *arg)
{
	struct find_arg *f = arg;

	if (strcmp(tp->provider, f->provider) || strcmp(tp->name, f->name))
		return 0;
	f->found = tp;
	return 1;
}

KP_EXPORT struct kprobes_tracepoint *kprobes_tracepoint_find(const char *provider,
							     const char *name)
{
	struct find_arg f = { provider, name, NULL };

	if (!provider || !name)
		return NULL;
	kprobes_tracepoint_foreach(find_one, &f);
	return f.found;
}

static bool has_word(const char *type, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = strstr(type, word); p; p = strstr(p + 1, word)) {
		bool start = p == type || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
					    (p[-1] >= '0' && p[-1] <= '9'));
		char e = p[n];

		if (start && !(e == '_' || (e >= 'a' && e <= 'z') || (e >= '0' && e <= '9')))
			return true;
	}
	return false;
}

KP_EXPORT char kprobes_tp_arg_kind(const struct kprobes_tp_arg *arg)
{
	static const char *const unsigned_names[] = {
		"unsigned", "size_t", "uintptr_t", "uintmax_t", "uint8_t", "uint16_t",
		"uint32_t", "uint64_t", "bool", "_Bool", "uid_t", "gid_t",
		"mode_t", "dev_t", "ino_t", "socklen_t",
	};
	const char *t = arg->type;

	if (strchr(t, '*'))
		return has_word(t, "char") && !strchr(strchr(t, '*') + 1, '*') ? 'S' : 'p';
	if (has_word(t, "float") || has_word(t, "double"))
		return 'f';
	for (size_t i = 0; i < sizeof(unsigned_names) / sizeof(unsigned_names[0]); i++)
		if (has_word(t, unsigned_names[i]))
			return 'u';
	return 's';
}

/* kprobes_list(): one line per tracepoint with handlers. */
int kp_list_tracepoints(FILE *out);

struct list_arg {
	FILE *out;
	int err;
};

static int list_one(struct kprobes_tracepoint *tp, const char *object, void *arg)
{
	struct list_arg *l = arg;
	const char *base = strrchr(object, '/');

	if (!static_key_enabled(&tp->key.key))
		return 0;
	base = base ? base + 1 : object;
	if (fprintf(l->out, "%016lx  t  %s:%s%s%s%s\n", (unsigned long)tp, tp->provider, tp->name,
		    *base ? "  [" : "", base, *base ? "]" : "") < 0)
		l->err = -EIO;
	return 0;
}

int kp_list_tracepoints(FILE *out)
{
	struct list_arg l = { out, 0 };
	int err = kprobes_tracepoint_foreach(list_one, &l);

	return err ? err : l.err;
}
