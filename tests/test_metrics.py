"""rankd's HTTP port: /metrics counts exactly what clients did, /healthz
follows Redis going away and coming back, the port is off unless asked.

Usage: test_metrics.py RANKD IDL
Starts its own redis-server and rankd processes on free loopback ports.
RANKD_TEST_WRAPPER runs rankd under a wrapper (valgrind).
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
import unittest

RANKD, IDL = os.path.abspath(sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rankd_http  # noqa: E402
from rankd_http import get, start_rankd, start_redis, stop, wait_for  # noqa
from servers import request_id_records  # noqa: E402

STUBS = rankd_http.load_stubs(IDL)

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402
from ranking import Ranking  # noqa: E402
from ranking.ttypes import (  # noqa: E402
    CountRequest, GetMemberDataRequest, GetRankRequest, GetTopNRequest,
    InvalidArgument, NotFound, Unavailable, UpdateBatchRequest,
    UpdateMode as Mode, UpdateRequest)

METHODS = ["Update", "GetRank", "GetTopN", "GetAround", "GetRanks", "Remove",
           "Count", "CountBetween", "GetPercentile", "GetScoreAtPercentile",
           "Sample", "SetMemberData", "GetMemberData", "UpdateBatch"]
OUTCOMES = ["ok", "invalid", "not_found", "unavailable", "internal"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse(text):
    """{(name, frozenset(labels)): value}, checking the exposition format:
    every sample belongs to a family declared by # HELP and # TYPE."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or types.get(family) == "histogram", \
            f"{name} has no # TYPE"
        pairs = LABEL.findall(labels or "")
        assert ",".join(f'{k}="{v}"' for k, v, _ in pairs) == (labels or ""), \
            f"bad labels: {labels!r}"
        key = (name, frozenset((k, v) for k, v, _ in pairs))
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(value)
    return samples, types


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def calls_counted(samples):
    return sum(v for (name, _), v in samples.items()
               if name == "rankd_requests_total")


def stopped(pid):
    """Whether every thread of pid is stopped (state T in /proc)."""
    tasks = os.listdir(f"/proc/{pid}/task")
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue  # a thread that ended
        if state not in ("T", "t"):
            return False
    return bool(tasks)


@contextmanager
def paused(pid):
    """rankd stopped for the block: SIGSTOP takes effect when each thread
    is next scheduled, so wait until all are stopped before sending, or a
    thread still running serves the first calls in turns of their own."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for("rankd stopped", lambda: stopped(pid))
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def connect(port):
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(60000)
    transport = TTransport.TFramedTransport(sock)
    transport.open()
    return Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)), transport


class Served(unittest.TestCase):
    """A redis-server and a rankd with --metrics-listen, of the class's own."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-metrics-")
        cls.redis, cls.redis_port = start_redis(cls.dir)
        cls.rankd, cls.port, cls.http = start_rankd(
            RANKD, cls.dir, cls.redis_port, ["--io-threads", "2"])

    @classmethod
    def tearDownClass(cls):
        status = stop(cls.rankd, cls.dir, cls.port)
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)
        assert status == 0, f"rankd exited with {status} on SIGTERM"

    def scrape(self):
        status, ctype, body = get(self.http, "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        return parse(body)[0]

    def commands(self):
        """Calls of each command Redis ran, from INFO commandstats."""
        stats = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "INFO", "commandstats"],
            check=True, capture_output=True, text=True).stdout
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r"^cmdstat_(\w+):calls=(\d+)", stats, re.M)}

class CountersTest(Served):

    def test_counters_are_exact(self):
        before = self.scrape()
        # Every family is there, at zero, before any call.
        for m in METHODS:
            for o in OUTCOMES:
                self.assertEqual(value(before, "rankd_requests_total",
                                       method=m, outcome=o), 0)
            self.assertEqual(value(before,
                                   "rankd_request_duration_seconds_count",
                                   method=m), 0)
        self.assertEqual(value(before, "rankd_redis_up",
                               node=f"127.0.0.1:{self.redis_port}"), 1)
        # servers.start's probe of the Thrift port was a connection too:
        # wait until rankd has closed it.
        wait_for("no open connection",
                 lambda: value(self.scrape(), "rankd_connections_open") == 0)
        opened = value(self.scrape(), "rankd_connections_total")

        c, t = connect(self.port)
        b = "metrics-board"
        for i in range(5):
            c.Update(UpdateRequest(board=b, member=f"m{i}", value=i * 10,
                                   request_id=f"r{i}"))
        for _ in range(2):
            with self.assertRaises(InvalidArgument):
                c.Update(UpdateRequest(board=b, member="x" * 257, value=1,
                                       request_id="bad"))
        for _ in range(3):
            self.assertEqual(
                c.GetRank(GetRankRequest(board=b, member="m4")).rank, 1)
        for _ in range(2):
            with self.assertRaises(NotFound):
                c.GetRank(GetRankRequest(board=b, member="nobody"))
        for _ in range(4):
            self.assertEqual(len(c.GetTopN(
                GetTopNRequest(board=b, n=10, with_data=True))), 5)
        with self.assertRaises(InvalidArgument):
            c.GetTopN(GetTopNRequest(board=b, n=0))
        self.assertEqual(c.Count(CountRequest(board=b)), 5)

        expected = {("Update", "ok"): 5, ("Update", "invalid"): 2,
                    ("GetRank", "ok"): 3, ("GetRank", "not_found"): 2,
                    ("GetTopN", "ok"): 4, ("GetTopN", "invalid"): 1,
                    ("Count", "ok"): 1}
        # A call is counted just after its reply is sent: the last one may
        # still be on its way.
        s = wait_for("every call counted", lambda: next(
            (s for s in [self.scrape()]
             if calls_counted(s) >= sum(expected.values())), None))
        for m in METHODS:
            calls = 0
            for o in OUTCOMES:
                n = expected.get((m, o), 0)
                calls += n
                self.assertEqual(value(s, "rankd_requests_total", method=m,
                                       outcome=o), n, (m, o))
            count = value(s, "rankd_request_duration_seconds_count", method=m)
            self.assertEqual(count, calls, m)
            buckets = sorted(
                ((float(dict(k[1])["le"]), v) for k, v in s.items()
                 if k[0] == "rankd_request_duration_seconds_bucket"
                 and dict(k[1])["method"] == m))
            self.assertGreaterEqual(len(buckets), 10)
            self.assertEqual(buckets[-1], (float("inf"), calls), m)
            counts = [v for _, v in buckets]
            self.assertEqual(counts, sorted(counts), f"{m}: not cumulative")
            total = value(s, "rankd_request_duration_seconds_sum", method=m)
            self.assertEqual(total > 0, calls > 0, m)
            self.assertLess(total, 60 * max(calls, 1))

        self.assertEqual(value(s, "rankd_connections_open"), 1)
        self.assertEqual(value(s, "rankd_connections_total"), opened + 1)
        # Declared and a byte count (test_crowd.py watches it for leaks).
        self.assertGreaterEqual(value(s, "rankd_heap_in_use_bytes"), 0)
        node = f"127.0.0.1:{self.redis_port}"
        trips = value(s, "rankd_redis_round_trips_total", node=node)
        # Every successful call went to Redis at least once; refused
        # arguments never did.
        self.assertGreaterEqual(trips, 5 + 3 + 2 + 4 + 1)
        self.assertEqual(value(s, "rankd_redis_errors_total", node=node), 0)
        self.assertEqual(value(s, "rankd_redis_batch_size_sum", node=node),
                         trips)
        writes = value(s, "rankd_redis_batch_size_count", node=node)
        self.assertTrue(0 < writes <= trips, (writes, trips))
        self.assertEqual(value(s, "rankd_redis_batch_size_bucket", node=node,
                               le="+Inf"), writes)

        # A second connection, then closed: the gauge follows, the counter
        # only goes up.
        c2, t2 = connect(self.port)
        self.assertEqual(c2.Count(CountRequest(board=b)), 5)
        s = self.scrape()
        self.assertEqual(value(s, "rankd_connections_open"), 2)
        self.assertEqual(value(s, "rankd_connections_total"), opened + 2)
        t2.close()
        t.close()
        wait_for("both connections closed",
                 lambda: value(self.scrape(), "rankd_connections_open") == 0)
        s = wait_for("every call counted", lambda: next(
            (s for s in [self.scrape()]
             if calls_counted(s) >= sum(expected.values()) + 1), None))
        self.assertEqual(value(s, "rankd_connections_total"), opened + 2)
        self.assertEqual(value(s, "rankd_requests_total", method="Count",
                               outcome="ok"), 2)

    def test_unknown_paths_and_methods(self):
        status, _, body = get(self.http, "/nothing-here")
        self.assertEqual((status, body), (404, "not found\n"))
        self.assertEqual(get(self.http, "/metrics/extra")[0], 404)
        self.assertEqual(get(self.http, "/metrics", method="POST")[0], 405)
        self.assertEqual(get(self.http, "/healthz", method="DELETE")[0], 405)
        status, ctype, _ = get(self.http, "/")
        self.assertEqual((status, ctype), (200, "text/html; charset=utf-8"))


