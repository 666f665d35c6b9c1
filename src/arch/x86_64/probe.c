/* Preparing, arming and retiring breakpoint probepoints on x86-64. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/text_poke.h"
#include "arch/x86_64/xol.h"
#include "core/arch_api.h"
#include "os/linux/memory.h"

#define INT3 ARCH_BREAKPOINT_INSN
#define MAX_FUNC_DECODE (1u << 20)

/* What the program's code has at addr, given the byte seen there, one
 * lookup after another (for a range a static-key site meets). */
static uint8_t original_byte(uintptr_t addr, uint8_t seen)
{
	struct kp_probepoint *pp = kp_probepoint_lookup(addr);
	const struct kp_jl_site *site;

	if (pp && pp->armed)
		return pp->ainsn.bytes[0];
	/* Inside the rel32 of an installed jump? */
	for (uintptr_t k = 1; k < ARCH_OPT_JUMP_LEN; k++) {
		pp = kp_probepoint_lookup(addr - k);
		if (pp && pp->ainsn.opt && pp->ainsn.opt->jumped)
			return pp->ainsn.opt->orig[k];
	}
	/* A static-key site reads as its NOP whatever its key (and a rewrite
	 * in progress) makes of it: one 5-byte instruction either way. */
	site = kp_jl_site_covering(addr);
	if (site)
		return arch_jump_label_nop[addr - site->addr];
	return seen;
}

/* The displacement of the jump installed at the probepoint pp at at (if
 * any) back in buf, the bytes at addr, where it falls in them; a byte
 * where a probepoint is armed is that one's (as original_byte has it). */
static void restore_jump_tail(const struct kp_probepoint *pp, uintptr_t at, uintptr_t addr,
			      uint8_t *buf, size_t len)
{
	if (!pp || !pp->ainsn.opt || !pp->ainsn.opt->jumped)
		return;
	for (uintptr_t k = 1; k < ARCH_OPT_JUMP_LEN; k++) {
		uintptr_t b = at + k;
		const struct kp_probepoint *q;

		if (b < addr || b - addr >= len)
			continue;
		q = kp_probepoint_lookup(b);
		if (!q || !q->armed)
			buf[b - addr] = pp->ainsn.opt->orig[k];
	}
}

/* A probepoint changes the byte at its address into an int3 or a jump's
 * opcode, and with a jump the displacement after it: only where one of
 * those two bytes is seen, or a jump's displacement reaches in from
 * before addr, is the probe table asked (a function's analysis reads all
 * of it, byte for byte lookups were most of that).  Where a static-key
 * site meets the range, byte by byte. */
int arch_read_original(uintptr_t addr, uint8_t *buf, size_t len)
{
	if (kp_mem_read_nofault(addr, buf, len))
		return -EFAULT;
	if (!len)
		return 0;
	if (kp_jl_sites_meet(addr, addr + len)) {
		for (size_t i = 0; i < len; i++)
			buf[i] = original_byte(addr + i, buf[i]);
		return 0;
	}
	for (uintptr_t k = ARCH_OPT_JUMP_LEN - 1; k > 0; k--)
		restore_jump_tail(kp_probepoint_lookup(addr - k), addr - k, addr, buf, len);
	for (size_t i = 0; i < len; i++) {
		struct kp_probepoint *pp;

		if (buf[i] != INT3 && buf[i] != JMP_REL32)
			continue;
		pp = kp_probepoint_lookup(addr + i);
		if (!pp)
			continue;
		restore_jump_tail(pp, addr + i, addr, buf, len);
		if (pp->armed)
			buf[i] = pp->ainsn.bytes[0];
	}
	return 0;
}

/* Instruction boundaries of the last function decoded, so that probing
 * every instruction of a large function stays linear.  The original bytes
 * are kept to notice when other code has been mapped at the same place. */
static struct {
	uintptr_t func;
	size_t size;
	uint8_t *code;		/* original bytes */
	uint8_t *starts;	/* bitmap of instruction starts */
	size_t decoded;		/* boundaries known below this offset */
} bcache;

static void bcache_drop(void)
{
	free(bcache.code);
	free(bcache.starts);
	memset(&bcache, 0, sizeof(bcache));
}

