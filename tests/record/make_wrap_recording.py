#!/usr/bin/env python3
"""Writes a recording whose compact events (8 bytes, the TSC's low 48 bits)
cross a wrap of those bits: fib entered at 2^48 - 1000 ticks (a full
16-byte event), fib entered again at 2^48 - 500, both returning after the
wrap, at 2^48 + 300 and 2^48 + 1000 (compact).  At 0.5 ns a tick, replay
must show 400 ns for the inner call and 1000 ns for the outer one
(tests/record/run-record.sh).

usage: make_wrap_recording.py DIR"""
import os
import struct
import sys

EV_REC_ENTRY = 6
WRAP = 1 << 48


def compact(ret, desc, tsc):
    return struct.pack("<Q", 1 | (2 if ret else 0) | desc << 2 | (tsc % WRAP) << 16)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "info"), "w") as f:
        f.write("kprobe-record 1\ntime_tsc 1\ntsc_base %d\nns_base 1000000000\n"
                "ns_per_tick 0.5\nlost_full 0\nlost_ringless 0\nafter_end 0\n"
                "corrupt 0\nbytes 40\n" % (WRAP - 4000))
    with open(os.path.join(d, "descs"), "w") as f:
        f.write("0\t1\t4242\t0x401000\t0\tprog\tfib\t\n"
                "1\t2\t4242\t0x401000\t1\tprog\tfib%return\t\n")
    with open(os.path.join(d, "specs"), "w") as f:
        f.write("0\tfib\n1\tfib%return\n")
    with open(os.path.join(d, "4242-4242.dat"), "wb") as f:
        f.write(struct.pack("<IHHQ", 16, EV_REC_ENTRY, 0, WRAP - 1000))
        f.write(compact(False, 0, WRAP - 500))
        f.write(compact(True, 1, WRAP + 300))
        f.write(compact(True, 1, WRAP + 1000))


if __name__ == "__main__":
    main()
