/*
 * GDB's JIT interface (gdb/jit.h, "JIT Compilation Interface" in the GDB
 * manual): a debugger that finds __jit_debug_descriptor and a breakpoint
 * on __jit_debug_register_code reads each registered ELF object from the
 * process's memory.  Objects are relocatable ELF files whose sections
 * already carry their run-time addresses: .text (NOBITS: the code is read
 * from the process) and .eh_frame, plus a symbol for the code.
 */
#include <elf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/jitdebug.h"

#define KP_EXPORT __attribute__((visibility("default")))

struct jit_code_entry {
	struct jit_code_entry *next_entry;
	struct jit_code_entry *prev_entry;
	const char *symfile_addr;
	uint64_t symfile_size;
};

struct jit_descriptor {
	uint32_t version;
	uint32_t action_flag;	/* 0 none, 1 register, 2 unregister */
	struct jit_code_entry *relevant_entry;
	struct jit_code_entry *first_entry;
};

/* Weak, as the protocol wants one descriptor per process: a program that
 * also links another JIT's (LLVM's) shares it instead of failing to link,
 * and in a process with several the first in the symbol scope is used by
 * all (each user keeps its own lock: two of them registering at the same
 * moment could tangle the list). */
KP_EXPORT __attribute__((weak)) struct jit_descriptor __jit_debug_descriptor = { 1, 0, NULL, NULL };

/* The debugger's breakpoint: it must stay a real call. */
void __jit_debug_register_code(void);

KP_EXPORT __attribute__((weak, noinline, used)) void __jit_debug_register_code(void)
{
	__asm__ volatile("" : : : "memory");
}

static pthread_mutex_t jit_lock = PTHREAD_MUTEX_INITIALIZER;

struct kp_jit_object {
	struct jit_code_entry entry;
	size_t alloc;			/* bytes allocated, for kp_jit_bytes() */
	size_t size;
	char image[];
};

enum { S_NULL, S_TEXT, S_EH, S_SYMTAB, S_STRTAB, S_SHSTRTAB, S_NUM };

