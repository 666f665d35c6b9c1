/* Watchpoint probes: handlers after accesses to a variable, through the
 * debug registers (os/linux/hwbreak.c arms them on every thread).
 *
 * Each registered watchpoint owns one of four slots; its breakpoints'
 * traps carry a cookie naming the slot and a generation, so the trap code
 * tells ours from the program's own perf events, and a trap still pending
 * from a watchpoint that is gone (or whose slot was taken since) is
 * recognised and dropped rather than run or passed to the program. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/stack.h"
#include "core/wprobe.h"
#include "elf/symbols.h"
#include "os/linux/hwbreak.h"
#include "os/linux/threads.h"

#define KP_WSTATE_REGISTERED 0x6b707731u

struct kp_wslot {
	struct wprobe *wp;		/* read by the hit path */
	uint64_t cookie;		/* read by the hit path; 0: free */
	struct kp_hwbp hw;
	uintptr_t addr;
	unsigned int len;
	bool rw;
	char *symbol;			/* "name+0xOFF" for the list */
	char *object;			/* file name, NULL for the main executable */
};

static struct kp_wslot wslots[KP_WSLOTS];
static uint32_t wgen;

#define wp_slot(wp) ((struct kp_wslot *)(wp)->__reserved[0])

struct wprobe *kp_wprobe_of_cookie(uint64_t cookie)
{
	unsigned int i = (unsigned int)(cookie & 0xff);
	struct kp_wslot *s;

	if (i >= KP_WSLOTS)
		return NULL;
	s = &wslots[i];
	if (__atomic_load_n(&s->cookie, __ATOMIC_ACQUIRE) != cookie)
		return NULL;
	return __atomic_load_n(&s->wp, __ATOMIC_ACQUIRE);
}

static int check_shape(const struct wprobe *wp)
{
	if (!wp->addr == !wp->symbol_name)
		return -EINVAL;
	if (wp->len != 1 && wp->len != 2 && wp->len != 4 && wp->len != 8)
		return -EINVAL;
	if (wp->type != WPROBE_W && wp->type != WPROBE_RW)
		return -EINVAL;
	if (wp->__state == KP_WSTATE_REGISTERED)
		return -EINVAL;
	return 0;
}

static int resolve(const struct wprobe *wp, uintptr_t *addr)
{
	struct ksym sym;
	int err;

	if (wp->symbol_name) {
		err = ksym_lookup_data(wp->symbol_name, &sym);
		if (err)
			return err;
		*addr = sym.addr + wp->offset;
	} else {
		*addr = (uintptr_t)wp->addr + wp->offset;
	}
	if (*addr % wp->len)
		return -EINVAL;
	return 0;
}

static int describe(struct kp_wslot *s)
{
	char name[256], buf[320];
	struct ksym sym;

	if (!ksym_data_at(s->addr, &sym, name, sizeof(name))) {
		snprintf(buf, sizeof(buf), "%s+0x%lx", name, (unsigned long)(s->addr - sym.addr));
		if (!sym.is_main && sym.basename) {
			s->object = strdup(sym.basename);
			if (!s->object)
				return -ENOMEM;
		}
	} else {
		snprintf(buf, sizeof(buf), "0x%lx", (unsigned long)s->addr);
	}
	s->symbol = strdup(buf);
	return s->symbol ? 0 : -ENOMEM;
}

static struct kp_wslot *free_slot(void)
{
	for (unsigned int i = 0; i < KP_WSLOTS; i++)
		if (!wslots[i].wp)
			return &wslots[i];
	return NULL;
}

static uint64_t new_cookie(const struct kp_wslot *s)
{
	wgen = (wgen + 1) & KP_WCOOKIE_GEN_MASK;
	return KP_WCOOKIE_MAGIC | (uint64_t)wgen << 8 | (uint64_t)(s - wslots);
}

static void slot_release(struct kp_wslot *s)
{
	free(s->symbol);
	free(s->object);
	s->symbol = s->object = NULL;
	s->wp = NULL;
}

/* Under kp_registry_lock: wp shaped and resolved to addr. */
static int arm(struct wprobe *wp, uintptr_t addr)
{
	struct kp_wslot *s = free_slot();
	bool disabled = (wp->flags & KPROBE_FLAG_DISABLED) || !kp_knob_enabled;
	uint64_t cookie;
	int err;

	if (!s)
		return -ENOSPC;
	s->addr = addr;
	s->len = wp->len;
	s->rw = wp->type == WPROBE_RW;
	err = describe(s);
	if (err)
		goto fail;
	cookie = new_cookie(s);
	/* Published before the first breakpoint, so no trap of it is
	 * taken for stale. */
	__atomic_store_n(&s->wp, wp, __ATOMIC_RELEASE);
	__atomic_store_n(&s->cookie, cookie, __ATOMIC_RELEASE);
	err = kp_hwbp_arm(&s->hw, addr, wp->len, s->rw, cookie, disabled);
	if (err) {
		__atomic_store_n(&s->cookie, 0, __ATOMIC_RELEASE);
		kp_synchronize();
		goto fail;
	}
	wp->__reserved[0] = s;
	return 0;
fail:
	slot_release(s);
	return err;
}

