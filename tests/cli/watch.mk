# kprobe watch's end-to-end test program (tests/test_cli_watch.c runs it).
$(B)/tests/cli/cli_watch: tests/cli/cli_watch.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -o $@ $< -lpthread

$(B)/tests/test_cli_watch $(B)/tests-asan/test_cli_watch: $(B)/kprobe $(B)/libkprobe-agent.so \
	$(B)/tests/cli/cli_watch
