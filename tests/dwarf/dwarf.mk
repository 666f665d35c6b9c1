# Variables by name (tools/kprobe/cli/dwarf_vars.c) against gdb: tests/cli/cli_dwarf.c
# built at -O0 and -O2 with gcc (and clang when installed), probed at chosen
# lines, every value compared with what gdb prints there.
.PHONY: dwarf-vars-check

dwarf-vars-check: $(B)/kprobe $(B)/libkprobe-agent.so
	tests/dwarf/run-dwarf.sh $(B)

CHECK_EXTRA += dwarf-vars-check
