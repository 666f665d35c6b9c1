/* The registry: probepoints by address, registration and removal of
 * kprobes, aggregates, enable/disable.  Writers serialize on one mutex;
 * the hit path reads the hash table without locks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/stack.h"
#include "core/jump_label.h"
#include "elf/symbols.h"
#include "os/linux/memory.h"
#include "os/linux/threads.h"

#define HASH_BITS 14
#define HASH_SIZE (1u << HASH_BITS)

/* Keep the dlclose() interposer (src/os/linux/dl.c) in static links. */
extern char kp_dl_interposer;
__attribute__((used)) static char *const need_dl_interposer = &kp_dl_interposer;

pthread_mutex_t kp_registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* A trylock's one atomic exchange: from a signal handler too, which finds
 * the lock busy (and waits for nothing) when the code it interrupted
 * holds or is taking it. */
bool kp_registry_trylock(void)
{
	return pthread_mutex_trylock(&kp_registry_lock) == 0;
}

void kp_registry_unlock(void)
{
	pthread_mutex_unlock(&kp_registry_lock);
}
struct kp_probepoint *kp_all_probepoints;
static struct kp_probepoint *all_tail;
static struct kp_probepoint *table[HASH_SIZE];

static unsigned int hash_addr(uintptr_t addr)
{
	return (unsigned int)((addr * 0x9e3779b97f4a7c15ULL) >> (64 - HASH_BITS));
}

struct kp_probepoint *kp_probepoint_lookup(uintptr_t addr)
{
	struct kp_probepoint *pp = __atomic_load_n(&table[hash_addr(addr)], __ATOMIC_ACQUIRE);

	while (pp && pp->addr != addr)
		pp = __atomic_load_n(&pp->hnext, __ATOMIC_ACQUIRE);
	return pp;
}

static void table_insert(struct kp_probepoint *pp)
{
	unsigned int h = hash_addr(pp->addr);

	pp->hnext = table[h];
	__atomic_store_n(&table[h], pp, __ATOMIC_RELEASE);
	pp->all_prev = all_tail;
	pp->all_next = NULL;
	if (all_tail)
		all_tail->all_next = pp;
	else
		kp_all_probepoints = pp;
	all_tail = pp;
}

/* Readers already on pp keep walking its (still valid) chain. */
static void hash_remove(struct kp_probepoint *pp)
{
	struct kp_probepoint **link = &table[hash_addr(pp->addr)];

	while (*link && *link != pp)
		link = &(*link)->hnext;
	if (*link)
		__atomic_store_n(link, pp->hnext, __ATOMIC_RELEASE);
}

static void table_remove(struct kp_probepoint *pp)
{
	hash_remove(pp);
	if (pp->all_prev)
		pp->all_prev->all_next = pp->all_next;
	else
		kp_all_probepoints = pp->all_next;
	if (pp->all_next)
		pp->all_next->all_prev = pp->all_prev;
	else
		all_tail = pp->all_prev;
}

/* Probepoints allocated and not yet freed (kp_get_stats). */
unsigned long kp_probepoints_alive;

void kp_probepoint_free(struct kp_probepoint *pp)
{
	__atomic_fetch_sub(&kp_probepoints_alive, 1, __ATOMIC_RELAXED);
	free(pp->symbol);
	free(pp->object);
	free(pp);
}

