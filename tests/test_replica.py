"""Reads from replicas (read_from=replica) through the generated Python
client, against a real primary and replica (redis-server --replicaof) and a
real rankd: reads go to the replica; a read through rankd after an update it
acknowledged sees it, while the replica lags; a replica paused (SIGSTOP),
lagging past the bound, or killed costs no call. The replica reaches the
primary through a proxy that can hold the replication stream back.

Usage: test_replica.py RANKD STUBS_DIR
RANKD_TEST_WRAPPER (as for the C tests), if set, is put in front of rankd.
"""
import collections
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

RANKD = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import (  # noqa: E402
    GetRankRequest, GetTopNRequest, NotFound, UpdateMode, UpdateRequest)
import servers  # noqa: E402
from servers import connect, free_port, start, stop, wait_port  # noqa

WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
DEADLINE = 60 if WRAPPER else 20


def wait_for(what, condition, deadline=DEADLINE):
    return servers.wait_for(what, condition, deadline)


def set_to(board, member, value, rid):
    return UpdateRequest(board=board, member=member, value=value,
                         request_id=rid, mode=UpdateMode.SET)


class DelayProxy:
    """A TCP proxy from the replica to the primary that holds what the
    primary sends for `delay` seconds: a replica that lags, at will."""

    def __init__(self, target_port):
        self.delay = 0.0
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pipe, args=(down, up, False),
                             daemon=True).start()
            threading.Thread(target=self.pipe, args=(up, down, True),
                             daemon=True).start()

    def pipe(self, src, dst, delayed):
        held = collections.deque()
        cond = threading.Condition()

        def sender():
            while True:
                with cond:
                    while not held:
                        cond.wait()
                    due, chunk = held[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # holding the bytes is the point
                    continue
                with cond:
                    held.popleft()
                if chunk is None:
                    dst.close()
                    return
                try:
                    dst.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=sender, daemon=True).start()
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                chunk = b""
            with cond:
                held.append((time.monotonic() + (self.delay if delayed
                                                  else 0), chunk or None))
                cond.notify()
            if not chunk:
                return


class ReplicaTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-replica-")
        cls.primary, cls.primary_port = cls.start_redis()
        cls.proxy = DelayProxy(cls.primary_port)
        cls.replica, cls.replica_port = cls.start_redis(
            "--replicaof", "127.0.0.1", str(cls.proxy.port))
        wait_for("the replica to sync", lambda: "master_link_status:up" in
                 cls.cli(cls.replica_port, "INFO", "replication"))
        cls.conf = os.path.join(cls.dir, "rankd.conf")
        with open(cls.conf, "w", encoding="utf-8") as f:
            f.write(f"""\
[redis]
nodes=127.0.0.1:{cls.primary_port}
replicas=127.0.0.1:{cls.primary_port}=127.0.0.1:{cls.replica_port}

[defaults]
read_from=replica

[board lagging]
max_replica_lag_ms=10000

[board other]
max_replica_lag_ms=10000

[board primary_only]
read_from=primary
""")
        cls.http = free_port()
        cls.rankd, cls.port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                       "--config", cls.conf, "--redis-timeout", "0.5",
                       "--metrics-listen", f"127.0.0.1:{cls.http}"], cls.dir)
        assert wait_port(cls.http, cls.rankd), "rankd's HTTP port did not open"
        cls.client, cls.transport = connect(cls.port)

    @classmethod
    def start_redis(cls, *extra):
        return start(lambda p: ["redis-server", "--bind", "127.0.0.1",
                                "--port", str(p), "--save", "",
                                "--appendonly", "no", *extra], cls.dir)

    @classmethod
    def cli(cls, port, *args):
        return subprocess.run(["redis-cli", "-p", str(port), *args],
                              check=True, capture_output=True,
                              text=True).stdout.strip()

    @classmethod
    def tearDownClass(cls):
        cls.transport.close()
        assert stop(cls.rankd, cls.dir, cls.port) == 0, \
            "rankd did not exit cleanly"
        for proc in (cls.primary, cls.replica):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                proc.wait(30)
        shutil.rmtree(cls.dir)

    def metric(self, name):
        body = urllib.request.urlopen(f"http://127.0.0.1:{self.http}/metrics",
                                      timeout=30).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def replica_reads(self):
        return self.metric('rankd_reads_total{source="replica"}')

    def replica_calls(self):
        stats = self.cli(self.replica_port, "INFO", "commandstats")
        return sum(int(line.split("calls=")[1].split(",")[0])
                   for line in stats.splitlines()
                   if line.startswith(("cmdstat_evalsha", "cmdstat_zrange",
                                       "cmdstat_zrevrange", "cmdstat_hmget",
                                       "cmdstat_zrank")))

    def read_all(self, board, member):
        """GetRank and GetTopN of board: (score, top score; None if the
        member or the board is not there)."""
        try:
            score = self.client.GetRank(
                GetRankRequest(board=board, member=member)).score
        except NotFound:
            score = None
        top = self.client.GetTopN(GetTopNRequest(board=board, n=1))
        return score, top[0].score if top else None

    # ---- tests (run in name order: the last kills the replica) ----

    def test_1_reads_go_to_the_replica(self):
        self.client.Update(set_to("plain", "a", 5, "plain-1"))
        before, calls = self.replica_reads(), self.replica_calls()
        wait_for("reads from the replica", lambda: self.read_all(
            "plain", "a") == (5, 5) and self.replica_reads() > before + 10)
        self.assertGreater(self.replica_calls(), calls)
        self.assertGreaterEqual(
            self.metric('rankd_replica_lag_seconds{replica="127.0.0.1:%d"}'
                        % self.replica_port), 0)
        # A board that reads from its primary never asks the replica.
        self.client.Update(set_to("primary_only", "p", 1, "po-1"))
        before = self.replica_reads()
        for _ in range(20):
            self.assertEqual(self.read_all("primary_only", "p"), (1, 1))
        self.assertEqual(self.replica_reads(), before)

    def test_2_read_your_writes_across_a_lagging_replica(self):
        """The replica gets the primary's writes 300 ms late. On a board
        that allows 10 s of lag, each read right after an update through
        rankd sees it (the primary answers it), and reads of a board this
        rankd did not write meanwhile go to the replica; on a board that
        allows the default 100 ms, the replica is not read."""
        self.client.Update(set_to("other", "o", 1, "other-1"))
        self.client.Update(set_to("strict", "s", 1, "strict-1"))
        wait_for("the replica to have them",
                 lambda: self.cli(self.replica_port, "EXISTS",
                                  "rk:{other}:z", "rk:{strict}:z") == "2")
        self.proxy.delay = 0.3
        try:
            wait_for("the replica to lag", lambda: self.metric(
                'rankd_replica_lag_seconds{replica="127.0.0.1:%d"}'
                % self.replica_port) > 0.2)

            def other_from_replica():
                before = self.replica_reads()
                self.client.GetRank(GetRankRequest(board="other", member="o"))
                return self.replica_reads() > before
            # Once a heartbeat sent after the write to "other" is through.
            wait_for("the lagging replica to serve 'other'",
                     other_from_replica)
            before = self.replica_reads()
            for i in range(1, 100):
                self.client.Update(set_to("lagging", "m", i, f"lag-{i}"))
                self.assertEqual(self.read_all("lagging", "m"), (i, i))
                self.client.GetRank(GetRankRequest(board="other", member="o"))
            other = self.replica_reads() - before
            self.assertGreater(other, 50)
            before = self.replica_reads()
            for _ in range(20):
                self.assertEqual(self.read_all("strict", "s"), (1, 1))
            self.assertEqual(self.replica_reads(), before)
        finally:
            self.proxy.delay = 0.0

    def test_3_paused_replica_costs_no_call(self):
        """SIGSTOP the replica for 1.5 s while reading: every call answers
        (those sent to it before its lag passed 100 ms wait for
        --redis-timeout, then the primary answers); after SIGCONT reads
        return to it."""
        self.client.Update(set_to("paused", "a", 7, "paused-1"))
        wait_for("the replica to have it",
                 lambda: self.cli(self.replica_port, "EXISTS",
                                  "rk:{paused}:z") == "1")
        os.kill(self.replica.pid, signal.SIGSTOP)
        try:
            end = time.monotonic() + 1.5
            reads = 0
            while time.monotonic() < end:
                self.assertEqual(self.read_all("paused", "a"), (7, 7))
                reads += 1
            self.assertGreater(reads, 10)
        finally:
            os.kill(self.replica.pid, signal.SIGCONT)
        before = self.replica_reads()
        wait_for("reads from the replica again", lambda: self.read_all(
            "paused", "a") == (7, 7) and self.replica_reads() > before)

    def test_4_replica_death_costs_no_call(self):
        """The replica SIGKILLed while 4 threads read: no call fails."""
        self.client.Update(set_to("dying", "a", 3, "dying-1"))
        wait_for("the replica to have it",
                 lambda: self.cli(self.replica_port, "EXISTS",
                                  "rk:{dying}:z") == "1")
        errors, counts = [], [0] * 4
        stop = threading.Event()

        def reader(k):
            c, t = connect(self.port)
            try:
                while not stop.is_set():
                    r = c.GetRank(GetRankRequest(board="dying", member="a"))
                    if r.score != 3:
                        errors.append(r)
                    counts[k] += 1
            except Exception as e:  # reported by the test
                errors.append(e)
            t.close()

        threads = [threading.Thread(target=reader, args=(k,))
                   for k in range(4)]
        for th in threads:
            th.start()
        wait_for("reads under way", lambda: sum(counts) > 100)
        self.replica.kill()
        self.replica.wait(30)
        at_kill = sum(counts)
        wait_for("reads after the kill", lambda: sum(counts) > at_kill + 200)
        stop.set()
        for th in threads:
            th.join()
        self.assertEqual(errors[:3], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
