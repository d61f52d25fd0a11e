"""CI smoke run of rank-bench: a few seconds against rankd and against Redis
directly (--direct), checking that both complete without errors and report
every operation. Not a performance test: no numbers are judged.

Usage: bench_smoke.py RANKD RANK_BENCH
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import start  # noqa: E402

RANKD, BENCH = sys.argv[1:3]


def run(args, ops=("update", "rank", "top")):
    out = subprocess.run([BENCH, "--members", "2000", "-c", "8", "-d", "2",
                          "-w", "0.5", "--json"] + args, capture_output=True,
                         text=True, timeout=120, check=False)
    if out.returncode != 0:
        sys.exit(f"rank-bench {args} failed ({out.returncode}): {out.stderr}")
    result = json.loads(out.stdout)
    for op in ops:
        stats = result["ops"][op]
        assert stats["count"] > 0 and stats["errors"] == 0, (op, stats)
        assert 0 < stats["p50_us"] <= stats["p99_us"] <= stats["max_us"], stats
    print(result["target"], {op: round(s["ops_per_sec"])
                             for op, s in result["ops"].items()})


def main():
    work = tempfile.mkdtemp(prefix="rankd-bench-smoke-")
    redis = rankd = None
    try:
        redis, redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], work)
        rankd, port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{redis_port}"], work)
        run(["--port", str(port), "--preload"])
        run(["--direct", f"127.0.0.1:{redis_port}", "--preload"])
        run(["--port", str(port), "--mix", "around=1,ranks=1"],
            ops=("around", "ranks"))
        rankd.terminate()
        assert rankd.wait(30) == 0, "rankd did not exit cleanly"
        rankd = None
        print("3 passed, 0 failed")
    finally:
        for proc in (rankd, redis):
            if proc is not None:
                proc.terminate()
                proc.wait(30)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
