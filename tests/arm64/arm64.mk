# arm64 on this x86-64 machine: tests cross-built with gcc-aarch64-linux-gnu
# against a sysroot unpacked from Debian's arm64 packages, run in
# qemu-system-aarch64 booting Debian's arm64 kernel (tests/arm64/arm64.sh).
#
#   make check-arm64        every arm64 suite in the guest; the guest's
#                           summary and exit status are the target's
#   make check-arm64-quick  (in `make check`) the smoke suite, the A64
#                           simulator's quick differential tests and fuzzer
#                           and the library's core suite in the guest;
#                           skipped with a message when the packages cannot
#                           be had, or with SKIP_ARM64=1
.PHONY: check-arm64 check-arm64-quick arm64-sysroot

A64       := $(B)/arm64
A64_SYSROOT = $(abspath $(A64)/sysroot)
A64_CC    := aarch64-linux-gnu-gcc
A64_CFLAGS = --sysroot=$(A64_SYSROOT) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) \
	-Wmissing-prototypes -fno-omit-frame-pointer
A64_OBJCOPY := aarch64-linux-gnu-objcopy
A64_AR    := aarch64-linux-gnu-ar

# ---- the library for arm64: src/arch/arm64 instead of src/arch/x86_64 ----
# The same flags and the same kprobes_text section as the native build;
# no Zydis (x86 only).
A64_LIBFLAGS = --sysroot=$(A64_SYSROOT) -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc \
	-Isrc/arch/arm64/include $(WARN) -fno-omit-frame-pointer -fPIC -fvisibility=hidden \
	-fno-reorder-functions -fno-reorder-blocks-and-partition
