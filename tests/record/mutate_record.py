#!/usr/bin/env python3
"""Mutates a recording (bytes changed, cut or inserted in one of its files)
and runs report, replay and dump on each copy: every run must end with
status 0 or 1, never a signal or a hang (tests/record/run-record.sh).

usage: mutate_record.py KPROBE RECORDING ITERATIONS"""
import os
import random
import shutil
import subprocess
import sys
import tempfile


def main():
    kprobe, src, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(20261126)
    work = tempfile.mkdtemp(prefix="kprobe-mutate-")
    bad = 0
    try:
        for it in range(n):
            d = os.path.join(work, "r")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(src, d)
            name = rng.choice(sorted(os.listdir(d)))
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                data = bytearray(f.read())
            for _ in range(rng.randint(1, 20)):
                if not data:
                    break
                i = rng.randrange(len(data))
                op = rng.random()
                if op < 0.6:
                    data[i] = rng.randrange(256)
                elif op < 0.8:
                    del data[i:i + rng.randint(1, 16)]
                else:
                    data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            with open(path, "wb") as f:
                f.write(data)
            for cmd in (["report"], ["replay"], ["dump", "--format", "chrome"],
                        ["dump", "--format", "json"]):
                try:
                    r = subprocess.run([kprobe] + cmd + [d], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, timeout=30)
                    why = None if r.returncode in (0, 1) else "status %d" % r.returncode
                except subprocess.TimeoutExpired:
                    why = "no end within 30 s"
                if why:
                    bad += 1
                    print("# %s on a recording with %s mutated (iteration %d): %s" %
                          (" ".join(cmd), name, it, why))
                    break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(bad)


if __name__ == "__main__":
    main()
