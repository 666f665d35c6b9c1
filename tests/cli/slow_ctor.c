/* A library whose constructor holds the dynamic loader's lock for a while
 * (every dlopen in the process waits for it): tests/cli/odd_target.c loads
 * it to keep an injected dlopen waiting. */
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void slow_ctor(void)
{
	struct timespec ts = { 1, 500 * 1000 * 1000 };

	while (nanosleep(&ts, &ts))
		;
	if (write(1, "ctor done\n", 10) < 0)
		ts.tv_sec = 0;
}
