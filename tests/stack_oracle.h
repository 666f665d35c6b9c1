/* gdb as the oracle for stacks at probe hits (test_stack.c,
 * test_stack_cxx.cpp): a child process runs a scenario and stops itself
 * inside probe handlers, after recording kprobes_stack(); gdb, attached to
 * it, prints the stack it unwinds at each stop, and the two must be the
 * same.  Skipped, saying so, without gdb.  The includer provides
 * kp_thread_current() (os/linux/threads.h). */
#ifndef KP_STACK_ORACLE_H
#define KP_STACK_ORACLE_H

#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

static void oracle_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

#define MAXREC 24
#define GDB_MAXF 300

/* What the child records at each stop, shared with the parent. */
struct oracle_rec {
	int n;
	unsigned long ips[GDB_MAXF];
};

struct oracle_shared {
	int nrec;
	struct oracle_rec rec[MAXREC];
};

static struct oracle_shared *oracle;

static bool gdb_available(void)
{
	return system("gdb --version >/dev/null 2>&1") == 0;
}

/* In a handler of the child: kprobes_stack() at the probe, then a stop
 * for gdb to unwind the same thread. */
static void oracle_stop(struct pt_regs *regs)
{
	struct oracle_rec *r;

	if (oracle->nrec >= MAXREC)
		return;
	r = &oracle->rec[oracle->nrec++];
	r->n = kprobes_stack(regs, r->ips, GDB_MAXF);
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSTOP);
}

static bool traced(void)
{
	char buf[4096];
	FILE *f = fopen("/proc/self/status", "r");
	bool yes = false;

	if (!f)
		return false;
	while (fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "TracerPid:", 10))
			yes = atoi(buf + 10) != 0;
	fclose(f);
	return yes;
}

/* gdb delivers the child's own breakpoint traps (the probes) and stops at
 * its SIGSTOPs, where it prints the pcs of the thread's frames (inline
 * and tail-call frames, which gdb makes up from debug information, are
 * not frames on the stack; nor is the return stub gdb shows above each
 * return-probed frame, where that frame will return, before its real
 * caller). */
static const char gdb_script[] =
	"import gdb\n"
	"gdb.execute('set pagination off')\n"
	"gdb.execute('set backtrace past-main on')\n"
	"gdb.execute('set backtrace limit 300')\n"
	"gdb.execute('handle all nostop noprint pass')\n"
	"gdb.execute('handle SIGTRAP stop print nopass')\n"
	"gdb.execute('handle SIGSTOP stop print nopass')\n"
	"cont = 'continue'\n"
	"while True:\n"
	"    try:\n"
	"        gdb.execute(cont, to_string=True)\n"
	"    except gdb.error:\n"
	"        break\n"
	"    if gdb.selected_inferior().pid == 0:\n"
	"        break\n"
	"    try:\n"
	"        sig = int(gdb.parse_and_eval('$_siginfo.si_signo'))\n"
	"    except gdb.error:\n"
	"        sig = 0\n"
	"    cont = 'signal SIGTRAP' if sig == 5 else 'continue'\n"
	"    if sig != 19:\n"
	"        continue\n"
	"    f = gdb.newest_frame()\n"
	"    pcs = []\n"
	"    while f is not None and len(pcs) < 300:\n"
	"        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME) and \\\n"
	"           f.name() != 'kprobes_return_stub':\n"
	"            pcs.append(f.pc())\n"
	"        try:\n"
	"            f = f.older()\n"
	"        except gdb.error:\n"
	"            break\n"
	"    print('STACK ' + ' '.join('%x' % p for p in pcs), flush=True)\n";

/* Runs scenario in a child with gdb attached; the stacks gdb printed at
 * the child's stops, parsed into g (at most MAXREC).  Returns how many. */
