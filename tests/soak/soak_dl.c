/* dlopen/dlclose cycles: the plugin is loaded, probed by object:symbol,
 * called, and unloaded, over and over; sometimes unloaded while its probes
 * are still registered (they must turn GONE), sometimes loaded again
 * before the GONE probes are removed (the new copy must run unprobed). */
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "soak_probes.h"

/* dlopen()/dlclose() never overlap a fork() whose child registers probes:
 * glibc's fork leaves the loader's list lock as another thread held it, and
 * the child's dl_iterate_phdr() would wait for it forever. */
static void *loader_open(const char *path, int flags)
{
	void *h;

	pthread_mutex_lock(&soak_loader_lock);
	h = dlopen(path, flags);
	pthread_mutex_unlock(&soak_loader_lock);
	return h;
}

static int loader_close(void *h)
{
	int ret;

	pthread_mutex_lock(&soak_loader_lock);
	ret = dlclose(h);
	pthread_mutex_unlock(&soak_loader_lock);
	return ret;
}

/* A probe on the plugin. */
struct dprobe {
	union anyprobe u;
	const char *sym;
	unsigned int off;
	char kind;
	bool post;
	unsigned long hits, post_hits, ret_hits;
};

enum { D_LEAF, D_MID0, D_MID7, D_RET, ND };

static struct dprobe dps[ND] = {
	[D_LEAF] = { .sym = "libsoakplugin.so:plug_leaf", .kind = 'k' },
	[D_MID0] = { .sym = "libsoakplugin.so:plug_mid", .kind = 'k' },
	[D_MID7] = { .sym = "libsoakplugin.so:plug_mid", .off = 7, .kind = 'k' },
	[D_RET]  = { .sym = "libsoakplugin.so:plug_ret", .kind = 'r' },
};

static long (*plug_leaf)(long), (*plug_mid)(long), (*plug_ret)(long);

static int dl_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct dprobe *d = container_of(p, struct dprobe, u.kp);

	if (regs->ip != (unsigned long)p->addr + 1)
		anomaly(A_BAD_IP, (long)p->addr, (long)regs->ip);
	if (d == &dps[D_MID7] && (long)regs->ax != (long)regs->di + 3)
		anomaly(A_BAD_REGS, 'D', (long)regs->ax);
	add(&d->hits, 1);
	return 0;
}

static void dl_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	add(&container_of(p, struct dprobe, u.kp)->post_hits, 1);
}

static int dl_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)ri->data = (long)regs->di;
	add(&container_of(ri->rp, struct dprobe, u.rp)->hits, 1);
	return 0;
}

static int dl_rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if ((long)regs->ax != *(long *)ri->data - 9)
		anomaly(A_BAD_RETVAL, 'D', (long)regs->ax);
	add(&container_of(ri->rp, struct dprobe, u.rp)->ret_hits, 1);
	return 0;
}

static void dl_setup(struct dprobe *d, uint64_t r)
{
	memset(&d->u, 0, sizeof(d->u));
	d->u.kp.symbol_name = d->sym;
	d->u.kp.offset = d->off;
	d->hits = d->post_hits = d->ret_hits = 0;
	d->post = d->kind == 'k' && (r & 1);
	if (d->kind == 'k') {
		d->u.kp.pre_handler = dl_pre;
		d->u.kp.post_handler = d->post ? dl_post : NULL;
	} else {
		d->u.rp.entry_handler = dl_rp_entry;
		d->u.rp.handler = dl_rp_ret;
		d->u.rp.data_size = sizeof(long);
		d->u.rp.maxactive = 8;
	}
}

/* All four, singly or as one kprobe batch plus the return probe. */
static int dl_register(uint64_t *rng)
{
	struct kprobe *batch[3] = { &dps[D_LEAF].u.kp, &dps[D_MID0].u.kp, &dps[D_MID7].u.kp };
	int err = 0;

	for (int i = 0; i < ND; i++)
		dl_setup(&dps[i], rnd(rng) >> (i * 3));
	if (rnd(rng) & 1) {
		err = register_kprobes(batch, 3);
	} else {
		for (int i = 0; i < 3 && !err; i++)
			if ((err = register_kprobe(batch[i])))
				unregister_kprobes(batch, i);
	}
	if (!err && (err = register_kretprobe(&dps[D_RET].u.rp)))
		unregister_kprobes(batch, 3);
	return err;
}

static void dl_unregister(void)
{
	struct kprobe *batch[3] = { &dps[D_LEAF].u.kp, &dps[D_MID0].u.kp, &dps[D_MID7].u.kp };

	unregister_kprobes(batch, 3);
	unregister_kretprobe(&dps[D_RET].u.rp);
}

