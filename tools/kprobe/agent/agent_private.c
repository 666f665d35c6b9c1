/* The agent's footprint in the target: one object, with nothing of its own
 * in the program's symbol scope.
 *
 * libelf, libdw, libz, liblzma and libbz2 are linked into the agent from
 * their static archives with their symbols hidden (tools/kprobe/kprobe.mk).
 * What this file gives the static elfutils archives is their error state:
 * theirs lives in local-exec TLS, which a shared object cannot hold.  The
 * instruction decoder libkprobes needs, where it is a shared library of
 * its own (Zydis on x86-64), is loaded privately by the architecture's
 * agent_decoder.c (tools/kprobe/arch/<arch>/). */
#include <elfutils/libdw.h>
#include <libelf.h>

#include "agent.h"

/* ---- the static elfutils archives' error state ----
 * Their own error objects keep it in local-exec TLS, which the linker
 * refuses in a shared object; these replace them (same names, hidden).
 * Nothing in the agent shows libelf's or libdw's messages: it reports
 * what it was doing instead. */

/* elfutils' internal setters, which its headers do not declare. */
void __libelf_seterrno(int value);
void __libdw_seterrno(int value);

static __thread int libelf_error, libdw_error;

int elf_errno(void)
{
	int e = libelf_error;

	libelf_error = 0;
	return e;
}

const char *elf_errmsg(int error)
{
	(void)error;
	return "ELF error";
}

void __libelf_seterrno(int value)
{
	libelf_error = value;
}

int dwarf_errno(void)
{
	int e = libdw_error;

	libdw_error = 0;
	return e;
}

const char *dwarf_errmsg(int error)
{
	(void)error;
	return "DWARF error";
}

void __libdw_seterrno(int value)
{
	libdw_error = value;
}
