# CPython 3.11 fires function__entry when its interpreter loop is entered
# from C, not on every Python call: here when next() (C) starts each of
# three generators.
def gen(k):
    yield k


for k in range(3):
    next(gen(k))
# A full collection: gc__start with generation 2.
__import__("gc").collect()
# To stderr: bpftrace prints its events on the stdout this process shares,
# and a line of ours could land inside one of its lines.  (No import at
# the top: the line numbers above are what the test expects.)
print("done", file=__import__("sys").stderr)