static int bcache_fill(uintptr_t func, size_t size)
{
	uintptr_t off = 0;

	bcache_drop();
	bcache.code = malloc(size);
	bcache.starts = calloc((size + 7) / 8, 1);
	if (!bcache.code || !bcache.starts) {
		bcache_drop();
		return -ENOMEM;
	}
	if (arch_read_original(func, bcache.code, size)) {
		bcache_drop();
		return -EFAULT;
	}
	/* An offset decoding reaches is a boundary even where the rest of the
	 * range cannot hold its instruction (a range that ends at the
	 * instruction after the one asked about). */
	while (off < size) {
		int n;

		bcache.starts[off / 8] |= (uint8_t)(1u << (off % 8));
		n = insn_length(bcache.code + off, size - off);
		if (n < 0)
			break;
		off += (uintptr_t)n;
	}
	bcache.decoded = off;
	bcache.func = func;
	bcache.size = size;
	return 0;
}

static bool bcache_valid_at(uintptr_t func, size_t size, uintptr_t addr)
{
	uint8_t now[KP_MAX_INSN];
	size_t len = func + size - addr < sizeof(now) ? func + size - addr : sizeof(now);

	if (bcache.func != func || bcache.size != size)
		return false;
	return arch_read_original(addr, now, len) == 0 &&
	       memcmp(now, bcache.code + (addr - func), len) == 0;
}

/* Is addr an instruction boundary of the function [func, func+size)?
 * strict: a boundary must be proven (reached by decoding from func). */
static int boundary(uintptr_t func, size_t size, uintptr_t addr, bool strict)
{
	uintptr_t off = addr - func;
	int err;

	if (!size || size > MAX_FUNC_DECODE || addr < func || addr >= func + size)
		return strict ? -EILSEQ : 0;
	if (!bcache_valid_at(func, size, addr)) {
		err = bcache_fill(func, size);
		if (err)
			return err == -ENOMEM || strict ? err : 0;
	}
	if (bcache.starts[off / 8] & (1u << (off % 8)))
		return 0;
	/* Past undecodable bytes (data in text) a sized function's addr is
	 * trusted; where the extent itself is a guess, it is not. */
	return off >= bcache.decoded && !strict ? 0 : -EILSEQ;
}

static int check_boundary(uintptr_t func, size_t size, uintptr_t addr)
{
	return boundary(func, size, addr, false);
}

int arch_check_boundary(uintptr_t start, size_t len, uintptr_t addr)
{
	/* Decoding needs only the bytes up to addr's instruction. */
	if (addr >= start && len > addr - start + KP_MAX_INSN)
		len = addr - start + KP_MAX_INSN;
	return boundary(start, len, addr, true);
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
	if (arch_read_original(pp->addr, buf, avail)) {
		avail = 1;
		while (avail < sizeof(buf) && !arch_read_original(pp->addr, buf, avail + 1))
			avail++;
		if (arch_read_original(pp->addr, buf, avail))
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
	/* Free retired slots in batches, once they have rested. */
	if (xol_reclaim_due())
		xol_reclaim();
}

/* Arming writes the breakpoint over byte 0; disarming puts the original
 * byte back.  One byte: the breakpoint step is the whole rewrite. */
static void first_byte_poke(const struct kp_probepoint *pp, bool arm, struct text_poke *tp)
{
	tp->addr = pp->addr;
	tp->skip = pp->armed == arm;
	tp->len = 1;
	tp->bp_in_place = !arm;
	tp->bytes[0] = arm ? INT3 : pp->ainsn.bytes[0];
	tp->resume = 0;
	tp->obj = &pp->obj;
}

static void arm_poke(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	first_byte_poke(((struct kp_probepoint *const *)b->ctx)[i], true, tp);
}

static void disarm_poke(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	first_byte_poke(((struct kp_probepoint *const *)b->ctx)[i], false, tp);
}

static void armed_done(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->armed = true;
}

static void disarmed_done(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->armed = false;
}

int arch_arm(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = arm_poke, .done = armed_done, .ctx = pps };

	return text_poke_bp(&b);
}

int arch_disarm(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = disarm_poke, .done = disarmed_done, .ctx = pps };

	return text_poke_bp(&b);
}

extern char __start_kprobes_text[] __attribute__((weak));
extern char __stop_kprobes_text[] __attribute__((weak));

void arch_trap_path_range(uintptr_t *lo, uintptr_t *hi)
{
	*lo = (uintptr_t)__start_kprobes_text;
	*hi = (uintptr_t)__stop_kprobes_text;
}
