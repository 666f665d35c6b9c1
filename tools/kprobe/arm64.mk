# The kprobe tool cross-built for arm64 (included by tests/arm64/arm64.mk,
# after the library's arm64 rules):
#
#   build/arm64/kprobe, build/arm64/libkprobe-agent.so,
#   build/arm64/libkprobe-audit.so    the tool, as build/ has them
#   build/arm64/tests/cli/*           the test programs it runs
#
# The same sources as the native build (tools/kprobe/kprobe.mk) with
# tools/kprobe/arch/arm64/ for what differs; the hit path's objects get the
# native build's code generation flags where they exist on AArch64
# (general registers only, no jump tables) and none of x86-64's fixed
# registers (the light handlers are built as plain C).
.PHONY: arm64-kprobe

A64_KP_ARCH := $(KP_DIR)/arch/arm64
A64_KP_FLAGS = -I$(KP_DIR) -I$(KP_DIR)/common -I$(A64_KP_ARCH)
A64_KP_AGENT_SRC := $(filter-out $(KP_DIR)/arch/$(ARCH)/%,$(KP_AGENT_SRC)) $(A64_KP_ARCH)/agent_decoder.c
A64_KP_AGENT_OBJ := $(A64_KP_AGENT_SRC:%.c=$(A64)/kprobe-agent/%.o)
A64_KP_CLI_SRC   := $(filter-out $(KP_DIR)/arch/$(ARCH)/%,$(KP_CLI_SRC)) $(A64_KP_ARCH)/inject_call.c
A64_KP_CLI_OBJ   := $(A64_KP_CLI_SRC:%.c=$(A64)/kprobe-cli/%.o)

# The hit path's files (see kprobe.mk for why each flag).
A64_KP_HIT_RT := $(KP_LANG_RT_SRC:%.c=$(A64)/kprobe-agent/%.o) \
	$(A64)/kprobe-agent/$(KP_DIR)/agent/agent_prog.o
$(A64_KP_HIT_RT): A64_KP_EXTRA = -mgeneral-regs-only -fno-jump-tables \
	-fno-tree-loop-distribute-patterns -DLANG_DIRECT_OPS
$(A64)/kprobe-agent/$(KP_DIR)/agent/agent_prog_fast.o \
$(A64)/kprobe-agent/$(KP_DIR)/agent/agent_hit_light.o: A64_KP_EXTRA = -mgeneral-regs-only \
	-fno-jump-tables -fno-tree-loop-distribute-patterns
$(A64)/kprobe-agent/$(KP_DIR)/agent/agent_hit.o: A64_KP_EXTRA = -fno-jump-tables -fno-tree-vectorize

$(A64)/kprobe-agent/%.o: %.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) -O2 -g $(A64_LIBFLAGS) $(KP_AGENT_INC) $(A64_KP_FLAGS) $(A64_KP_EXTRA) \
		-DKP_LIBDW_SONAME='"libdw.so.1"' -MMD -MP -c $< -o $@
	$(A64_TEXTSEC) $@

$(A64)/kprobe-cli/%.o: %.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -Iinclude -Isrc -Isrc/arch/arm64/include $(KP_CLI_INC) $(A64_KP_FLAGS) \
		-DKPROBE_AGENT_INSTALL_DIR='"$(KP_AGENT_INSTALL_DIR)"' -DKPROBE_VERSION='"$(VERSION)"' \
		-MMD -MP -c $< -o $@

# elfutils and the compression libraries from the sysroot's static
# archives, hidden, as natively (libdw.a of Debian 12 also needs zstd).
$(A64)/libkprobe-agent.so: $(A64_KP_AGENT_OBJ) $(A64)/libkprobes.a $(KP_DIR)/arm64.mk
	$(A64_CC) --sysroot=$(A64_SYSROOT) -shared -Wl,-z,now -Wl,-z,nodelete \
		-Wl,-Bsymbolic-functions -Wl,--no-undefined \
		-o $@ $(A64_KP_AGENT_OBJ) -Wl,--whole-archive $(A64)/libkprobes.a -Wl,--no-whole-archive \
		-Wl,--exclude-libs,libdw.a:libelf.a:libz.a:liblzma.a:libbz2.a:libzstd.a \
		-Wl,-Bstatic -ldw -lelf -lz -llzma -lbz2 -lzstd -Wl,-Bdynamic -lpthread -ldl

$(A64)/libkprobe-audit.so: $(KP_DIR)/agent/audit.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O2 -g -Wall -Wextra -fPIC -shared -o $@ $<

$(A64)/kprobe: $(A64_KP_CLI_OBJ)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -o $@ $^ -ldw -lelf -lrt -lstdc++

A64_KP := $(A64)/kprobe $(A64)/libkprobe-agent.so $(A64)/libkprobe-audit.so
arm64-kprobe: $(A64_KP)

-include $(wildcard $(A64)/kprobe-agent/$(KP_DIR)/*/*.d $(A64)/kprobe-cli/$(KP_DIR)/*/*.d)

# ---- the tool's suite in the guest (tests/arm64/cli_arm64.sh) ----
# The test program, as natively (kprobe.mk), for arm64.
$(A64)/tests/cli/cli_target: tests/cli/cli_target.c include/kprobes/tracepoint.h \
	include/kprobes/jump_label.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O1 -g -std=gnu11 -Wall -Iinclude -fno-omit-frame-pointer \
		-o $@ $< -lpthread -ldl

