#!/usr/bin/env python3
"""Checks on what kprobe dump writes (tests/record/run-record.sh).

  check_record.py counts JSONFILE
      one line per function: NAME ENTRIES RETURNS UNMATCHED MAXDEPTH THREADS PIDS
  check_record.py chrome CHROMEFILE
      parses the Trace Event file, checks that on every thread each E closes
      the B on top of that thread's stack and that every B is closed; prints
      the number of B events
"""
import collections
import json
import sys


def counts(path):
    per = collections.defaultdict(lambda: [0, 0, 0, 0, set(), set()])
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            row = per[ev["function"]]
            if ev["type"] == "entry":
                row[0] += 1
            else:
                row[1] += 1
                if "unmatched" in ev:
                    row[2] += 1
            row[3] = max(row[3], ev["depth"])
            row[4].add(ev["tid"])
            row[5].add(ev["pid"])
    for name in sorted(per):
        e, r, u, d, tids, pids = per[name]
        print(name, e, r, u, d, len(tids), len(pids))


def chrome(path):
    with open(path) as f:
        data = json.load(f)
    stacks = collections.defaultdict(list)
    begins = 0
    for ev in data["traceEvents"]:
        key = (ev["pid"], ev["tid"])
        if ev["ph"] == "B":
            stacks[key].append(ev["name"])
            begins += 1
        elif ev["ph"] == "E":
            if not stacks[key] or stacks[key][-1] != ev["name"]:
                sys.exit("E %s on %s does not close the top B %s" %
                         (ev["name"], key, stacks[key][-1:] or None))
            stacks[key].pop()
    for key, st in stacks.items():
        if st:
            sys.exit("thread %s leaves %d B events open" % (key, len(st)))
    print(begins)


CLOSED = ("no return (longjmp, exception or missed)", "still running at the end")


def events(path):
    n = 0
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            if ev.get("unmatched") not in CLOSED:
                n += 1
    print(n)


if __name__ == "__main__":
    {"counts": counts, "chrome": chrome, "events": events}[sys.argv[1]](sys.argv[2])