static const char shstrtab[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
#define SH_TEXT 1
#define SH_EH 7
#define SH_SYMTAB 17
#define SH_STRTAB 25
#define SH_SHSTRTAB 33

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static void fill_image(struct kp_jit_object *o, const char *name, uintptr_t lo, uintptr_t hi,
		       const void *eh, size_t eh_size)
{
	char *img = o->image;
	size_t name_len = strlen(name) + 1;
	size_t off_eh = sizeof(Elf64_Ehdr);
	size_t off_sym = align8(off_eh + eh_size + 4);
	size_t off_str = off_sym + 2 * sizeof(Elf64_Sym);
	size_t off_shstr = off_str + 1 + name_len;
	size_t off_sh = align8(off_shstr + sizeof(shstrtab));
	Elf64_Ehdr *eh_hdr = (Elf64_Ehdr *)img;
	Elf64_Sym *sym = (Elf64_Sym *)(img + off_sym);
	Elf64_Shdr *sh = (Elf64_Shdr *)(img + off_sh);

	memcpy(eh_hdr->e_ident, ELFMAG, SELFMAG);
	eh_hdr->e_ident[EI_CLASS] = ELFCLASS64;
	eh_hdr->e_ident[EI_DATA] = ELFDATA2LSB;
	eh_hdr->e_ident[EI_VERSION] = EV_CURRENT;
	eh_hdr->e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh_hdr->e_type = ET_REL;
	eh_hdr->e_machine = EM_X86_64;
	eh_hdr->e_version = EV_CURRENT;
	eh_hdr->e_ehsize = sizeof(Elf64_Ehdr);
	eh_hdr->e_shoff = off_sh;
	eh_hdr->e_shentsize = sizeof(Elf64_Shdr);
	eh_hdr->e_shnum = S_NUM;
	eh_hdr->e_shstrndx = S_SHSTRTAB;

	memcpy(img + off_eh, eh, eh_size);	/* the zero terminator follows */
	/* in a relocatable object a symbol's value is an offset in its section */
	sym[1] = (Elf64_Sym){ .st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
			      .st_shndx = S_TEXT, .st_value = 0, .st_size = hi - lo };
	memcpy(img + off_str + 1, name, name_len);
	memcpy(img + off_shstr, shstrtab, sizeof(shstrtab));

	sh[S_TEXT] = (Elf64_Shdr){ .sh_name = SH_TEXT, .sh_type = SHT_NOBITS,
				   .sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = lo,
				   .sh_offset = off_eh, .sh_size = hi - lo, .sh_addralign = 1 };
	sh[S_EH] = (Elf64_Shdr){ .sh_name = SH_EH, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
				 .sh_addr = (uintptr_t)(img + off_eh), .sh_offset = off_eh,
				 .sh_size = eh_size + 4, .sh_addralign = 8 };
	sh[S_SYMTAB] = (Elf64_Shdr){ .sh_name = SH_SYMTAB, .sh_type = SHT_SYMTAB,
				     .sh_offset = off_sym, .sh_size = 2 * sizeof(Elf64_Sym),
				     .sh_link = S_STRTAB, .sh_info = 1, .sh_addralign = 8,
				     .sh_entsize = sizeof(Elf64_Sym) };
	sh[S_STRTAB] = (Elf64_Shdr){ .sh_name = SH_STRTAB, .sh_type = SHT_STRTAB,
				     .sh_offset = off_str, .sh_size = 1 + name_len, .sh_addralign = 1 };
	sh[S_SHSTRTAB] = (Elf64_Shdr){ .sh_name = SH_SHSTRTAB, .sh_type = SHT_STRTAB,
				       .sh_offset = off_shstr, .sh_size = sizeof(shstrtab),
				       .sh_addralign = 1 };
	o->size = off_sh + S_NUM * sizeof(Elf64_Shdr);
}

static size_t live_bytes;

size_t kp_jit_bytes(void)
{
	return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

struct kp_jit_object *kp_jit_register(const char *name, uintptr_t lo, uintptr_t hi,
				      const void *eh, size_t eh_size)
{
	size_t size = sizeof(Elf64_Ehdr) + eh_size + 4 + 8 + 2 * sizeof(Elf64_Sym) + 1 +
		      strlen(name) + 1 + sizeof(shstrtab) + 8 + S_NUM * sizeof(Elf64_Shdr);
	struct kp_jit_object *o = calloc(1, sizeof(*o) + size);

	if (!o)
		return NULL;
	o->alloc = sizeof(*o) + size;
	__atomic_add_fetch(&live_bytes, o->alloc, __ATOMIC_RELAXED);
	fill_image(o, name, lo, hi, eh, eh_size);
	o->entry.symfile_addr = o->image;
	o->entry.symfile_size = o->size;
	pthread_mutex_lock(&jit_lock);
	o->entry.next_entry = __jit_debug_descriptor.first_entry;
	if (o->entry.next_entry)
		o->entry.next_entry->prev_entry = &o->entry;
	__jit_debug_descriptor.first_entry = &o->entry;
	__jit_debug_descriptor.relevant_entry = &o->entry;
	__jit_debug_descriptor.action_flag = 1;
	__jit_debug_register_code();
	__jit_debug_descriptor.action_flag = 0;
	pthread_mutex_unlock(&jit_lock);
	return o;
}

void kp_jit_unregister(struct kp_jit_object *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&jit_lock);
	if (o->entry.prev_entry)
		o->entry.prev_entry->next_entry = o->entry.next_entry;
	else
		__jit_debug_descriptor.first_entry = o->entry.next_entry;
	if (o->entry.next_entry)
		o->entry.next_entry->prev_entry = o->entry.prev_entry;
	__jit_debug_descriptor.relevant_entry = &o->entry;
	__jit_debug_descriptor.action_flag = 2;
	__jit_debug_register_code();
	__jit_debug_descriptor.action_flag = 0;
	pthread_mutex_unlock(&jit_lock);
	__atomic_sub_fetch(&live_bytes, o->alloc, __ATOMIC_RELAXED);
	free(o);
}
