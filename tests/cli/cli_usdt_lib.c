/* A library with an SDT probe guarded by a semaphore, loaded with
 * dlopen() by the program built from the same file with -DMAIN: the
 * probe's object is not loaded when the tool resolves it, and its
 * semaphore must be raised once it is.  The program prints
 * "enabled=N of 4". */
#ifdef MAIN
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
	int (*work)(int);
	int n = 0;

	if (!h) {
		fprintf(stderr, "cannot load the library: %s\n", dlerror());
		return 1;
	}
	*(void **)&work = dlsym(h, "lib_work");
	for (int i = 0; work && i < 4; i++)
		n += work(i);
	printf("enabled=%d of 4\n", n);
	return 0;
}
#else
#include "sdt_probe.h"

__attribute__((section(".probes"), used)) volatile unsigned short lib_ev_semaphore;

int lib_work(int i)
{
	int neg = -i;

	if (!lib_ev_semaphore)
		return 0;
	SDT_PROBE3(libp, ev, lib_ev_semaphore, "r", (long)i, "m", neg, "n", 5);
	return 1;
}
#endif
