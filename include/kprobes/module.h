/*
 * kprobes/module.h - the Kprobes "module" model in user space.
 *
 * A module is a shared object written against <kprobes.h> that
 * `kprobe load MODULE.so [ARG...] (-- COMMAND | -p PID)` loads into a
 * target process, as insmod loads a kernel module:
 *
 *	#include <kprobes.h>
 *	#include <kprobes/module.h>
 *
 *	static struct kprobe kp = { .symbol_name = "parse_header" };
 *
 *	static int pre(struct kprobe *p, struct pt_regs *regs)
 *	{
 *		kprobe_printk("parse_header(%lx)\n", regs->di);
 *		return 0;
 *	}
 *
 *	int kprobe_module_init(int argc, char **argv)
 *	{
 *		kp.pre_handler = pre;
 *		return register_kprobe(&kp);
 *	}
 *
 *	void kprobe_module_exit(void)
 *	{
 *		unregister_kprobe(&kp);
 *	}
 *
 * Build it with `cc -shared -fPIC -o mod.so mod.c` and no -lkprobes: the
 * agent that loads it provides the library (one copy per process), and
 * kprobe_printk.
 *
 * kprobe_module_init() gets argc and argv as main() does: argv[0] is the
 * module's path, then the ARGs of the command line.  It runs once, before
 * the command's main() (-- COMMAND) or while the tool waits (-p PID); a
 * non-zero return fails the session (a negative errno is reported as
 * such) and the module is not called again.  kprobe_module_exit() runs
 * once when the session ends: when the tool detaches or stops, or when the
 * process exits.  It must unregister every probe init registered: then
 * the module is unloaded, as rmmod unloads a kernel module (unregistering
 * waits until none of the probe's handlers runs), and a later session
 * loads it afresh.  A module whose init fails is unloaded at once, so
 * init undoes what it did before failing.
 */
#ifndef KPROBES_MODULE_H
#define KPROBES_MODULE_H

#ifdef __cplusplus
extern "C" {
#endif

/* What a module exports. */
int kprobe_module_init(int argc, char **argv);
void kprobe_module_exit(void);

/* Sends one line to the tool's output (a missing final newline is added;
 * a line is cut at KPROBE_PRINTK_MAX bytes).  Async-signal-safe, no lock,
 * no allocation, and no system call but on a thread's first line (it
 * claims the thread's buffer then): callable from any handler.  Formats:
 * %d %i %u %x %X %o %c %s %p %% with the flags '-' and '0', a field width,
 * a precision for %s, and the length modifiers hh h l ll z j t.  Returns
 * the bytes sent, or -1 when the line was dropped (the tool's buffer for
 * this thread is full; the tool reports the loss). */
int kprobe_printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define KPROBE_PRINTK_MAX 1024

#ifdef __cplusplus
}
#endif

#endif
