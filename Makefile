# libkprobes — Kprobes for Linux user space on x86-64.
#
#   make          library, CLI, examples into build/
#   make check    install missing Debian packages, build, run every test
#   make bench    overhead table (build/kprobes-bench)
#   make demo     a bundled program probed end to end
#   make install  PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
DESTDIR ?=
B       := build
# The instruction set the library is built for: its code is src/arch/$(ARCH),
# its <asm/kprobes.h> (what the core may know of it) src/arch/$(ARCH)/include.
ARCH    ?= x86_64
VERSION := 0.1.0
SONAME  := libkprobes.so.0

CC      ?= cc
CXX     ?= c++
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wmissing-prototypes
BASE    := -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -Isrc/arch/$(ARCH)/include $(WARN) -fno-omit-frame-pointer
LIBFLAGS := $(BASE) -fPIC -fvisibility=hidden -fno-reorder-functions -fno-reorder-blocks-and-partition
# All library code goes to one section, kprobes_text, whose bounds
# (__start_kprobes_text/__stop_kprobes_text) the blacklist uses.
TEXTSEC := objcopy --rename-section .text=kprobes_text,alloc,load,readonly,code,contents
LIBS    := -lZydis -lelf -ldw -lpthread -ldl

# asm-offsets.c is compiled to assembly only, for $(B)/gen/asm-offsets.inc.
ASM_OFFSETS := src/arch/$(ARCH)/asm-offsets.c
LIB_SRC := $(sort $(filter-out $(ASM_OFFSETS),$(wildcard src/core/*.c src/arch/$(ARCH)/*.c src/os/linux/*.c src/elf/*.c)))
LIB_ASM := $(sort $(wildcard src/arch/$(ARCH)/*.S))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o) $(LIB_ASM:%.S=$(B)/obj/%.o)
ASAN_OBJ := $(LIB_SRC:%.c=$(B)/asan/%.o) $(LIB_ASM:%.S=$(B)/asan/%.o)

TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
TEST_ASAN := $(TEST_SRC:tests/%.c=$(B)/tests-asan/%)
TEST_HELPERS := $(sort $(wildcard tests/helpers/*.c tests/helpers/*.S))

# C++ tests (exceptions through return probes); no C helpers linked in.
TEST_CXX_SRC := $(sort $(wildcard tests/test_*.cpp))
TEST_BIN  += $(TEST_CXX_SRC:tests/%.cpp=$(B)/tests/%)
TEST_ASAN += $(TEST_CXX_SRC:tests/%.cpp=$(B)/tests-asan/%)
CXXTESTFLAGS := -std=gnu++17 -D_GNU_SOURCE -Iinclude -Isrc -Isrc/arch/$(ARCH)/include -Itests -fno-omit-frame-pointer

EXAMPLES := $(patsubst examples/%.c,$(B)/examples/%,$(sort $(wildcard examples/*.c)))

SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined

.PHONY: all lib check deps test test-asan bench demo install clean examples soak

all: lib $(B)/libkprobes.pc examples

lib: $(B)/libkprobes.so $(B)/libkprobes.a

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBFLAGS) -MMD -MP -c $< -o $@
	$(TEXTSEC) $@

# Structure offsets for the assembly, as the kernel's asm-offsets: each
# DEFINE in asm-offsets.c leaves "->NAME value" in the compiler's output.
# $(call asm_offsets_inc,SOURCE,COMPILER-OUTPUT,TARGET) turns the markers
# into .set lines (also for the arm64 build, tests/arm64/arm64.mk).
define asm_offsets_inc
{ echo "/* Generated from $(1) by the Makefile: do not edit. */"; \
	  sed -n 's/^[[:space:]]*\.ascii[[:space:]]*"->\([A-Za-z_][A-Za-z_0-9]*\) \(-\{0,1\}[0-9][0-9]*\)"$$/\t.set \1, \2/p' \
		$(2); } > $(3).tmp
	@test -s $(3).tmp && grep -q '\.set PT_SIZE, ' $(3).tmp || { echo "$(3): no offsets found" >&2; exit 1; }
	mv $(3).tmp $(3)
endef
$(B)/gen/asm-offsets.inc: $(ASM_OFFSETS)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) -MMD -MP -MT $@ -MF $(B)/gen/asm-offsets.d -S $< -o $(B)/gen/asm-offsets.s
	$(call asm_offsets_inc,$<,$(B)/gen/asm-offsets.s,$@)
-include $(B)/gen/asm-offsets.d

$(LIB_ASM:%.S=$(B)/obj/%.o) $(LIB_ASM:%.S=$(B)/asan/%.o): $(B)/gen/asm-offsets.inc

$(B)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) -I$(B)/gen -MMD -MP -c $< -o $@
	$(TEXTSEC) $@

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(LIBFLAGS) $(SAN) -MMD -MP -c $< -o $@
	$(TEXTSEC) $@

$(B)/asan/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) -I$(B)/gen -MMD -MP -c $< -o $@
	$(TEXTSEC) $@

