# Python workload of the real-program tests: json, re, hashlib, zlib,
# sorting, classes, generators, string formatting; deterministic output.
# Scale: the first argument (default 1).
import sys, json, re, hashlib, zlib, heapq, collections, itertools

scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
N = 4000 * scale


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm2(self):
        return self.x * self.x + self.y * self.y


def lcg(seed):
    while True:
        seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield seed >> 33


rnd = lcg(12345)
records = [{"id": i, "name": "rec-%05d" % i, "value": next(rnd) % 100000,
            "tags": ["t%d" % (j % 7) for j in range(i % 5)]} for i in range(N)]
text = json.dumps(records, sort_keys=True, indent=1)
print("json bytes", len(text))
back = json.loads(text)
assert back == records
print("sha256", hashlib.sha256(text.encode()).hexdigest())
print("md5", hashlib.md5(text.encode()).hexdigest())
packed = zlib.compress(text.encode(), 6)
print("zlib", len(packed), zlib.crc32(packed), len(zlib.decompress(packed)))
names = re.findall(r'"name": "(rec-\d*7)"', text)
print("re matches", len(names), names[:3])
print("re sub", re.sub(r"[aeiou]", "_", "the quick brown fox jumps over the lazy dog" * 3)[:40])
by_value = sorted(records, key=lambda r: (r["value"], r["id"]))
print("sorted", [r["id"] for r in by_value[:5]], [r["id"] for r in by_value[-5:]])
print("heap", heapq.nsmallest(4, (r["value"] for r in records)))
tags = collections.Counter(t for r in records for t in r["tags"])
print("tags", sorted(tags.items()))
pts = [Point(next(rnd) % 1000 - 500, next(rnd) % 1000 - 500) for _ in range(N)]
print("points", sum(p.norm2() for p in pts) % 1000003, max(pts, key=Point.norm2).norm2())
words = ("%x" % (next(rnd) % 65536) for _ in range(N))
groups = itertools.groupby(sorted(words, key=len), key=len)
print("groups", [(k, len(list(g))) for k, g in groups])
print("format", "{:>10}|{:<8.3f}|{:08b}".format("right", 3.14159, 37), f"{N:,}")
