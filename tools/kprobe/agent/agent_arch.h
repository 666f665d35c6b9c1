/* What the agent asks of the architecture's own file
 * (tools/kprobe/arch/<arch>/agent_decoder.c) besides agent_private_load()
 * (agent.h). */
#ifndef KPROBE_AGENT_ARCH_H
#define KPROBE_AGENT_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* The length of the instruction at at (avail bytes readable); <= 0 when
 * it does not decode. */
int agent_insn_length(const uint8_t *at, size_t avail);

#endif