static bool probe_enabled(const struct kprobe *p)
{
	return !(__atomic_load_n(&p->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED);
}

bool kp_probepoint_enabled(const struct kp_probepoint *pp)
{
	return pp->nenabled != 0;
}

/* A jprobe is always its probepoint's last probe. */
static bool has_jprobe(const struct kp_probepoint *pp)
{
	return pp->last && pp->last->__type == KP_TYPE_JPROBE;
}

/* Is p on the registry?  The mark alone could be a copy's: the set of
 * registered pointers decides, without reading anything p points to. */
static bool is_registered(const struct kprobe *p)
{
	return p->__state == KP_STATE_REGISTERED && p->__pp && kp_probeset_has(p);
}

/* Adds (delta 1) or removes (-1) p's share of its probepoint's counts. */
static void pp_account(struct kp_probepoint *pp, const struct kprobe *p, long delta)
{
	if (!probe_enabled(p))
		return;
	pp->nenabled += (unsigned long)delta;
	if (p->post_handler || p->__type == KP_TYPE_JPROBE)
		pp->nunoptimizable += (unsigned long)delta;
}

/* Removes duplicates from pps[0..n) in place; returns the new count. */
static int dedupe(struct kp_probepoint **pps, int n)
{
	int m = 0;

	for (int i = 0; i < n; i++)
		if (!pps[i]->mark) {
			pps[i]->mark = true;
			pps[m++] = pps[i];
		}
	for (int i = 0; i < m; i++)
		pps[i]->mark = false;
	return m;
}

/* addr is reached by decoding from the start of the symbol of size 0 whose
 * code (up to the next symbol) holds it: 0, -EILSEQ, or -EINVAL. */
static int check_unsized(const struct ksym *unsized, uintptr_t addr)
{
	int err = arch_check_boundary(unsized->addr, unsized->size, addr);

	return err == -EILSEQ || err == -ENOMEM || !err ? err : -EINVAL;
}

/* offset from the function symbol sym stays inside its code (for a symbol
 * of size 0, up to the next symbol) and, where nothing else tells the
 * instruction boundaries, lands on one.  Under the registry lock. */
static int check_symbol_offset(const struct ksym *sym, unsigned long offset)
{
	struct ksym unsized;

	if (sym->size)
		return offset < sym->size ? 0 : -EINVAL;
	if (ksym_lookup_unsized(sym->addr, &unsized) || unsized.addr != sym->addr)
		return 0;	/* no extent known: addr's own function decides */
	if (offset >= unsized.size)
		return -EINVAL;
	return check_unsized(&unsized, sym->addr + offset);
}

int kp_check_symbol_offset(uintptr_t sym_addr, size_t sym_size, unsigned long offset)
{
	struct ksym sym = { .addr = sym_addr, .size = sym_size };
	int err;

	pthread_mutex_lock(&kp_registry_lock);
	err = check_symbol_offset(&sym, offset);
	pthread_mutex_unlock(&kp_registry_lock);
	return err;
}

/* addr or symbol_name (+ offset) to an address and its function.  Code
 * without a sized symbol or FDE is decoded from the symbol of size 0
 * before it, when there is one. */
static int resolve_address(const struct kprobe *p, uintptr_t *addr, struct ksym *fn,
			   bool *have_fn)
{
	struct ksym sym;
	int err;

	if (!p->addr == !p->symbol_name)
		return -EINVAL;
	if (p->symbol_name) {
		err = ksym_lookup_name(p->symbol_name, &sym);
		if (!err)
			err = check_symbol_offset(&sym, p->offset);
		if (err)
			return err;
		*addr = sym.addr + p->offset;
	} else {
		*addr = (uintptr_t)p->addr + p->offset;
	}
	*have_fn = ksym_lookup_addr(*addr, fn) == 0;
	if (!*have_fn && ksym_lookup_unsized(*addr, &sym) == 0)
		return check_unsized(&sym, *addr);
	return 0;
}

static bool is_code(uintptr_t addr, bool have_fn)
{
	struct ksym obj;

	if (ksym_object_of(addr, &obj) == 0)
		return true;
	return !have_fn && kp_mem_is_exec(addr, 1);
}

static void describe(struct kp_probepoint *pp, const struct ksym *fn, bool have_fn)
{
	char buf[512];

	if (have_fn && fn->name)
		snprintf(buf, sizeof(buf), "%s+0x%lx", fn->name, (unsigned long)(pp->addr - fn->addr));
	else
		snprintf(buf, sizeof(buf), "0x%lx", (unsigned long)pp->addr);
	pp->symbol = strdup(buf);
	if (have_fn && !fn->is_main && fn->basename)
		pp->object = strdup(fn->basename);
}

/* A jump may cover them when the function is shorter than the jump. */
size_t kp_padding_after(uintptr_t end)
{
	struct ksym other;
	size_t n = 0;

	while (n < 4 && ksym_lookup_addr(end + n, &other) == -ENOENT)
		n++;
	return n;
}

static int probepoint_create(uintptr_t addr, const struct ksym *fn, bool have_fn,
			     struct kp_probepoint **out)
{
	struct kp_probepoint *pp = calloc(1, sizeof(*pp));
	struct ksym obj;
	int err;

	if (!pp)
		return -ENOMEM;
	__atomic_fetch_add(&kp_probepoints_alive, 1, __ATOMIC_RELAXED);
	pp->addr = addr;
	pp->in_object = ksym_object_of(addr, &obj) == 0;
	if (pp->in_object)
		kp_object_id_of(addr, &pp->obj);
	if (have_fn) {
		pp->func = fn->addr;
		pp->func_size = fn->size;
		pp->pad_after = kp_padding_after(fn->addr + fn->size);
	}
	err = arch_prepare_probepoint(pp, have_fn ? fn->addr : addr, have_fn ? fn->size : 0);
	if (err) {
		kp_probepoint_free(pp);
		return err;
	}
	describe(pp, fn, have_fn);
	table_insert(pp);
	*out = pp;
	return 0;
}

/* What an optimized probe's detour must keep for p's handler.  A return
 * probe's own entry handler reads pt_regs (the return address), and its
 * set-up without one is the library's C (kp_kretprobe_entry_fast). */
static uint8_t probe_needs(const struct kprobe *p, enum kp_type type)
{
	uintptr_t fn = (uintptr_t)p->pre_handler;
	uint8_t need = 0;

	if (type == KP_TYPE_KRETPROBE) {
		fn = (uintptr_t)container_of(p, struct kretprobe, kp)->entry_handler;
		need = KP_OPT_SAVE_REGS | KP_OPT_SAVE_SCRATCH;
	}
	if (fn)
		need |= kp_code_needs(fn);
	/* kprobes_vector_reg() reads the saved vector state. */
	if (p->flags & KPROBE_FLAG_VECTOR_REGS)
		need |= KP_OPT_SAVE_ALL;
	if (ARCH_DETOURS_KEEP_SCRATCH)
		need &= (uint8_t)~KP_OPT_SAVE_SCRATCH;
	/* The caller promises its handler reads only arguments from pt_regs. */
	if (type == KP_TYPE_KPROBE && (p->flags & KPROBE_FLAG_ARGS_ONLY) && (need & KP_OPT_SAVE_REGS))
		need |= KP_OPT_ARGS;
	return need;
}

/* The probepoint's first probe p, when it is alone there, an enabled
 * kprobe whose pre-handler needs its argument registers and nothing
 * else: the args level (KP_OPT_ARGS). */
static bool args_probe(const struct kprobe *p)
{
	return p && !p->__next && p->__type == KP_TYPE_KPROBE &&
	       !(p->flags & KPROBE_FLAG_DISABLED) && p->pre_handler && !p->post_handler &&
	       kp_probe_needs(p) == (KP_OPT_SAVE_REGS | KP_OPT_ARGS);
}

/* Recomputes pp->fast after any change of its probes, their flags or
 * needs.  Under the registry lock; the hit path reads it in a read-side
 * section, as it reads the list. */
static void pp_update_fast(struct kp_probepoint *pp)
{
	struct kprobe *p = pp->probes, *fast = NULL;

	if (p && !p->__next && !(p->flags & KPROBE_FLAG_DISABLED) && kp_probe_fast_fn(p)) {
		fast = p;
	} else if (p && p->__next && !p->__next->__next && kp_probe_light_entry(p) &&
		   !(p->__next->flags & KPROBE_FLAG_DISABLED) &&
		   kp_probe_fast_fn(p->__next) == (void *)kp_kretprobe_entry_fast) {
		/* A light kprobe and a return probe without an entry handler
		 * (count or record a function's entry and return): the return
		 * probe's C set-up runs the kprobe's handler first. */
		fast = p->__next;
	}
	__atomic_store_n(&pp->fast, fast, __ATOMIC_RELEASE);
	__atomic_store_n(&pp->afast, args_probe(p) ? p : NULL, __ATOMIC_RELEASE);
	/* (A pair's kprobe is pp->probes: the assembly runs it first.) */
	__atomic_store_n(&pp->rfast,
			 fast && kp_probe_fast_fn(fast) == (void *)kp_kretprobe_entry_fast &&
					 kp_membarrier_ok ? fast : NULL,
			 __ATOMIC_RELEASE);
}

static void *probe_fast_fn(struct kprobe *p, enum kp_type type)
{
	if (type == KP_TYPE_KRETPROBE)
		return container_of(p, struct kretprobe, kp)->entry_handler ?
			       NULL : (void *)kp_kretprobe_entry_fast;
	/* (the scratch registers, when the detours leave them to the
	 * needs, are saved on the fast path too) */
	if (type == KP_TYPE_KPROBE && p->pre_handler &&
	    !(kp_probe_needs(p) & (uint8_t)~KP_OPT_SAVE_SCRATCH))
		return (void *)p->pre_handler;
	return NULL;
}

/* The link a new probe of this type goes into, and the probe that will
 * come before it. */
static struct kprobe **insert_link(struct kp_probepoint *pp, enum kp_type type,
				   struct kprobe **prev)
{
	struct kprobe *last = pp->last;

	/* As in Kprobes, a jprobe comes last: the other probes' pre-handlers
	 * run before it changes the path. */
	if (last && last->__type == KP_TYPE_JPROBE && type != KP_TYPE_JPROBE)
		last = kp_probe_prev(last);
	*prev = last;
	return last ? &last->__next : &pp->probes;
}

static void probe_attach(struct kp_probepoint *pp, struct kprobe *p, enum kp_type type)
{
	struct kprobe *prev, **link = insert_link(pp, type, &prev);

	p->__next = *link;
	kp_probe_prev(p) = prev;
	if (p->__next)
		kp_probe_prev(p->__next) = p;
	else
		pp->last = p;
	p->__pp = pp;
	p->__state = KP_STATE_REGISTERED;
	p->__type = type;
	p->opcode = arch_insn_opcode(&pp->ainsn);
	p->nmissed = 0;
	p->flags &= KPROBE_FLAG_DISABLED | KPROBE_FLAG_VECTOR_REGS | KPROBE_FLAG_ARGS_ONLY;
	p->addr = (kprobe_opcode_t *)pp->addr;
	kp_probe_needs(p) = probe_needs(p, type);
	kp_probe_fast_fn(p) = probe_fast_fn(p, type);
	pp_account(pp, p, 1);
	/* No hit may take the old single probe for all of them. */
	__atomic_store_n(&pp->fast, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&pp->rfast, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&pp->afast, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(link, p, __ATOMIC_RELEASE);
	pp_update_fast(pp);
}

/* Registers p without arming; *pp_out is the probepoint to arm. */
static int kp_register_locked(struct kprobe *p, enum kp_type type, struct kp_probepoint **pp_out)
{
	struct kp_probepoint *pp;
	struct ksym fn;
	bool have_fn = false;
	uintptr_t addr;
	int err;

	if (!p || is_registered(p))
		return -EINVAL;
	err = resolve_address(p, &addr, &fn, &have_fn);
	if (err)
		return err;
	if (!is_code(addr, have_fn) || kp_blacklisted(addr))
		return -EINVAL;
	/* A static-key site is rewritten under the probe's feet: refused,
	 * as Kprobes refuses jump-label sites. */
	if (kp_jl_site_at(addr))
		return -EINVAL;
	/* Return probes and jprobes work on function entries only, and not
	 * everywhere: see placement.c. */
	if (kp_placement_refusal(addr, type, &fn, have_fn))
		return -EINVAL;
	pp = kp_probepoint_lookup(addr);
	if (pp && type == KP_TYPE_JPROBE && has_jprobe(pp))
		return -EEXIST;
	err = kp_probeset_add(p);
	if (err)
		return err;
	/* Never put a breakpoint into an installed jump; a new probe also changes
	 * what the existing probepoint may do. */
	kp_optimizer_region_conflicts(addr);
	if (pp)
		kp_optimizer_unoptimize(pp);
	if (!pp) {
		err = probepoint_create(addr, &fn, have_fn, &pp);
		if (err) {
			kp_probeset_remove(p);
			return err;
		}
	}
	probe_attach(pp, p, type);
	*pp_out = pp;
	return 0;
}

static bool should_arm(const struct kp_probepoint *pp)
{
	return kp_knob_enabled && !pp->gone && kp_probepoint_enabled(pp);
}

/* Arms or disarms each probepoint as its probes and the knob say; one core
 * synchronization per direction.  Without memory for the batch, one
 * probepoint at a time: the state the callers have already changed (a
 * probe detached, disabled) must reach the code. */
static int kp_apply_arming(struct kp_probepoint **pps, int n)
{
	struct kp_probepoint *one_arm[1], *one_disarm[1];
	struct kp_probepoint **arm = n == 1 ? one_arm : calloc((size_t)n + 1, sizeof(*arm));
	struct kp_probepoint **disarm = n == 1 ? one_disarm : calloc((size_t)n + 1, sizeof(*disarm));
	int na = 0, nd = 0, err = 0;

	if (!arm || !disarm) {
		for (int i = 0; i < n && !err; i++)
			err = kp_apply_arming(&pps[i], 1);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (should_arm(pps[i]) && !pps[i]->armed)
			arm[na++] = pps[i];
		else if (!should_arm(pps[i]) && pps[i]->armed)
			disarm[nd++] = pps[i];
	}
	if (nd) {
		kp_optimizer_forget_batch(disarm, nd);
		err = arch_disarm(disarm, nd);
	}
	/* A disarmed probe may sit inside a jump installed meanwhile. */
	for (int i = 0; i < na && !err; i++)
		kp_optimizer_region_conflicts(arm[i]->addr);
	if (na && !err) {
		kp_optimizer_analyse_ahead(arm, na);
		err = arch_arm(arm, na);
	}
	for (int i = 0; i < n && !err; i++) {
		kp_optimizer_reevaluate(pps[i]);
		if (!pps[i]->armed)
			kp_optimizer_reevaluate_near(pps[i]->addr);
	}
out:
	if (arm != one_arm)
		free(arm);
	if (disarm != one_disarm)
		free(disarm);
	return err;
}

/* Takes p off its probepoint; returns the probepoint if it became empty.
 * The caller disarms it before taking it out of the table: a thread that
 * traps meanwhile must still find it. */
static struct kp_probepoint *probe_detach(struct kprobe *p)
{
	struct kp_probepoint *pp = p->__pp;
	struct kprobe *prev = kp_probe_prev(p);

	kp_probeset_remove(p);
	pp_account(pp, p, -1);
	/* Threads on p keep following its (unchanged) __next. */
	__atomic_store_n(prev ? &prev->__next : &pp->probes, p->__next, __ATOMIC_RELEASE);
	if (p->__next)
		kp_probe_prev(p->__next) = prev;
	else
		pp->last = prev;
	pp_update_fast(pp);
	return pp->probes ? NULL : pp;
}

/* Unregisters n probes with one disarm batch and one grace period.  Cannot
 * fail: without memory for the batch, one probe at a time. */
static void kp_unregister_locked(struct kprobe **ps, int n)
{
	struct kp_probepoint *one_touched[1], *one_empty[1];
	bool one_live[1] = { false };
	struct kp_probepoint **touched = n == 1 ? one_touched : calloc((size_t)n + 1, sizeof(*touched));
	struct kp_probepoint **empty = n == 1 ? one_empty : calloc((size_t)n + 1, sizeof(*empty));
	bool *live = n == 1 ? one_live : calloc((size_t)n + 1, sizeof(*live));
	int nt = 0, ne = 0;

	if (!touched || !empty || !live) {
		for (int i = 0; i < n; i++)
			kp_unregister_locked(&ps[i], 1);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct kp_probepoint *pp;

		if (!ps[i])
			continue;
		if (!is_registered(ps[i])) {
			ps[i]->addr = NULL;
			continue;
		}
		live[i] = true;
		pp = probe_detach(ps[i]);
		if (pp)
			empty[ne++] = pp;
		else
			touched[nt++] = ps[i]->__pp;
	}
	if (ne) {
		kp_optimizer_forget_batch(empty, ne);
		arch_disarm(empty, ne);
	}
	for (int i = 0; i < ne; i++)
		table_remove(empty[i]);
	for (int i = 0; i < ne; i++)
		kp_optimizer_reevaluate_near(empty[i]->addr);
	if (nt)
		kp_apply_arming(touched, dedupe(touched, nt));
	kp_synchronize();
	for (int i = 0; i < n; i++) {
		if (!ps[i] || !live[i])
			continue;
		ps[i]->__state = 0;
		ps[i]->__pp = NULL;
		ps[i]->__next = NULL;
		kp_probe_prev(ps[i]) = NULL;
		__atomic_and_fetch(&ps[i]->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
	}
	for (int i = 0; i < ne; i++)
		arch_retire_probepoint(empty[i]);
out:
	if (touched != one_touched)
		free(touched);
	if (empty != one_empty)
		free(empty);
	if (live != one_live)
		free(live);
}

int kp_register_batch(struct kprobe **ps, int n, enum kp_type type)
{
	struct kp_probepoint **pps;
	int err = 0, i;

	if (n <= 0 || !ps)
		return n == 0 ? 0 : -EINVAL;
	err = kp_init();
	if (err)
		return err;
	/* unwind tables for kprobes_stack(), before any handler can run */
	kp_stack_tables_update();
	pps = calloc((size_t)n, sizeof(*pps));
	if (!pps)
		return -ENOMEM;
	pthread_mutex_lock(&kp_registry_lock);
	kp_mem_batch_begin();
	/* The static-key sites of every loaded object, for kp_register_locked:
	 * once per batch. */
	err = kp_jl_refresh();
	for (i = 0; !err && i < n; i++) {
		err = kp_register_locked(ps[i], type, &pps[i]);
		if (err)
			break;
	}
	if (err) {
		kp_unregister_locked(ps, i);
	} else {
		err = kp_apply_arming(pps, dedupe(pps, n));
		if (err)
			kp_unregister_locked(ps, n);
	}
	kp_mem_batch_end();
	pthread_mutex_unlock(&kp_registry_lock);
	free(pps);
	return err;
}

void kp_unregister_batch(struct kprobe **ps, int n)
{
	if (n <= 0 || !ps)
		return;
	pthread_mutex_lock(&kp_registry_lock);
	kp_mem_batch_begin();
	kp_unregister_locked(ps, n);
	kp_mem_batch_end();
	pthread_mutex_unlock(&kp_registry_lock);
}

int kp_set_disabled(struct kprobe *p, bool disabled)
{
	struct kp_probepoint *pp;
	int err = 0;

	pthread_mutex_lock(&kp_registry_lock);
	if (!p || !is_registered(p)) {
		err = -EINVAL;
		goto out;
	}
	/* A post handler or jprobe coming back needs the breakpoint before it
	 * runs, as when it is registered: a hit through the jump would skip
	 * its post handler. */
	if (!disabled && (p->post_handler || p->__type == KP_TYPE_JPROBE))
		kp_optimizer_unoptimize(p->__pp);
	pp = p->__pp;
	pp_account(pp, p, -1);
	if (disabled)
		__atomic_or_fetch(&p->flags, KPROBE_FLAG_DISABLED, __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(&p->flags, ~KPROBE_FLAG_DISABLED, __ATOMIC_RELAXED);
	pp_account(pp, p, 1);

	pp_update_fast(pp);

	err = kp_apply_arming(&pp, 1);
out:
	pthread_mutex_unlock(&kp_registry_lock);
	return err;
}

/* Re-applies arming to every probepoint (the enabled knob). */
int kp_rearm_all(void)
{
	int n = 0, i = 0, err;
	struct kp_probepoint **pps;

	for (struct kp_probepoint *pp = kp_all_probepoints; pp; pp = pp->all_next)
		n++;
	pps = calloc((size_t)n + 1, sizeof(*pps));
	if (!pps)
		return -ENOMEM;
	for (struct kp_probepoint *pp = kp_all_probepoints; pp; pp = pp->all_next)
		pps[i++] = pp;
	err = kp_apply_arming(pps, n);
	free(pps);
	return err;
}

/* Objects were unloaded: their probes are gone ([GONE] in the list).  The
 * code is no longer mapped, so nothing is written; the address leaves the
 * hash table so that other code mapped there later is not mistaken for
 * ours.  Called after dlclose(). */
/* Marks the probepoints of unloaded objects gone.  Under the lock. */
void kp_objects_unloaded_locked(void)
{
	/* The object found loaded last, whose segments are still where its
	 * probepoints are: the probepoints of one object are many, and each
	 * question to the loader walks its list under its lock (calls into
	 * libc, which may itself be probed) */
	const struct kp_object_id *loaded = NULL;
	struct ksym obj;

	ksym_refresh();
	for (struct kp_probepoint *pp = kp_all_probepoints; pp; pp = pp->all_next) {
		if (pp->gone || !pp->in_object)
			continue;
		if (loaded && kp_object_id_equal(loaded, &pp->obj))
			continue;
		/* Something mapped at the address since is not the object. */
		if (ksym_object_of(pp->addr, &obj) == 0 && kp_object_loaded(&pp->obj)) {
			loaded = &pp->obj;
			continue;
		}
		kp_optimizer_forget_gone(pp);
		pp->gone = true;
		pp->armed = false;
		hash_remove(pp);
		for (struct kprobe *p = pp->probes; p; p = p->__next) {
			__atomic_or_fetch(&p->flags, KPROBE_FLAG_GONE, __ATOMIC_RELAXED);
			__atomic_and_fetch(&p->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
		}
	}
}

void kp_objects_unloaded(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_objects_unloaded_locked();
	pthread_mutex_unlock(&kp_registry_lock);
}
