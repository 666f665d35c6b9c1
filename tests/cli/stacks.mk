# Stack tests' programs (tests/test_cli_stack.c runs them under kprobe):
# built without frame pointers, as distribution binaries are.
$(B)/tests/cli/cli_stack: tests/cli/cli_stack.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -std=gnu11 -Wall -o $@ $< -lpthread

$(B)/tests/cli/cli_stack_cxx: tests/cli/cli_stack_cxx.cpp
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -Wall -o $@ $<

$(B)/tests/cli/cli_stack_dl: tests/cli/cli_stack_dl.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -std=gnu11 -Wall -o $@ $< -ldl

$(B)/tests/test_cli_stack $(B)/tests-asan/test_cli_stack: $(B)/kprobe $(B)/libkprobe-agent.so \
	$(B)/tests/cli/cli_stack $(B)/tests/cli/cli_stack_cxx $(B)/tests/cli/cli_stack_dl
