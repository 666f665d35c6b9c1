# Real programs probed everywhere (tests/real/run-real.sh): Debian's gzip,
# sqlite3 + libsqlite3, python3.11 and libc, output compared with an
# unprobed run, hit counts with Linux uprobes.  `make check` runs the quick
# mode, `make soak` the full one.
.PHONY: real-quick real-full

$(B)/real/stopper.so: tests/real/stopper.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -nostdlib -o $@ $<

real-quick: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/real/stopper.so
	B=$(B) bash tests/real/run-real.sh quick

real-full: $(B)/kprobe $(B)/libkprobe-agent.so $(B)/real/stopper.so
	B=$(B) bash tests/real/run-real.sh full

CHECK_EXTRA += real-quick
SOAK_TARGETS += real-full
