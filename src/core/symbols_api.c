/* <kprobes/symbols.h>: the library's symbol cache and object list, for
 * tools that name probes the way registration does. */
#include <errno.h>
#include <string.h>

#include "kprobes/symbols.h"
#include "core/internal.h"
#include "core/stack.h"
#include "elf/symbols.h"
#include "os/linux/loader.h"
#include "os/linux/threads.h"

/* The library's struct, filled from its cache's. */
static void sym_from_ksym(struct kprobes_sym *out, const struct ksym *k)
{
	out->sz = sizeof(*out);
	out->addr = k->addr;
	out->size = k->size;
	out->name = k->name;
	out->object = k->object;
	out->basename = k->basename;
	out->load_bias = k->load_bias;
	out->is_main = k->is_main;
}

/* Copies what both the caller's struct (out->sz bytes) and ours know;
 * bytes of a newer caller's struct beyond ours read as zero. */
static void sym_copy_out(struct kprobes_sym *out, const struct ksym *k)
{
	size_t sz = out->sz;
	struct kprobes_sym s;

	sym_from_ksym(&s, k);
	if (sz > sizeof(s)) {
		memset((char *)out + sizeof(s), 0, sz - sizeof(s));
		sz = sizeof(s);
	}
	memcpy(out, &s, sz);
	out->sz = sz;
}

static bool sym_out_ok(const struct kprobes_sym *out)
{
	return out && out->sz >= KPROBES_SYM_SZ_V1;
}

KP_EXPORT int kprobes_sym_lookup_name(const char *spec, struct kprobes_sym *out)
{
	struct ksym k;
	int err;

	if (!spec || !*spec || !sym_out_ok(out))
		return -EINVAL;
	err = ksym_lookup_name(spec, &k);
	if (!err)
		sym_copy_out(out, &k);
	return err;
}

KP_EXPORT int kprobes_sym_lookup_addr(unsigned long addr, struct kprobes_sym *out)
{
	struct ksym k;
	int err;

	if (!sym_out_ok(out))
		return -EINVAL;
	err = ksym_lookup_addr(addr, &k);
	if (!err)
		sym_copy_out(out, &k);
	return err;
}

KP_EXPORT int kprobes_sym_object_of(unsigned long addr, struct kprobes_sym *out)
{
	struct ksym k = { 0 };
	int err;

	if (!sym_out_ok(out))
		return -EINVAL;
	err = ksym_object_of(addr, &k);
	if (!err) {
		k.name = NULL;
		sym_copy_out(out, &k);
	}
	return err;
}

struct foreach_call {
	int (*fn)(const struct kprobes_sym *sym, void *arg);
	void *arg;
};

static int foreach_one(const struct ksym *k, void *arg)
{
	struct foreach_call *c = arg;
	struct kprobes_sym s;

	sym_from_ksym(&s, k);
	return c->fn(&s, c->arg);
}

KP_EXPORT int kprobes_sym_foreach(const char *object, const char *glob,
				  int (*fn)(const struct kprobes_sym *sym, void *arg), void *arg)
{
	struct foreach_call c = { fn, arg };

	if (!fn)
		return -EINVAL;
	return ksym_foreach(object, glob, foreach_one, &c);
}

KP_EXPORT int kprobes_sym_check_offset(unsigned long sym_addr, size_t sym_size,
				       unsigned long offset)
{
	if (!sym_addr)
		return -EINVAL;
	return kp_check_symbol_offset(sym_addr, sym_size, offset);
}

struct caller_walk {
	int (*fn)(struct dl_phdr_info *info, size_t size, void *arg);
	void *arg;
};

/* The walk is the library's, the caller's function is the caller's: its
 * calls count as usual (kp_lib_code_suspend()). */
static int caller_walk_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct caller_walk *w = arg;
	unsigned int lib = kp_lib_code_suspend();
	int ret = w->fn(info, size, w->arg);

	kp_lib_code_resume(lib);
	return ret;
}

KP_EXPORT int kprobes_objects_foreach(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
				      void *arg)
{
	struct caller_walk w = { fn, arg };

	if (!fn)
		return -EINVAL;
	return kp_dl_iterate_phdr(caller_walk_one, &w);
}

KP_EXPORT void kprobes_objects_changed(void)
{
	kp_stack_objects_changed();
}
