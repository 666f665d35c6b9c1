# Soak test: many threads, signals, fork/exec, dlopen/dlclose while probes
# are registered, removed, enabled, disabled and (un)optimized continuously.
#
#   make soak-quick     ~25 s, part of `make check`
#   make soak-long      5 minutes (`make soak` runs it)
#   make $(B)/kprobes-soak-asan && $(B)/kprobes-soak-asan --seconds 60

SOAK_SRC := $(sort $(wildcard tests/soak/soak*.c))
SOAK_REPROS := $(B)/soak/repro-census $(B)/soak/repro-unmapped-batch
SOAK_SRC := $(filter-out tests/soak/soak_plugin.c,$(SOAK_SRC))
SOAK_HDR := $(wildcard tests/soak/*.h)
SOAK_PLUGIN := $(B)/soak/libsoakplugin.so

$(SOAK_PLUGIN): tests/soak/soak_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -shared -fPIC -o $@ $<

$(B)/kprobes-soak: $(SOAK_SRC) $(SOAK_HDR) $(B)/libkprobes.a $(SOAK_PLUGIN)
	@mkdir -p $(B)
	$(CC) $(CFLAGS) $(BASE) -Isrc -o $@ $(SOAK_SRC) $(B)/libkprobes.a $(LIBS)

$(B)/kprobes-soak-asan: $(SOAK_SRC) $(SOAK_HDR) $(B)/libkprobes-asan.a $(SOAK_PLUGIN)
	@mkdir -p $(B)
	$(CC) -O1 -g $(BASE) $(SAN) -Isrc -o $@ $(SOAK_SRC) $(B)/libkprobes-asan.a $(LIBS)

# Minimal reproductions of the bugs the soak found (docs/soak.md).
$(B)/soak/repro-%: tests/soak/repro_%.c $(B)/libkprobes.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isrc -o $@ $< $(B)/libkprobes.a $(LIBS)

$(B)/soak/repro-unmapped-batch: tests/soak/repro_unmapped_batch.c $(B)/libkprobes.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isrc -o $@ $< $(B)/libkprobes.a $(LIBS)

soak-repros: $(SOAK_REPROS) $(SOAK_PLUGIN)
	-$(B)/soak/repro-census region
	-$(B)/soak/repro-census slot
	-$(B)/soak/repro-unmapped-batch $(SOAK_PLUGIN)

.PHONY: soak-quick soak-long soak-repros

soak-quick: $(B)/kprobes-soak
	$(B)/kprobes-soak --seconds 15 --threads 4

soak-long: $(B)/kprobes-soak
	$(B)/kprobes-soak --seconds 300 --threads 6 --progress 15

CHECK_EXTRA += soak-quick
SOAK_TARGETS += soak-long
