/* The kprobe agent: loaded into the target (LD_PRELOAD or ptrace-driven
 * dlopen), it resolves the session's probes, registers them with
 * libkprobes, feeds their hits into the session's shared memory and serves
 * the control socket. */
#ifndef KPROBE_AGENT_H
#define KPROBE_AGENT_H

#include <kprobes.h>
#include <kprobes/tracepoint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "shm.h"
#include "spec.h"

#define AGENT_EXPORT __attribute__((visibility("default")))

/* The agent's entry for a later `kprobe -p` on a process it left: the tool
 * calls it in the target, as it calls dlopen (agent.c). */
AGENT_EXPORT long kprobe_agent_start(const char *unused, long unused_flags);

struct prog_point;

/* One registered probe point.  The kprobe (or kretprobe) comes first so
 * handlers find the rest from the pointer libkprobes gives them. */
struct agent_probe;

/* A kprobe on one of a function's exit sites (kprobes_exit_sites()),
 * which takes its returns for the probe ap instead of a return probe. */
struct agent_exit {
	struct kprobe kp;
	struct agent_probe *ap;
};

/* Exit sites a return is taken at, at most; a function with more keeps a
 * return probe. */
#define AGENT_MAX_EXITS 8

struct agent_probe {
	union {
		struct kprobe kp;
		struct kretprobe rp;
	} u;
	struct agent_session *session;
	unsigned int gen;		/* the session's generation (hit paths) */
	bool is_return;
	struct kprobes_tracepoint *tp;	/* a tracepoint's handler, not a probe */
	/* Entry probes with argN:f64: the kprobe only marks the hit, and this
	 * jprobe's entry, which the library starts with the function's
	 * registers, vector ones included, records the event. */
	bool vector_args;
	struct jprobe jp;
	uint32_t desc;			/* descriptor index in the session */
	uint16_t spec;			/* index of its spec in the config */
	bool at_function_entry;		/* run: a function's first instruction */
	uint32_t prog_probe;		/* run: the program's probe it runs */
	struct prog_point *prog_point;	/* run: a fast form's state (agent_prog_fast.c) */
	/* An SDT probe's 16-bit semaphore, raised while the probe is armed
	 * (so the program evaluates the probe's arguments), or 0. */
	uintptr_t semaphore;
	bool sem_raised;
	uint8_t nargs;
	uint8_t nstrings;
	struct spec_arg args[SPEC_MAX_ARGS];
	/* A return taken at the function's exit sites: a kprobe on each
	 * (registered instead of u.rp), or none (nexits 0). */
	uint8_t nexits;
	struct agent_exit *exits;
};

/* A spec whose object is not loaded yet: armed when it is. */
struct agent_deferred {
	int spec;
	char path[512];			/* the object as given, or found on disk */
};

struct agent_prog;

struct agent_session {
	struct session_config cfg;
	struct kps_map map;
	size_t map_size;		/* bytes mapped: kps_total_size() */
	struct agent_prog *prog;	/* run: the program (agent_prog.c) */
	uint32_t nrings;		/* rings the CLI gave the session */
	int shm_fd;			/* kept open for exec'd children (-f), or -1 */
	uint64_t shm_ino;		/* its inode, to know it is still ours */
	unsigned int gen;		/* tells threads their cached ring is stale */
	bool follower;			/* an exec'd child joining a running session */
	bool time_tsc;			/* events stamped with the TSC */
	uint64_t tick_ns_q32;		/* ns per TSC tick << 32, for latency */
	uint64_t wait_ticks;		/* how long a writer waits for ring space */
	bool stalled;			/* a wait timed out: the reader is gone */
	bool rings_exhausted;		/* a wait for a free ring timed out */
	struct agent_probe **probes;
	int nprobes, cap;
	struct agent_deferred *deferred;
	int ndeferred;
	struct agent_watch *watch;	/* a watch session's watchpoint */
	char *stack_threads;		/* count --stacks: each ring's memo (agent_stacks.c) */
	size_t stack_threads_bytes;
	uint32_t stack_entries;		/* entries its table holds (stack_table.h) */
};

/* The session lock: the control thread and the dlopen hook both change the
 * set of probes. */
extern pthread_mutex_t agent_lock;
extern struct agent_session *agent_session;	/* NULL: dormant */

