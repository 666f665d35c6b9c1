# `kprobe run` programs on a bundled target, outputs compared with what
# bpftrace 0.17 prints (tests/run/run-programs.sh; bpftrace itself reruns
# them when it is installed and may trace here).
.PHONY: run-programs

$(B)/tests/cli/run_target: tests/cli/run_target.c tools/kprobe/common/sdt_probe.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -std=gnu11 -Wall -fno-omit-frame-pointer -Itools/kprobe/common -o $@ $< -lpthread

run-programs: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/tests/cli/run_target
	B=$(B) bash tests/run/run-programs.sh

CHECK_EXTRA += run-programs
