/* A program linked against libkprobes.so as the README shows: it probes
 * write() and calls it three times. */
#include <stdio.h>
#include <unistd.h>

#include <kprobes.h>

static long hits;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	hits++;
	return 0;
}

int main(void)
{
	struct kprobe kp = { .symbol_name = "write", .pre_handler = count_hit };
	int rc = register_kprobe(&kp);

	if (rc) {
		fprintf(stderr, "register_kprobe: %d\n", rc);
		return 1;
	}
	for (int i = 0; i < 3; i++)
		if (write(1, "w\n", 2) != 2)
			return 1;
	unregister_kprobe(&kp);
	printf("dynlinked: %ld hits\n", hits);
	return 0;
}
