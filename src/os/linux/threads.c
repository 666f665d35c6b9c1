/* Thread records, grace periods and the instruction-pointer census. */
/* On the hit path of optimized probes, which save vector state only for
 * handlers that need it: this code must not touch it. */
#include "asm/hitpath.h"

#include "asm/sigcontext.h"
#include "os/linux/threads.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "os/linux/signals.h"
#include "os/linux/sys.h"
#include "os/linux/upcalls.h"
#include <fcntl.h>
#include <stdio.h>


static struct kp_thread records[KP_MAX_THREADS];
static unsigned int records_used;	/* high-water mark */
__thread struct kp_thread *kp_self_tls __attribute__((tls_model("initial-exec")));
#define self kp_self_tls
int kp_membarrier_ok;
unsigned int kp_guest_readers;

static pid_t sys_gettid(void)
{
	return kp_gettid();
}

static bool thread_is_dead(pid_t tid)
{
	return kp_syscall(SYS_tgkill, kp_getpid(), tid, 0) == -ESRCH;
}

/* A record whose owner has exited can be taken over. */
static bool record_claim(struct kp_thread *r, pid_t tid, bool reap)
{
	pid_t owner = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);

	if (owner != 0) {
		if (!reap || owner == tid || r->nest || !thread_is_dead(owner))
			return false;
	}
	if (!__atomic_compare_exchange_n(&r->tid, &owner, tid, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return false;
	r->nest = 0;
	r->in_handler = 0;
	r->lib_code = 0;
	r->ri_top = NULL;
	r->jprobe_pp = NULL;
	r->nsigframes = 0;
	r->trap_depth = 0;
	r->trap_ctx = NULL;
	r->ri_cache_busy = 0;
	return true;
}

static struct kp_thread *record_find(pid_t tid, bool reap)
{
	unsigned int start = (unsigned int)tid % KP_MAX_THREADS;

	for (unsigned int i = 0; i < KP_MAX_THREADS; i++) {
		unsigned int k = (start + i) % KP_MAX_THREADS;

		if (record_claim(&records[k], tid, reap)) {
			unsigned int used = __atomic_load_n(&records_used, __ATOMIC_RELAXED);

			while (used < k + 1 &&
			       !__atomic_compare_exchange_n(&records_used, &used, k + 1, true,
							    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
				;
			return &records[k];
		}
	}
	return NULL;
}

struct kp_thread *kp_thread_self(void)
{
	pid_t tid;

	if (self)
		return self;
	tid = sys_gettid();
	self = record_find(tid, false);
	if (!self)
		self = record_find(tid, true);
	return self;
}

static void census_after_fork(void);

/* In a fork child only the forking thread exists: its record becomes its
 * own, every other record is free. */
static void after_fork_child(void)
{
	unsigned int n = __atomic_load_n(&records_used, __ATOMIC_RELAXED);

	for (unsigned int i = 0; i < n; i++) {
		if (&records[i] == self)
			continue;
		records[i].tid = 0;
		records[i].nest = 0;
		records[i].in_handler = 0;
		records[i].lib_code = 0;
		records[i].ri_top = NULL;
		records[i].jprobe_pp = NULL;
		records[i].nsigframes = 0;
		records[i].trap_depth = 0;
		records[i].trap_ctx = NULL;
		records[i].wstep.active = 0;
		records[i].wstep.echo = 0;
		/* its cached instances stay for the record's next owner */
		records[i].ri_cache_busy = 0;
	}
	if (self)
		self->tid = sys_gettid();
	/* sections of threads that do not exist here */
	__atomic_store_n(&kp_guest_readers, 0, __ATOMIC_RELAXED);
	census_after_fork();
}

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

struct kp_thread *kp_thread_records(unsigned int *n)
{
	*n = __atomic_load_n(&records_used, __ATOMIC_ACQUIRE);
	return records;
}

bool kp_thread_record_dead(const struct kp_thread *r)
{
	pid_t tid = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);

	return !tid || thread_is_dead(tid);
}

bool kp_membarrier_all(void)
{
	return kp_membarrier_ok && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

static void census_init(void);

void kp_threads_init(void)
{
	kp_membarrier_ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
	pthread_atfork(NULL, NULL, after_fork_child);
	census_init();
}

static void pause_briefly(void)
{
	struct timespec ts = { 0, 50000 };

	nanosleep(&ts, NULL);
}

/* A record's sections: depth in the low half, the ended count in the high
 * half.  gen is read first: a section seen in nest that ended before gen was
 * read would otherwise be waited for as the next one. */
#define SECTION_NEST 0xffffffffULL

static uint64_t section_word(const struct kp_thread *r)
{
	uint64_t gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);

	return gen << 32 | __atomic_load_n(&r->nest, __ATOMIC_ACQUIRE);
}

uint64_t kp_thread_section(const struct kp_thread *r)
{
	return section_word(r);
}

bool kp_thread_section_ended(const struct kp_thread *r, uint64_t snap)
{
	uint64_t now = section_word(r);

	return !(snap & SECTION_NEST) || !(now & SECTION_NEST) || (now >> 32) != (snap >> 32);
}

/* Sections of threads without a record (kp_guest_read_enter): one count
 * for them all, so the wait is for a moment when none is inside.  They are
 * short (a stack walk) and rare (outside handlers, before the thread ever
 * met the library). */
static void wait_guest_readers(void)
{
	while (__atomic_load_n(&kp_guest_readers, __ATOMIC_ACQUIRE))
		sched_yield();
}

void kp_synchronize(void)
{
	unsigned int n = __atomic_load_n(&records_used, __ATOMIC_ACQUIRE);
	uint64_t *snap;
	struct kp_thread *me = kp_thread_self();

	if (kp_membarrier_ok)
		membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	snap = calloc(n ? n : 1, sizeof(*snap));
	if (!snap) {
		/* No memory for a snapshot: wait for every section instead. */
		for (unsigned int i = 0; i < n; i++)
			while (&records[i] != me && section_word(&records[i]) & SECTION_NEST)
				pause_briefly();
		wait_guest_readers();
		return;
	}
	for (unsigned int i = 0; i < n; i++)
		snap[i] = section_word(&records[i]);
	for (unsigned int i = 0; i < n; i++) {
		/* The caller may itself be inside a handler.  The section seen
		 * has ended once the depth is 0 or an outermost one ended. */
		if (&records[i] == me || !(snap[i] & SECTION_NEST))
			continue;
		for (;;) {
			uint64_t now = section_word(&records[i]);

			if (!(now & SECTION_NEST) || (now >> 32) != (snap[i] >> 32))
				break;
			if (thread_is_dead(records[i].tid))
				break;
			sched_yield();
		}
	}
	free(snap);
	wait_guest_readers();
}

/* Waits until no live thread runs the jprobe entry function of pp: the
 * entry runs after the trap handler's read-side section, up to its
 * jprobe_return(). */
void kp_wait_jprobes_left(const void *pp)
{
	unsigned int n = __atomic_load_n(&records_used, __ATOMIC_ACQUIRE);
	struct kp_thread *me = kp_thread_self();

	for (unsigned int i = 0; i < n; i++) {
		while (&records[i] != me &&
		       __atomic_load_n(&records[i].jprobe_pp, __ATOMIC_ACQUIRE) == pp) {
			pid_t tid = __atomic_load_n(&records[i].tid, __ATOMIC_ACQUIRE);

			if (!tid || thread_is_dead(tid))
				break;
			sched_yield();
		}
	}
}

/* ---- program signal handlers ---- */

uintptr_t kp_handler_text[2][2];

static bool in_handler_text(uintptr_t ip)
{
	for (int i = 0; i < 2; i++)
		if (ip >= kp_handler_text[i][0] && ip < kp_handler_text[i][1])
			return true;
	return false;
}

/* Whether the signal frame at frame lies on the alternate stack. */
static bool on_altstack(uintptr_t frame)
{
	stack_t ss;

	if (kp_syscall(SYS_sigaltstack, 0, &ss, 0) || (ss.ss_flags & SS_DISABLE))
		return false;
	return frame >= (uintptr_t)ss.ss_sp && frame < (uintptr_t)ss.ss_sp + ss.ss_size;
}

/* A recorded frame below a newer one on the same stack was left by
 * siglongjmp(): the newer frame is where its handler was. */
static bool frame_gone(const struct kp_sigframe *f, uintptr_t newer)
{
	return f->frame < newer && on_altstack(f->frame) == on_altstack(newer);
}

static void sigframe_fill(struct kp_sigframe *f, const ucontext_t *uc)
{
	uintptr_t ip = arch_ucontext_ip(uc);

	/* Never on the way out of a trap handler: those block every
	 * asynchronous signal until their sigreturn. */
	f->ip = ip;
	f->frame = (uintptr_t)uc;
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

void kp_sigframe_push(const void *ctx)
{
	const ucontext_t *uc = ctx;
	struct kp_thread *t = kp_thread_current();
	unsigned int n;

	if (!t)
		return;
	/* Recorded first, with no system call before: a census may read the
	 * record of this thread stopped anywhere from here on. */
	n = t->nsigframes;
	if (n < KP_SIGFRAMES)
		sigframe_fill(&t->sigframes[n], uc);
	__atomic_store_n(&t->nsigframes, n + 1, __ATOMIC_RELEASE);
	if (n > KP_SIGFRAMES)
		return;
	/* Then the records siglongjmp() left below this frame go, the new
	 * one moving down over them (a reader sees it all along). */
	while (n && frame_gone(&t->sigframes[n - 1], (uintptr_t)uc))
		n--;
	if (n + 1 < __atomic_load_n(&t->nsigframes, __ATOMIC_RELAXED)) {
		sigframe_fill(&t->sigframes[n], uc);
		__atomic_store_n(&t->nsigframes, n + 1, __ATOMIC_RELEASE);
	}
}

void kp_sigframe_pop(void)
{
	struct kp_thread *t = kp_thread_current();

	if (t && t->nsigframes)
		__atomic_store_n(&t->nsigframes, t->nsigframes - 1, __ATOMIC_RELEASE);
}

/* ---- census: where is every thread right now? ---- */

static int census_sig;
static const uintptr_t (*census_ranges)[2];
static int census_nranges;
static volatile int census_answers;
static volatile int census_inside;
static int census_busy;		/* handlers still reading the ranges */

/* A thread that was in the census handler when another forked does not
 * exist in the child: its count would make the child's census wait
 * forever. */
static void census_after_fork(void)
{
	census_busy = 0;
	census_nranges = 0;
}

/* kp_handler_text: code between a trap handler deciding where a thread
 * resumes and the thread being there: the library's own text and the
 * signal restorer. */

/* The architecture's answer (upcalls.h): is ip on the way into a detour
 * from outside it?  A census counts such a thread as inside. */
static bool bound_for_detour(uintptr_t ip)
{
	bool (*fn)(uintptr_t) = kp_os_upcall_get(ip_bound_for_detour);

	return fn && fn(ip);
}

static void census_check(uintptr_t ip)
{
	for (int i = 0; i < census_nranges; i++)
		if (ip >= census_ranges[i][0] && ip < census_ranges[i][1])
			__atomic_store_n(&census_inside, 1, __ATOMIC_RELAXED);
	if (census_nranges && bound_for_detour(ip))
		__atomic_store_n(&census_inside, 1, __ATOMIC_RELAXED);
}

/* Our census signals carry this address; others are the program's. */
static char census_tag[64];
/* The current round: an answer to an earlier one (a thread that could not
 * answer in time) must not count for this one. */
static unsigned int census_round;

static void census_handler(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t ip = arch_ucontext_ip(uc);

	uintptr_t tag = (uintptr_t)info->si_value.sival_ptr;

	if (info->si_code != SI_QUEUE || tag < (uintptr_t)census_tag ||
	    tag >= (uintptr_t)census_tag + sizeof(census_tag)) {
		kp_sig_forward(sig, info, ctx);
		return;
	}
	/* Seq-cst with the round's start (kp_threads_outside): a handler
	 * either sees the new round or is waited for before it begins. */
	__atomic_fetch_add(&census_busy, 1, __ATOMIC_SEQ_CST);
	if (tag - (uintptr_t)census_tag != __atomic_load_n(&census_round, __ATOMIC_SEQ_CST) %
					      sizeof(census_tag)) {
		__atomic_fetch_sub(&census_busy, 1, __ATOMIC_RELEASE);
		return;
	}
	/* The trap and fault handlers block this signal until their
	 * sigreturn: ip is never on the way out of one. */
	census_check(ip);
	/* Where the program's signal handlers it runs interrupted it. */
	if (self) {
		unsigned int n = __atomic_load_n(&self->nsigframes, __ATOMIC_ACQUIRE);

		if (n > KP_SIGFRAMES)
			__atomic_store_n(&census_inside, 1, __ATOMIC_RELAXED);
		for (unsigned int i = 0; i < n && i < KP_SIGFRAMES; i++)
			if (!frame_gone(&self->sigframes[i], (uintptr_t)uc))
				census_check(self->sigframes[i].ip);
	}
	__atomic_fetch_add(&census_answers, 1, __ATOMIC_RELEASE);
	__atomic_fetch_sub(&census_busy, 1, __ATOMIC_RELEASE);
}

int kp_census_signal(void)
{
	return census_sig;
}

/* Owned like SIGTRAP: a program that uses the signal itself keeps its
 * handler (virtualized) and gets its own signals forwarded. */
static void census_init(void)
{
	census_sig = SIGRTMAX - 2;
	kp_sig_own(census_sig, census_handler, 0, false);
}

static int census_send(pid_t pid, pid_t tid)
{
	siginfo_t info;

	memset(&info, 0, sizeof(info));
	info.si_signo = census_sig;
	info.si_code = SI_QUEUE;
	info.si_pid = pid;
	info.si_uid = getuid();
	info.si_value.sival_ptr = &census_tag[census_round % sizeof(census_tag)];
	return (int)kp_syscall6(SYS_rt_tgsigqueueinfo, pid, tid, census_sig, (long)&info, 0, 0);
}

/* A thread blocked in a system call cannot be inside a range unless the call
 * was made there; its user instruction pointer is in /proc/.../syscall. */
static int thread_blocked_ip(pid_t tid, uintptr_t *ip, bool *in_syscall)
{
	char path[64], buf[256];
	unsigned long v[9];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	if (!strncmp(buf, "running", 7))
		return -EAGAIN;
	if (sscanf(buf, "%ld %lx %lx %lx %lx %lx %lx %lx %lx", (long *)&v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
		*ip = v[8];
		*in_syscall = true;
		return 0;
	}
	/* "-1 sp pc": stopped outside a system call (preempted, faulting). */
	if (sscanf(buf, "%ld %lx %lx", (long *)&v[0], &v[1], &v[2]) == 3) {
		*ip = v[2];
		*in_syscall = false;
		return 0;
	}
	return -EIO;
}

static bool ip_in_ranges(uintptr_t ip, const uintptr_t (*ranges)[2], int n)
{
	for (int i = 0; i < n; i++)
		if (ip >= ranges[i][0] && ip < ranges[i][1])
			return true;
	return n > 0 && bound_for_detour(ip);
}

/* A thread stopped in library code: inside a trap handler, the context it
 * will return to (where it trapped, until the handler decides; nested
 * handlers: unknown, so inside); after one, where it was sent. */
static bool trap_destination_in(const struct kp_thread *r, bool in_syscall,
				const uintptr_t (*ranges)[2], int nr)
{
	unsigned int depth = __atomic_load_n(&r->trap_depth, __ATOMIC_ACQUIRE);
	const ucontext_t *uc;

	if (depth > 1)
		return true;
	/* Stopped in library code outside any trap handler, outside a
	 * read-side section (whose code never goes into a region or a slot)
	 * and outside a system call: maybe at the start of a signal wrapper
	 * that has not recorded its frame yet.  Unknown: inside.  (Library
	 * threads that sleep in system calls are in nobody's way; one in the
	 * sigreturn after a trap handler goes where that handler sent it.) */
	if (depth == 0)
		return (!in_syscall && !__atomic_load_n(&r->nest, __ATOMIC_ACQUIRE)) ||
		       ip_in_ranges(__atomic_load_n(&r->resume_ip, __ATOMIC_ACQUIRE), ranges, nr);
	uc = __atomic_load_n(&r->trap_ctx, __ATOMIC_ACQUIRE);
	if (!uc)
		return true;
	return ip_in_ranges(arch_ucontext_ip(uc), ranges, nr) ||
	       ip_in_ranges(arch_ucontext_ip(uc) - 1, ranges, nr);
}

/* A thread that cannot answer (asleep, preempted, or blocking the census
 * signal), stopped at ip: the places its program signal handlers
 * interrupted, from its record (it is not running, so they are stable;
 * frames siglongjmp() left count too); and, stopped in the trap path, where
 * that trap will send it. */
static bool frames_in_ranges(pid_t tid, uintptr_t ip, bool in_syscall,
			     const uintptr_t (*ranges)[2], int nr)
{
	unsigned int used = __atomic_load_n(&records_used, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < used; i++) {
		const struct kp_thread *r = &records[i];
		unsigned int n;

		if (__atomic_load_n(&r->tid, __ATOMIC_ACQUIRE) != tid)
			continue;
		if (in_handler_text(ip) && trap_destination_in(r, in_syscall, ranges, nr))
			return true;
		n = __atomic_load_n(&r->nsigframes, __ATOMIC_ACQUIRE);
		if (n > KP_SIGFRAMES)
			return true;
		for (unsigned int k = 0; k < n; k++)
			if (ip_in_ranges(r->sigframes[k].ip, ranges, nr))
				return true;
		return false;
	}
	/* No record yet: in library code, it may be claiming one in a signal
	 * wrapper that interrupted it anywhere. */
	return in_handler_text(ip) && !in_syscall;
}

/* Whether thread tid blocks the census signal (SigBlk in its status). */
static bool census_blocked(pid_t tid)
{
	char path[64], buf[2048], *p;
	unsigned long long mask;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strstr(buf, "SigBlk:");
	if (!p || sscanf(p + 7, "%llx", &mask) != 1)
		return false;
	return mask & (1ULL << (census_sig - 1));
}

bool kp_threads_outside(const uintptr_t (*ranges)[2], int n)
{
	pid_t me = sys_gettid(), pid = getpid();
	int sent = 0;
	struct dirent *de;
	DIR *d;

	/* Nothing to be inside: no thread is asked (one that cannot answer
	 * would otherwise count as inside nothing). */
	if (n <= 0)
		return true;
	d = opendir("/proc/self/task");
	if (!d)
		return false;
	/* The round first, then the counts: a late handler of an earlier
	 * round (a thread that could not answer in time) that passed its
	 * round check before the new round began is waited for here, and
	 * one that comes later sees the new round and ignores its signal.
	 * Reset before it, its answer would count for this round and end
	 * the wait before a thread that may be inside has answered. */
	__atomic_store_n(&census_round, census_round + 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&census_busy, __ATOMIC_SEQ_CST))
		sched_yield();
	census_ranges = ranges;
	census_nranges = n;
	census_answers = 0;
	census_inside = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		bool in_syscall;
		uintptr_t ip;

		if (tid <= 0 || tid == me)
			continue;
		/* A running thread that blocks the census signal cannot say
		 * where it is: inside, as far as we know, without waiting. */
		if (census_blocked(tid)) {
			if (thread_blocked_ip(tid, &ip, &in_syscall) == 0) {
				if (ip_in_ranges(ip, ranges, n) ||
				    frames_in_ranges(tid, ip, in_syscall, ranges, n))
					census_inside = 1;
			} else {
				census_inside = 1;
			}
			continue;
		}
		/* Sleeping threads are read, not signalled: a signal would make
		 * some of their system calls fail with EINTR. */
		if (thread_blocked_ip(tid, &ip, &in_syscall) == 0) {
			if (ip_in_ranges(ip, ranges, n) ||
			    frames_in_ranges(tid, ip, in_syscall, ranges, n))
				census_inside = 1;
			continue;
		}
		if (census_send(pid, tid) == 0)
			sent++;
	}
	closedir(d);
	for (int spins = 0; spins < 20000 &&
	     __atomic_load_n(&census_answers, __ATOMIC_ACQUIRE) < sent; spins++)
		pause_briefly();
	bool ok = census_answers >= sent && !census_inside;

	census_nranges = 0;
	/* A late handler may still be reading the caller's ranges. */
	while (__atomic_load_n(&census_busy, __ATOMIC_ACQUIRE))
		sched_yield();
	return ok;
}
