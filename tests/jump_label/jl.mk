# Shared objects with static keys and tracepoints for test_jump_label and
# test_tracepoint: one built like ordinary code, one at -O0.  Both test
# builds (tests/ and tests-asan/) find them in $(B)/tests/jl/.

JL_PLUGIN_DEPS := include/kprobes/jump_label.h include/kprobes/tracepoint.h

$(B)/tests/jl/libjlplugin.so: tests/jump_label/jlplugin.c $(JL_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -fPIC -shared -o $@ $<

$(B)/tests/jl/libjlo0.so: tests/jump_label/jlo0.c $(JL_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -O0 -g $(BASE) -fPIC -shared -o $@ $<

JL_SOS := $(B)/tests/jl/libjlplugin.so $(B)/tests/jl/libjlo0.so

$(B)/tests/test_jump_label $(B)/tests-asan/test_jump_label: $(JL_SOS)
$(B)/tests/test_tracepoint $(B)/tests-asan/test_tracepoint: $(JL_SOS)
$(B)/tests/test_jump_label_cxx $(B)/tests-asan/test_jump_label_cxx: include/kprobes/jump_label.h include/kprobes/tracepoint.h
