"""admin_cost.py -- what GetBoardInfo, ResetBoard and DeleteBoard cost Redis
on a node that holds many other keys: the commands each sends (INFO
commandstats, reset before each call) and how long each takes (wall time,
one call). Two boards of 50 members: 'cost' (plain) and 'shday' (daily,
3 shards); OTHER_KEYS other keys beside them.

Usage: python3 bench/admin_cost.py RANKD [OTHER_KEYS]   (default 1000000)
Starts its own redis-server and rankd on free loopback ports; needs the
Python stubs, which it generates from idl/ (Debian's python3-thrift).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import rankd_http  # noqa: E402
from rankd_http import start_rankd, start_redis, stop  # noqa: E402

rankd_http.load_stubs(os.path.join(HERE, "..", "idl", "ranking.thrift"))
from ranking.ttypes import (  # noqa: E402
    DeleteBoardRequest, GetBoardInfoRequest, ResetBoardRequest,
    UpdateBatchRequest, UpdateMode, UpdateRequest)
from servers import connect  # noqa: E402


def main():
    rankd = os.path.abspath(sys.argv[1])
    others = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    work = tempfile.mkdtemp(prefix="rankd-admin-cost-")
    conf = os.path.join(work, "rankd.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write("[board shday]\nperiod=daily\nshards=3\n")
    redis, redis_port = start_redis(work)
    proc, port, _ = start_rankd(rankd, work, redis_port,
                                extra=("--config", conf, "--grant",
                                       "anonymous=read,write,admin"),
                                metrics=False)

    def cli(*args):
        return subprocess.run(["redis-cli", "-p", str(redis_port), *args],
                              check=True, capture_output=True,
                              text=True).stdout

    def commands():
        return sum(int(line.split("calls=")[1].split(",")[0])
                   for line in cli("INFO", "commandstats").splitlines()
                   if line.startswith("cmdstat_"))
    try:
        c, t = connect(port)
        for board in ("cost", "shday"):
            c.UpdateBatch(UpdateBatchRequest(requests=[
                UpdateRequest(board=board, member=f"m{i}", value=i,
                              request_id=f"{board}-{i}", mode=UpdateMode.SET)
                for i in range(50)]))
        cli("EVAL", "for i = 1, tonumber(ARGV[1]) do "
            "redis.call('SET', 'other:' .. i, i) end", "0", str(others))
        print(f"{others} other keys; rankd {sys.argv[1]}")
        print("| call | Redis commands | ms |\n|---|---:|---:|")
        for name, call in (
                ("GetBoardInfo, no such board", lambda: c.GetBoardInfo(
                    GetBoardInfoRequest(board="nobody"))),
                ("GetBoardInfo, plain", lambda: c.GetBoardInfo(
                    GetBoardInfoRequest(board="cost"))),
                ("GetBoardInfo, daily, 3 shards", lambda: c.GetBoardInfo(
                    GetBoardInfoRequest(board="shday"))),
                ("ResetBoard, plain", lambda: c.ResetBoard(
                    ResetBoardRequest(board="cost", request_id="r1"))),
                ("DeleteBoard, daily, 3 shards", lambda: c.DeleteBoard(
                    DeleteBoardRequest(board="shday", request_id="d1")))):
            cli("CONFIG", "RESETSTAT")
            started = time.monotonic()
            call()
            took = time.monotonic() - started
            # Less the INFO that counts them.
            print(f"| {name} | {commands() - 1} | {took * 1000:.1f} |")
        t.close()
    finally:
        stop(proc)
        redis.terminate()
        redis.wait(30)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
