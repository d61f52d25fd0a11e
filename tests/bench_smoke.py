"""CI smoke run of rank-bench: a few seconds against rankd and against Redis
directly (--direct), pipelined against rankd, and Enqueue paced by --rate,
checking that they complete without errors and report every operation, and
that --plot draws latency over time (a PNG, and its per-second TSV), and
--tls with a client certificate against a rankd that requires one
(tls_rankd.py). Not a performance test: no numbers are judged.

Usage: bench_smoke.py RANKD RANK_BENCH
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import certs  # noqa: E402
from servers import start  # noqa: E402
from tls_rankd import start_tls_rankd  # noqa: E402

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
    return result


def check_plot(port, work):
    png = os.path.join(work, "latency.png")
    result = run(["--port", str(port), "--mix", "update=1,rank=1",
                  "--plot", png], ops=("update", "rank"))
    with open(png, "rb") as f:
        image = f.read()
    assert image[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert len(image) > 10000, f"a {len(image)}-byte PNG draws nothing"
    assert not os.path.exists(png + ".data"), "gnuplot's data file was left"
    with open(png + ".tsv", encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()]
    assert rows[0] == ["second", "op", "count", "p50_ms", "p99_ms",
                       "p999_ms"], rows[0]
    assert {r[1] for r in rows[1:]} == {"update", "rank"}, rows
    for op in ("update", "rank"):
        mine = [r for r in rows[1:] if r[1] == op]
        # -d 2: a row for each second, and every measured request in one
        assert [r[0] for r in mine] == ["0", "1"], (op, mine)
        assert sum(int(r[2]) for r in mine) == result["ops"][op]["count"], \
            (op, mine, result["ops"][op])
        for r in mine:
            assert int(r[2]) > 0 and 0 < float(r[3]) <= float(r[4]) \
                <= float(r[5]), r
    print("plot", len(image), "bytes,", len(rows) - 1, "rows")


def check_tls(redis_port, work):
    """rank-bench --tls: blocking and pipelined, with a client certificate;
    without one the server refuses and rank-bench says so."""
    paths = certs.make(os.path.join(work, "certs"), ["bench"])
    procs, port, _ = start_tls_rankd(RANKD, redis_port, work,
                                     os.path.dirname(paths["ca"]))
    try:
        tls = ["--port", str(port), "--tls-ca", paths["ca"],
               "--tls-cert", paths["client_bench"][0],
               "--tls-key", paths["client_bench"][1]]
        result = run(tls + ["-d", "1", "-c", "4"])
        assert result["target"] == "rankd-tls", result
        run(tls + ["-d", "1", "-c", "2", "--pipeline", "16"])
        out = subprocess.run([BENCH, "--port", str(port), "--tls-ca",
                              paths["ca"], "-d", "1", "-w", "0", "-c", "1",
                              "--members", "10"], capture_output=True,
                             text=True, timeout=60, check=False)
        assert out.returncode == 1, out
        assert "client certificate" in out.stderr, out.stderr
        out = subprocess.run([BENCH, "--tls-cert", paths["ca"]],
                             capture_output=True, text=True, timeout=60,
                             check=False)
        assert out.returncode == 2 and "--tls-key" in out.stderr, out
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)


def main():
    work = tempfile.mkdtemp(prefix="rankd-bench-smoke-")
    redis = rankd = None
    try:
        redis, redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], work)
        # Every board may also take Enqueue (the enqueue operation).
        conf = os.path.join(work, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write("[defaults]\nqueue=on\n")
        rankd, port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--config", conf,
                       "--redis", f"127.0.0.1:{redis_port}"], work)
        run(["--port", str(port), "--preload"])
        run(["--direct", f"127.0.0.1:{redis_port}", "--preload"])
        run(["--port", str(port), "--mix", "around=1,ranks=1,percentile=1"],
            ops=("around", "ranks", "percentile"))
        # Pipelined: 24 calls per write, more than rankd runs at once on a
        # connection; every reply must match its call.
        piped = run(["--port", str(port), "--pipeline", "24", "-c", "2",
                     "--mix", "update=1,rank=1,top=1,around=1,ranks=1"],
                    ops=("update", "rank", "top", "around", "ranks"))
        assert piped["pipeline"] == 24, piped
        # Enqueue of 50, paced to 200 calls/s in all.
        queued = run(["--port", str(port), "--mix", "enqueue=1", "--batch",
                      "50", "--rate", "200"], ops=("enqueue",))
        per_s = queued["ops"]["enqueue"]["ops_per_sec"]
        assert per_s <= 200 * 1.1, f"--rate 200 ran {per_s} calls/s"
        check_plot(port, work)
        check_tls(redis_port, work)
        rankd.terminate()
        assert rankd.wait(30) == 0, "rankd did not exit cleanly"
        rankd = None
        print("7 passed, 0 failed")
    finally:
        for proc in (rankd, redis):
            if proc is not None:
                proc.terminate()
                proc.wait(30)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