$(B)/libkprobes.so.$(VERSION): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,now -o $@ $^ $(LIBS)

$(B)/libkprobes.so: $(B)/libkprobes.so.$(VERSION)
	ln -sf libkprobes.so.$(VERSION) $(B)/$(SONAME)
	ln -sf libkprobes.so.$(VERSION) $@

$(B)/libkprobes.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libkprobes-asan.a: $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libkprobes.pc: scripts/libkprobes.pc.in Makefile
	@mkdir -p $(B)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

examples: $(EXAMPLES)

$(B)/examples/%: examples/%.c $(B)/libkprobes.a include/kprobes.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -o $@ $< $(B)/libkprobes.a $(LIBS)

# Tests link the static library so that its signal interposition comes first
# in symbol lookup, exactly as it does for a program linked with -lkprobes.
# The stack suites share the gdb oracle's header.
$(B)/tests/test_stack $(B)/tests-asan/test_stack: tests/stack_oracle.h tests/libc_workload.h
$(B)/tests/test_stack_cache $(B)/tests-asan/test_stack_cache: tests/libc_workload.h
$(B)/tests/test_stack_cxx $(B)/tests-asan/test_stack_cxx: tests/stack_oracle.h

# The allocation-failure suite sees every calloc() of the library.
$(B)/tests/test_nomem $(B)/tests-asan/test_nomem: TEST_LDFLAGS := -Wl,--wrap=calloc

# The A64 classifier is plain C: its unit tests run on any host, compiled in.
A64_HOST := $(B)/tests/test_a64_insn $(B)/tests-asan/test_a64_insn
$(A64_HOST): TEST_SRC_EXTRA := src/arch/arm64/insn.c
$(A64_HOST): src/arch/arm64/insn.c src/arch/arm64/insn.h tests/a64/insn_table.h

# The suites that run the kprobe tool share its runner (tests/cli_helpers.c).
KP_CLI_SUITES := test_cli test_run test_cli_watch test_cli_stack
KP_CLI_SUITE_BINS := $(KP_CLI_SUITES:%=$(B)/tests/%) $(KP_CLI_SUITES:%=$(B)/tests-asan/%)
$(KP_CLI_SUITE_BINS): TEST_SRC_EXTRA := tests/cli_helpers.c
$(KP_CLI_SUITE_BINS): tests/cli_helpers.c tests/cli_helpers.h

$(B)/tests/%: tests/%.c $(TEST_HELPERS) tests/testutil.h $(B)/libkprobes.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Itests -o $@ $< $(TEST_SRC_EXTRA) $(TEST_HELPERS) $(B)/libkprobes.a $(LIBS) -lcriterion $(TEST_LDFLAGS)

$(B)/tests-asan/%: tests/%.c $(TEST_HELPERS) tests/testutil.h $(B)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(BASE) $(SAN) -Itests -o $@ $< $(TEST_SRC_EXTRA) $(TEST_HELPERS) $(B)/libkprobes-asan.a $(LIBS) -lcriterion $(TEST_LDFLAGS)

$(B)/tests/%: tests/%.cpp tests/testutil.h include/kprobes.h $(B)/libkprobes.a
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g $(CXXTESTFLAGS) -o $@ $< $(B)/libkprobes.a $(LIBS) -lcriterion

$(B)/tests-asan/%: tests/%.cpp tests/testutil.h include/kprobes.h $(B)/libkprobes-asan.a
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g $(CXXTESTFLAGS) $(SAN) -o $@ $< $(B)/libkprobes-asan.a $(LIBS) -lcriterion

deps:
	@sh scripts/install-deps.sh

# Suites beyond the Criterion tests (tests/*/*.mk add their quick modes to
# CHECK_EXTRA; `make soak` runs the long ones).
CHECK_EXTRA :=
SOAK_TARGETS :=

# Builds in parallel (one job per core unless JOBS says otherwise): on
# two cores that halves the build part of make check.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

check: deps
	@$(MAKE) -j$(JOBS) --no-print-directory all $(TEST_BIN) $(TEST_ASAN)
	@sh scripts/run-tests.sh $(B)
	@for t in $(CHECK_EXTRA); do s=$$(date +%s); \
		$(MAKE) --no-print-directory $$t || exit 1; \
		echo "check: $$t took $$(( $$(date +%s) - s )) s"; done