KP_EXPORT int register_wprobe(struct wprobe *wp)
{
	uintptr_t addr;
	int err;

	if (!wp)
		return -EINVAL;
	err = kp_init();
	if (err)
		return err;
	err = check_shape(wp);
	if (!err)
		err = resolve(wp, &addr);
	if (err)
		return err;
	/* unwind tables for kprobes_stack() in its handler, as for kprobes */
	kp_stack_tables_update();
	pthread_mutex_lock(&kp_registry_lock);
	if (wp->__state == KP_WSTATE_REGISTERED)
		err = -EINVAL;
	else
		err = arch_wprobe_prepare();
	if (!err)
		err = arm(wp, addr);
	if (!err) {
		wp->addr = (void *)addr;
		wp->__state = KP_WSTATE_REGISTERED;
	}
	pthread_mutex_unlock(&kp_registry_lock);
	return err;
}

static bool registered(const struct wprobe *wp)
{
	return wp && wp->__state == KP_WSTATE_REGISTERED && wp_slot(wp);
}

KP_EXPORT void unregister_wprobe(struct wprobe *wp)
{
	struct kp_wslot *s;

	if (!wp)
		return;
	pthread_mutex_lock(&kp_registry_lock);
	if (!registered(wp)) {
		pthread_mutex_unlock(&kp_registry_lock);
		wp->addr = NULL;
		return;
	}
	s = wp_slot(wp);
	/* Traps already on their way find no watchpoint and are dropped;
	 * closing the events stops every thread's breakpoint at once. */
	__atomic_store_n(&s->cookie, 0, __ATOMIC_RELEASE);
	kp_hwbp_disarm(&s->hw);
	kp_synchronize();
	slot_release(s);
	wp->__state = 0;
	wp->__reserved[0] = NULL;
	pthread_mutex_unlock(&kp_registry_lock);
}

static int set_enabled(struct wprobe *wp, bool on)
{
	int err = 0;

	if (!wp)
		return -EINVAL;
	pthread_mutex_lock(&kp_registry_lock);
	if (!registered(wp)) {
		err = -EINVAL;
	} else if (on) {
		/* Breakpoints on first: traps in between are dropped by the
		 * flag, never half-counted. */
		err = kp_knob_enabled ? kp_hwbp_enable(&wp_slot(wp)->hw, true) : 0;
		if (!err)
			__atomic_and_fetch(&wp->flags, ~KPROBE_FLAG_DISABLED, __ATOMIC_RELEASE);
	} else {
		__atomic_or_fetch(&wp->flags, KPROBE_FLAG_DISABLED, __ATOMIC_RELEASE);
		err = kp_hwbp_enable(&wp_slot(wp)->hw, false);
	}
	pthread_mutex_unlock(&kp_registry_lock);
	return err;
}

KP_EXPORT int disable_wprobe(struct wprobe *wp)
{
	return set_enabled(wp, false);
}

KP_EXPORT int enable_wprobe(struct wprobe *wp)
{
	return set_enabled(wp, true);
}

/* The global knob changed (under kp_registry_lock): breakpoints of enabled
 * watchpoints off or on with it. */
void kp_wprobes_rearm(void)
{
	for (unsigned int i = 0; i < KP_WSLOTS; i++) {
		struct kp_wslot *s = &wslots[i];

		if (s->wp)
			kp_hwbp_enable(&s->hw, kp_knob_enabled &&
				       !(s->wp->flags & KPROBE_FLAG_DISABLED));
	}
}

/* Under kp_registry_lock. */
void kp_list_wprobes(FILE *out)
{
	for (unsigned int i = 0; i < KP_WSLOTS; i++) {
		const struct kp_wslot *s = &wslots[i];

		if (!s->wp)
			continue;
		fprintf(out, "%016lx  w  %s", (unsigned long)s->addr, s->symbol);
		if (s->object)
			fprintf(out, "  [%s]", s->object);
		fputs(s->rw ? "  [RW]" : "  [W]", out);
		if (s->wp->flags & KPROBE_FLAG_DISABLED)
			fputs("  [DISABLED]", out);
		fputc('\n', out);
	}
}

/* Fork child, under kp_registry_lock: the events are the parent's threads'
 * (inherit_thread does not cross fork); the child's one thread gets its
 * own, so watchpoints go on working there as probes do. */
void kp_wprobe_after_fork_child(void)
{
	bool any = false;

	for (unsigned int i = 0; i < KP_WSLOTS; i++)
		any |= wslots[i].wp != NULL;
	/* Without what the architecture needs, none is armed again. */
	if (!any || arch_wprobe_after_fork_child())
		return;
	for (unsigned int i = 0; i < KP_WSLOTS; i++) {
		struct kp_wslot *s = &wslots[i];

		if (!s->wp)
			continue;
		/* A watchpoint that cannot be re-armed stays listed but
		 * catches nothing; its unregistration still works. */
		kp_hwbp_rearm_child(&s->hw, s->addr, s->len, s->rw, s->cookie,
				    (s->wp->flags & KPROBE_FLAG_DISABLED) || !kp_knob_enabled);
	}
}