/* Threads of the agent itself never report hits (agent_hit.c). */
void agent_mark_own_thread(void);
bool agent_on_own_thread(void);
/* Brackets agent work done on a program thread (the constructor, the
 * dlopen hook). */
void agent_own_begin(void);
void agent_own_end(void);
/* Learns how the light handlers find the thread's id (the agent's
 * constructor calls it); agent_hit_light_ok() says whether they can. */
void agent_hit_init(void);
bool agent_hit_light_ok(void);
/* After fork: forget cached rings; be quiet unless following. */
void agent_hit_after_fork(bool follow);
/* Sets the probe's handlers (and return instance data size) for its
 * session's action and clock (agent_hit.c). */
void agent_set_handlers(struct agent_probe *ap);
/* The pre-handler that takes the return probe ap's returns at an exit
 * site, when its light handler can (a count, a record without values),
 * or NULL (agent_hit_light.c). */
kprobe_pre_handler_t agent_exit_handler(const struct agent_probe *ap);
/* Runs an argument's fetch plan at a hit (fault-safe loads, no call the
 * handler analysis cannot follow); false when a load faulted. */
bool agent_run_plan(const struct pt_regs *regs, const struct spec_arg *a, uint64_t *out);
/* Whether a hit of the calling thread is not the program's (the agent's
 * own threads, a forked child that is not followed). */
bool agent_hit_silent(struct agent_session *s);
/* Writes one record (header fields type, nvals, desc; len bytes of data
 * after it, reserved = len) into the calling thread's ring; async-signal-
 * safe.  len, or -1 when dropped (counted). */
int agent_emit_record(struct agent_session *s, uint16_t type, uint16_t nvals, uint32_t desc,
		      const void *data, uint32_t len);
/* Writes one line of a loaded module into the calling thread's ring
 * (async-signal-safe); its length, or -1 when dropped (counted). */
int agent_emit_text(const char *text, uint32_t len);
/* The handler attached to a tracepoint probe's tracepoint (data: the
 * agent_probe). */
void agent_tp_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data);
/* Bytes of kretprobe instance data a probe needs. */
size_t agent_return_data_size(const struct agent_probe *ap);

/* agent_session.c: start (all-or-none) and stop a session.  On failure
 * err gets one line and *kind the exit status class (2 bad probe, 1 other),
 * which also goes to the session memory.  A follower (an exec'd child of a
 * followed command) joins a running session and arms what it can.
 * shm_fd is the session memory passed over the control socket (config
 * "shm passed"), or -1; it is always consumed. */
int agent_session_start(const char *config, int shm_fd, bool follower, char *err,
			size_t errlen, int *kind);
void agent_session_stop(void);
/* A launched command's program session: waits (at most 2 s) until the
 * tool has printed what precedes the command's output. */
void agent_session_wait_go(void);
/* Copies the probes' miss counts into the descriptors. */
void agent_session_flush(void);
/* Arms deferred specs whose object has appeared (the dlopen hook). */
void agent_session_arm_deferred(void);
/* Notes the loaded objects' executable segments in the running session's
 * memory (the dlopen hook). */
void agent_session_note_objects(void);

/* agent_loaded.c: appends the executable segments of the objects loaded
 * now that m's objects table lacks. */
void agent_loaded_note(struct kps_map *m);

/* agent_dlhook.c: call agent_session_arm_deferred() whenever the dynamic
 * loader has added objects. */
int agent_dlhook_install(void);
void agent_dlhook_remove(void);
/* The hook's probe address (hidden from the list), 0 when not installed. */
uintptr_t agent_dlhook_address(void);

/* agent_watch.c: a watch session watches its variable instead of probing
 * (config "watch"): start all or nothing, and stop. */
struct agent_fail;
int agent_watch_start(struct agent_session *s, struct agent_fail *f);
void agent_watch_stop(struct agent_session *s);
/* Records one access (agent_hit.c): counted under desc, or traced with
 * the old and new value. */
void agent_watch_record(struct agent_session *s, uint32_t desc, uint64_t old_value,
			uint64_t new_value, const struct pt_regs *regs);

