/* Noticing dlopen: the dynamic loader calls _dl_debug_state() (the
 * debugger's breakpoint function, r_debug.r_brk) after it has mapped new
 * objects, with r_state == RT_CONSISTENT.  A kprobe on its `ret` sends the
 * loading thread, outside the signal handler, through on_objects_changed()
 * before it returns to the loader, so deferred probes are armed before
 * dlopen() returns, in every thread and with either way of loading the
 * agent (LD_PRELOAD or injection) alike.
 *
 * Only a breakpoint probe honours a pre-handler's change of the
 * instruction pointer, so the probe must never be jump-optimized: it has
 * an empty post-handler, the way Kprobes documents to keep a probe that
 * changes the execution path from being optimized (its shape is no
 * guarantee: a 1-byte `ret` followed by padding can take a jump). */
#include <errno.h>
#include <link.h>
#include <string.h>

#include <kprobes/symbols.h>

#include "agent.h"

static struct kprobe hook;
static bool installed;

/* Entered as if called by the loader in place of _dl_debug_state(): the
 * loader's return address is on top of the stack. */
static void on_objects_changed(void)
{
	int saved = errno;

	agent_own_begin();
	agent_session_arm_deferred();
	agent_session_note_objects();
	/* the new objects' unwind tables, before their code runs */
	kprobes_objects_changed();
	agent_own_end();
	errno = saved;
}

/* Keeps the probe a breakpoint (see the top); never runs for a redirected
 * thread, whose pre-handler returns 1. */
static void hook_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	(void)p;
	(void)regs;
	(void)flags;
}

static int hook_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	if (agent_on_own_thread() || _r_debug.r_state != RT_CONSISTENT)
		return 0;
	instruction_pointer_set(regs, on_objects_changed);
	return 1;
}

/* The final `ret` of _dl_debug_state (glibc's is just `ret`), else its
 * entry. */
static int find_hook_address(uintptr_t *addr)
{
	struct kprobes_sym sym = { .sz = sizeof(sym) };
	int rc = kprobes_sym_lookup_name("_dl_debug_state", &sym);

	if (rc)
		return rc;
	*addr = sym.addr;
	if (sym.size && ((const unsigned char *)sym.addr)[sym.size - 1] == 0xc3)
		*addr = sym.addr + sym.size - 1;
	return 0;
}

int agent_dlhook_install(void)
{
	uintptr_t addr;
	int rc;

	if (installed)
		return 0;
	rc = find_hook_address(&addr);
	if (rc)
		return rc;
	memset(&hook, 0, sizeof(hook));
	hook.addr = (kprobe_opcode_t *)addr;
	hook.pre_handler = hook_pre;
	hook.post_handler = hook_post;
	rc = register_kprobe(&hook);
	installed = rc == 0;
	return rc;
}

void agent_dlhook_remove(void)
{
	if (!installed)
		return;
	unregister_kprobe(&hook);
	installed = false;
}

uintptr_t agent_dlhook_address(void)
{
	return installed ? (uintptr_t)hook.addr : 0;
}