class HealthTest(Served):

    def health(self):
        return get(self.http, "/healthz")

    def test_health_follows_redis(self):
        node = f"127.0.0.1:{self.redis_port}"
        self.assertEqual(self.health(), (200, "text/plain; charset=utf-8",
                                         "ok\n"))
        c, t = connect(self.port)
        before = self.scrape()

        self.redis.terminate()
        self.assertEqual(self.redis.wait(30), 0)
        status, _, body = wait_for(
            "/healthz 503",
            lambda: next((h for h in [self.health()] if h[0] == 503), None))
        self.assertEqual(body, f"unavailable: Redis {node} unreachable\n")
        self.assertEqual(value(self.scrape(), "rankd_redis_up", node=node), 0)
        # Calls answer Unavailable, and are counted so.
        for _ in range(3):
            with self.assertRaises(Unavailable):
                c.GetRank(GetRankRequest(board="health-board", member="m"))
        s = wait_for("every call counted", lambda: next(
            (s for s in [self.scrape()]
             if calls_counted(s) >= calls_counted(before) + 3), None))
        self.assertEqual(
            value(s, "rankd_requests_total", method="GetRank",
                  outcome="unavailable")
            - value(before, "rankd_requests_total", method="GetRank",
                    outcome="unavailable"), 3)
        self.assertGreaterEqual(
            value(s, "rankd_redis_errors_total", node=node)
            - value(before, "rankd_redis_errors_total", node=node), 3)

        # Redis again, on the same port.
        self.__class__.redis, _ = start_redis(self.dir, self.redis_port)
        wait_for("/healthz 200", lambda: self.health() == (
            200, "text/plain; charset=utf-8", "ok\n"))
        self.assertEqual(value(self.scrape(), "rankd_redis_up", node=node), 1)
        c.Update(UpdateRequest(board="health-board", member="m", value=1,
                               request_id="after"))
        self.assertEqual(c.GetRank(
            GetRankRequest(board="health-board", member="m")).score, 1)
        t.close()


class HostileHttpTest(Served):
    """What an attack on the HTTP port found."""

    def test_nul_in_a_query_is_refused(self):
        # board=a%00b read board a (C strings stop at the NUL).
        c, t = connect(self.port)
        c.Update(UpdateRequest(board="a", member="m", value=1,
                               request_id="nul-1"))
        t.close()
        self.assertEqual(get(self.http, "/api/top?board=a")[0], 200)
        for query in ("board=a%00b", "board=a&n=5%00x",
                      "board=a&periods_back=0%00"):
            status, ctype, body = get(self.http, "/api/top?" + query)
            self.assertEqual(status, 400, query)
            self.assertIn("NUL", body)
            self.assertNotIn('"entries"', body)

    def test_refused_connections_log_once_a_second(self):
        # Past 64 connections each new one is refused; one log line each
        # (344 in 2 s) flooded the log.
        log = os.path.join(self.dir, f"log-{self.port}")

        def lines():
            with open(log, encoding="utf-8", errors="replace") as f:
                return sum(1 for line in f if "http:" in line)
        before = lines()
        held = []
        start = time.monotonic()
        try:
            for _ in range(64 + 200):
                s = socket.create_connection(("127.0.0.1", self.http))
                held.append(s)
        finally:
            for s in held:
                s.close()
        elapsed = time.monotonic() - start
        # Refusals happened (the 265th connection could not be served)...
        wait_for("a refusal logged", lambda: lines() > before)
        # ...and at most one line a second was written for them.
        self.assertLessEqual(lines() - before, int(elapsed) + 2)


class UpdateModel:
    """Update's rules on a board without options: scores per member and
    what each request id was used for."""

    def __init__(self):
        self.scores, self.used = {}, {}

    def apply(self, member, mode, value, rid):
        current = self.scores.get(member)
        if rid in self.used:
            if self.used[rid] != (member, mode, value):
                return ("invalid", "request_id")
            return ("ok", False, current)
        self.used[rid] = (member, mode, value)
        if mode == Mode.INCREMENT:
            new = (current or 0) + value
        elif mode == Mode.BEST and current is not None:
            new = max(current, value)
        else:
            new = value
        self.scores[member] = new
        return ("ok", True, new)


