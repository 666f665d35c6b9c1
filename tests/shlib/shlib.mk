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

# Every public header compiles on its own, as ISO C11 (no _GNU_SOURCE) and
# as GNU C, with warnings as errors: what a program including just that
# header gets.
.PHONY: check-headers
PUBLIC_HEADERS := $(patsubst include/%,%,$(sort $(wildcard include/*.h include/kprobes/*.h)))

check-headers:
	@for h in $(PUBLIC_HEADERS); do for std in c11 gnu11; do \
		echo "#include <$$h>" | $(CC) -std=$$std -Wall -Wextra -Werror -Iinclude \
			-fsyntax-only -x c - || \
		{ echo "check-headers: <$$h> does not compile on its own (-std=$$std)"; exit 1; }; \
	done; done
	@echo "check-headers: $(words $(PUBLIC_HEADERS)) public headers compile on their own"

CHECK_EXTRA += check-headers
