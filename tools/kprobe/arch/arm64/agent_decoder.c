/* The A64 instruction decoder in the agent: libkprobes classifies A64
 * words with its own classifier (src/arch/arm64/insn.c), linked into the
 * agent with the rest of the library, so there is no decoder library to
 * load privately, as there is on x86-64. */
#include "agent.h"

int agent_private_load(char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return 0;
}