static int run_under_gdb(void (*scenario)(void), unsigned long (*g)[GDB_MAXF], int *gn)
{
	char script[] = "/tmp/kp-stack-gdb-XXXXXX.py", cmd[256], *line = NULL;
	size_t cap = 0;
	int fd = mkstemps(script, 3), status, ns = 0;
	pid_t pid;
	FILE *out;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, gdb_script, sizeof(gdb_script) - 1), (ssize_t)sizeof(gdb_script) - 1);
	close(fd);
	oracle = (struct oracle_shared *)mmap(NULL, sizeof(*oracle), PROT_READ | PROT_WRITE,
					      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq((void *)oracle, MAP_FAILED);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
		for (int i = 0; i < 10000 && !traced(); i++)
			oracle_sleep_ms(1);
		if (!traced())
			_exit(3);
		scenario();
		_exit(0);
	}
	snprintf(cmd, sizeof(cmd), "gdb -nx -batch -p %d -x %s 2>/dev/null </dev/null", pid, script);
	out = popen(cmd, "r");
	cr_assert(out);
	while (getline(&line, &cap, out) > 0) {
		char *p = line + 6, *end;
		int n = 0;

		if (strncmp(line, "STACK ", 6) || ns >= MAXREC)
			continue;
		while (n < GDB_MAXF) {
			unsigned long v = strtoul(p, &end, 16);

			if (end == p)
				break;
			g[ns][n++] = v;
			p = end;
		}
		gn[ns++] = n;
	}
	free(line);
	pclose(out);
	unlink(script);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3 && !ns)
		cr_skip_test("gdb could not attach to a child (ptrace not permitted?): no oracle");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %#x", status);
	return ns;
}

static void print_stack(const char *what, const unsigned long *v, int n)
{
	fprintf(stderr, "%s (%d):", what, n);
	for (int i = 0; i < n; i++) {
		Dl_info di;

		if (dladdr((void *)v[i], &di) && di.dli_sname)
			fprintf(stderr, " %s+%#lx", di.dli_sname, v[i] - (unsigned long)di.dli_saddr);
		else
			fprintf(stderr, " %#lx", v[i]);
	}
	fprintf(stderr, "\n");
}

/* Every stop's kprobes_stack() equals gdb's unwind from the probed frame
 * on (gdb's first frames are the handler's, then the signal frame). */
static void expect_gdb_stacks(void (*scenario)(void), int min_stops)
{
	static unsigned long g[MAXREC][GDB_MAXF];
	static int gn[MAXREC];
	int ns;

	if (!gdb_available())
		cr_skip_test("gdb is not installed: no oracle for the stacks");
	ns = run_under_gdb(scenario, g, gn);
	cr_assert_eq(ns, oracle->nrec, "gdb saw %d stops, the child made %d", ns, oracle->nrec);
	cr_assert_geq(ns, min_stops, "only %d stops", ns);
	cr_log_info("%d stops compared with gdb", ns);
	for (int i = 0; i < ns; i++) {
		const struct oracle_rec *r = &oracle->rec[i];
		int k = -1;
		bool same;

		cr_assert_gt(r->n, 0, "stop %d: kprobes_stack returned %d", i, r->n);
		for (int j = 0; j < gn[i] && k < 0; j++)
			if (g[i][j] == r->ips[0])
				k = j;
		same = k >= 0 && gn[i] - k == r->n;
		for (int j = 0; same && j < r->n; j++)
			same = g[i][k + j] == r->ips[j];
		if (!same) {
			print_stack("gdb", g[i], gn[i]);
			print_stack("kprobes_stack", r->ips, r->n);
		}
		cr_expect(same, "stop %d: kprobes_stack differs from gdb's bt (see stderr)", i);
	}
	munmap(oracle, sizeof(*oracle));
}

/* A pre-handler's regs->ip is past the probed address (as after an int3);
 * gdb shows the probed frame at the probed address: from a detour, which
 * its unwind information describes so, and at a breakpoint, where the
 * signal context's ip is past the int3, inside the probed instruction,
 * while gdb unwinds an interrupted frame from its exact ip: the context
 * shows the probed address while gdb looks.  The recorded stack's first
 * entry is the probed address too. */
static int oracle_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct kp_thread *t = kp_thread_current();
	ucontext_t *uc = t ? (ucontext_t *)t->trap_ctx : NULL;
	greg_t ip = 0;

	if (uc && (unsigned long)uc->uc_mcontext.gregs[REG_RIP] == regs->ip) {
		ip = uc->uc_mcontext.gregs[REG_RIP];
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)p->addr;
	}
	oracle_stop(regs);
	if (ip)
		uc->uc_mcontext.gregs[REG_RIP] = ip;
	if (oracle->nrec && oracle->rec[oracle->nrec - 1].ips[0] == (unsigned long)p->addr + 1)
		oracle->rec[oracle->nrec - 1].ips[0] = (unsigned long)p->addr;
	return 0;
}

#endif
