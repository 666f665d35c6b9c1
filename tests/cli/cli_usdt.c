/* A program with a SystemTap SDT probe guarded by a semaphore, written
 * out in the note format sys/sdt.h produces (the header is not needed to
 * build it): provider "demo", name "req", operands a 64-bit value, a
 * 32-bit signed one, and a constant.  It counts the iterations that found
 * the semaphore raised and prints "enabled=N of M". */
#include <stdio.h>
#include <stdlib.h>

/* The semaphore: in .probes, raised by tracers while they probe. */
__attribute__((section(".probes"), used)) volatile unsigned short demo_req_semaphore;

#define DEMO_REQ(a, b)									\
	__asm__ volatile("990:	nop\n"							\
			 ".pushsection .note.stapsdt,\"?\",\"note\"\n"			\
			 ".balign 4\n"							\
			 ".4byte 992f-991f, 994f-993f, 3\n"				\
			 "991:	.asciz \"stapsdt\"\n"					\
			 "992:	.balign 4\n"						\
			 "993:	.8byte 990b\n"						\
			 ".8byte _.stapsdt.base\n"					\
			 ".8byte demo_req_semaphore\n"					\
			 ".asciz \"demo\"\n"						\
			 ".asciz \"req\"\n"						\
			 ".asciz \"8@%[x] -4@%[y] -4@$7\"\n"				\
			 "994:	.balign 4\n"						\
			 ".popsection\n"						\
			 ".ifndef _.stapsdt.base\n"					\
			 ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
			 ".weak _.stapsdt.base\n"					\
			 ".hidden _.stapsdt.base\n"					\
			 "_.stapsdt.base: .space 1\n"					\
			 ".size _.stapsdt.base, 1\n"					\
			 ".popsection\n"						\
			 ".endif\n"							\
			 : : [x] "r"((long)(a)), [y] "m"(b))

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
