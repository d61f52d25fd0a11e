"""import_gen.py -- the entries of an import bench, in export's own form.

Usage: python3 bench/import_gen.py MEMBERS csv|jsonl > FILE
MEMBERS members m0.. sorted by member id bytewise, each with a random score
and time (seed 7: the same file every run) and data on every tenth.
"""
import json, random, sys
n, fmt = int(sys.argv[1]), sys.argv[2]
random.seed(7)
if fmt == "csv":
    print("member,score,timestamp_ms,subscores,data")
for m in sorted("m%d" % i for i in range(n)):
    score = random.randint(-10**12, 10**12)
    t = 1700000000000 + random.randint(0, 10**9)
    data = {"name": "player " + m} if int(m[1:]) % 10 == 0 else None
    if fmt == "csv":
        d = json.dumps(data, separators=(",", ":")).replace('"', '""') if data else ""
        print('"%s",%d,%d,,%s' % (m, score, t, '"%s"' % d if d else ""))
    else:
        e = {"member": m, "score": score, "timestamp_ms": t}
        if data:
            e["data"] = data
        print(json.dumps(e, separators=(",", ":")))