static bool dl_resolve(void *h)
{
	plug_leaf = (long (*)(long))dlsym(h, "plug_leaf");
	plug_mid = (long (*)(long))dlsym(h, "plug_mid");
	plug_ret = (long (*)(long))dlsym(h, "plug_ret");
	return plug_leaf && plug_mid && plug_ret;
}

/* Calls each plugin function k times; false on a wrong result. */
static bool dl_calls(int k)
{
	bool ok = true;

	for (long x = 0; x < k; x++)
		ok &= plug_leaf(x) == 3 * x + 1 && plug_mid(x) == (((x + 3) * 2) ^ 1) &&
		      plug_ret(x) == x - 9;
	return ok;
}

/* This thread alone calls the plugin: every probe must count exactly. */
static void dl_check_exact(unsigned long k)
{
	for (int i = 0; i < ND; i++) {
		struct dprobe *d = &dps[i];

		if (d->hits != k || d->u.kp.nmissed || (d->post && d->post_hits != k) ||
		    (d->kind == 'r' && (d->ret_hits != k || d->u.rp.nmissed)))
			anomaly(A_DL, 10 + i, (long)d->hits);
		add(&tot.dl_hits, d->hits + d->post_hits + d->ret_hits);
	}
}

static bool still_loaded(void)
{
	void *h = loader_open(opt.plugin, RTLD_NOW | RTLD_NOLOAD);

	if (h)
		loader_close(h);
	return h != NULL;
}

/* Unloaded under registered probes: every one is GONE, none optimized. */
static void dl_check_gone(void)
{
	if (still_loaded())
		return;
	add(&tot.dl_gone_checked, 1);
	for (int i = 0; i < ND; i++) {
		unsigned int f = __atomic_load_n(&dps[i].u.kp.flags, __ATOMIC_RELAXED);

		if (!(f & KPROBE_FLAG_GONE) || (f & KPROBE_FLAG_OPTIMIZED))
			anomaly(A_DL, 20 + i, f);
	}
}

static void dl_close(void *h)
{
	if (loader_close(h))
		anomaly(A_DL, 2, 0);
}

/* Loaded again while the GONE probes are still registered: the new copy
 * runs without them, and removing them does not touch it. */
static void dl_reload_under_gone(void)
{
	unsigned long hits0 = dps[D_LEAF].hits + dps[D_MID7].hits + dps[D_RET].hits;
	void *h = loader_open(opt.plugin, RTLD_NOW | RTLD_LOCAL);

	if (!h || !dl_resolve(h)) {
		anomaly(A_DL, 3, 0);
		return;
	}
	if (!dl_calls(20))
		anomaly(A_DL, 4, 0);
	dl_unregister();
	if (!dl_calls(20))
		anomaly(A_DL, 5, 0);
	if (dps[D_LEAF].hits + dps[D_MID7].hits + dps[D_RET].hits != hits0)
		anomaly(A_DL, 6, 0);
	dl_close(h);
}

static void dl_cycle(uint64_t *rng)
{
	void *h = loader_open(opt.plugin, RTLD_NOW | RTLD_LOCAL);
	unsigned long k = 20 + rnd(rng) % 200;
	int err, mode = (int)(rnd(rng) % 4);

	if (!h || !dl_resolve(h)) {
		anomaly(A_DL, 1, 0);
		if (h)
			loader_close(h);
		return;
	}
	err = dl_register(rng);
	if (err) {
		anomaly(A_REG_FAIL, 'D', err);
		dl_close(h);
		return;
	}
	if (rnd(rng) & 1)	/* give the optimizer a chance */
		sleep_us(6000 + (long)(rnd(rng) % 4000));
	if (!dl_calls((int)k))
		anomaly(A_DL, 7, 0);
	dl_check_exact(k);
	if (mode == 0) {
		dl_unregister();
		dl_close(h);
	} else {
		if (mode == 2)
			disable_kprobe(&dps[D_MID0].u.kp);
		dl_close(h);
		dl_check_gone();
		if (mode == 3 && !still_loaded())
			dl_reload_under_gone();
		else
			dl_unregister();
	}
	add(&tot.dl_cycles, 1);
}

/* One cycle, for the warm-up (no thread of its own). */
void dl_cycle_once(uint64_t *rng)
{
	dl_cycle(rng);
}

void *dl_thread(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = opt.seed * 977 + 5;

	worker_signals_begin(w);
	while (!stop_all) {
		if (opt.no_dl)
			add(&tot.dl_cycles, 1);	/* alive, for the watchdog */
		else
			dl_cycle(&rng);
		sleep_us(2000 + (long)(rnd(&rng) % 10000));
	}
	worker_signals_end(w);
	return NULL;
}
