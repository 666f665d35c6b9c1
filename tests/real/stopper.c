/* Preloaded into the unprobed runs of the uprobe oracle.  Its constructor
 * runs where the kprobe agent's does (the last initializer before the
 * program's own), and stops the process with SIGSTOP so that the driver can
 * take the uprobe hit counts accumulated so far: the counts after it are the
 * ones `kprobe count` sees.  No libc, no C runtime files: the object adds no
 * function call (not even __cxa_finalize at exit) to the process. */
#include <signal.h>
#include <sys/syscall.h>

static long raw_syscall2(long nr, long a, long b)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return ret;
}

/* LD_PRELOAD is taken out of the environment first: the program must see
 * the environment it sees under kprobe (whose agent restores it). */
static int is_preload(const char *s)
{
	const char *p = "LD_PRELOAD=";

	while (*p && *s == *p)
		s++, p++;
	return !*p;
}

__attribute__((constructor)) static void stop_here(int argc, char **argv, char **envp)
{
	char **out = envp;

	(void)argc, (void)argv;
	for (char **e = envp; *e; e++)
		if (!is_preload(*e))
			*out++ = *e;
	*out = 0;
	raw_syscall2(SYS_kill, raw_syscall2(SYS_getpid, 0, 0), SIGSTOP);
}