class BatchedUpdatesTest(Served):
    """Updates of one board queued together leave rankd in one script call
    (per worker), and each keeps the result it has when sent alone."""

    CONNECTIONS = 4  # x RANK_CONN_MAX_CALLS (16) calls in flight each

    @staticmethod
    def calls(board, c):
        """Connection c's 16 updates, on members of its own, in the order
        sent: retries, request-id reuse, a refused range and ties."""
        m, base = f"m{c}", c * 1000
        big = 2**53 - 1
        return [
            (UpdateRequest(board, m, base + 10, f"r{c}-1", Mode.SET), None),
            (UpdateRequest(board, m, 5, f"r{c}-2", Mode.INCREMENT), None),
            # A retry: not applied again.
            (UpdateRequest(board, m, 5, f"r{c}-2", Mode.INCREMENT), None),
            # Its request id again with another value: refused.
            (UpdateRequest(board, m, 6, f"r{c}-2", Mode.INCREMENT), "request_id"),
            (UpdateRequest(board, m, base + 1, f"r{c}-3", Mode.BEST), None),
            (UpdateRequest(board, m, base + 99, f"r{c}-4", Mode.BEST), None),
            # Out of range: refused, and its request id not used up...
            (UpdateRequest(board, m, big, f"r{c}-5", Mode.INCREMENT), "outside"),
            # ...so it applies when sent again with a value in range.
            (UpdateRequest(board, m, 1, f"r{c}-5", Mode.INCREMENT), None),
            (UpdateRequest(board, f"{m}-b", base + 100, f"r{c}-6",
                           Mode.SET, data={"k": f"v{c}"}), None),
            (UpdateRequest(board, f"{m}-b", 0, f"r{c}-7", Mode.INCREMENT), None),
            (UpdateRequest(board, f"{m}-b", 0, f"r{c}-7", Mode.INCREMENT), None),
            (UpdateRequest(board, f"{m}-c", base + 100, f"r{c}-8", Mode.SET),
             None),
            (UpdateRequest(board, f"{m}-c", base + 100, f"r{c}-8", Mode.SET),
             None),
            (UpdateRequest(board, f"{m}-c", base + 100, f"r{c}-9", Mode.SET),
             None),
            (UpdateRequest(board, f"{m}-d", -5 - c, f"r{c}-10"), None),
            (UpdateRequest(board, f"{m}-d", -5 - c, f"r{c}-10", Mode.SET),
             "request_id"),
        ]

    @staticmethod
    def outcome(client, request):
        try:
            r = client.Update(request)
            return ("ok", r.applied, r.score)
        except InvalidArgument as e:
            return ("invalid", e.message.replace(request.board, "B"))

    @staticmethod
    def received(client):
        try:
            r = client.recv_Update()
            return ("ok", r.applied, r.score)
        except InvalidArgument as e:
            return ("invalid", e.message)

    def trips(self):
        return value(self.scrape(), "rankd_redis_round_trips_total",
                     node=f"127.0.0.1:{self.redis_port}")

    def test_concurrent_updates_share_script_calls(self):
        together, alone = "batch-together", "batch-alone"
        n = self.CONNECTIONS
        conns = [connect(self.port) for _ in range(n)]
        try:
            # Each update alone: one call answered before the next is sent.
            want = [[self.outcome(conns[c][0], r)
                     for r, _ in self.calls(alone, c)] for c in range(n)]
            for c in range(n):
                for (r, refused), got in zip(self.calls(alone, c), want[c]):
                    self.assertEqual(got[0], "invalid" if refused else "ok",
                                     (r, got))
                    if refused:
                        self.assertIn(refused, got[1])
            # The board's layout is checked once: a first update (the
            # lowest score, so it leaves the others' ranks alone).
            conns[0][0].Update(UpdateRequest(together, "warm", -10**9, "warm"))
            before = self.trips()
            # All 64 at once: rankd is stopped while they are sent, so it
            # reads them in one turn of its loop.
            with paused(self.rankd.pid):
                for c in range(n):
                    for r, _ in self.calls(together, c):
                        conns[c][0].send_Update(r)
            got = [[self.received(conns[c][0]) for _ in range(16)]
                   for c in range(n)]
            sent = n * 16
            trips = self.trips() - before
            sys.stderr.write(f"{sent} concurrent updates: {trips:.0f} "
                             "Redis round trips\n")
            self.assertLess(trips, sent)
            for c in range(n):
                self.assertEqual(
                    [tuple(x.replace(together, "B") if isinstance(x, str)
                           else x for x in g) for g in got[c]],
                    want[c], f"connection {c}")
            # The boards are the same, member data included.
            top = [(e.member, e.score, e.rank) for e in
                   conns[0][0].GetTopN(GetTopNRequest(
                       board=together, n=100, with_data=True))
                   if e.member != "warm"]
            ref = [(e.member, e.score, e.rank) for e in
                   conns[0][0].GetTopN(GetTopNRequest(
                       board=alone, n=100, with_data=True))]
            self.assertEqual(top, ref)
            for c in range(n):
                self.assertEqual(
                    conns[0][0].GetMemberData(GetMemberDataRequest(
                        board=together, member=f"m{c}-b")),
                    {"k": f"v{c}"})
        finally:
            for _, t in conns:
                t.close()


    def test_burst_sizes_a_new_layout(self):
        """A script call of many updates on a new board opens its layout of
        request-id record hashes sized for them (60 updates: 2 hashes of
        32), so a burst fills no smaller layout first; every request id is
        still recognised."""
        c = connect(self.port)
        try:
            board = "burst-layout"
            reqs = [UpdateRequest(board, f"m{i}", 1, f"b{i}", Mode.INCREMENT)
                    for i in range(60)]
            first = c[0].UpdateBatch(UpdateBatchRequest(requests=reqs))
            again = c[0].UpdateBatch(UpdateBatchRequest(requests=reqs))
        finally:
            c[1].close()
        self.assertTrue(all(r.response.applied for r in first.results))
        self.assertFalse(any(r.response.applied for r in again.results))
        meta = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "HGETALL",
             f"rk:{{{board}}}:q"], capture_output=True, text=True,
            check=True).stdout.split()
        fields = dict(zip(meta[::2], meta[1::2]))
        self.assertEqual(fields.get("s"), "2", fields)
        self.assertNotIn("o", fields)

    def test_batches_match_one_by_one(self):
        """Rounds of 4 x 16 updates sent while rankd is stopped (so they
        form batches), with retries and reuses of earlier request ids, across
        the growth of the layout of record hashes (1 hash to 32) and the
        move of records it starts: every answer and the final scores
        are those of the same calls sent one by one."""
        rand = random.Random(18)
        together, alone = "model-together", "model-alone"
        n = self.CONNECTIONS
        conns = [connect(self.port) for _ in range(n)]
        sent = [[] for _ in range(n)]  # each connection's calls so far
        model = UpdateModel()
        try:
            # One update alone first: the layout of request-id records opens
            # with one hash, as a quiet board's does (a batch opens it sized
            # for its updates), so that the rounds grow it.
            for board in (together, alone):
                conns[0][0].Update(UpdateRequest(board, "opener", 1,
                                                 "opener", Mode.SET))
            for _ in range(30):
                rounds = []
                for c in range(n):
                    calls = []
                    for _ in range(16):
                        if sent[c] and rand.random() < 0.25:
                            # An earlier call of this connection again: a
                            # retry, or its request id with another value.
                            old = rand.choice(sent[c])
                            value = old[2] + (rand.random() < 0.3)
                            call = (old[0], old[1], value, old[3])
                        else:
                            rid = f"c{c}-{len(sent[c])}"
                            call = (f"m{c}-{rand.randrange(4)}",
                                    rand.choice([Mode.INCREMENT, Mode.BEST,
                                                 Mode.SET]),
                                    rand.randrange(-50, 100), rid)
                        sent[c].append(call)
                        calls.append(call)
                    rounds.append(calls)
                want = [[self.outcome(conns[c][0], UpdateRequest(
                    alone, m, v, rid, mode)) for m, mode, v, rid in calls]
                    for c, calls in enumerate(rounds)]
                # One by one, rankd answers as the model of its rules does.
                for c, calls in enumerate(rounds):
                    for call, answer in zip(calls, want[c]):
                        expected = model.apply(*call)
                        if expected[0] == "invalid":
                            self.assertEqual(answer[0], "invalid", call)
                            self.assertIn(expected[1], answer[1])
                        else:
                            self.assertEqual(answer, expected, call)
                with paused(self.rankd.pid):
                    for c, calls in enumerate(rounds):
                        for m, mode, v, rid in calls:
                            conns[c][0].send_Update(
                                UpdateRequest(together, m, v, rid, mode))
                got = [[self.received(conns[c][0]) for _ in range(16)]
                       for c in range(n)]
                for c in range(n):
                    self.assertEqual(
                        [tuple(x.replace(together, "B")
                               if isinstance(x, str) else x for x in g)
                         for g in got[c]], want[c], f"connection {c}")
            final = {e.member: e.score for e in conns[0][0].GetTopN(
                GetTopNRequest(board=together, n=100))}
            ref = {e.member: e.score for e in
                   conns[0][0].GetTopN(GetTopNRequest(board=alone, n=100))}
            self.assertEqual(final, ref)
            self.assertEqual(len(final), 4 * n + 1)
        finally:
            for _, t in conns:
                t.close()

    def test_concurrent_ranks_share_reads(self):
        """GetRanks of one board queued together read their members'
        prefixes in one HMGET, then their values again with their ranks in
        one transaction (MULTI, HMGET, a ZRANK each, EXEC; per worker),
        without a script, and each gets the answer it gets alone."""
        board, n = "batch-ranks", self.CONNECTIONS
        conns = [connect(self.port) for _ in range(n)]
        try:
            c0 = conns[0][0]
            for i in range(40):
                c0.Update(UpdateRequest(board, f"p{i}", i % 7, f"r{i}",
                                        Mode.SET))
            members = [f"p{i}" for i in range(48)] * 2  # 8 absent, twice
            want = []
            for m in members[:16 * n]:
                try:
                    e = c0.GetRank(GetRankRequest(board=board, member=m))
                    want.append((e.member, e.score, e.rank))
                except NotFound:
                    want.append(None)
            before = self.commands()
            with paused(self.rankd.pid):
                for i, m in enumerate(members[:16 * n]):
                    conns[i % n][0].send_GetRank(
                        GetRankRequest(board=board, member=m))
            got = [None] * (16 * n)
            for c in range(n):
                for i in range(c, 16 * n, n):
                    try:
                        e = conns[c][0].recv_GetRank()
                        got[i] = (e.member, e.score, e.rank)
                    except NotFound:
                        pass
            after = self.commands()
            ran = {c: after.get(c, 0) - before.get(c, 0)
                   for c in ("hmget", "zmscore", "zrank", "exec",
                             "evalsha")}
            sys.stderr.write(f"{16 * n} concurrent GetRanks: {ran}\n")
            self.assertEqual(got, want)
            # One HMGET and one transaction (with an HMGET of its own) per
            # worker and loop iteration: all 64 are buffered before rankd
            # runs again, and they take 2-3 iterations of its two workers
            # (before paused() waited for every thread to stop, a worker
            # still running served the first calls as they came, and up to
            # 20 iterations were seen on a loaded machine); no ZMSCORE.
            self.assertLess(ran["hmget"], 16 * n // 2)
            self.assertGreater(ran["exec"], 0)
            self.assertLessEqual(ran["exec"], ran["hmget"] - ran["exec"])
            self.assertEqual(ran["zmscore"], 0)
            # A ZRANK per member found, and no script.
            self.assertEqual(ran["zrank"], sum(w is not None for w in want))
            self.assertEqual(ran["evalsha"], 0)
        finally:
            for _, t in conns:
                t.close()


class UpdateBatchTest(Served):
    """UpdateBatch: one result per request, in order; a refused item fails
    nothing else; each item idempotent by its own request id."""

    def test_without_rank(self):
        """with_rank=false: applied as ever, the rank left unset; the
        default answers it."""
        client, t = connect(self.port)
        try:
            reqs = [UpdateRequest("ub-nr", "a", 10, "1", Mode.SET),
                    UpdateRequest("ub-nr", "b", 20, "2", Mode.SET)]
            got = client.UpdateBatch(UpdateBatchRequest(
                requests=reqs, with_rank=False)).results
            self.assertEqual([(g.response.score, g.response.applied,
                               g.response.rank) for g in got],
                             [(10, True, None), (20, True, None)])
            got = client.UpdateBatch(UpdateBatchRequest(requests=[
                UpdateRequest("ub-nr", "a", 5, "3", Mode.INCREMENT)])).results
            self.assertEqual((got[0].response.score, got[0].response.rank),
                             (15, 2))
        finally:
            t.close()

    def test_update_without_rank(self):
        """UpdateRequest.with_rank=false (1.6): Update applies as ever and
        leaves the rank unset, with no ZRANK in Redis; a retry is
        recognised the same; in an UpdateBatch that answers ranks, the
        request that says false gets none and the others theirs."""
        board = "u-nr"
        client, t = connect(self.port)
        try:
            client.Update(UpdateRequest(board, "top", 100, "0", Mode.SET))
            before = self.commands()
            got = [client.Update(UpdateRequest(
                board, "a", 10, "1", Mode.INCREMENT, with_rank=False))
                for _ in range(2)]
            after = self.commands()
            self.assertEqual([(g.score, g.applied, g.rank) for g in got],
                             [(10, True, None), (10, False, None)])
            self.assertEqual(after.get("zrank", 0), before.get("zrank", 0))
            self.assertEqual(after["zadd"] - before.get("zadd", 0), 1)
            got = client.Update(UpdateRequest(board, "a", 5, "2",
                                              Mode.INCREMENT))
            self.assertEqual((got.score, got.rank), (15, 2))
            got = client.UpdateBatch(UpdateBatchRequest(requests=[
                UpdateRequest(board, "b", 1, "3", Mode.SET, with_rank=False),
                UpdateRequest(board, "c", 200, "4", Mode.SET),
                UpdateRequest(board, "a", 5, "2", Mode.INCREMENT,
                              with_rank=True)])).results
            self.assertEqual([(g.response.score, g.response.applied,
                               g.response.rank) for g in got],
                             [(1, True, None), (200, True, 1),
                              (15, False, 3)])
        finally:
            t.close()

    def board_keys(self, board):
        """The sorted set, times and data of a board as redis-cli --csv
        prints them (binary bytes escaped), hashes sorted by field."""
        def run(*args):
            out = subprocess.run(
                ["redis-cli", "-p", str(self.redis_port), "--csv", *args],
                capture_output=True, text=True, check=True).stdout
            return re.findall(r'"((?:[^"\\]|\\.)*)"', out)

        def fields(key):
            lines = run("HGETALL", key)
            return sorted(zip(lines[::2], lines[1::2]))
        return (run("ZRANGE", f"rk:{{{board}}}:z", "0", "-1", "WITHSCORES"),
                fields(f"rk:{{{board}}}:t"), fields(f"rk:{{{board}}}:a"))

    def test_deferred_writes_match_one_by_one(self):
        """With with_rank=false, update.lua writes a script call's places
        and data once every update of it is computed (one ZREM, ZADD, HSET
        a key). Rounds of 60 updates of 5 members in one UpdateBatch --
        repeats of a member, retries, request ids reused, increments
        refused past the limit, data set and deleted, equal times -- answer
        as the same updates sent one by one, and leave the same sorted set,
        times and data."""
        rand = random.Random(21)
        together, alone = "dw-together", "dw-alone"
        big = 2**53 - 1
        sent = []
        client, t = connect(self.port)
        try:
            for _ in range(12):
                reqs = []
                for _ in range(60):
                    if sent and rand.random() < 0.2:
                        # A retry, or its request id with another value.
                        old = rand.choice(sent)
                        reqs.append(dict(old, value=old["value"]
                                         + (rand.random() < 0.3)))
                        continue
                    r = dict(member=f"m{rand.randrange(5)}",
                             value=rand.choice([rand.randrange(-50, 100),
                                                big, -big]),
                             request_id=f"r{len(sent)}",
                             mode=rand.choice([Mode.INCREMENT, Mode.BEST,
                                               Mode.SET]),
                             timestamp_ms=1700000000000 + rand.randrange(3))
                    if rand.random() < 0.3:
                        r["data"] = rand.choice([{}, {"k": str(rand.random())}])
                    sent.append(r)
                    reqs.append(r)
                want = []
                for r in reqs:
                    try:
                        u = client.Update(UpdateRequest(board=alone, **r))
                        want.append(("ok", u.score, u.applied))
                    except InvalidArgument as e:
                        want.append(("invalid", e.message))
                before = self.commands()
                got = [("ok", g.response.score, g.response.applied)
                       if g.response else
                       ("invalid", re.sub(r"^requests\[\d+\]: ", "",
                                          g.invalid.message))
                       for g in client.UpdateBatch(UpdateBatchRequest(
                           requests=[UpdateRequest(board=together, **r)
                                     for r in reqs],
                           with_rank=False)).results]
                self.assertEqual(got, want)
                after = self.commands()
                # One script call, one ZADD at most: the writes deferred.
                # (A check of the board's layout -- a worker's first write,
                # and again after a while -- sends a SET and registers the
                # board by a ZADD.)
                def delta(c):
                    return after.get(c, 0) - before.get(c, 0)
                self.assertEqual(delta("fcall"), 1)
                self.assertLessEqual(delta("zadd"), 1 + delta("set"))
            self.assertIn("invalid", [w[0] for w in want])
            together_keys = self.board_keys(together)
            self.assertEqual(together_keys, self.board_keys(alone))
            self.assertEqual(len(together_keys[1]), 5)
            self.assertGreater(len(together_keys[2]), 0)
        finally:
            t.close()

    def test_deferred_batch_on_damaged_times(self):
        """A rankless batch reads its members' times first: when that key
        holds another type, the first update names it, the others are not
        applied, nothing is written and no request id is used up."""
        board = "dw-damaged"
        cli = ["redis-cli", "-p", str(self.redis_port)]
        subprocess.run(cli + ["SET", f"rk:{{{board}}}:t", "x"], check=True,
                       capture_output=True)
        reqs = [UpdateRequest(board, f"m{i}", i + 1, f"d{i}", Mode.SET)
                for i in range(3)]
        client, t = connect(self.port)
        try:
            got = client.UpdateBatch(UpdateBatchRequest(
                requests=reqs, with_rank=False)).results
            self.assertEqual([g.response for g in got], [None] * 3)
            self.assertIn(f"requests[0]: damaged data: key rk:{{{board}}}:t "
                          "holds a string "
                          "where rankd keeps a hash (member times)",
                          got[0].unavailable.message)
            for g in got[1:]:
                self.assertIn("not applied: an update before it in the same "
                              "batch met", g.unavailable.message)
            exists = subprocess.run(
                cli + ["EXISTS", f"rk:{{{board}}}:z", f"rk:{{{board}}}:a"],
                check=True, capture_output=True, text=True).stdout
            self.assertEqual(exists.strip(), "0")
            subprocess.run(cli + ["DEL", f"rk:{{{board}}}:t"], check=True,
                           capture_output=True)
            got = client.UpdateBatch(UpdateBatchRequest(
                requests=reqs, with_rank=False)).results
            self.assertEqual([(g.response.score, g.response.applied)
                              for g in got], [(1, True), (2, True), (3, True)])
        finally:
            t.close()

    def test_results_in_order(self):
        client, t = connect(self.port)
        try:
            reqs = [
                UpdateRequest("ub-a", "x", 10, "1", Mode.SET),
                UpdateRequest("ub-a", "x", 5, "2", Mode.INCREMENT),
                UpdateRequest("ub-b", "y", 7, "1", Mode.SET),
                UpdateRequest("ub-a", "", 1, "3"),  # no member: refused
                UpdateRequest("ub-a", "x", 5, "2", Mode.INCREMENT),  # retry
                UpdateRequest("ub-a", "x", 6, "2", Mode.INCREMENT),  # reuse
                UpdateRequest("ub{", "x", 1, "4"),  # bad board
                UpdateRequest("ub-a", "z", 1, "5", Mode.SET,
                              data={"k": "v"}),
            ]
            got = client.UpdateBatch(UpdateBatchRequest(requests=reqs)).results
            self.assertEqual(len(got), len(reqs))
            for g in got:
                self.assertEqual(sum(x is not None for x in
                                     (g.response, g.invalid, g.unavailable)),
                                 1, g)
            self.assertEqual((got[0].response.score, got[0].response.applied,
                              got[0].response.rank), (10, True, 1))
            self.assertEqual((got[1].response.score, got[1].response.applied),
                             (15, True))
            self.assertEqual((got[2].response.score, got[2].response.rank),
                             (7, 1))
            self.assertTrue(got[3].invalid.message.startswith(
                "requests[3]: member"), got[3].invalid.message)
            self.assertEqual((got[4].response.score, got[4].response.applied),
                             (15, False))
            self.assertIn("requests[5]: request_id", got[5].invalid.message)
            self.assertTrue(got[6].invalid.message.startswith(
                "requests[6]: board"), got[6].invalid.message)
            self.assertEqual((got[7].response.score, got[7].response.rank),
                             (1, 2))
            self.assertEqual(client.GetMemberData(
                GetMemberDataRequest(board="ub-a", member="z")), {"k": "v"})
            # The same batch again: nothing applies twice, the refusals stay.
            again = client.UpdateBatch(
                UpdateBatchRequest(requests=reqs)).results
            for i, (a, b) in enumerate(zip(got, again)):
                if a.response is None:
                    self.assertEqual(a, b, i)
                else:
                    self.assertFalse(b.response.applied, i)
                    self.assertEqual(b.response.score, client.GetRank(
                        GetRankRequest(board=reqs[i].board,
                                       member=reqs[i].member)).score)
            self.assertEqual(client.GetRank(
                GetRankRequest(board="ub-a", member="x")).score, 15)
            self.assertEqual(client.Count(CountRequest(board="ub-a")), 2)
        finally:
            t.close()

    def test_size_limits(self):
        client, t = connect(self.port)
        try:
            for n in (0, 1001):
                reqs = [UpdateRequest("ub-size", f"m{i}", 1, f"r{i}")
                        for i in range(n)]
                with self.assertRaises(InvalidArgument) as e:
                    client.UpdateBatch(UpdateBatchRequest(requests=reqs))
                self.assertIn(f"requests: {n} updates; UpdateBatch takes "
                              "1 to 1000", e.exception.message)
            self.assertEqual(client.Count(CountRequest(board="ub-size")), 0)
            reqs = [UpdateRequest("ub-size", f"m{i}", i, f"r{i}", Mode.SET)
                    for i in range(1000)]
            got = client.UpdateBatch(UpdateBatchRequest(requests=reqs)).results
            self.assertEqual([g.response.score for g in got], list(range(1000)))
            self.assertEqual(client.Count(CountRequest(board="ub-size")), 1000)
            self.assertEqual(client.GetRank(
                GetRankRequest(board="ub-size", member="m999")).rank, 1)
        finally:
            t.close()


class BatchRequestIdTest(Served):
    """UpdateBatch with a request_id: one record for the whole batch, which
    applies at most once and all or nothing."""

    def batch(self, client, reqs, request_id, with_rank=False):
        return client.UpdateBatch(UpdateBatchRequest(
            requests=reqs, with_rank=with_rank,
            request_id=request_id)).results

    def records(self, board):
        return request_id_records(self.redis_port, board)

    def scores(self, client, board, members):
        got = {}
        for m in members:
            try:
                got[m] = client.GetRank(GetRankRequest(board, m)).score
            except NotFound:
                got[m] = None
        return got

    def test_applies_once_with_one_record(self):
        board = "brid-once"
        client, t = connect(self.port)
        try:
            reqs = [UpdateRequest(board, f"m{i}", 10 * i, f"line-{i}",
                                  Mode.SET, 1700000000000 + i,
                                  data={"n": str(i)} if i % 3 == 0 else None)
                    for i in range(250)]
            before = self.commands().get("fcall", 0)
            got = self.batch(client, reqs, "import-1")
            self.assertEqual([(g.response.score, g.response.applied,
                               g.response.rank) for g in got],
                             [(10 * i, True, None) for i in range(250)])
            # One script call, one record for the 250 updates (more than
            # the 64 a call of other updates: a batch recorded as a whole
            # is never split).
            self.assertEqual(self.commands()["fcall"] - before, 1)
            self.assertEqual(self.records(board), 1)
            # Resent: nothing applies again, each answers its place now.
            client.Update(UpdateRequest(board, "m5", 7, "live", Mode.INCREMENT))
            again = self.batch(client, reqs, "import-1")
            self.assertEqual([(g.response.score, g.response.applied)
                              for g in again],
                             [(10 * i + (7 if i == 5 else 0), False)
                              for i in range(250)])
            self.assertEqual(client.GetRank(
                GetRankRequest(board, "m249")).rank, 1)
            self.assertEqual(client.GetMemberData(GetMemberDataRequest(
                board, "m3")), {"n": "3"})
            # The updates' own ids are not recorded (as the IDL says).
            u = client.Update(UpdateRequest(board, "m1", 1, "line-1",
                                            Mode.INCREMENT))
            self.assertEqual((u.score, u.applied), (11, True))
        finally:
            t.close()

    def times(self, board):
        """The board's times hash, member=hex of its value, sorted."""
        script = ("local r = {} local a = redis.call('HGETALL', KEYS[1]) "
                  "for i = 1, #a, 2 do r[#r + 1] = a[i] .. '=' .. "
                  "a[i + 1]:gsub('.', function(c) "
                  "return string.format('%02x', c:byte()) end) end "
                  "table.sort(r) return r")
        return subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "EVAL", script, "1",
             f"rk:{{{board}}}:t"],
            capture_output=True, text=True, check=True).stdout.split()

    def test_sets_store_places_as_updates_do(self):
        """A batch of SETs recorded as a whole writes each member's place
        (prefix, then sorted-set score) as rankd packs it; an Update writes
        it in update.lua. The two agree byte for byte, and an increment
        reads an imported score back exactly, up to 2^53-1."""
        big = 2**53 - 1
        values = [0, 42, -42, 258, big, -big, 10**12 + 7]
        client, t = connect(self.port)
        try:
            reqs = [UpdateRequest("brid-packed", f"m{i}", v, f"p{i}",
                                  Mode.SET, 1700000000000 + i)
                    for i, v in enumerate(values)]
            got = self.batch(client, reqs, "packed-1")
            self.assertEqual([g.response.applied for g in got],
                             [True] * len(values))
            for i, v in enumerate(values):
                client.Update(UpdateRequest("brid-lua", f"m{i}", v, f"p{i}",
                                            Mode.SET, 1700000000000 + i))
            packed = self.times("brid-packed")
            self.assertEqual(len(packed), len(values))
            self.assertEqual(packed, self.times("brid-lua"))
            for i, v in enumerate(values):
                step = -1 if v > 0 else 1
                u = client.Update(UpdateRequest("brid-packed", f"m{i}", step,
                                                f"i{i}", Mode.INCREMENT))
                self.assertEqual((u.score, u.applied), (v + step, True))
        finally:
            t.close()

    def test_other_requests_refused(self):
        board = "brid-reuse"
        client, t = connect(self.port)
        try:
            reqs = [UpdateRequest(board, f"m{i}", i, f"r{i}", Mode.SET)
                    for i in range(5)]
            self.batch(client, reqs, "b")
            changed = list(reqs)
            changed[2] = UpdateRequest(board, "m2", 99, "r2", Mode.SET)
            for other in (changed, reqs[:4], list(reversed(reqs))):
                got = self.batch(client, other, "b")
                for i, g in enumerate(got):
                    self.assertIsNone(g.response, i)
                    self.assertIn(f"requests[{i}]: request_id: already used "
                                  "on this board for another batch",
                                  g.invalid.message)
            self.assertEqual(self.scores(client, board,
                                         [f"m{i}" for i in range(5)]),
                             {f"m{i}": i for i in range(5)})
            # Another board's batch of the same request_id is its own.
            got = self.batch(client, [UpdateRequest("brid-reuse2", "m", 1,
                                                    "r", Mode.SET)], "b")
            self.assertTrue(got[0].response.applied)
        finally:
            t.close()

    def test_all_or_nothing(self):
        """A request refused in Redis (an increment past 2^53-1) leaves the
        whole batch unapplied and unrecorded; fixed, the batch applies."""
        board = "brid-all"
        big = 2**53 - 1
        client, t = connect(self.port)
        try:
            client.Update(UpdateRequest(board, "top", big, "x", Mode.SET))
            reqs = [UpdateRequest(board, "a", 5, "1", Mode.INCREMENT,
                                  data={"k": "v"}),
                    UpdateRequest(board, "top", 1, "2", Mode.INCREMENT),
                    UpdateRequest(board, "b", 7, "3", Mode.SET)]
            records = self.records(board)
            got = self.batch(client, reqs, "all-1")
            self.assertIn("requests[1]: value: current score", got[1]
                          .invalid.message)
            for i in (0, 2):
                self.assertIn(f"requests[{i}]: not applied: requests[1] of "
                              "the same batch was refused", got[i]
                              .invalid.message)
            self.assertEqual(self.scores(client, board, ["a", "b", "top"]),
                             {"a": None, "b": None, "top": big})
            self.assertEqual(self.records(board), records)
            with self.assertRaises(NotFound):
                client.GetMemberData(GetMemberDataRequest(board, "a"))
            reqs[1] = UpdateRequest(board, "top", -1, "2", Mode.INCREMENT)
            got = self.batch(client, reqs, "all-1")
            self.assertEqual([g.response.applied for g in got], [True] * 3)
            self.assertEqual(self.scores(client, board, ["a", "b", "top"]),
                             {"a": 5, "b": 7, "top": big - 1})
            self.assertEqual(client.GetMemberData(GetMemberDataRequest(
                board, "a")), {"k": "v"})
        finally:
            t.close()

    def test_sets_on_damaged_data(self):
        """A batch of SETs recorded as a whole checks the keys it writes:
        with the member-data key holding another type, a batch that gives
        data is refused whole, naming it, with nothing written and no
        record; one that gives none applies, as its updates sent alone
        would."""
        board = "brid-damaged"
        cli = ["redis-cli", "-p", str(self.redis_port)]
        subprocess.run(cli + ["SET", f"rk:{{{board}}}:a", "x"], check=True,
                       capture_output=True)
        client, t = connect(self.port)
        try:
            with_data = [UpdateRequest(board, f"m{i}", i, f"r{i}", Mode.SET,
                                       data={"k": "v"} if i == 2 else None)
                         for i in range(3)]
            got = self.batch(client, with_data, "dmg-1")
            for g in got:
                self.assertIsNone(g.response)
                self.assertIn(f"damaged data: key rk:{{{board}}}:a holds a "
                              "string where rankd keeps a hash (member data)",
                              g.unavailable.message)
            self.assertEqual(client.Count(CountRequest(board=board)), 0)
            self.assertEqual(self.records(board), 0)
            plain = [UpdateRequest(board, f"m{i}", i, f"r{i}", Mode.SET)
                     for i in range(3)]
            got = self.batch(client, plain, "dmg-2")
            self.assertEqual([(g.response.score, g.response.applied)
                              for g in got], [(0, True), (1, True), (2, True)])
            self.assertEqual(self.records(board), 1)
        finally:
            t.close()

    def test_refused_calls_change_nothing(self):
        board = "brid-bad"
        client, t = connect(self.port)
        try:
            one = [UpdateRequest(board, "m", 1, "r", Mode.SET)]
            cases = [
                ([UpdateRequest(board, f"m{i}", 1, f"r{i}")
                  for i in range(251)], False, "b",
                 "requests: 251 updates; a batch with a request_id takes 1 "
                 "to 250"),
                (one, True, "b", "with_rank: a batch with a request_id "
                 "answers no ranks"),
                (one, False, "", "request_id: "),
                (one + [UpdateRequest("brid-other", "m", 1, "r")], False,
                 "b", "requests[1].board: 'brid-other'; a batch with a "
                 "request_id updates one board ('brid-bad')"),
            ]
            for reqs, with_rank, rid, message in cases:
                with self.assertRaises(InvalidArgument) as e:
                    self.batch(client, reqs, rid, with_rank)
                self.assertIn(message, e.exception.message)
            # A request refused by rankd: the others are not applied.
            got = self.batch(client, one + [UpdateRequest(board, "", 1, "r")]
                             + one, "b")
            self.assertIn("requests[1]: member: ", got[1].invalid.message)
            for i in (0, 2):
                self.assertIn(f"requests[{i}]: not applied: requests[1] of "
                              "the same batch was refused", got[i]
                              .invalid.message)
            self.assertEqual(client.Count(CountRequest(board=board)), 0)
            self.assertEqual(self.records(board), 0)
        finally:
            t.close()


