/*
 * jprobe_example: the classic jprobe sample, in user space.
 *
 * A jprobe on do_fork-like function `spawn_job` whose entry function has
 * the same prototype and so sees every argument — integers, doubles and
 * the ones passed on the stack — then returns through jprobe_return().
 *
 *   build/examples/jprobe_example
 */
#include <kprobes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

long spawn_job(long id, const char *name, double weight,
	       long a, long b, long c, long d, long e);
__attribute__((noinline)) long spawn_job(long id, const char *name, double weight,
					 long a, long b, long c, long d, long e)
{
	return id + a + b + c + d + e + (long)(weight * 10) + (long)strlen(name);
}

/* Same prototype as spawn_job. */
static long j_spawn_job(long id, const char *name, double weight,
			long a, long b, long c, long d, long e)
{
	char buf[200];
	int n = snprintf(buf, sizeof(buf),
			 "jprobe: id = %ld, name = %s, weight = %.2f, stack args = %ld %ld\n",
			 id, name, weight, d, e);

	if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
		jprobe_return();
	/* Always end with a call to jprobe_return(). */
	jprobe_return();
	return 0;
}

static struct jprobe my_jprobe = {
	.entry = (void *)j_spawn_job,
	.kp = {
		.symbol_name = "spawn_job",
	},
};

int main(void)
{
	int ret;

	setvbuf(stdout, NULL, _IONBF, 0);
	ret = register_jprobe(&my_jprobe);
	if (ret < 0) {
		fprintf(stderr, "register_jprobe failed, returned %d (%s)\n", ret, strerror(-ret));
		return 1;
	}
	printf("Planted jprobe at %p, handler addr %p\n", (void *)my_jprobe.kp.addr, my_jprobe.entry);
	for (long i = 1; i <= 2; i++)
		printf("spawn_job -> %ld\n", spawn_job(i, "worker", 1.5 * i, 1, 2, 3, 4 * i, 5 * i));
	unregister_jprobe(&my_jprobe);
	printf("jprobe at %p unregistered\n", (void *)my_jprobe.kp.addr);
	return 0;
}
