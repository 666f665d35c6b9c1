/* libkprobe-audit.so: starts the agent before any constructor runs.
 *
 * A launched command's libraries run their constructors before the
 * preloaded agent's (the loader initializes the objects loaded last
 * first, dependencies before their users), so calls made by those
 * constructors would come before the probes are armed.  This module,
 * given to the command in LD_AUDIT beside the agent in LD_PRELOAD, is
 * called by the loader once every object of the program is loaded and
 * relocated and before any initializer runs (la_activity,
 * LA_ACT_CONSISTENT): it finds the agent among the loaded objects and
 * calls the start function the agent exports, with the session config.
 * The agent's constructor then finds the session started.
 *
 * It lives in the loader's audit namespace, with its own copy of libc: it
 * only reads the agent's dynamic symbol table (GNU hash) and calls one
 * function. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define AGENT_FILE "libkprobe-agent.so"
#define AGENT_START "kprobe_agent_early_start"

static struct link_map *agent;
static int started;

unsigned int la_version(unsigned int version)
{
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	(void)cookie;
	if (lmid == LM_ID_BASE && map->l_name && !strcmp(base_name(map->l_name), AGENT_FILE))
		agent = map;
	return 0;	/* no symbol binding watched: nothing costs later */
}

/* A dynamic entry's address (the loader relocates them in place; one
 * below the load address is still an offset). */
static uintptr_t dyn_ptr(const struct link_map *m, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d->d_un.d_ptr < m->l_addr ? m->l_addr + d->d_un.d_ptr :
							    d->d_un.d_ptr;
	return 0;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* A function m defines, found through its GNU hash table. */
static void *lookup(const struct link_map *m, const char *name)
{
	const uint32_t *hash = (const uint32_t *)dyn_ptr(m, DT_GNU_HASH);
	const ElfW(Sym) *syms = (const ElfW(Sym) *)dyn_ptr(m, DT_SYMTAB);
	const char *strs = (const char *)dyn_ptr(m, DT_STRTAB);
	uint32_t h = gnu_hash(name), nbuckets, symoffset, i;
	const uint32_t *buckets, *chain;

	if (!hash || !syms || !strs || !hash[0])
		return NULL;
	nbuckets = hash[0];
	symoffset = hash[1];
	buckets = hash + 4 + hash[2] * (sizeof(ElfW(Addr)) / 4);
	chain = buckets + nbuckets;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];

		if ((h | 1) == (h2 | 1) && !strcmp(strs + syms[i].st_name, name) &&
		    syms[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC)
			return (void *)(m->l_addr + syms[i].st_value);
		if (h2 & 1)
			return NULL;
	}
}

void la_activity(uintptr_t *cookie, unsigned int flag)
{
	void (*start)(const char *config, int follower, char **envp);
	const char *config;

	(void)cookie;
	if (flag != LA_ACT_CONSISTENT || started || !agent)
		return;
	started = 1;
	config = getenv("KPROBE_AGENT_CONFIG");
	start = (void (*)(const char *, int, char **))lookup(agent, AGENT_START);
	if (!config || !start)
		return;
	/* The loader marks the namespace consistent right after this call;
	 * the agent's dlopen() of its private libraries insists on it. */
	_r_debug.r_state = RT_CONSISTENT;
	/* Our libc was initialized with the program's environment. */
	start(config, getenv("KPROBE_AGENT_FOLLOWER") != NULL, environ);
}