class BatchRequestIdBoardsTest(unittest.TestCase):
    """A batch with a request_id on a board that cannot take one (sharded,
    capped, dense, or across periods) is refused whole, naming why;
    nothing changes."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-brid-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w") as f:
            f.write("[board sh]\nshards=4\n\n[board capped]\ncap=10\n\n"
                    "[board dense]\nrank=dense\n\n[board day]\n"
                    "period=daily\nretention=3\naccept_late=true\n\n"
                    "[board subs]\nsubscores=asc,desc\n\n"
                    "[board sets]\nsubscores=asc,desc\n\n"
                    "[board sets_one]\nsubscores=asc,desc\n\n"
                    "[board sets_asc]\norder=asc\nsubscores=desc,asc\n\n"
                    "[board sets_asc_one]\norder=asc\nsubscores=desc,asc\n"
                    "\n[board sets_plain]\n\n[board sets_plain_one]\n")
        cls.redis, cls.redis_port = start_redis(cls.dir)
        cls.rankd, cls.port, _ = start_rankd(
            RANKD, cls.dir, cls.redis_port, ["--config", conf])

    @classmethod
    def tearDownClass(cls):
        status = stop(cls.rankd, cls.dir, cls.port)
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)
        assert status == 0, f"rankd exited with {status} on SIGTERM"

    def test_refused(self):
        day = 86400000
        now = int(time.time() * 1000) // day * day
        cases = {
            "sh": "request_id: board 'sh' has shards",
            "capped": "request_id: board 'capped' has a cap",
            "dense": "request_id: board 'dense' has rank=dense",
        }
        client, t = connect(self.port)
        try:
            for board, message in cases.items():
                reqs = [UpdateRequest(board, f"m{i}", i, f"r{i}", Mode.SET)
                        for i in range(3)]
                with self.assertRaises(InvalidArgument) as e:
                    client.UpdateBatch(UpdateBatchRequest(
                        requests=reqs, with_rank=False, request_id="b"))
                self.assertIn(message, e.exception.message)
                self.assertEqual(client.Count(CountRequest(board=board)), 0)
            reqs = [UpdateRequest("day", "a", 1, "1", Mode.SET, now + 5),
                    UpdateRequest("day", "b", 1, "2", Mode.SET, now - day)]
            with self.assertRaises(InvalidArgument) as e:
                client.UpdateBatch(UpdateBatchRequest(
                    requests=reqs, with_rank=False, request_id="b"))
            self.assertIn("requests[1].timestamp_ms: in period ",
                          e.exception.message)
            self.assertIn("a batch with a request_id updates one period",
                          e.exception.message)
            # One period of a periodic board is fine.
            got = client.UpdateBatch(UpdateBatchRequest(
                requests=reqs[:1], with_rank=False, request_id="b")).results
            self.assertTrue(got[0].response.applied)
        finally:
            t.close()

    def batch(self, client, reqs, request_id):
        return client.UpdateBatch(UpdateBatchRequest(
            requests=reqs, with_rank=False, request_id=request_id)).results

    def keys(self, board):
        """The board's sorted set (with scores), member times and data, as
        Redis holds them."""
        def cli(*args):
            out = subprocess.run(
                ["redis-cli", "-p", str(self.redis_port), "--no-raw", *args],
                capture_output=True, check=True, text=True).stdout
            # --no-raw: one quoted element a line, its bytes escaped.
            return re.findall(r"^\s*\d+\) (.*)$", out, re.M)

        def pairs(*args):
            x = cli(*args)
            return sorted(zip(x[::2], x[1::2]))
        return (cli("ZRANGE", f"rk:{{{board}}}:z", "0", "-1", "WITHSCORES"),
                pairs("HGETALL", f"rk:{{{board}}}:t"),
                pairs("HGETALL", f"rk:{{{board}}}:a"))

    def test_sets_as_sent_match_one_by_one(self):
        """A batch with a request_id whose updates each SET another member
        is answered as sent (update.lua returns only their count): its
        answers, and what it leaves in Redis (scores at both ends of the
        range and 0, kept and new times, subscores, data set, deleted or
        left alone), are those of the same updates sent one by one, on desc
        and asc boards, with subscores and without."""
        big = 2**53 - 1
        t0 = 1700000000000
        seed = [("same", 50, [1, 2], t0, {"k": "a"}),
                ("resubs", 50, [1, 2], t0 + 1, {"k": "b"}),
                ("rescore", 50, [1, 2], t0 + 2, None),
                ("retime", 50, [1, 2], t0 + 3, {"k": "c"}),
                ("zero", 1, [0, 0], t0 + 5, None)]
        sets = [("same", 50, [1, 2], t0 + 100, None),
                ("resubs", 50, [1, 3], t0 + 101, {}),
                ("rescore", -7, [1, 2], t0 + 2, {"k": "x"}),
                ("retime", 51, [1, 2], t0 + 103, None),
                ("zero", 0, [0, 0], t0 + 105, {"z": "0"}),
                ("new", 0, [0, 0], t0 + 106, None),
                ("top", big, [9, 9], t0 + 107, {"t": "1"}),
                ("bottom", -big, [-1, -1], t0 + 108, None),
                ("neg", -12, [0, 1], t0 + 109, {})]
        client, t = connect(self.port)
        try:
            for board, alone, with_subs in (
                    ("sets", "sets_one", True),
                    ("sets_asc", "sets_asc_one", True),
                    ("sets_plain", "sets_plain_one", False)):
                def req(b, m, v, subs, ts, data, prefix):
                    return UpdateRequest(b, m, v, f"{prefix}-{m}", Mode.SET,
                                         ts, subs if with_subs else None,
                                         data)
                for b in (board, alone):
                    for e in seed:
                        client.Update(req(b, *e, "seed"))
                got = self.batch(client, [req(board, *e, "s") for e in sets],
                                 f"sets-{board}")
                one = [client.Update(req(alone, *e, "s")) for e in sets]
                self.assertEqual(
                    [(g.response.score, g.response.applied,
                      g.response.subscores) for g in got],
                    [(u.score, u.applied, u.subscores) for u in one], board)
                self.assertEqual(self.keys(board), self.keys(alone), board)
                # Sent again: applied before, each answers its place now.
                again = self.batch(client, [req(board, *e, "s")
                                            for e in sets], f"sets-{board}")
                self.assertEqual(
                    [(g.response.score, g.response.applied,
                      g.response.subscores) for g in again],
                    [(u.score, False, u.subscores) for u in one], board)
                # A member twice: the batch takes the general path, and
                # still matches.
                twice = [("new", 3, [0, 0], t0 + 200, {"n": "1"}),
                         ("top", 4, [9, 9], t0 + 201, None),
                         ("new", 3, [0, 0], t0 + 202, {})]
                got = self.batch(client, [req(board, *e, f"t{i}")
                                          for i, e in enumerate(twice)],
                                 f"twice-{board}")
                one = [client.Update(req(alone, *e, f"t{i}"))
                       for i, e in enumerate(twice)]
                self.assertEqual(
                    [(g.response.score, g.response.applied,
                      g.response.subscores) for g in got],
                    [(u.score, u.applied, u.subscores) for u in one], board)
                self.assertEqual(self.keys(board), self.keys(alone), board)
        finally:
            t.close()

    def test_answers_as_update(self):
        """UpdateBatch's answers (written without the generated structs)
        carry what Update's do: score, rank, applied, subscores; or the
        item's refusal."""
        client, t = connect(self.port)
        try:
            reqs = [UpdateRequest("subs", "a", 5, "1", Mode.SET,
                                  subscores=[1, -2]),
                    UpdateRequest("subs", "b", 5, "2", Mode.SET,
                                  subscores=[0, 9]),
                    UpdateRequest("subs", "a", 5, "1", Mode.SET,
                                  subscores=[1, -2]),
                    UpdateRequest("subs", "c", 1, "3", Mode.SET)]
            got = client.UpdateBatch(UpdateBatchRequest(requests=reqs))
            r = [g.response for g in got.results[:3]]
            self.assertEqual([(x.score, x.rank, x.applied, x.subscores)
                              for x in r],
                             [(5, 1, True, [1, -2]), (5, 1, True, [0, 9]),
                              (5, 2, False, [1, -2])])
            self.assertIsNone(got.results[3].response)
            self.assertIn("requests[3]: subscores: ",
                          got.results[3].invalid.message)
            self.assertIsNone(got.results[3].unavailable)
            alone = client.Update(UpdateRequest("subs", "a", 5, "1", Mode.SET,
                                                subscores=[1, -2]))
            self.assertEqual(alone, r[2])
        finally:
            t.close()


