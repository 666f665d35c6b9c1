# kprobe record, report, replay and dump end to end, and count's calls made
# by library constructors (tests/record/run-record.sh, run by `make check`).
.PHONY: record-check

KP_REC_PROGS := $(B)/tests/cli/cli_record $(B)/tests/cli/cli_record_cxx \
	$(B)/tests/cli/libcli_ctor.so $(B)/tests/cli/cli_ctor

$(B)/tests/cli/cli_record: tests/cli/cli_record.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -o $@ $< -lpthread

$(B)/tests/cli/cli_record_cxx: tests/cli/cli_record_cxx.cpp
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -o $@ $<

$(B)/tests/cli/libcli_ctor.so: tests/cli/cli_ctor_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -o $@ $<

$(B)/tests/cli/cli_ctor: tests/cli/cli_ctor.c $(B)/tests/cli/libcli_ctor.so
	$(CC) -O1 -g -o $@ $< -L$(B)/tests/cli -lcli_ctor -Wl,-rpath,'$$ORIGIN'

record-check: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/libkprobe-audit.so $(KP_REC_PROGS)
	B=$(B) bash tests/record/run-record.sh

CHECK_EXTRA += record-check
