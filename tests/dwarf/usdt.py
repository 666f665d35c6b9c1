# CPython 3.11 fires function__entry when its interpreter loop is entered
# from C, not on every Python call: here when next() (C) starts each of
# three generators.
def gen(k):
    yield k


for k in range(3):
    next(gen(k))
print("done")
