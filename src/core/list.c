/* The probe list in the format of Kprobes' debugfs "list" file. */
#include <errno.h>

#include "core/internal.h"
#include "core/wprobe.h"

int kp_list_tracepoints(FILE *out);

static void list_probe(FILE *out, const struct kp_probepoint *pp, const struct kprobe *p)
{
	fprintf(out, "%016lx  %c  %s", (unsigned long)pp->addr, (char)p->__type, pp->symbol);
	if (pp->object)
		fprintf(out, "  [%s]", pp->object);
	if (pp->gone)
		fputs("  [GONE]", out);
	if (p->flags & KPROBE_FLAG_DISABLED)
		fputs("  [DISABLED]", out);
	if (p->flags & KPROBE_FLAG_OPTIMIZED)
		fputs("  [OPTIMIZED]", out);
	fputc('\n', out);
}

KP_EXPORT int kprobes_list(FILE *out)
{
	int err = 0;

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&kp_registry_lock);
	for (const struct kp_probepoint *pp = kp_all_probepoints; pp; pp = pp->all_next)
		for (const struct kprobe *p = pp->probes; p; p = p->__next)
			list_probe(out, pp, p);
	kp_list_wprobes(out);
	if (ferror(out))
		err = -EIO;
	pthread_mutex_unlock(&kp_registry_lock);
	/* Then the tracepoints that have handlers (type t, provider:name). */
	if (!err)
		err = kp_list_tracepoints(out);
	return err;
}
