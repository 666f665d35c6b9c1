# arm64 on this x86-64 machine: tests cross-built with gcc-aarch64-linux-gnu
# against a sysroot unpacked from Debian's arm64 packages, run in
# qemu-system-aarch64 booting Debian's arm64 kernel (tests/arm64/arm64.sh).
#
#   make check-arm64        every arm64 suite in the guest; the guest's
#                           summary and exit status are the target's
#   make check-arm64-quick  (in `make check`) the smoke suite and the A64
#                           simulator's quick differential tests and fuzzer
#                           in the guest;
#                           skipped with a message when the packages cannot
#                           be had, or with SKIP_ARM64=1
.PHONY: check-arm64 check-arm64-quick arm64-sysroot

A64       := $(B)/arm64
A64_SYSROOT = $(abspath $(A64)/sysroot)
A64_CC    := aarch64-linux-gnu-gcc
A64_CFLAGS = --sysroot=$(A64_SYSROOT) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) \
	-Wmissing-prototypes -fno-omit-frame-pointer
# Criterion suites built for arm64; the library's suites join them once the
# library builds for arm64.
A64_SMOKE := $(A64)/tests/test_arm64_smoke
# Each is also built with ASan+UBSan (the cross compiler's libasan runs in
# the guest as it does natively).
A64_SRC   := $(sort $(wildcard tests/arm64/test_*.c))
A64_TESTS := $(A64_SRC:tests/arm64/%.c=$(A64)/tests/%) \
	$(A64_SRC:tests/arm64/%.c=$(A64)/tests-asan/%)

# The A64 classifier's suite compiles it in (plain C, no library needed).
A64_SIM   := $(A64)/tests/test_a64_sim
$(A64_SIM) $(A64)/tests-asan/test_a64_sim: A64_EXTRA := -Iinclude -Isrc src/arch/arm64/insn.c
$(A64_SIM) $(A64)/tests-asan/test_a64_sim: src/arch/arm64/insn.c src/arch/arm64/insn.h

$(A64)/tests/%: tests/arm64/%.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -o $@ $< $(A64_EXTRA) -lcriterion

$(A64)/tests-asan/%: tests/arm64/%.c $(A64)/sysroot.stamp
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) -O1 $(SAN) -o $@ $< $(A64_EXTRA) -lcriterion

# The sysroot's own script decides what is stale (new package versions)
# and touches the stamp when it checked; the arm64 targets run it first.
arm64-sysroot:
	@sh scripts/install-deps.sh --arm64
	@B=$(B) bash tests/arm64/arm64.sh sysroot

$(A64)/sysroot.stamp:
	@$(MAKE) --no-print-directory arm64-sysroot

# The long run of the A64 simulator's differential tests and fuzzer
# (A64_FUZZ=long, ten times the quick mode's encodings and sequences).
check-arm64: arm64-sysroot
	@$(MAKE) --no-print-directory $(A64_TESTS)
	@B=$(B) ARM64_ENV="A64_FUZZ=long $(ARM64_ENV)" bash tests/arm64/arm64.sh run $(A64_TESTS)

check-arm64-quick:
	@B=$(B) A64_QUICK="$(A64_SMOKE) $(A64_SIM)" MAKE="$(MAKE)" bash tests/arm64/quick.sh

CHECK_EXTRA += check-arm64-quick
