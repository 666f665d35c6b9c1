# Shared objects that Criterion suites dlopen and dlclose (tests/dl/).
$(B)/tests/libkpgone.so: tests/dl/libkpgone.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -o $@ $<

$(B)/tests/test_gone $(B)/tests-asan/test_gone: $(B)/tests/libkpgone.so
