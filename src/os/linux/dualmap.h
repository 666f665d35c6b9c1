/* Memory that holds code written while threads may run it, without a
 * system call per write: one memfd mapped twice, writable at one address
 * and executable at another, never both at one address.  A write is
 * plain stores through rw, then the architecture's cache maintenance on
 * the rx addresses.
 *
 * Both mappings are shared, so a forked child shares the pages with its
 * parent: what is written there must mean the same in both (the
 * architecture's watchpoint steps, which depend on an instruction word
 * alone, do). */
#ifndef KP_OS_DUALMAP_H
#define KP_OS_DUALMAP_H

#include <stddef.h>

struct kp_dualmap {
	void *rw;		/* readable and writable */
	const void *rx;		/* readable and executable: the same pages */
	size_t len;
};

/* len bytes (a multiple of the page size), zeroed.  0, or -errno with
 * nothing left mapped or open. */
int kp_dualmap_create(struct kp_dualmap *m, size_t len);

#endif