class ViewerConnectionTest(unittest.TestCase):
    """The viewer reads in-process: it opens no Thrift connection, and
    reads as well after rankd's idle timeout as before it."""

    def test_viewer_opens_no_connection(self):
        work = tempfile.mkdtemp(prefix="rankd-metrics-pool-")
        redis, redis_port = start_redis(work)
        try:
            rankd, port, http = start_rankd(RANKD, work, redis_port,
                                            ["--idle-timeout", "1"])
            try:
                def metric(name):
                    return value(parse(get(http, "/metrics")[2])[0], name)
                wait_for("no open connection",
                         lambda: metric("rankd_connections_open") == 0)
                opened = metric("rankd_connections_total")
                self.assertEqual(get(http, "/api/top?board=b")[0], 200)
                self.assertEqual(get(http, "/api/boards")[0], 200)
                self.assertEqual(metric("rankd_connections_open"), 0)
                self.assertEqual(metric("rankd_connections_total"), opened)
                # A connection of our own, closed by the idle timeout: the
                # viewer reads as before after it.
                with socket.create_connection(("127.0.0.1", port)):
                    wait_for("the idle connection closed by rankd",
                             lambda: metric("rankd_connections_total")
                             == opened + 1
                             and metric("rankd_connections_open") == 0)
                status, _, body = get(http, "/api/top?board=b")
                self.assertEqual(status, 200, body)
                self.assertEqual(metric("rankd_connections_total"),
                                 opened + 1)
            finally:
                self.assertEqual(stop(rankd), 0)
        finally:
            redis.terminate()
            redis.wait(30)
            shutil.rmtree(work)


