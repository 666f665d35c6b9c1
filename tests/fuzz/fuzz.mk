# Differential out-of-line fuzzer (tests/fuzz, docs/fuzzing.md): random
# instruction sequences run unprobed and with probes on every boundary.
# `make check` runs fuzz-quick (the saved regression cases, then 600 cases
# from seed 1, at most 60 s: fewer cases on a loaded machine),
# `make soak` runs fuzz-soak (five minutes, a new seed each time).
.PHONY: fuzz-quick fuzz-soak fuzz-replay fuzz-open

FUZZ_SRC := tests/fuzz/fuzz_main.c tests/fuzz/gen.c tests/fuzz/run.c tests/fuzz/sandbox.S
FUZZ_CASES := $(sort $(wildcard tests/fuzz/regressions/*.case))
FUZZ_JOBS ?= 2

$(B)/kprobes-fuzz: $(FUZZ_SRC) tests/fuzz/fuzz.h $(B)/libkprobes.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Itests/fuzz -o $@ $(FUZZ_SRC) $(B)/libkprobes.a $(LIBS)

fuzz-replay: $(B)/kprobes-fuzz
	$(B)/kprobes-fuzz --replay $(FUZZ_CASES)

# Cases of library bugs not fixed yet: expected to fail until they are,
# then moved up to tests/fuzz/regressions/.
fuzz-open: $(B)/kprobes-fuzz
	$(if $(wildcard tests/fuzz/regressions/open/*.case),$(B)/kprobes-fuzz --replay $(sort $(wildcard tests/fuzz/regressions/open/*.case)),@echo "no open cases")

fuzz-quick: fuzz-replay
	$(B)/kprobes-fuzz --seed 1 --cases 300 --seconds 30 --jobs $(FUZZ_JOBS) \
		--save-dir $(B)

fuzz-soak: fuzz-replay
	$(B)/kprobes-fuzz --seconds 300 --jobs $(FUZZ_JOBS) --save-dir $(B) \
		--forms $(B)/fuzz-forms.txt

CHECK_EXTRA += fuzz-quick
SOAK_TARGETS += fuzz-soak