soak: all
	@$(MAKE) --no-print-directory $(SOAK_TARGETS)

bench: lib
	@$(MAKE) --no-print-directory $(B)/kprobes-bench $(B)/kprobe-bench-extra
	$(B)/kprobes-bench
	@echo
	@echo "jump-optimization coverage of function entries (kprobes-bench --coverage OBJECT [--list]):"
	-@$(B)/kprobes-bench --coverage libc.so.6
	-@$(B)/kprobes-bench --coverage /usr/bin/python3.11
	-@$(B)/kprobes-bench --coverage libsqlite3.so.0
	@echo
	@echo "kprobe tool, in the target on top of the probe (count_extra, trace_extra):"
	$(B)/kprobe-bench-extra
	@$(MAKE) --no-print-directory $(B)/kprobe $(B)/libkprobe-agent.so $(B)/tests/cli/cli_record
	@echo
	@echo "kprobe tool, whole runs on fib(20) x N (cli_count, cli_count_ret, record_fib, uftrace_fib):"
	python3 bench/cli_bench.py $(B)
	@echo
	@echo "kprobe run against kprobe count, every function of sqlite3's and jq's library counted by probe:"
	python3 bench/run_real_bench.py $(B)
	@echo
	@echo "a count by stack of every jv_* call of jq against a plain count (count_stacks_ratio):"
	-sh bench/kprobe_stacks_jq.sh $(B) 3

BENCH_SRC := $(filter-out bench/coverage_preload.c,$(sort $(wildcard bench/*.c bench/*.S)))

$(B)/kprobes-bench: $(BENCH_SRC) bench/bench.h $(B)/libkprobes.a $(B)/libkprobes-coverage.so
	@mkdir -p $(B)
	$(CC) -O2 -g $(BASE) -o $@ $(filter %.c %.S,$^) $(B)/libkprobes.a $(LIBS) -lm -lZydis

# Preloaded by `kprobes-bench --coverage EXECUTABLE` to measure a program
# that cannot be loaded into the bench (bench/coverage.c).
$(B)/libkprobes-coverage.so: bench/coverage.c bench/coverage_preload.c bench/bench.h $(B)/libkprobes.a
	@mkdir -p $(B)
	$(CC) -O2 -g $(BASE) -fPIC -shared -o $@ $(filter %.c,$^) $(B)/libkprobes.a $(LIBS)

demo: all
	@$(MAKE) --no-print-directory $(B)/demo
	@echo "=== 1. a program instrumenting itself through the library ==="
	$(B)/demo
	@echo
	@echo "=== 2. the same workload, unmodified, under the kprobe tool ==="
	$(B)/kprobe trace 'parse_request id=arg1:u64 kind=arg2:s64 key=arg3:u64' 'lookup%return ret=retval:x64' -- $(B)/demo --plain 3
	$(B)/kprobe count 'parse_request' 'lookup' 'libc.so.6:clock_gettime' -- $(B)/demo --plain 100000
	$(B)/kprobe latency lookup -- $(B)/demo --plain 100000
	@echo
	@echo "=== 3. static tracepoints: a NOP each until the tool switches them on ==="
	$(B)/kprobe trace 'tp:shop:*' -- $(B)/examples/tp_demo 8

$(B)/demo: examples/demo/demo.c $(B)/libkprobes.a
	@mkdir -p $(B)
	$(CC) -O2 -g $(BASE) -o $@ $< $(B)/libkprobes.a $(LIBS)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	           $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 644 include/kprobes.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/include/kprobes
	install -m 644 include/kprobes/*.h $(DESTDIR)$(PREFIX)/include/kprobes/
	install -m 755 $(B)/libkprobes.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libkprobes.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf libkprobes.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libkprobes.so
	install -m 644 $(B)/libkprobes.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(B)/libkprobes.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 644 docs/kprobes.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	printf '.so man3/kprobes.3\n' > $(DESTDIR)$(PREFIX)/share/man/man3/libkprobes.3
	if [ -x $(B)/kprobe ]; then install -d $(DESTDIR)$(PREFIX)/bin && install -m 755 $(B)/kprobe $(DESTDIR)$(PREFIX)/bin/; fi

clean:
	rm -rf $(B)

# The kprobe CLI and its injected agent.
include tools/kprobe/kprobe.mk

# Fuzzing, real programs, soak: each directory under tests/ brings its rules.
include $(sort $(wildcard tests/*/*.mk))

-include $(shell find $(B) -name '*.d' -type f 2>/dev/null)