A64_TEXTSEC := $(A64_OBJCOPY) --rename-section .text=kprobes_text,alloc,load,readonly,code,contents
A64_LIBS  := -lelf -ldw -lpthread -ldl
A64_ASM_OFFSETS := src/arch/arm64/asm-offsets.c
A64_LIB_SRC := $(sort $(filter-out $(A64_ASM_OFFSETS),$(wildcard src/core/*.c \
	src/arch/arm64/*.c src/os/linux/*.c src/elf/*.c)))
A64_LIB_ASM := $(sort $(wildcard src/arch/arm64/*.S))
A64_LIB_OBJ := $(A64_LIB_SRC:%.c=$(A64)/obj/%.o) $(A64_LIB_ASM:%.S=$(A64)/obj/%.o)
A64_ASAN_OBJ := $(A64_LIB_SRC:%.c=$(A64)/asan/%.o) $(A64_LIB_ASM:%.S=$(A64)/asan/%.o)

$(A64)/obj/%.o: %.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) -O2 -g $(A64_LIBFLAGS) -MMD -MP -c $< -o $@
	$(A64_TEXTSEC) $@

$(A64)/asan/%.o: %.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) -O1 -g $(A64_LIBFLAGS) $(SAN) -MMD -MP -c $< -o $@
	$(A64_TEXTSEC) $@

$(A64)/gen/asm-offsets.inc: $(A64_ASM_OFFSETS) $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_LIBFLAGS) -MMD -MP -MT $@ -MF $(A64)/gen/asm-offsets.d -S $< \
		-o $(A64)/gen/asm-offsets.s
	$(call asm_offsets_inc,$<,$(A64)/gen/asm-offsets.s,$@)

$(A64_LIB_ASM:%.S=$(A64)/obj/%.o) $(A64_LIB_ASM:%.S=$(A64)/asan/%.o): $(A64)/gen/asm-offsets.inc

$(A64)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_LIBFLAGS) -I$(A64)/gen -MMD -MP -c $< -o $@
	$(A64_TEXTSEC) $@

$(A64)/asan/%.o: %.S
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_LIBFLAGS) -I$(A64)/gen -MMD -MP -c $< -o $@
	$(A64_TEXTSEC) $@

$(A64)/libkprobes.a: $(A64_LIB_OBJ)
	@rm -f $@
	$(A64_AR) rcs $@ $^

$(A64)/libkprobes-asan.a: $(A64_ASAN_OBJ)
	@rm -f $@
	$(A64_AR) rcs $@ $^

.PHONY: arm64-lib
arm64-lib: $(A64)/libkprobes.a

# Criterion suites built for arm64: the smoke suite of the machine
# (tests/arm64/) and the library's own suites (tests/) listed in
# A64_LIB_TESTS below.
A64_SMOKE := $(A64)/tests/test_arm64_smoke
# The library's suites for arm64: the architecture's own
# (tests/arm64/test_arm64_kprobes.c and test_arm64_kretprobe.c, with their
# A64 helper functions) and those of tests/ that are architecture-neutral.
# Left out, and why: test_api, test_kretprobe, test_jprobe, test_signals,
# test_threads, test_limits, test_stack, test_stack_memo, test_cxx_*,
# test_stack_cxx: x86-64 inline assembly and instruction bytes in their probed functions
# (their points, on A64 code, are in the arm64 suites); test_vecregs:
# xmm registers loaded by x86-64 assembly (the V registers are in
# test_arm64_vecregs); test_optimize, test_nomem, test_text_poke,
# test_insn: the x86-64 jump optimizer (an x86-64 target function; arm64
# has no jump optimization yet), patcher and decoder; test_jump_label:
# x86-64 NOP/JMP bytes and an x86-64 site in assembly (the static-key
# sites of test_tracepoint run); test_fault_region: an x86-64 function in
# assembly (a fault in a slot, shown at the probed address, is in
# test_arm64_kprobes); test_census: waits for a jump optimization;
# test_a64_insn: the classifier's host unit tests (run natively).  The
# kprobe tool's suites: tools/kprobe/arm64.mk.
A64_LIB_NAMES := test_arm64_kprobes test_arm64_kretprobe test_arm64_vecregs test_gone \
	test_nofault test_read_nofault test_elf test_tracepoint test_fork_loader test_libc_all \
	test_wprobe
A64_LIB_TESTS := $(A64_LIB_NAMES:%=$(A64)/tests/%) $(A64_LIB_NAMES:%=$(A64)/tests-asan/%)
A64_LIB_HELPERS := tests/arm64/helpers_a64.S tests/arm64/helpers_a64.h \
	tests/arm64/hang_watch.c tests/arm64/hang_watch.h
# Each is also built with ASan+UBSan (the cross compiler's libasan runs in
# the guest as it does natively).
# The A64 classifier's suite compiles it in (plain C, no library needed).
A64_SIM   := $(A64)/tests/test_a64_sim
A64_JL_SOS := $(A64)/tests/jl/libjlplugin.so $(A64)/tests/jl/libjlo0.so
A64_TESTS := $(A64_SMOKE) $(A64)/tests-asan/test_arm64_smoke \
	$(A64_SIM) $(A64)/tests-asan/test_a64_sim $(A64_LIB_TESTS) \
	$(A64)/tests/test_arm64_fuzz $(A64)/tests-asan/test_arm64_fuzz \
	$(A64)/tests/libkpgone.so $(A64_JL_SOS)

$(A64)/tests/test_arm64_smoke: tests/arm64/test_arm64_smoke.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -o $@ $< -lcriterion

$(A64)/tests-asan/test_arm64_smoke: tests/arm64/test_arm64_smoke.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) -o $@ $< -lcriterion

A64_HARNESS := tests/arm64/a64_harness.c tests/arm64/a64_harness.h

$(A64_SIM): tests/arm64/test_a64_sim.c src/arch/arm64/insn.c src/arch/arm64/insn.h $(A64_HARNESS) $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -o $@ $< -Iinclude -Isrc src/arch/arm64/insn.c tests/arm64/a64_harness.c -lcriterion

$(A64)/tests-asan/test_a64_sim: tests/arm64/test_a64_sim.c src/arch/arm64/insn.c src/arch/arm64/insn.h $(A64_HARNESS) $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) -o $@ $< -Iinclude -Isrc src/arch/arm64/insn.c tests/arm64/a64_harness.c -lcriterion

# The differential fuzzer with the library shares the simulator suite's
# harness.
A64_FUZZ_LIB := $(A64)/tests/test_arm64_fuzz

$(A64_FUZZ_LIB): tests/arm64/test_arm64_fuzz.c $(A64_HARNESS) $(A64)/libkprobes.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) $(A64_TEST_FLAGS) -o $@ $< tests/arm64/a64_harness.c \
		$(A64)/libkprobes.a $(A64_LIBS) -lcriterion

$(A64)/tests-asan/test_arm64_fuzz: tests/arm64/test_arm64_fuzz.c $(A64_HARNESS) $(A64)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) $(A64_TEST_FLAGS) -o $@ $< tests/arm64/a64_harness.c \
		$(A64)/libkprobes-asan.a $(A64_LIBS) -lcriterion

# test_gone dlopens $(A64)/tests/libkpgone.so (tests/dl/), which goes into
# the guest with the suites.
$(A64)/tests/libkpgone.so: tests/dl/libkpgone.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O2 -fPIC -shared -o $@ $<

$(A64)/tests/test_gone $(A64)/tests-asan/test_gone: $(A64)/tests/libkpgone.so

# test_tracepoint loads the static-key objects of tests/jump_label/ from
# tests/jl/ (in the guest: /tests/jl/): A64_JL_SOS, above.

$(A64)/tests/jl/libjlplugin.so: tests/jump_label/jlplugin.c $(JL_PLUGIN_DEPS) $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O2 -g -std=gnu11 -D_GNU_SOURCE -Iinclude $(WARN) -fPIC -shared -o $@ $<

$(A64)/tests/jl/libjlo0.so: tests/jump_label/jlo0.c $(JL_PLUGIN_DEPS) $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) --sysroot=$(A64_SYSROOT) -O0 -g -std=gnu11 -D_GNU_SOURCE -Iinclude $(WARN) -fPIC -shared -o $@ $<

$(A64)/tests/test_tracepoint $(A64)/tests-asan/test_tracepoint: $(A64_JL_SOS)

# The suites run in an emulator: their hang guards (tests/slowdown.h) are
# four times the native ones.
A64_TEST_FLAGS = -Iinclude -Isrc -Isrc/arch/arm64/include -Itests -Wno-missing-prototypes \
	-DKP_TEST_SLOWDOWN=4

$(A64)/tests/%: tests/arm64/%.c $(A64_LIB_HELPERS) tests/testutil.h $(A64)/libkprobes.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) $(A64_TEST_FLAGS) -o $@ $< $(filter %.S %.c,$(A64_LIB_HELPERS)) $(A64)/libkprobes.a \
		$(A64_LIBS) -lcriterion $(A64_TEST_LDFLAGS)

$(A64)/tests-asan/%: tests/arm64/%.c $(A64_LIB_HELPERS) tests/testutil.h $(A64)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) $(A64_TEST_FLAGS) -o $@ $< $(filter %.S %.c,$(A64_LIB_HELPERS)) \
		$(A64)/libkprobes-asan.a $(A64_LIBS) -lcriterion $(A64_TEST_LDFLAGS)

$(A64)/tests/%: tests/%.c tests/testutil.h $(A64)/libkprobes.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) $(A64_TEST_FLAGS) -o $@ $< $(A64_TEST_SRC_EXTRA) $(A64)/libkprobes.a \
		$(A64_LIBS) -lcriterion $(A64_TEST_LDFLAGS)

$(A64)/tests-asan/%: tests/%.c tests/testutil.h $(A64)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) $(A64_TEST_FLAGS) -o $@ $< $(A64_TEST_SRC_EXTRA) $(A64)/libkprobes-asan.a \
		$(A64_LIBS) -lcriterion $(A64_TEST_LDFLAGS)

# The sysroot's own script decides what is stale (new package versions)
# and touches the stamp when it checked; the arm64 targets run it first.
arm64-sysroot:
	@sh scripts/install-deps.sh --arm64
	@B=$(B) bash tests/arm64/arm64.sh sysroot

$(A64)/sysroot.stamp:
	@$(MAKE) --no-print-directory arm64-sysroot

# The long run of the A64 simulator's differential tests and fuzzer
# (A64_FUZZ=long, ten times the quick mode's encodings and sequences).
# With the library's suites, plain and sanitized, the guest runs for
# 15 to 40 minutes on a loaded 2-core host: 40 minutes at most.
check-arm64: arm64-sysroot
	@$(MAKE) --no-print-directory $(A64_TESTS)
	@B=$(B) ARM64_ENV="A64_FUZZ=long $(ARM64_ENV)" ARM64_TIMEOUT=$${ARM64_TIMEOUT:-2400} \
		bash tests/arm64/arm64.sh run $(A64_TESTS)

# The quick run: the machine's smoke suite, the A64 simulator's quick mode
# and the library's core arm64 suite, not sanitized.
A64_QUICK := $(A64_SMOKE) $(A64_SIM) $(A64)/tests/test_arm64_kprobes $(A64_FUZZ_LIB)

check-arm64-quick:
	@B=$(B) A64_QUICK="$(A64_QUICK)" MAKE="$(MAKE)" JOBS="$(JOBS)" bash tests/arm64/quick.sh

# The overhead rows in the guest (tests/arm64/bench_arm64.c): ns per hit
# of each probe kind, as ratios to a call and to a bare BRK in the same run.
.PHONY: bench-arm64
bench-arm64: arm64-sysroot
	@$(MAKE) --no-print-directory $(A64)/tests/bench_arm64
	@B=$(B) bash tests/arm64/arm64.sh run $(A64)/tests/bench_arm64

CHECK_EXTRA += check-arm64-quick

# The kprobe tool for arm64 and its guest tests.
include tools/kprobe/arm64.mk