# The SDT probe program (operands in AArch64 syntax in its note), as
# tests/dwarf/run-dwarf.sh builds it natively.
$(A64)/tests/cli/cli_usdt: tests/cli/cli_usdt.c $(KP_DIR)/common/sdt_probe.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O2 -g -std=gnu11 -Wall -I$(KP_DIR)/common -o $@ $<

# The whole suite in check-arm64, its short set (A64_CLI=quick) in
# check-arm64-quick.
A64_KP_SUITE := $(A64_KP) $(A64)/tests/cli/cli_target $(A64)/tests/cli/cli_usdt \
		tests/arm64/cli_arm64.sh
A64_TESTS += $(A64_KP_SUITE)
A64_QUICK += $(A64_KP_SUITE)

# ---- the tool's Criterion suites in the guest ----
# tests/test_cli.c, test_run.c and test_cli_stack.c, as natively, with the
# programs they run.  In the guest a suite at /tests/test_cli takes / for
# its build directory: the tool is linked at /kprobe, the programs are in
# /tests/cli and the modules in /examples (tests/arm64/arm64.sh).  Their
# timeouts (hang guards) are four times the native ones: the emulator.
# Plain only: a sanitized build instruments the suite's own harness, not
# the tool and agent it runs (the same plain binaries), and that harness
# is sanitized natively by make check; in the emulator it would double
# the suites' 8 minutes.
A64_KP_SUITES := test_cli test_run test_cli_stack test_cli_watch
A64_KP_SUITE_BINS := $(A64_KP_SUITES:%=$(A64)/tests/%)
$(A64_KP_SUITE_BINS): A64_TEST_SRC_EXTRA := tests/cli_helpers.c
$(A64_KP_SUITE_BINS): tests/cli_helpers.c tests/cli_helpers.h

A64_KP_PROG_CFLAGS = --sysroot=$(A64_SYSROOT) -O1 -g -std=gnu11 -Wall
A64_CXX := aarch64-linux-gnu-g++

$(A64)/tests/cli/libcliplugin.so: tests/cli/cli_plugin.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O1 -g -shared -fPIC -o $@ $<

$(A64)/tests/cli/cli_zlib: tests/cli/cli_zlib.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O1 -g -o $@ $< -lz

$(A64)/tests/cli/cli_hostile: tests/cli/cli_hostile.c $(KP_DIR)/common/shm.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -I$(KP_DIR)/common -o $@ $<

$(A64)/tests/cli/cli_static: tests/cli/cli_static.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O1 -static -o $@ $<

$(A64)/tests/cli/fake_agent: tests/cli/fake_agent.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -o $@ $<

$(A64)/tests/cli/odd_target: tests/cli/odd_target.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -fno-omit-frame-pointer -o $@ $< -lpthread -ldl

$(A64)/tests/cli/libslowctor.so: tests/cli/slow_ctor.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O1 -g -shared -fPIC -o $@ $<

$(A64)/tests/cli/cli_module.so: tests/cli/cli_module.c include/kprobes/module.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -Iinclude -shared -fPIC -o $@ $<

$(A64)/tests/cli/run_target: tests/cli/run_target.c $(KP_DIR)/common/sdt_probe.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -fno-omit-frame-pointer -I$(KP_DIR)/common -o $@ $< -lpthread

# Built without frame pointers, as distribution binaries are
# (tests/cli/stacks.mk).
$(A64)/tests/cli/cli_stack: tests/cli/cli_stack.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O2 -g -fomit-frame-pointer -std=gnu11 -Wall -o $@ $< -lpthread

$(A64)/tests/cli/cli_watch: tests/cli/cli_watch.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_KP_PROG_CFLAGS) -o $@ $< -lpthread

$(A64)/tests/cli/cli_stack_cxx: tests/cli/cli_stack_cxx.cpp $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CXX) --sysroot=$(A64_SYSROOT) -O2 -g -fomit-frame-pointer -Wall -o $@ $<

$(A64)/tests/cli/cli_record_cxx: tests/cli/cli_record_cxx.cpp $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CXX) --sysroot=$(A64_SYSROOT) -O1 -g -o $@ $<

A64_KP_MODULES := $(patsubst examples/modules/%.c,$(A64)/examples/%.so,\
		$(sort $(wildcard examples/modules/*.c)))
$(A64)/examples/%.so: examples/modules/%.c include/kprobes.h include/kprobes/module.h $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -Iinclude -shared -fPIC -o $@ $<

A64_KP_CLI_PROGS := $(A64)/tests/cli/cli_target $(A64)/tests/cli/libcliplugin.so \
	$(A64)/tests/cli/cli_zlib $(A64)/tests/cli/cli_static $(A64)/tests/cli/cli_hostile \
	$(A64)/tests/cli/fake_agent $(A64)/tests/cli/odd_target $(A64)/tests/cli/libslowctor.so \
	$(A64)/tests/cli/cli_module.so $(A64)/tests/cli/run_target \
	$(A64)/tests/cli/cli_stack $(A64)/tests/cli/cli_stack_cxx $(A64)/tests/cli/cli_watch \
	$(A64)/tests/cli/cli_record_cxx $(A64_KP_MODULES)
# test_cli_stack reads the stack program's source (its build directory's
# ../tests/cli/cli_stack.c: /tests/cli/ in the guest).
A64_KP_CLI_PROGS += tests/cli/cli_stack.c
$(A64_KP_SUITE_BINS): $(A64_KP) $(A64_KP_CLI_PROGS)

A64_TESTS += $(A64_KP_SUITE_BINS) $(A64_KP_CLI_PROGS)
