/* Making a thread of another process call dlopen() through a stub that
 * puts the thread back by itself, so that nothing the tool does or fails
 * to do afterwards (dying, giving up) can leave the thread broken. */
#ifndef KPROBE_INJECT_CALL_H
#define KPROBE_INJECT_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracee.h"

/* Where the stub goes: unused bytes of an executable mapping of pid, past
 * the end of an object's code segment (never executed or read by the
 * program).  0, or -ENOSPC when no mapping has room. */
int inject_find_stub_room(pid_t pid, uint64_t *addr);

struct inject_request {
	uint64_t stub;		/* from inject_find_stub_room() */
	uint64_t dlopen;	/* dlopen or __libc_dlopen_mode in the target */
	uint64_t dlerror;	/* 0 when unknown */
	uint64_t flags;		/* dlopen's mode */
	const char *path;	/* the object to load */
};

struct inject_result {
	uint64_t handle;	/* dlopen's result */
	char why[256];		/* dlerror()'s message when handle is 0 */
};

/* Redirects the held thread tid of ts into the stub, which calls
 * dlopen(path, flags) (and dlerror() if it fails), restores every register,
 * the vector state and an interrupted system call, and jumps back to where
 * the thread was.  Then lets the other threads of ts go (in a stopped
 * process: back to their group stop), runs tid traced until the stub has
 * answered and lets it go too, waiting at most timeout_ms for the answer.
 * 0 with *res filled, -ETIMEDOUT (the thread still finishes on its own),
 * -ESRCH (the thread or process went away), or -errno before the thread was
 * touched.  ts keeps the threads the agent started, running under ptrace:
 * service them with tracee_service() while the agent must answer (a
 * stopped process), or tracee_release() them. */
int inject_call_dlopen(struct tracee_set *ts, pid_t tid, const struct inject_request *req,
		       int timeout_ms, struct inject_result *res);

/* ---- between the two halves (cli/inject_stub.c, arch/<arch>/inject_call.c) ---- */

/* What the stub leaves on the thread's stack, the nonce stored last; then
 * it pauses (ppoll, every signal blocked) while pause_sec/pause_nsec is
 * not zero, so that the tool reads the answer before the program takes
 * the stack back.  The stubs' assembly uses these offsets. */
struct inject_answer {
	uint64_t nonce, handle, why;
	int64_t pause_sec, pause_nsec;		/* a struct timespec */
	uint64_t arch;				/* x86-64: XRSTOR's EDX:EAX */
	uint64_t mask;				/* the pause's signal mask: all */
};
_Static_assert(offsetof(struct inject_answer, pause_sec) == 24 &&
	       offsetof(struct inject_answer, arch) == 40 &&
	       offsetof(struct inject_answer, mask) == 48, "the stubs' answer layout");

/* Long enough for a tool slowed down by a loaded machine; the tool cuts
 * it short once it holds the thread. */
#define INJECT_PAUSE_S	5

/* The architecture's stub, its bytes and length. */
const unsigned char *inject_arch_stub(size_t *len);
/* The pause of held thread tid ends at once when it resumes (its timeout
 * in memory is zero already): what the thread's registers need for that. */
void inject_arch_end_pause(pid_t tid);

int inject_mem_io(pid_t pid, uint64_t addr, void *buf, size_t len, bool write);
uint64_t inject_make_nonce(void);
/* An answer as the tool writes it before the call: no nonce, the pause. */
void inject_answer_init(struct inject_answer *a);
/* The rest of inject_call_dlopen() once tid's registers point into the
 * stub: the other threads let go, tid run traced until the answer at
 * answer carries nonce (at most timeout_ms), held in its pause, which is
 * ended, and let go. */
int inject_call_traced(struct tracee_set *ts, pid_t tid, uint64_t answer, uint64_t nonce,
		       int timeout_ms, struct inject_result *res);

#endif
