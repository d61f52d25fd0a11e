"""The read cache (read_cache=tracked, read_cache_ms) through the generated
Python client, against a real redis-server and two rankds: a read through
the rankd that acknowledged an update sees it; a write elsewhere (the other
rankd, redis-cli) is seen once Redis says so; a lost invalidation
connection drops the cache; the memory bound holds.

Usage: test_cache.py RANKD STUBS_DIR
RANKD_TEST_WRAPPER (as for the C tests), if set, is put in front of rankd
(valgrind); the model run is then shorter.
"""
import os
import random
import shlex
import shutil
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


from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from ranking import Ranking  # noqa: E402
from ranking.ttypes import (  # noqa: E402
    GetRankRequest, GetTopNRequest, InvalidArgument, NotFound,
    RemoveRequest, UpdateBatchRequest, UpdateMode, UpdateRequest)
import servers  # noqa: E402
from servers import connect, free_port, start, stop, wait_port  # noqa

WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
MODEL_SECONDS = 5 if WRAPPER else 20
DEADLINE = 60 if WRAPPER else 20
# Board names read by the tests of many boards (fewer under valgrind).
MANY = 10 if WRAPPER else 1

CONFIG = """\
[defaults]
read_cache=tracked

[board hotsh]
shards=4

[board timed]
read_cache=off
read_cache_ms=300

[board plain]
read_cache=off

[board cool]
read_cache=off
read_cache_ms=600000
"""



def wait_for(what, condition, deadline=DEADLINE):
    return servers.wait_for(what, condition, deadline)


class Cork(TTransport.TTransportBase):
    """Holds what the client writes until release(), so that several calls
    leave in one write and reach rankd together."""

    def __init__(self, inner):
        self.inner = inner
        self.held = []

    def isOpen(self):
        return self.inner.isOpen()

    def read(self, sz):
        return self.inner.read(sz)

    def write(self, buf):
        self.held.append(buf)

    def flush(self):
        pass

    def release(self):
        self.inner.write(b"".join(self.held))
        self.inner.flush()
        self.held = []


def corked_client(port):
    """A client whose calls leave only at cork.release(): (client, cork)."""
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(60000)
    sock.open()
    cork = Cork(sock)
    transport = TTransport.TFramedTransport(cork)
    return (Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)), cork)


def set_to(board, member, value, rid):
    return UpdateRequest(board=board, member=member, value=value,
                         request_id=rid, mode=UpdateMode.SET)


class CacheTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-cache-")
        cls.conf = os.path.join(cls.dir, "rankd.conf")
        with open(cls.conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port",
                       str(p), "--save", "", "--appendonly", "no"], cls.dir)
        cls.http = {}
        cls.rankd, cls.port = cls.start_rankd()
        cls.other, cls.other_port = cls.start_rankd()
        cls.client, cls.transport = connect(cls.port)
        cls.writer, cls.writer_transport = connect(cls.other_port)

    @classmethod
    def start_rankd(cls, *extra):
        http = free_port()
        proc, port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                       "--config", cls.conf, "--redis",
                       f"127.0.0.1:{cls.redis_port}", "--metrics-listen",
                       f"127.0.0.1:{http}", *extra], cls.dir)
        assert wait_port(http, proc), "rankd's HTTP port did not open"
        cls.http[port] = http
        return proc, port

    @classmethod
    def stop(cls, proc, port):
        assert stop(proc, cls.dir, port) == 0, "rankd did not exit cleanly"

    @classmethod
    def tearDownClass(cls):
        cls.transport.close()
        cls.writer_transport.close()
        cls.stop(cls.rankd, cls.port)
        cls.stop(cls.other, cls.other_port)
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    # ---- helpers ----

    def rcli(self, *args):
        return subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), *args], check=True,
            capture_output=True, text=True).stdout.strip()

    def metric(self, name, port=None):
        body = urllib.request.urlopen(
            f"http://127.0.0.1:{self.http[port or self.port]}/metrics",
            timeout=30).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def top(self, board, n=10, client=None):
        return [(e.member, e.score) for e in (client or self.client).GetTopN(
            GetTopNRequest(board=board, n=n))]

    def warm(self, board, n=10):
        """Reads board's page until the cache answers it (the first reads
        start the tracking session and register the board)."""
        def hit():
            before = self.metric("rankd_read_cache_hits_total")
            self.top(board, n)
            return self.metric("rankd_read_cache_hits_total") > before
        wait_for(f"a cache hit on {board}", hit)

    # ---- tests ----

    def test_own_update_is_seen_at_once(self):
        """Updates through rankd, each followed at once by reads on two
        connections (each worker of rankd): every read shows the update,
        and the reads between updates come from the cache."""
        c2, t2 = connect(self.port)
        self.client.Update(set_to("own", "a", 1, "own-0"))
        self.warm("own")
        hits = self.metric("rankd_read_cache_hits_total")
        for i in range(1, 200):
            self.client.Update(set_to("own", "a", i, f"own-{i}"))
            for c in (self.client, c2, self.client):
                self.assertEqual(self.top("own", client=c), [("a", i)])
                self.assertEqual(c.GetRank(
                    GetRankRequest(board="own", member="a")).score, i)
        t2.close()
        # The third read of each round (and the GetRanks after the first)
        # are hits: the cache was in the way and stayed right.
        self.assertGreater(self.metric("rankd_read_cache_hits_total") - hits,
                           150)

    def test_write_elsewhere_is_seen(self):
        """A write through the other rankd, then a DEL by redis-cli: the
        cached page changes once Redis's invalidation arrives."""
        self.writer.Update(set_to("hot", "elsewhere", 5, "else-1"))
        wait_for("the first write", lambda: ("elsewhere", 5) in self.top("hot"))
        self.warm("hot")
        self.writer.Update(set_to("hot", "elsewhere", 6, "else-2"))
        took = wait_for("the other rankd's write",
                        lambda: ("elsewhere", 6) in self.top("hot"))
        print(f"\nanother rankd's write seen after {took * 1000:.1f} ms",
              file=sys.stderr)
        self.warm("hot")
        self.rcli("DEL", "rk:{hot}:z", "rk:{hot}:t")
        took = wait_for("redis-cli's DEL", lambda: self.top("hot") == [])
        print(f"redis-cli's DEL seen after {took * 1000:.1f} ms",
              file=sys.stderr)
        self.assertGreater(self.metric(
            'rankd_read_cache_invalidations_total{source="redis"}'), 0)

    def test_sharded_board(self):
        """A sharded board's shards are tracked too."""
        for i in range(8):
            self.client.Update(set_to("hotsh", f"m{i}", i, f"sh-{i}"))
        self.warm("hotsh")
        self.writer.Update(set_to("hotsh", "m3", 100, "sh-100"))
        wait_for("the other rankd's write to a shard",
                 lambda: self.top("hotsh")[0] == ("m3", 100))

    def test_lost_tracking_drops_the_cache(self):
        """The invalidation connection killed, and CLIENT TRACKING refused
        for a while (an ACL rule) so that no new session can begin: the
        cache serves nothing meanwhile, and a write Redis could not report
        is seen; once tracking is allowed again, a new session begins and
        the cache serves again."""
        self.client.Update(set_to("lost", "lost", 1, "lost-1"))
        self.warm("lost")
        sessions = self.metric("rankd_read_cache_tracking_sessions_total")
        self.rcli("ACL", "SETUSER", "default", "-client|tracking")
        try:
            ids = [line.split("id=")[1].split()[0]
                   for line in self.rcli("CLIENT", "LIST").splitlines()
                   if "name=rankd-invalidations" in line]
            self.assertGreaterEqual(len(ids), 1)  # one per rankd that reads
            for i in ids:
                self.rcli("CLIENT", "KILL", "ID", i)
            wait_for("tracking to be down", lambda: self.metric(
                "rankd_read_cache_tracking_up") == 0)
            self.rcli("DEL", "rk:{lost}:z", "rk:{lost}:t")
            hits = self.metric("rankd_read_cache_hits_total")
            for _ in range(10):
                self.assertEqual(self.top("lost"), [])
            self.assertEqual(self.metric("rankd_read_cache_hits_total"), hits)
        finally:
            self.rcli("ACL", "SETUSER", "default", "+client|tracking")
        wait_for("a new tracking session", lambda: self.metric(
            "rankd_read_cache_tracking_sessions_total") > sessions)
        self.client.Update(set_to("lost", "lost", 2, "lost-2"))
        self.warm("lost")
        self.rcli("DEL", "rk:{lost}:z", "rk:{lost}:t")
        wait_for("a write in the new session", lambda: self.top("lost") == [])

    def test_timed_board(self):
        """read_cache_ms=300: a write rankd does not see is served stale at
        most that long; its own writes are seen at once."""
        self.client.Update(set_to("timed", "t", 1, "timed-1"))
        self.warm("timed")
        self.rcli("DEL", "rk:{timed}:z", "rk:{timed}:t")
        deleted = time.monotonic()
        wait_for("the timed page to expire", lambda: self.top("timed") == [])
        self.assertLess(time.monotonic() - deleted, 0.3 + 2.0)
        for i in range(2, 20):
            self.client.Update(set_to("timed", "t", i, f"timed-{i}"))
            self.assertEqual(self.top("timed"), [("t", i)])

    def test_refused_calls_keep_the_cache(self):
        """Calls that change nothing (refused before Redis, refused by the
        script, replayed) leave a hot board's cached answers in place: the
        read after each is still a hit. An update that applies drops them."""
        board = "cool"
        self.client.Update(set_to(board, "a", 1, "cool-1"))
        self.client.Update(set_to(board, "b", 2, "cool-2"))
        self.warm(board)

        def refused(call):
            with self.assertRaises(InvalidArgument):
                call()

        def batch(requests, **kw):
            return self.client.UpdateBatch(
                UpdateBatchRequest(requests=requests, **kw)).results

        def batch_refused_item():
            results = batch([set_to(board, "a", 2**53 + 1, "cool-b1")])
            self.assertIsNotNone(results[0].invalid)

        def group_refused():
            results = batch([set_to(board, "a", 5, "cool-g1"),
                             set_to(board, "", 5, "cool-g2")],
                            with_rank=False, request_id="cool-group")
            self.assertTrue(all(r.invalid is not None for r in results))

        def replayed_update():
            self.assertFalse(self.client.Update(
                set_to(board, "a", 1, "cool-1")).applied)

        def remove_absent():
            self.assertFalse(self.client.Remove(RemoveRequest(
                board=board, member="absent", request_id="cool-r1")).removed)

        calls = {
            "value over 2^53": lambda: refused(lambda: self.client.Update(
                set_to(board, "a", 2**53 + 1, "cool-x1"))),
            "empty member": lambda: refused(lambda: self.client.Update(
                set_to(board, "", 1, "cool-x2"))),
            "replayed request id": replayed_update,
            "reused request id": lambda: refused(lambda: self.client.Update(
                set_to(board, "a", 7, "cool-1"))),
            "batch with a refused update": batch_refused_item,
            "batch with a request_id, refused": group_refused,
            "replayed batch": lambda: self.assertEqual(
                [r.response.applied for r in batch(
                    [set_to(board, "b", 2, "cool-2")])], [False]),
            "remove of an absent member": remove_absent,
            "replayed remove": remove_absent,
        }
        for name, call in calls.items():
            call()
            hits = self.metric("rankd_read_cache_hits_total")
            self.assertEqual(self.top(board), [("b", 2), ("a", 1)])
            self.assertEqual(self.metric("rankd_read_cache_hits_total"),
                             hits + 1, f"the read after a {name} missed")
        self.client.Update(set_to(board, "a", 3, "cool-3"))
        hits = self.metric("rankd_read_cache_hits_total")
        self.assertEqual(self.top(board), [("a", 3), ("b", 2)])
        self.assertEqual(self.metric("rankd_read_cache_hits_total"), hits)

    def private(self, config, *extra):
        """A redis-server and a rankd of this test's own (config, rankd's
        extra options), stopped at its end: (client, rankd port, redis-cli
        argv prefix). self.another() then starts another rankd on it."""
        d = tempfile.mkdtemp(prefix="rankd-cache-own-")
        self.addCleanup(shutil.rmtree, d)
        conf = os.path.join(d, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(config)
        redis, redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port",
                       str(p), "--save", "", "--appendonly", "no"], d)

        def stop_redis():
            redis.terminate()
            redis.wait(30)
        self.addCleanup(stop_redis)

        def rankd():
            http = free_port()
            proc, port = start(
                lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                           "--config", conf, "--redis",
                           f"127.0.0.1:{redis_port}", "--metrics-listen",
                           f"127.0.0.1:{http}", *extra], d)
            assert wait_port(http, proc), "rankd's HTTP port did not open"
            self.http[port] = http
            self.addCleanup(lambda: self.assertEqual(stop(proc, d, port), 0))
            c, t = connect(port)
            self.addCleanup(t.close)
            return c, port
        self.another = rankd
        c, port = rankd()
        return c, port, ["redis-cli", "-p", str(redis_port)]

    def read_boards(self, port, names, depth=64):
        """GetTopN of each of names on 2 connections, depth calls at a
        time on each."""
        clients = [corked_client(port) for _ in range(2)]
        try:
            for i in range(0, len(names), depth * len(clients)):
                for k, (c, cork) in enumerate(clients):
                    batch = names[i + k * depth:i + (k + 1) * depth]
                    for name in batch:
                        c.send_GetTopN(GetTopNRequest(board=name, n=10))
                    cork.release()
                    c.pending = len(batch)
                for c, _ in clients:
                    for _ in range(c.pending):
                        c.recv_GetTopN()
        finally:
            for _, cork in clients:
                cork.inner.close()

    def test_many_timed_board_names_bounded(self):
        """Reads of 60,000 board names with read_cache_ms, each once: the
        cache's bookkeeping of each board is counted under
        --read-cache-bytes, and rankd's heap does not grow with the names
        (it grew ~143 bytes a name, counted nowhere)."""
        bound = 262144
        c, port, _ = self.private("[defaults]\nread_cache_ms=300\n",
                                  "--read-cache-bytes", str(bound))
        # Fill what is bounded by a count (each worker's layout checks,
        # RANK_LAYOUT_CACHE_MAX) before measuring.
        self.read_boards(port, [f"warm{i}" for i in range(25000 // MANY)])
        heap = self.metric("rankd_heap_in_use_bytes", port)
        self.read_boards(port, [f"name{i}" for i in range(60000 // MANY)])
        grown = self.metric("rankd_heap_in_use_bytes", port) - heap
        print(f"\n{60000 // MANY:,} board names read: heap {grown / 1048576:+.2f} MiB, "
              f"cache {self.metric('rankd_read_cache_bytes', port):.0f} "
              "bytes", file=sys.stderr)
        self.assertLess(grown, 4 * 1048576)
        self.assertLessEqual(self.metric("rankd_read_cache_bytes", port), bound)
        # The boards' bookkeeping is what fills it: no answer is kept.
        self.assertGreater(self.metric("rankd_read_cache_bytes", port),
                           bound // 2)

    def test_swapdb_is_seen(self):
        """SWAPDB swaps the board's keys out from under the cache, and Redis
        7.0 reports nothing: the tracked page is served stale at most
        RANK_READ_CACHE_TRACKED_MAX_AGE_MS (1 s), not until the next
        write."""
        c, port, rcli = self.private("[defaults]\nread_cache=tracked\n")
        c.Update(set_to("swap", "a", 1, "swap-1"))

        def hit():
            before = self.metric("rankd_read_cache_hits_total", port)
            c.GetTopN(GetTopNRequest(board="swap", n=10))
            return self.metric("rankd_read_cache_hits_total", port) > before
        wait_for("a cache hit on swap", hit)
        subprocess.run([*rcli, "SWAPDB", "0", "1"], check=True,
                       capture_output=True)
        swapped = time.monotonic()
        took = wait_for("SWAPDB to be seen", lambda: c.GetTopN(
            GetTopNRequest(board="swap", n=10)) == [])
        print(f"\nSWAPDB seen after {took * 1000:.0f} ms", file=sys.stderr)
        self.assertLess(time.monotonic() - swapped, 1.0 + 2.0)

    def warm_own(self, c, port, board):
        """Reads board through c until rankd's cache answers it."""
        def hit():
            before = self.metric("rankd_read_cache_hits_total", port)
            c.GetTopN(GetTopNRequest(board=board, n=10))
            return self.metric("rankd_read_cache_hits_total", port) > before
        wait_for(f"a cache hit on {board}", hit)

    @staticmethod
    def info(rcli, section):
        out = subprocess.run([*rcli, "INFO", section], check=True,
                             capture_output=True, text=True).stdout
        return dict(line.strip().split(":", 1) for line in out.splitlines()
                    if ":" in line)

    def prefixes(self, rcli):
        """Redis's tracking prefixes, over every session."""
        return int(self.info(rcli, "stats")["tracking_total_prefixes"])

    def update_cost(self, c, rcli, n=200):
        """Redis's microseconds per update (FCALL of update.lua) over n
        updates of one board, and their median latency (ms) seen here."""
        def fcall():
            st = self.info(rcli, "commandstats").get("cmdstat_fcall",
                                                     "calls=0,usec=0,")
            return (int(st.split("calls=")[1].split(",")[0]),
                    int(st.split("usec=")[1].split(",")[0]))
        calls, usec = fcall()
        took = []
        for _ in range(n):
            self.rid = getattr(self, "rid", 0) + 1
            begin = time.monotonic()
            c.Update(set_to("upd", f"m{self.rid % 10}", self.rid,
                            f"upd-{self.rid}"))
            took.append(time.monotonic() - begin)
        calls2, usec2 = fcall()
        return (usec2 - usec) / (calls2 - calls), sorted(took)[n // 2] * 1000

    def test_many_tracked_boards_bounded(self):
        """Reads of 5,000 board names with read_cache=tracked: the tracking
        session's prefixes stay within --read-cache-tracked-boards (default
        100; Redis 7.0 walks them all for every key it writes), so what an
        update costs Redis does not grow with the names read; the boards
        read last are cached (the tracked set follows what is read), and a
        board read all along stays tracked through the set's rotations."""
        c, port, rcli = self.private("[defaults]\nread_cache=tracked\n")
        c.Update(set_to("keep", "a", 1, "keep-1"))
        self.warm_own(c, port, "keep")
        # The least of three runs: other processes on the machine only ever
        # add to it.
        cost = [min(self.update_cost(c, rcli) for _ in range(3))]
        names = [f"many{i}" for i in range(5000 // MANY)]
        peak, begin = 0, time.monotonic()
        for i in range(0, len(names), 25):
            self.read_boards(port, names[i:i + 25])
            c.GetTopN(GetTopNRequest(board="keep", n=10))
            peak = max(peak, self.prefixes(rcli))
            if i + 25 in (len(names) // 5, len(names)):
                cost.append(min(self.update_cost(c, rcli) for _ in range(3)))
        rate = len(names) / (time.monotonic() - begin)
        print(f"\n{len(names):,} tracked boards read ({rate:.0f}/s): peak "
              f"{peak} prefixes; update " + " -> ".join(
                  f"{us:.1f} us ({ms:.2f} ms)" for us, ms in cost)
              + " in Redis (seen here) with 0, 1/5 and all read",
              file=sys.stderr)
        # The set rotates through a second session: the boards kept are in
        # both, and Redis counts a prefix once.
        self.assertLessEqual(peak, 100 + 100 // 2 + 1)
        # Timings on a shared machine vary by half from run to run (under
        # valgrind, 65.9 -> 109.5 us between 1/5 and all read, once): only
        # growth of another order is judged here, the unbounded set's (44
        # us -> 9 ms); the prefix count above is the exact check.
        self.assertLess(cost[2][0], cost[0][0] * 3 + 20)
        self.warm_own(c, port, names[-1])
        self.warm_own(c, port, "keep")
        dropped = self.metric(
            'rankd_read_cache_invalidations_total{source="redis"}', port)
        subprocess.run([*rcli, "DEL", "rk:{keep}:z", "rk:{keep}:t"],
                       check=True, capture_output=True)
        wait_for("Redis's invalidation of keep", lambda: self.metric(
            'rankd_read_cache_invalidations_total{source="redis"}', port)
            > dropped and c.GetTopN(GetTopNRequest(board="keep", n=10)) == [])

    def test_rotations_miss_no_change(self):
        """The tracked set rotating all along (a reader of ever new board
        names, --read-cache-tracked-boards 20) while another rankd writes a
        board read all along here: every write is seen here within 0.5 s,
        so Redis reported it (unreported, the cached page would stay up to
        its 1 s age bound), and the set did rotate meanwhile."""
        c, port, rcli = self.private("[defaults]\nread_cache=tracked\n",
                                     "--read-cache-tracked-boards", "20")
        w, _ = self.another()
        w.Update(set_to("keep", "a", 0, "rot-0"))
        self.warm_own(c, port, "keep")
        rotations = self.metric("rankd_read_cache_tracked_rotations_total",
                                port)
        sessions = self.metric("rankd_read_cache_tracking_sessions_total",
                               port)
        hits = self.metric("rankd_read_cache_hits_total", port)
        done = threading.Event()

        def reader():
            r, t = connect(port)
            k = 0
            while not done.is_set():
                # Never more than 3 boards read since keep: it stays among
                # the 10 a rotation keeps.
                self.read_boards(port, [f"rot{k + i}" for i in range(3)])
                r.GetTopN(GetTopNRequest(board="keep", n=10))
                k += 3
            t.close()
        th = threading.Thread(target=reader)
        th.start()
        slowest = 0.0
        try:
            for i in range(1, 101 if not WRAPPER else 21):
                w.Update(set_to("keep", "a", i, f"rot-{i}"))
                slowest = max(slowest, wait_for(
                    f"write {i} of keep", lambda: self.top(
                        "keep", client=c) == [("a", i)]))
        finally:
            done.set()
            th.join()
        rotated = self.metric("rankd_read_cache_tracked_rotations_total",
                              port) - rotations
        hits = self.metric("rankd_read_cache_hits_total", port) - hits
        print(f"\n{rotated:.0f} rotations, {hits:.0f} hits; slowest write "
              f"seen after {slowest * 1000:.1f} ms", file=sys.stderr)
        self.assertEqual(self.metric(
            "rankd_read_cache_tracking_sessions_total", port), sessions)
        self.assertGreater(rotated, 0)
        self.assertLess(slowest, 0.5)
        self.assertLessEqual(
            self.metric("rankd_read_cache_tracked_prefixes", port), 20)

    def test_sharded_board_fits_after_rotation(self):
        """--read-cache-tracked-boards 10 full of boards just read, then a
        board of 8 shards (9 prefixes, more than the half a rotation
        keeps): the rotation makes room for it, it is cached, and reading
        it alone rotates nothing more."""
        c, port, _ = self.private(
            "[defaults]\nread_cache=tracked\n\n[board big]\nshards=8\n",
            "--read-cache-tracked-boards", "10")
        c.Update(set_to("big", "a", 1, "big-1"))
        self.warm_own(c, port, "first")
        self.read_boards(port, [f"fill{i}" for i in range(30)])
        self.warm_own(c, port, "big")
        rotations = self.metric("rankd_read_cache_tracked_rotations_total",
                                port)
        for _ in range(50):
            self.assertEqual(self.top("big", client=c), [("a", 1)])
        self.assertEqual(self.metric(
            "rankd_read_cache_tracked_rotations_total", port), rotations)

    def test_lost_tracking_with_many_boards_keeps_updates(self):
        """5,000 tracked boards read, then the invalidation connection
        killed while updates run, with --redis-timeout 0.3: the new session
        registers the tracked set in commands Redis runs quickly, every
        update is answered, and the session is back up."""
        c, port, rcli = self.private("[defaults]\nread_cache=tracked\n",
                                     "--redis-timeout", "0.3")
        c.Update(set_to("base", "a", 1, "base-1"))
        self.warm_own(c, port, "base")
        self.read_boards(port, [f"lost{i}" for i in range(5000 // MANY)])
        wait_for("the tracked set to fill",
                 lambda: self.prefixes(rcli) >= 50)
        sessions = self.metric("rankd_read_cache_tracking_sessions_total",
                               port)
        done, failures, took, count = threading.Event(), [], [0.0], [0]

        def updates():
            u, t = connect(port)
            i = 0
            while not done.is_set():
                i += 1
                begin = time.monotonic()
                try:
                    u.Update(set_to("upd", "m", i, f"lost-upd-{i}"))
                except Exception as e:  # reported by the test
                    failures.append(repr(e))
                took[0] = max(took[0], time.monotonic() - begin)
                count[0] += 1
            t.close()
        th = threading.Thread(target=updates)
        th.start()
        try:
            wait_for("updates to run", lambda: count[0] > 50)
            for line in subprocess.run(
                    [*rcli, "CLIENT", "LIST"], check=True, capture_output=True,
                    text=True).stdout.splitlines():
                if "name=rankd-invalidations" in line:
                    subprocess.run([*rcli, "CLIENT", "KILL", "ID",
                                    line.split("id=")[1].split()[0]],
                                   check=True, capture_output=True)
            wait_for("a new tracking session", lambda: self.metric(
                "rankd_read_cache_tracking_sessions_total", port) > sessions
                and self.metric("rankd_read_cache_tracking_up", port) == 1)
            after = count[0]
            wait_for("more updates", lambda: count[0] > after + 200)
        finally:
            done.set()
            th.join()
            print(f"\nkilled with {self.prefixes(rcli)} prefixes: {count[0]} "
                  f"updates, {len(failures)} failed, slowest "
                  f"{took[0] * 1000:.0f} ms", file=sys.stderr)
        self.assertEqual(failures[:3], [])
        self.warm_own(c, port, "base")

    def zrange_calls(self):
        stats = self.rcli("INFO", "commandstats")
        for line in stats.splitlines():
            if line.startswith("cmdstat_zrange:"):
                return int(line.split("calls=")[1].split(",")[0])
        return 0

    def test_concurrent_misses_share_one_read(self):
        """After each change of the board, 64 reads of the same page arrive
        at once (4 connections, 16 sent before any answer is read): the
        reads that miss together wait for one read of Redis (one per worker
        of rankd), not one each."""
        clients = [corked_client(self.port) for _ in range(4)]
        self.client.Update(set_to("herd", "h", 0, "herd-0"))
        self.warm("herd")
        rounds, depth = 20, 16
        before = self.zrange_calls()
        for i in range(1, rounds + 1):
            self.client.Update(set_to("herd", "h", i, f"herd-{i}"))
            for c, cork in clients:
                for _ in range(depth):
                    c.send_GetTopN(GetTopNRequest(board="herd", n=10))
                cork.release()
            for c, _ in clients:
                for _ in range(depth):
                    page = c.recv_GetTopN()
                    self.assertEqual([(e.member, e.score) for e in page],
                                     [("h", i)])
        reads = self.zrange_calls() - before
        for _, cork in clients:
            cork.inner.close()
        print(f"\n{rounds} changes x {len(clients) * depth} reads at once: "
              f"{reads} reads of Redis", file=sys.stderr)
        # Each change can cost a read per worker twice: rankd drops the page
        # when the update is answered, and again when Redis's invalidation of
        # the same write arrives, which may come after the reads began (it
        # does under valgrind). Without the flights: ~30 a change.
        self.assertLessEqual(reads, rounds * 8)

    def test_uncached_board_never_hits(self):
        self.client.Update(set_to("plain", "p", 1, "plain-1"))
        hits = self.metric("rankd_read_cache_hits_total")
        misses = self.metric("rankd_read_cache_misses_total")
        for _ in range(20):
            self.top("plain")
        self.assertEqual(self.metric("rankd_read_cache_hits_total"), hits)
        self.assertEqual(self.metric("rankd_read_cache_misses_total"), misses)

    def test_memory_bound(self):
        """--read-cache-bytes: many pages, and the cache stays under it."""
        proc, port = self.start_rankd("--read-cache-bytes", "20000")
        try:
            c, t = connect(port)
            for i in range(50):
                c.Update(set_to("bound", f"b{i}", i, f"bound-{i}"))
            # A tracked board is cached once its tracking session, which
            # its first read starts, is up: before, nothing is a hit.
            c.GetTopN(GetTopNRequest(board="bound", n=1))
            wait_for("the tracking session", lambda: self.metric(
                "rankd_read_cache_tracking_up", port) == 1)
            for _ in range(3):
                for n in range(1, 51):
                    c.GetTopN(GetTopNRequest(board="bound", n=n))
            # A sweep larger than the bound evicts each page before it
            # comes again; one page read again is a hit.
            for _ in range(3):
                c.GetTopN(GetTopNRequest(board="bound", n=5))
            t.close()
            self.assertLessEqual(
                self.metric("rankd_read_cache_bytes", port), 20000)
            self.assertGreater(
                self.metric("rankd_read_cache_evictions_total", port), 0)
            self.assertGreater(
                self.metric("rankd_read_cache_hits_total", port), 0)
        finally:
            self.stop(proc, port)

    def test_model_readers_and_writers(self):
        """8 readers and 2 writers through one rankd for MODEL_SECONDS:
        no read returns a state older than the last update acknowledged
        before that read began."""
        acked = {}  # member -> the last value acknowledged
        best = [0]  # the highest value acknowledged on the board
        lock = threading.Lock()
        errors = []
        stop = time.monotonic() + MODEL_SECONDS
        reads = [0]

        def writer(k):
            c, t = connect(self.port)
            value = 0
            try:
                while time.monotonic() < stop:
                    value += 1
                    m = f"w{k}-{value % 20}"
                    v = value * 2 + k
                    c.Update(set_to("model", m, v, f"model-{k}-{value}"))
                    with lock:
                        acked[m] = v
                        best[0] = max(best[0], v)
            except Exception as e:  # reported by the test
                errors.append(e)
            t.close()

        def reader(k):
            c, t = connect(self.port)
            rnd = random.Random(k)
            try:
                while time.monotonic() < stop:
                    if rnd.random() < 0.5:
                        with lock:
                            floor = best[0]
                        page = c.GetTopN(GetTopNRequest(board="model", n=10))
                        top = page[0].score if page else 0
                        if top < floor:
                            errors.append(f"top {top} < acknowledged {floor}")
                    else:
                        m = f"w{rnd.randrange(2)}-{rnd.randrange(20)}"
                        with lock:
                            floor = acked.get(m)
                        try:
                            got = c.GetRank(GetRankRequest(
                                board="model", member=m)).score
                        except NotFound:
                            got = None
                        if floor is not None and (got is None or got < floor):
                            errors.append(f"{m}: {got} < acknowledged {floor}")
                    reads[0] += 1
            except Exception as e:  # reported by the test
                errors.append(e)
            t.close()

        hits = self.metric("rankd_read_cache_hits_total")
        threads = ([threading.Thread(target=writer, args=(k,))
                    for k in range(2)]
                   + [threading.Thread(target=reader, args=(k,))
                      for k in range(8)])
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors[:5], [])
        self.assertGreater(reads[0], 100)
        self.assertGreater(self.metric("rankd_read_cache_hits_total"), hits)


if __name__ == "__main__":
    unittest.main(verbosity=2)
