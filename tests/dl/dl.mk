# Shared objects that Criterion suites dlopen and dlclose (tests/dl/).
$(B)/tests/libkpgone.so: tests/dl/libkpgone.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -o $@ $<

$(B)/tests/test_gone $(B)/tests-asan/test_gone: $(B)/tests/libkpgone.so

# The same function with two frame sizes (tests/test_stack_cache.c,
# tests/test_stack_memo.c).
$(B)/tests/libkpframe_a.so: tests/dl/libkpframe.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -fomit-frame-pointer -DFRAME=256 -o $@ $<

$(B)/tests/libkpframe_b.so: tests/dl/libkpframe.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -fomit-frame-pointer -DFRAME=1024 -o $@ $<

$(B)/tests/test_stack_cache $(B)/tests-asan/test_stack_cache: $(B)/tests/libkpframe_a.so \
	$(B)/tests/libkpframe_b.so
$(B)/tests/test_stack_memo $(B)/tests-asan/test_stack_memo: $(B)/tests/libkpframe_a.so \
	$(B)/tests/libkpframe_b.so
$(B)/tests/test_libcalls $(B)/tests-asan/test_libcalls: $(B)/tests/libkpgone.so