/* On the hit path.  capture: the stack at regs into ips
 * (room for cfg.stack_depth frames), its frame count (0 without stacks or
 * when none can be had).  count (agent_stacks.c): one more hit of this stack at desc in
 * the session's table (stack_table.h) by the thread of ring (-1: none,
 * the hit is added atomically); false when it is full (the caller counts
 * the loss). */
static inline __attribute__((always_inline)) int
agent_stack_capture(const struct agent_session *s, const struct pt_regs *regs, uint64_t *ips)
{
	/* inline: libkprobes' analysis of what a handler touches follows
	 * calls only so deep, and kprobes_stack() is deep already */
	int n = regs && s->cfg.stack_depth ?
		kprobes_stack(regs, (unsigned long *)ips, (int)s->cfg.stack_depth) : 0;

	return n > 0 ? n : 0;
}

bool agent_stack_count(struct agent_session *s, int ring, uint32_t desc, const uint64_t *ips,
		       int n);
/* Captures the hit's stack (its first frame at, when not 0: a breakpoint's
 * pt_regs are past the probed address) and counts it as
 * agent_stack_count() does, with the ring's memo when the thread has a
 * ring (ring >= 0).  agent_stacks_start() gives a count session with
 * stacks its rings' memos (none when it cannot: the stacks are then
 * captured without), agent_stacks_free() takes them back once no handler
 * runs. */
bool agent_stack_count_hit(struct agent_session *s, int ring, uint32_t desc,
			   const struct pt_regs *regs, uint64_t at);
void agent_stacks_start(struct agent_session *s);
/* Whether the session's handlers unwind stacks (trace or count with
 * stacks, a program, which may use ustack): then the objects loaded
 * later need their unwind tables before their code runs. */
bool agent_stacks_wanted(const struct agent_session *s);
void agent_stacks_free(struct agent_session *s);

/* agent_module.c: `kprobe load`: dlopens the session's module and calls
 * its init (0, or a negative errno with err set), and its exit once. */
int agent_module_load(const struct session_config *cfg, char *err, size_t errlen);
void agent_module_unload(void);

/* agent_prog.c: `kprobe run`.  start: the verified image and its specs
 * (before they are resolved); armed: BEGIN and the interval threads;
 * end: stops the intervals and runs END (once); free: what start took.
 * set_handlers: a point's handlers (from agent_set_handlers). */
struct agent_fail;
/* Whether the program has a probe that needs no function: BEGIN, END or
 * an interval. */
bool agent_prog_has_special(const struct agent_prog *p);
int agent_prog_start(struct agent_session *s, struct agent_fail *f);
/* numaid (agent_numa.c): the processors' nodes read from sysfs, then the
 * node of a processor, on the hit path. */
void agent_numa_load(void);
uint64_t agent_numa_node(unsigned int cpu);
int agent_prog_armed(struct agent_session *s, struct agent_fail *f);
void agent_prog_end(struct agent_session *s);
void agent_prog_free(struct agent_session *s);
void agent_prog_set_handlers(struct agent_probe *ap);

/* agent_server.c: the control socket.  An injected agent's control thread
 * ends with the session (DISARM, or its tool gone), taking the library's
 * optimizer thread and descriptors with it; start() begins anew (waiting
 * for an ending thread to be gone). */
int agent_server_start(void);

/* agent_interpose.c: an injected agent points the program's references
 * to sigaction, signal, sigprocmask, pthread_sigmask (...) at the
 * library's interposers, as preloading does; refresh() takes in objects
 * loaded since (called periodically by the control thread). */
void agent_interpose_start(void);
void agent_interpose_refresh(void);

/* agent.c */
const char *agent_self_basename(void);
/* Loaded by `kprobe -p` (not preloaded): it leaves when a session ends. */
bool agent_injected(void);

/* agent_objects.c: whether the loaded object with this file name is there
 * only because the agent needs it. */
bool agent_object_is_private(const char *name);
/* dlopen(RTLD_LOCAL) of a library only the agent uses: it stays out of the
 * global scope and, with what it needs, counts as private.  NULL on
 * failure (dlerror() says why). */
void *agent_object_open_private(const char *soname);

/* arch/<arch>/agent_decoder.c: loads the instruction decoder privately (the agent's
 * constructor does, before anything decodes).  0, or -1 with err set. */
int agent_private_load(char *err, size_t errlen);

#endif
