# libkprobes.so as programs use it: linked in, and from an object the
# program preloads (tests/shlib/run.sh).
.PHONY: check-shlib

$(B)/tests/shlib/dynlinked: tests/shlib/dynlinked.c $(B)/libkprobes.so
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -Iinclude -o $@ $< -L$(B) -lkprobes -Wl,-rpath,$(abspath $(B))

$(B)/tests/shlib/libpreload.so: tests/shlib/preload.c $(B)/libkprobes.so
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -Iinclude -fPIC -shared -o $@ $< -L$(B) -lkprobes \
		-Wl,-rpath,$(abspath $(B))

check-shlib: $(B)/tests/shlib/dynlinked $(B)/tests/shlib/libpreload.so
	B=$(B) bash tests/shlib/run.sh

CHECK_EXTRA += check-shlib
