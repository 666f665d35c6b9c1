/* A program with a SystemTap SDT probe guarded by a semaphore, written
 * out in the note format sys/sdt.h produces (the header is not needed to
 * build it: tools/kprobe/common/sdt_probe.h): provider "demo", name "req",
 * operands a 64-bit value, a 32-bit signed one and a constant.  It counts
 * the iterations that found the semaphore raised and prints
 * "enabled=N of M". */
#include <stdio.h>
#include <stdlib.h>

#include "sdt_probe.h"

/* The semaphore: in .probes, raised by tracers while they probe. */
__attribute__((section(".probes"), used)) volatile unsigned short demo_req_semaphore;

/* The three operand forms: a register, memory, a constant. */
#define DEMO_REQ(a, b) SDT_PROBE3(demo, req, demo_req_semaphore, "r", a, "m", b, "n", 7)

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10, enabled = 0;

	for (int i = 0; i < rounds; i++) {
		int neg = -i;

		if (demo_req_semaphore) {
			enabled++;
			DEMO_REQ(1000 + i, neg);
		}
	}
	printf("enabled=%d of %d\n", enabled, rounds);
	return 0;
}
