/* numaid in programs: the NUMA node of each processor, read from sysfs
 * when a program starts (off the hit path) and looked up on it by the
 * processor number kp_cpu_id() gives, without a system call.  A machine
 * without the node directory (one node) reads 0 everywhere, as bpftrace's
 * numaid does there. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define NUMA_MAX_CPUS 4096

static uint16_t node_of_cpu[NUMA_MAX_CPUS];

/* "0-3,8,10-11": each processor of the list is on node. */
static void mark_cpulist(const char *list, unsigned int node)
{
	const char *p = list;

	while (*p >= '0' && *p <= '9') {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		for (unsigned long c = lo; c <= hi && c < NUMA_MAX_CPUS; c++)
			node_of_cpu[c] = (uint16_t)node;
		if (*end != ',')
			break;
		p = end + 1;
	}
}

void agent_numa_load(void)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;

	memset(node_of_cpu, 0, sizeof(node_of_cpu));
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], list[4096];
		unsigned int node;
		size_t n;
		FILE *f;

		if (sscanf(e->d_name, "node%u", &node) != 1 || node > UINT16_MAX)
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/%s/cpulist", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		n = fread(list, 1, sizeof(list) - 1, f);
		fclose(f);
		list[n] = 0;
		mark_cpulist(list, node);
	}
	closedir(d);
}

uint64_t agent_numa_node(unsigned int cpu)
{
	return cpu < NUMA_MAX_CPUS ? node_of_cpu[cpu] : 0;
}
