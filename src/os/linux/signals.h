/* Signals owned by libkprobes, and the program's view of them.
 *
 * The library keeps its own handlers for SIGTRAP (breakpoints) and the fault
 * signals (faults inside out-of-line slots).  sigaction() and friends are
 * interposed so the program still sees and installs its own handlers, which
 * the library calls for every signal that is not its own; and so that no
 * thread ever blocks SIGTRAP, which would make the kernel kill the process at
 * the next breakpoint. */
#ifndef KP_OS_SIGNALS_H
#define KP_OS_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

typedef void (*kp_sig_handler_t)(int, siginfo_t *, void *);

/* Installs the library's handler for sig, bypassing interposition, and
 * remembers the previous disposition as the program's. block_others: every
 * asynchronous signal stays blocked while fn runs, so none is delivered
 * with a context inside the library's trap path (it arrives once the
 * thread is where the handler sends it). 0 or -errno. */
int kp_sig_own(int sig, kp_sig_handler_t fn, int extra_flags, bool block_others);

/* Hands a signal the library does not consume to the program's disposition:
 * its handler (with its mask and flags), or the default action with the
 * registers of uc (a core dump shows them). Async-signal-safe. */
void kp_sig_forward(int sig, siginfo_t *info, void *uc);

/* kp_thread_mask_state: whether this thread's signal mask blocks SIGSEGV
 * or SIGBUS, for kp_load_nofault() (os/linux/memory.h). */
#define KP_MASK_UNKNOWN 0
#define KP_MASK_CLEAR 1
#define KP_MASK_BLOCKS_FAULTS 2
extern __thread int kp_thread_mask_state __attribute__((tls_model("initial-exec")));
/* Reads the thread's mask into kp_thread_mask_state and returns it. */
int kp_thread_mask_refresh(void);

/* Whether sig is currently handled by the library. */
bool kp_sig_is_owned(int sig);

/* The program-handler table's lock, for the fork handlers (src/core/fork.c). */
void kp_sig_fork_lock(void);
void kp_sig_fork_unlock(void);

#endif