def listening_ports(pid):
    """The TCP ports process pid listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


class OffByDefaultTest(unittest.TestCase):

    def test_off_unless_asked(self):
        work = tempfile.mkdtemp(prefix="rankd-metrics-off-")
        redis, redis_port = start_redis(work)
        try:
            rankd, port, _ = start_rankd(RANKD, work, redis_port,
                                         metrics=False)
            try:
                self.assertEqual(listening_ports(rankd.pid), {port})
            finally:
                self.assertEqual(stop(rankd), 0)
            # With the option, a second listening port; closed on exit.
            rankd, port, http = start_rankd(RANKD, work, redis_port)
            try:
                self.assertEqual(listening_ports(rankd.pid), {port, http})
                self.assertEqual(get(http, "/healthz")[0], 200)
            finally:
                self.assertEqual(stop(rankd), 0)
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", http), timeout=5)
        finally:
            redis.terminate()
            redis.wait(30)
            shutil.rmtree(work)

    def test_bad_and_taken_addresses(self):
        bad = subprocess.run([RANKD, "--metrics-listen", "127.0.0.1"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--metrics-listen", bad.stderr)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            work = tempfile.mkdtemp(prefix="rankd-metrics-taken-")
            try:
                r = subprocess.run(
                    [RANKD, "--listen", "127.0.0.1:0", "--redis",
                     "127.0.0.1:1", "--metrics-listen",
                     f"127.0.0.1:{taken.getsockname()[1]}"],
                    capture_output=True, text=True, timeout=60, cwd=work)
            finally:
                shutil.rmtree(work)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--metrics-listen", r.stderr)
        self.assertIn("in use", r.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(STUBS, ignore_errors=True)
