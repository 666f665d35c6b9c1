/* A SystemTap SDT probe site written out in the note format <sys/sdt.h>
 * produces, for the tool's own tests and benchmark (no header package
 * needed): SDT_PROBE3(provider, name, semaphore, ca, a, cb, b, cc, c)
 * emits a nop, a .note.stapsdt note naming it with the operands
 * "8@A -4@B -4@C" (a 64-bit value and two 32-bit signed ones, each in the
 * form its asm constraint ca, cb, cc asks for: "r" a register, "m"
 * memory, "n" a constant), and the .stapsdt.base section prelink
 * adjustments are measured from.  semaphore is an unsigned short in
 * section ".probes".  Each site's address is also listed in the section
 * "sdt_sites" (__start_sdt_sites..__stop_sdt_sites), for a benchmark that
 * probes its own sites. */
#ifndef KPROBE_SDT_PROBE_H
#define KPROBE_SDT_PROBE_H

#define SDT_PROBE_STR(x) #x

#define SDT_PROBE3(provider, name, semaphore, ca, a, cb, b, cc, c)				\
	__asm__ volatile("990:	nop\n"							\
			 ".pushsection .note.stapsdt,\"?\",\"note\"\n"			\
			 ".balign 4\n"							\
			 ".4byte 992f-991f, 994f-993f, 3\n"				\
			 "991:	.asciz \"stapsdt\"\n"					\
			 "992:	.balign 4\n"						\
			 "993:	.8byte 990b\n"						\
			 ".8byte _.stapsdt.base\n"					\
			 ".8byte " SDT_PROBE_STR(semaphore) "\n"			\
			 ".asciz \"" SDT_PROBE_STR(provider) "\"\n"			\
			 ".asciz \"" SDT_PROBE_STR(name) "\"\n"				\
			 ".asciz \"8@%[sdt_a] -4@%[sdt_b] -4@%[sdt_c]\"\n"		\
			 "994:	.balign 4\n"						\
			 ".popsection\n"						\
			 ".pushsection sdt_sites,\"aw\"\n"				\
			 ".balign 8\n"							\
			 ".8byte 990b\n"						\
			 ".popsection\n"						\
			 ".ifndef _.stapsdt.base\n"					\
			 ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
			 ".weak _.stapsdt.base\n"					\
			 ".hidden _.stapsdt.base\n"					\
			 "_.stapsdt.base: .space 1\n"					\
			 ".size _.stapsdt.base, 1\n"					\
			 ".popsection\n"						\
			 ".endif\n"							\
			 : : [sdt_a] ca((long)(a)), [sdt_b] cb((int)(b)), [sdt_c] cc((int)(c)))

#endif
