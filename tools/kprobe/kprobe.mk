# Build rules for the kprobe CLI (build/kprobe) and its agent; included by
# the top-level Makefile.
#
#   build/kprobe                the command-line tool
#   build/libkprobe-agent.so    what it preloads or injects into the target:
#                               libkprobes (whole archive, so its sigaction/
#                               signal/sigprocmask interposers stay exported)
#                               plus the agent
#   build/tests/cli/*           programs the end-to-end tests run under it

# The tool is split by which side of the process boundary code runs on:
#   cli/     the command-line tool (parsing, attaching, reading results)
#   agent/   what runs inside the target (libkprobe-agent.so, the audit
#            module)
#   common/  the formats both sides share: probe specs, the control
#            protocol, the session memory's layout
#   lang/    the probe-program language: compiler (tool side) and runtime
#            (agent side)
# Each side sees only its own headers and common/'s.
KP_DIR       := tools/kprobe
KP_SHARED    := $(addprefix $(KP_DIR)/common/,spec.c proto.c nearmatch.c elf_file.c debug_file.c)
# The probe-program language (its rules below): all of it in the CLI, the
# runtime half (verifier, interpreter, maps) in the agent.
KP_LANG_SRC    := $(sort $(wildcard $(KP_DIR)/lang/*.c))
KP_LANG_RT_SRC := $(addprefix $(KP_DIR)/lang/,verify.c vm.c maps.c)
# What differs by architecture (registers, the cycle counter, the
# instruction decoder) is in arch/$(ARCH)/: kp_arch.h for both sides, the
# agent's decoder file.
KP_AGENT_SRC := $(filter-out $(KP_DIR)/agent/audit.c,$(sort $(wildcard $(KP_DIR)/agent/*.c))) \
		$(KP_SHARED) $(KP_LANG_RT_SRC) $(KP_DIR)/arch/$(ARCH)/agent_decoder.c
# The SDT operand syntax of each architecture is parsed by the CLI on every
# host (an object's e_machine picks which); only the AArch64 one has a file
# of its own.
KP_USDT_ARCH_SRC := $(KP_DIR)/arch/arm64/usdt_operand.c
KP_CLI_SRC   := $(sort $(wildcard $(KP_DIR)/cli/*.c)) $(KP_SHARED) $(KP_LANG_SRC) \
		$(KP_DIR)/arch/$(ARCH)/inject_call.c \
		$(KP_USDT_ARCH_SRC)
KP_AGENT_OBJ := $(KP_AGENT_SRC:%.c=$(B)/kprobe-agent/%.o)
KP_CLI_OBJ   := $(KP_CLI_SRC:%.c=$(B)/kprobe-cli/%.o)
KP_CFLAGS    := -I$(KP_DIR) -I$(KP_DIR)/common -I$(KP_DIR)/arch/$(ARCH)
KP_CLI_INC   := -I$(KP_DIR)/cli
KP_AGENT_INC := -I$(KP_DIR)/agent
# Where `make install` puts the agent; the CLI looks beside itself first.
KP_AGENT_INSTALL_DIR := $(PREFIX)/lib/kprobe

# Modules for `kprobe load` (examples/modules/*.c): shared objects without
# -lkprobes, whose library calls bind to the agent's copy in the target.
KP_MODULES := $(patsubst examples/modules/%.c,$(B)/examples/%.so,\
		$(sort $(wildcard examples/modules/*.c)))
$(B)/examples/%.so: examples/modules/%.c include/kprobes.h include/kprobes/module.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -shared -fPIC -o $@ $<

all: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/libkprobe-audit.so $(KP_MODULES)

# The language's runtime and the program handlers run on the hit path:
# built so that libkprobes' handler analysis can follow them (no vector
# registers, no jump tables, string operations inline rather than calls
# through the PLT), which lets a probe skip saving the vector state.
# The interpreter calls the agent's services directly (LANG_DIRECT_OPS).
$(KP_LANG_RT_SRC:%.c=$(B)/kprobe-agent/%.o) $(B)/kprobe-agent/$(KP_DIR)/agent/agent_prog.o: \
	KP_CFLAGS += -mgeneral-regs-only -fno-jump-tables -minline-all-stringops \
		     -mstringop-strategy=unrolled_loop -fno-tree-loop-distribute-patterns \
		     -DLANG_DIRECT_OPS

# The fast forms' handlers go further, as the light handlers do: %rsi (the
# pt_regs pointer) and r8-r11 reserved, so that only a form that reads an
# argument or the return value reads its pt_regs, and the map code they
# inline (maps_impl.h) stays loops rather than calls.
$(B)/kprobe-agent/$(KP_DIR)/agent/agent_prog_fast.o: KP_CFLAGS += -ffixed-rsi -ffixed-r8 \
	-ffixed-r9 -ffixed-r10 -ffixed-r11 -fno-tree-loop-distribute-patterns \
	-mgeneral-regs-only -fno-jump-tables

# The hit path's handlers (agent_hit.c) likewise: a fetch plan's if-chains
# must not become a jump table, nor neighbouring stores a vector move, or
# every optimized hit would save the vector state (vector_entry, which
# takes doubles, rules out -mgeneral-regs-only here).
$(B)/kprobe-agent/$(KP_DIR)/agent/agent_hit.o: KP_CFLAGS += -fno-jump-tables -fno-tree-vectorize

# The loader audit module that starts the agent before any constructor of
# a launched command's libraries (audit.c); the CLI finds it beside the
# agent.
$(B)/libkprobe-audit.so: $(KP_DIR)/agent/audit.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -fPIC -shared -o $@ $<

# Agent code goes to the library's kprobes_text section, so libkprobes'
# blacklist keeps every probe out of the handlers and the agent.  It is
# built like the library but sees only the public headers (include/) and
# the tool's own: the agent uses libkprobes through its API, and an
# include of the library's internals fails to build.
KP_AGENT_FLAGS := $(filter-out -Isrc -Isrc/arch/%,$(LIBFLAGS))
$(B)/kprobe-agent/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KP_AGENT_FLAGS) $(KP_AGENT_INC) $(KP_CFLAGS) -MMD -MP -c $< -o $@
	$(TEXTSEC) $@

# The agent's footprint in the target is this one object: it needs no
# shared library but libc and the loader.  elfutils and the compression
# libraries it needs come from their static archives with their symbols
# hidden (--exclude-libs), so no lookup of the program's ever binds to
# them; Zydis and, for FILE:LINE, libdw.so are loaded privately
# (arch/x86_64/agent_decoder.c, agent_lines.c), by these sonames.
KP_SONAME_OF = $(shell objdump -p $$($(CC) -print-file-name=$(1)) 2>/dev/null | awk '/SONAME/ { print $$2 }')
KP_ZYDIS_SONAME := $(or $(call KP_SONAME_OF,libZydis.so),libZydis.so.4.0)
KP_LIBDW_SONAME := $(or $(call KP_SONAME_OF,libdw.so),libdw.so.1)
$(B)/kprobe-agent/$(KP_DIR)/arch/x86_64/agent_decoder.o: KP_CFLAGS += -DKP_ZYDIS_SONAME='"$(KP_ZYDIS_SONAME)"'
$(B)/kprobe-agent/$(KP_DIR)/agent/agent_lines.o: KP_CFLAGS += -DKP_LIBDW_SONAME='"$(KP_LIBDW_SONAME)"'

# -Bsymbolic-functions: the library's own calls of sigaction, pthread_sigmask
# and friends go to its interposers even when the agent is injected (not
# first in the global scope), so its threads never block SIGTRAP.
# --no-undefined: a symbol missing from the archives fails here, not in the
# target.
$(B)/libkprobe-agent.so: $(KP_AGENT_OBJ) $(B)/libkprobes.a $(KP_DIR)/kprobe.mk
	$(CC) -shared -Wl,-z,now -Wl,-z,nodelete -Wl,-Bsymbolic-functions -Wl,--no-undefined \
		-o $@ $(KP_AGENT_OBJ) -Wl,--whole-archive $(B)/libkprobes.a -Wl,--no-whole-archive \
		-Wl,--exclude-libs,libdw.a:libelf.a:libz.a:liblzma.a:libbz2.a \
		-Wl,-Bstatic -ldw -lelf -lz -llzma -lbz2 -Wl,-Bdynamic

$(B)/kprobe-cli/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CLI_INC) $(KP_CFLAGS) -DKPROBE_AGENT_INSTALL_DIR='"$(KP_AGENT_INSTALL_DIR)"' \
		-DKPROBE_VERSION='"$(VERSION)"' \
		-MMD -MP -c $< -o $@

# libdw: FILE:LINE of stack frames; libstdc++: __cxa_demangle for C++ names.
$(B)/kprobe: $(KP_CLI_OBJ)
	$(CC) -o $@ $^ -ldw -lelf -lrt -lstdc++

# What count and trace add per hit in the target (not part of `all`):
#   make kprobe-bench-extra
.PHONY: kprobe-bench-extra
kprobe-bench-extra: $(B)/kprobe-bench-extra
	$(B)/kprobe-bench-extra

# A count by stack against a plain count on a jq run (skips without jq):
#   make kprobe-bench-stacks
.PHONY: kprobe-bench-stacks
kprobe-bench-stacks: $(B)/kprobe $(B)/libkprobe-agent.so
	bench/kprobe_stacks_jq.sh $(B)

# The compiler half of the language too: the prog_* rows compile their
# programs in the process.
KP_LANG_TOOL_OBJ = $(patsubst %.c,$(B)/kprobe-cli/%.o,$(filter-out $(KP_LANG_RT_SRC),$(KP_LANG_SRC)))
$(B)/kprobe-bench-extra: $(KP_DIR)/bench_extra.c $(KP_AGENT_OBJ) $(KP_LANG_TOOL_OBJ) $(B)/libkprobes.a
	$(CC) -O2 -g $(BASE) $(KP_AGENT_INC) $(KP_CFLAGS) -o $@ $< $(KP_AGENT_OBJ) $(KP_LANG_TOOL_OBJ) \
		$(B)/libkprobes.a $(LIBS)

# ---- end-to-end test programs (tests/test_cli.c runs them under kprobe) ----

KP_TEST_PROGS := $(B)/tests/cli/cli_target $(B)/tests/cli/libcliplugin.so
KP_TEST_PROGS += $(B)/tests/cli/cli_zlib
KP_TEST_PROGS += $(B)/tests/cli/cli_static
KP_TEST_PROGS += $(B)/tests/cli/cli_hostile
KP_TEST_PROGS += $(B)/tests/cli/fake_agent
KP_TEST_PROGS += $(B)/tests/cli/odd_target $(B)/tests/cli/libslowctor.so

$(B)/tests/cli/cli_target: tests/cli/cli_target.c include/kprobes/tracepoint.h include/kprobes/jump_label.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -Iinclude -fno-omit-frame-pointer -o $@ $< -lpthread -ldl

$(B)/tests/cli/cli_zlib: tests/cli/cli_zlib.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -o $@ $< -lz
$(B)/tests/cli/cli_hostile: tests/cli/cli_hostile.c $(KP_DIR)/common/shm.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -I$(KP_DIR)/common -o $@ $<

$(B)/tests/cli/cli_static: tests/cli/cli_static.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -static -o $@ $<

# Serves its own control socket as an agent would, and misbehaves.
$(B)/tests/cli/fake_agent: tests/cli/fake_agent.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -o $@ $<

# A module for the `kprobe load` tests: no -lkprobes, like any module.
$(B)/tests/cli/cli_module.so: tests/cli/cli_module.c include/kprobes/module.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -Iinclude -shared -fPIC -o $@ $<

$(B)/tests/test_run $(B)/tests-asan/test_run: $(B)/kprobe $(B)/libkprobe-agent.so \
	$(B)/tests/cli/cli_target $(B)/tests/cli/cli_module.so $(B)/tests/cli/libcliplugin.so $(KP_MODULES) \
	$(B)/tests/cli/run_target $(B)/tests/cli/cli_stack_cxx $(B)/tests/cli/cli_record_cxx

$(B)/tests/cli/libcliplugin.so: tests/cli/cli_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -shared -fPIC -o $@ $<

# Odd processes for attach mode (seccomp, exited main thread, blocking
# waits, a slow constructor).
$(B)/tests/cli/odd_target: tests/cli/odd_target.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -fno-omit-frame-pointer -o $@ $< -lpthread -ldl

$(B)/tests/cli/libslowctor.so: tests/cli/slow_ctor.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -shared -fPIC -o $@ $<

$(B)/tests/test_cli $(B)/tests-asan/test_cli: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/libkprobe-audit.so $(KP_TEST_PROGS) \
	$(KP_MODULES) $(B)/tests/cli/cli_record_cxx

# `make install` also installs the tool, its agent and its man page.
.PHONY: install-kprobe
install: install-kprobe
install-kprobe: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/libkprobe-audit.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(KP_AGENT_INSTALL_DIR) \
	           $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(B)/kprobe $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(B)/libkprobe-agent.so $(DESTDIR)$(KP_AGENT_INSTALL_DIR)/
	install -m 755 $(B)/libkprobe-audit.so $(DESTDIR)$(KP_AGENT_INSTALL_DIR)/
	install -m 644 docs/kprobe.1 $(DESTDIR)$(PREFIX)/share/man/man1/

# ---- the CLI's reading side under hostile session memory ----
# tests/test_cli_shm_fuzz.c links the CLI code that reads the session (its
# own cli_die/cli_warn/cli_now_ns stand in for main.c), plain and with the
# sanitizers like every suite.
KP_READER_SRC := $(addprefix $(KP_DIR)/cli/,session.c consumer.c record.c output.c output_summary.c \
		   ctl_client.c escape.c run.c ldcache.c symbolize.c \
		   stacks.c dwarf_vars.c dwarf_strings.c usdt.c cxx_names.c) \
		   $(addprefix $(KP_DIR)/common/,spec.c proto.c elf_file.c debug_file.c) \
		   $(KP_LANG_SRC) $(KP_USDT_ARCH_SRC)
KP_READER_ASAN_OBJ := $(KP_READER_SRC:%.c=$(B)/kprobe-cli-asan/%.o)

$(B)/kprobe-cli-asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) $(KP_CLI_INC) $(KP_CFLAGS) -MMD -MP -c $< -o $@

$(B)/tests/test_cli_shm_fuzz: tests/test_cli_shm_fuzz.c $(KP_READER_SRC:%.c=$(B)/kprobe-cli/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CLI_INC) $(KP_CFLAGS) -Itests -o $@ $^ -lpthread -lcriterion -ldw -lelf -lstdc++

$(B)/tests-asan/test_cli_shm_fuzz: tests/test_cli_shm_fuzz.c $(KP_READER_ASAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) $(KP_CLI_INC) $(KP_CFLAGS) -Itests -o $@ $^ -lpthread -lcriterion -ldw -lelf -lstdc++

# tests/test_usdt.c: SDT operands compiled by the CLI's usdt.c (with the
# same stand-ins for main.c), plain and with the sanitizers.
$(B)/tests/test_usdt: tests/test_usdt.c $(KP_READER_SRC:%.c=$(B)/kprobe-cli/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CLI_INC) $(KP_CFLAGS) -Itests -o $@ $^ -lpthread -lcriterion -ldw -lelf -lstdc++

$(B)/tests-asan/test_usdt: tests/test_usdt.c $(KP_READER_ASAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) $(KP_CLI_INC) $(KP_CFLAGS) -Itests -o $@ $^ -lpthread -lcriterion -ldw -lelf -lstdc++

# ---- the control-channel client against fake agents (tests/test_ctl.c) ----
# It links the client's own sources rather than the library.

KP_CTL_TEST_SRC := $(addprefix $(KP_DIR)/cli/,ctl_client.c escape.c) \
		   $(addprefix $(KP_DIR)/common/,proto.c spec.c)
KP_CTL_TEST_DEP := tests/test_ctl.c $(KP_CTL_TEST_SRC) $(wildcard $(KP_DIR)/cli/*.h $(KP_DIR)/common/*.h)

$(B)/tests/test_ctl: $(KP_CTL_TEST_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CLI_INC) $(KP_CFLAGS) -o $@ tests/test_ctl.c $(KP_CTL_TEST_SRC) -lcriterion

$(B)/tests-asan/test_ctl: $(KP_CTL_TEST_DEP)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) $(KP_CLI_INC) $(KP_CFLAGS) -o $@ tests/test_ctl.c $(KP_CTL_TEST_SRC) \
		-lcriterion

# ---- the probe-program language (tools/kprobe/lang/) ----
# The tool links all of it (compiler, verifier, map reading, formatting);
# the agent links the runtime half: verifier, interpreter, maps (its
# memory reads are libkprobes' kprobes_read_nofault()).  tests/test_lang.c
# links the whole language and the library, plain and with the sanitizers.
KP_LANG_DIR    := $(KP_DIR)/lang
KP_LANG_SRC    := $(sort $(wildcard $(KP_LANG_DIR)/*.c))
KP_LANG_RT_SRC := $(addprefix $(KP_LANG_DIR)/,verify.c vm.c maps.c)

# The interpreter as a runtime may build it, with direct calls to its
# services and the hit path's code generation flags: compiled along with the
# suite so that this variant keeps building (linked by nothing here).
KP_LANG_DIRECT_VM := $(B)/kprobe-cli/lang-direct/vm.o
$(KP_LANG_DIRECT_VM): $(KP_LANG_DIR)/vm.c $(wildcard $(KP_LANG_DIR)/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CFLAGS) -DLANG_DIRECT_OPS -mgeneral-regs-only -fno-jump-tables \
		-minline-all-stringops -mstringop-strategy=rep_byte -c $< -o $@

$(B)/tests/test_lang: tests/test_lang.c $(KP_LANG_SRC:%.c=$(B)/kprobe-cli/%.o) $(B)/libkprobes.a | $(KP_LANG_DIRECT_VM)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(KP_CFLAGS) -Itests -o $@ $^ $(LIBS) -lcriterion

$(B)/tests-asan/test_lang: tests/test_lang.c $(KP_LANG_SRC:%.c=$(B)/kprobe-cli-asan/%.o) $(B)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) $(KP_CFLAGS) -Itests -o $@ $^ $(LIBS) -lcriterion

# The light handlers never read %rsi (the pt_regs pointer) nor write r8-r11:
# the library's handler analysis sees that, and optimized probes and return
# probes then save the least (agent_hit_light.c).
$(B)/kprobe-agent/$(KP_DIR)/agent/agent_hit_light.o: KP_CFLAGS += -ffixed-rsi -ffixed-r8 -ffixed-r9 -ffixed-r10 -ffixed-r11 \
	-fno-tree-loop-distribute-patterns -mgeneral-regs-only -fno-jump-tables
