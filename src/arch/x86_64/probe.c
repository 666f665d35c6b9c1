/* Preparing, arming and retiring breakpoint probepoints on x86-64. */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/xol.h"
#include "core/internal.h"
#include "os/linux/memory.h"

#define INT3 0xcc
#define MAX_FUNC_DECODE (1u << 20)

uint8_t arch_original_byte(uintptr_t addr)
{
	struct kp_probepoint *pp = kp_probepoint_lookup(addr);

	if (pp && pp->armed)
		return pp->ainsn.bytes[0];
	return *(volatile uint8_t *)addr;
}

/* Copies code with our own breakpoints taken out. */
static int read_original(uintptr_t addr, uint8_t *buf, size_t len)
{
	if (kp_mem_read_nofault(addr, buf, len))
		return -EFAULT;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == INT3)
			buf[i] = arch_original_byte(addr + i);
	return 0;
}

/* Walks instruction boundaries from the function start up to addr. */
static int check_boundary(uintptr_t func, size_t size, uintptr_t addr)
{
	uintptr_t pc = func;
	uint8_t buf[KP_MAX_INSN];

	if (!size || size > MAX_FUNC_DECODE || addr < func || addr >= func + size)
		return 0;
	while (pc < addr) {
		size_t avail = func + size - pc < sizeof(buf) ? func + size - pc : sizeof(buf);
		int n;

		if (read_original(pc, buf, avail))
			return -EFAULT;
		n = insn_length(buf, avail);
		if (n < 0)
			return 0;	/* data in the function: cannot tell, trust addr */
		pc += (uintptr_t)n;
	}
	return pc == addr ? 0 : -EILSEQ;
}

int arch_prepare_probepoint(struct kp_probepoint *pp, uintptr_t func, size_t size)
{
	uint8_t buf[KP_MAX_INSN];
	size_t avail = sizeof(buf);
	const char *why;
	int err;

	err = check_boundary(func, size, pp->addr);
	if (err)
		return err;
	if (size && func + size - pp->addr < avail)
		avail = func + size - pp->addr;
	if (read_original(pp->addr, buf, avail)) {
		avail = 1;
		while (avail < sizeof(buf) && !read_original(pp->addr, buf, avail + 1))
			avail++;
		if (read_original(pp->addr, buf, avail))
			return -EINVAL;
	}
	err = insn_analyze(&pp->ainsn, pp->addr, buf, avail, &why);
	if (err)
		return err == -EILSEQ ? -EILSEQ : -EINVAL;
	return xol_build(&pp->ainsn, pp->addr, pp);
}

void arch_retire_probepoint(struct kp_probepoint *pp)
{
	if (pp->ainsn.slot)
		xol_retire(pp->ainsn.slot);
	else
		kp_probepoint_free(pp);
}

static int write_first_bytes(struct kp_probepoint **pps, int n, bool arm)
{
	int err = 0;

	for (int i = 0; i < n; i++) {
		uint8_t b = arm ? INT3 : pps[i]->ainsn.bytes[0];

		if (pps[i]->armed == arm)
			continue;
		err = kp_mem_write(pps[i]->addr, &b, 1);
		if (err)
			break;
		pps[i]->armed = arm;
	}
	kp_sync_cores();
	return err;
}

int arch_arm(struct kp_probepoint **pps, int n)
{
	return write_first_bytes(pps, n, true);
}

int arch_disarm(struct kp_probepoint **pps, int n)
{
	return write_first_bytes(pps, n, false);
}

extern char __start_kprobes_text[] __attribute__((weak));
extern char __stop_kprobes_text[] __attribute__((weak));

void arch_trap_path_range(uintptr_t *lo, uintptr_t *hi)
{
	*lo = (uintptr_t)__start_kprobes_text;
	*hi = (uintptr_t)__stop_kprobes_text;
}
