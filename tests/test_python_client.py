"""rankd from Python: the generated Python client against a real rankd.

Usage: test_python_client.py RANKD STUBS_DIR
Starts its own redis-server and rankd on free loopback ports.
"""
import datetime
import math
import os
import random
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import zoneinfo

RANKD = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from thrift.protocol import TBinaryProtocol, TCompactProtocol  # noqa: E402
from thrift.Thrift import (  # noqa: E402
    TApplicationException, TMessageType, TType)
from thrift.transport import TSocket, TSSLSocket, TTransport  # noqa: E402

from ranking import Ranking  # noqa: E402
import socket  # noqa: E402
from servers import start, stop, wait_for  # noqa: E402
from ranking.ttypes import (  # noqa: E402
    CountBetweenRequest, CountRequest, Entry, GetAroundRequest,
    GetMemberDataRequest, GetPercentileRequest, GetRankRequest,
    GetRanksRequest, GetScoreAtPercentileRequest, GetTopNRequest,
    InvalidArgument, NotFound, RankOf, RemoveRequest, SampleRequest,
    GetServerInfoRequest, SetMemberDataRequest, UpdateMode, UpdateRequest)
from ranking.constants import IDL_VERSION  # noqa: E402

MAX = 2**53 - 1


def connect(port, framed=True, compact=False):
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(30000)
    transport = (TTransport.TFramedTransport(sock) if framed
                 else TTransport.TBufferedTransport(sock))
    protocol = (TCompactProtocol.TCompactProtocol(transport) if compact
                else TBinaryProtocol.TBinaryProtocol(transport))
    transport.open()
    return Ranking.Client(protocol), transport


class ServedTest(unittest.TestCase):
    """A redis-server and a rankd of the class's own, and a client."""
    config = None  # the text of a --config file, if any

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-py-")
        extra = []
        if cls.config is not None:
            conf = os.path.join(cls.dir, "rankd.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.write(cls.config)
            extra = ["--config", conf]
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", *extra,
                       "--redis", f"127.0.0.1:{cls.redis_port}"], cls.dir)
        cls.client, cls.transport = connect(cls.port)

    @classmethod
    def tearDownClass(cls):
        cls.transport.close()
        assert stop(cls.rankd, cls.dir, cls.port) == 0, \
            "rankd did not exit cleanly"
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)


class RankdTest(ServedTest):

    def board(self):
        RankdTest.counter = getattr(RankdTest, "counter", 0) + 1
        return f"py-{RankdTest.counter}"

    def test_update_rank_top(self):
        b, c = self.board(), self.client
        r = c.Update(UpdateRequest(board=b, member="alice", value=10,
                                   request_id="a1"))
        self.assertEqual((r.score, r.rank, r.applied), (10, 1, True))
        c.Update(UpdateRequest(board=b, member="bob", value=30, request_id="b1",
                               mode=UpdateMode.BEST))
        c.Update(UpdateRequest(board=b, member="carol", value=20,
                               request_id="c1", mode=UpdateMode.SET))
        e = c.GetRank(GetRankRequest(board=b, member="carol"))
        self.assertEqual((e.member, e.score, e.rank), ("carol", 20, 2))
        page = c.GetTopN(GetTopNRequest(board=b, n=10))
        self.assertEqual([(x.member, x.score, x.rank) for x in page],
                         [("bob", 30, 1), ("carol", 20, 2), ("alice", 10, 3)])
        page = c.GetTopN(GetTopNRequest(board=b, n=2, offset=1))
        self.assertEqual([x.member for x in page], ["carol", "alice"])
        self.assertEqual(
            c.GetTopN(GetTopNRequest(board=self.board(), n=10)), [])

    def test_retry_is_not_counted_twice(self):
        b, c = self.board(), self.client
        req = UpdateRequest(board=b, member="alice", value=5, request_id="once")
        self.assertTrue(c.Update(req).applied)
        again = c.Update(req)
        self.assertFalse(again.applied)
        self.assertEqual(again.score, 5)
        with self.assertRaises(InvalidArgument) as ctx:
            c.Update(UpdateRequest(board=b, member="alice", value=6,
                                   request_id="once"))
        self.assertIn("request_id", ctx.exception.message)

    def test_exact_large_scores(self):
        b, c = self.board(), self.client
        for i, v in enumerate([MAX, MAX - 1, -MAX]):
            c.Update(UpdateRequest(board=b, member=f"m{i}", value=v,
                                   request_id=f"r{i}", mode=UpdateMode.SET))
        self.assertEqual(
            [x.score for x in c.GetTopN(GetTopNRequest(board=b, n=10))],
            [MAX, MAX - 1, -MAX])
        with self.assertRaises(InvalidArgument) as ctx:
            c.Update(UpdateRequest(board=b, member="m0", value=1,
                                   request_id="over"))
        self.assertIn("value", ctx.exception.message)
        self.assertEqual(
            c.GetRank(GetRankRequest(board=b, member="m0")).score, MAX)

    def test_ties_first_come(self):
        b, c = self.board(), self.client
        t = 1763800000000
        c.Update(UpdateRequest(board=b, member="zed", value=7, request_id="1",
                               timestamp_ms=t))
        c.Update(UpdateRequest(board=b, member="amy", value=7, request_id="2",
                               timestamp_ms=t + 1))
        self.assertEqual(
            [x.member for x in c.GetTopN(GetTopNRequest(board=b, n=10))],
            ["zed", "amy"])

    def test_errors_name_the_field(self):
        c = self.client
        cases = [
            (dict(board="b" * 201), "board"),
            (dict(board="a{b"), "board"),
            (dict(member="m" * 257), "member"),
            (dict(member="nul\x00inside"), "member"),
            (dict(request_id="r" * 129), "request_id"),
            (dict(value=MAX + 1), "value"),
            (dict(timestamp_ms=-5), "timestamp_ms"),
        ]
        for override, field in cases:
            args = dict(board=self.board(), member="m", value=1,
                        request_id="x")
            args.update(override)
            with self.assertRaises(InvalidArgument) as ctx:
                c.Update(UpdateRequest(**args))
            self.assertTrue(ctx.exception.message.startswith(field + ":"),
                            ctx.exception.message)
        with self.assertRaises(NotFound):
            c.GetRank(GetRankRequest(board=self.board(), member="nobody"))
        with self.assertRaises(InvalidArgument) as ctx:
            c.GetTopN(GetTopNRequest(board=self.board(), n=1001))
        self.assertIn("n: must be 1-1000", ctx.exception.message)

    def test_unicode_members(self):
        b, c = self.board(), self.client
        for i, m in enumerate(["Zoë", "日本", "🏃 runner"]):
            c.Update(UpdateRequest(board=b, member=m, value=i,
                                   request_id=str(i)))
        self.assertEqual(
            [x.member for x in c.GetTopN(GetTopNRequest(board=b, n=10))],
            ["🏃 runner", "日本", "Zoë"])
        self.assertEqual(
            c.GetRank(GetRankRequest(board=b, member="日本")).rank, 2)

    def start_buffered_compact(self):
        """A rankd of the class's Redis with --transport buffered
        --protocol compact: (process, port)."""
        return start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{self.redis_port}",
                       "--transport", "buffered", "--protocol", "compact"],
            self.dir)

    def test_buffered_compact(self):
        proc, port = self.start_buffered_compact()
        try:
            c, t = connect(port, framed=False, compact=True)
            b = self.board()
            c.Update(UpdateRequest(board=b, member="x" * 200, value=MAX,
                                   request_id="1"))
            for i in range(100):
                c.Update(UpdateRequest(board=b, member=f"{i:0200d}", value=i,
                                       request_id=f"r{i}"))
            page = c.GetTopN(GetTopNRequest(board=b, n=101))
            self.assertEqual(len(page), 101)
            self.assertEqual(page[0].score, MAX)
            t.close()
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(30), 0)

    def log(self, port):
        with open(os.path.join(self.dir, f"log-{port}"), encoding="utf-8",
                  errors="replace") as f:
            return f.read()

    def test_wrong_transport_or_protocol_is_told(self):
        """A client speaking another transport or protocol than the port's
        gets a TApplicationException it can read, naming what the port
        expects, and rankd's log names the mismatch; HTTP is logged; the
        clients that speak the port's wire go on."""
        wrong = ((False, False, "framed transport, binary protocol"),
                 (True, True, "framed transport, binary protocol"),
                 (False, True, "framed transport, binary protocol"))
        for framed, compact, expects in wrong:
            c, t = connect(self.port, framed=framed, compact=compact)
            with self.assertRaises(TApplicationException) as cm:
                c.Count(CountRequest(board=self.board()))
            self.assertIn(f"rankd expects {expects}", cm.exception.message)
            self.assertEqual(cm.exception.type,
                             TApplicationException.PROTOCOL_ERROR)
            t.close()
        with socket.create_connection(("127.0.0.1", self.port), 30) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            self.assertEqual(s.recv(100), b"")  # closed, nothing said
        spoke = ("buffered (unframed) transport, binary protocol",
                 "framed transport, compact protocol",
                 "buffered (unframed) transport, compact protocol", "HTTP")
        wait_for("the mismatches in rankd's log", lambda: all(
            f"a client from 127.0.0.1 speaks {w}; this port expects framed "
            "transport, binary protocol" in self.log(self.port)
            for w in spoke), 30)
        # Logged once a peer and wire: the same mistake again is not.
        c, t = connect(self.port, framed=False)
        with self.assertRaises(TApplicationException):
            c.Count(CountRequest(board=self.board()))
        t.close()
        self.assertEqual(self.log(self.port).count(f"speaks {spoke[0]}"), 1)
        # The port's own wire still works, on a new connection and the
        # class's.
        c, t = connect(self.port)
        self.assertEqual(c.Count(CountRequest(board=self.board())), 0)
        t.close()
        self.assertEqual(self.client.Count(CountRequest(board=self.board())),
                         0)
        # A buffered compact port: a framed binary client is told.
        proc, port = self.start_buffered_compact()
        try:
            c, t = connect(port)
            with self.assertRaises(TApplicationException) as cm:
                c.Count(CountRequest(board=self.board()))
            self.assertIn("rankd expects buffered (unframed) transport, "
                          "compact protocol", cm.exception.message)
            t.close()
            c, t = connect(port, framed=False, compact=True)
            self.assertEqual(c.Count(CountRequest(board=self.board())), 0)
            t.close()
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(30), 0)


OPTIONS_CONF = """\
[board asc]
order=asc
[board comp_sh]
rank=competition
shards=4
[board dense]
rank=dense
[board dense_sh]
rank=dense
shards=4
[board best_sh]
mode=best
shards=4
[board cap_sh]
cap=2
shards=4
[board dedup_short]
dedup_window=1
[board daily_paris]
period=daily
timezone=Europe/Paris
accept_late=true
retention=2
"""


class BoardOptionsTest(ServedTest):
    """Board options (config file) seen from Python."""
    config = OPTIONS_CONF

    def fill(self, board):
        t = 1763800000000
        for i, (member, score) in enumerate(
                [("a", 50), ("b", 40), ("c", 40), ("d", 30), ("e", 40)]):
            self.client.Update(UpdateRequest(
                board=board, member=member, value=score, mode=UpdateMode.SET,
                request_id=f"{board}-{member}", timestamp_ms=t + i))

    def page(self, board, n=10, offset=0):
        return [(e.member, e.score, e.rank)
                for e in self.client.GetTopN(GetTopNRequest(
                    board=board, n=n, offset=offset))]

    def test_ascending(self):
        self.fill("asc")
        self.assertEqual([m for m, _, _ in self.page("asc")],
                         ["d", "b", "c", "e", "a"])
        r = self.client.Update(UpdateRequest(
            board="asc", member="a", value=60, mode=UpdateMode.BEST,
            request_id="asc-best"))
        self.assertEqual(r.score, 50)  # BEST keeps the lower

    def test_competition_sharded(self):
        self.fill("comp_sh")
        self.assertEqual([r for _, _, r in self.page("comp_sh")],
                         [1, 2, 2, 2, 5])
        self.assertEqual(self.page("comp_sh", 2, 3),
                         [("e", 40, 2), ("d", 30, 5)])
        self.assertEqual(self.client.GetRank(
            GetRankRequest(board="comp_sh", member="e")).rank, 2)

    def test_dense(self):
        for board in ("dense", "dense_sh"):
            self.fill(board)
            self.assertEqual([r for _, _, r in self.page(board)],
                             [1, 2, 2, 2, 3])
            self.assertEqual(self.client.GetRank(
                GetRankRequest(board=board, member="d")).rank, 3)

    def test_cap_sharded(self):
        self.fill("cap_sh")
        self.assertEqual(self.page("cap_sh"), [("a", 50, 1), ("b", 40, 2)])
        with self.assertRaises(NotFound):
            self.client.GetRank(GetRankRequest(board="cap_sh", member="d"))

    def test_periods(self):
        paris = zoneinfo.ZoneInfo("Europe/Paris")
        today = datetime.datetime.now(paris).date()
        noon = datetime.datetime.combine(
            today - datetime.timedelta(days=1), datetime.time(12), paris)
        # Yesterday's update goes to yesterday's board (accept_late).
        self.client.Update(UpdateRequest(
            board="daily_paris", member="ann", value=4, request_id="p1",
            timestamp_ms=int(noon.timestamp() * 1000)))
        self.client.Update(UpdateRequest(
            board="daily_paris", member="bob", value=9, request_id="p2"))
        self.assertEqual([e.member for e in self.client.GetTopN(
                             GetTopNRequest(board="daily_paris", n=10))],
                         ["bob"])
        self.assertEqual([e.member for e in self.client.GetTopN(
                             GetTopNRequest(board="daily_paris", n=10,
                                            periods_back=1))],
                         ["ann"])
        self.assertEqual(self.client.GetRank(GetRankRequest(
            board="daily_paris", member="ann", periods_back=1)).score, 4)
        with self.assertRaises(InvalidArgument):
            self.client.GetRank(GetRankRequest(
                board="daily_paris", member="ann", periods_back=3))

    def test_dedup_window(self):
        def again():
            return self.client.Update(UpdateRequest(
                board="dedup_short", member="ann", value=1,
                request_id="same"))
        self.assertTrue(again().applied)
        start = time.monotonic()
        while not again().applied:  # forgotten after 1 to 1.25 s
            self.assertLess(time.monotonic() - start, 10)
            time.sleep(0.05)  # the client's retry pace
        self.assertGreater(time.monotonic() - start, 0.9)

    def test_default_mode(self):
        # No mode in the request: the board's BEST applies.
        for value, want in ((10, 10), (3, 10), (12, 12)):
            r = self.client.Update(UpdateRequest(
                board="best_sh", member="ann", value=value,
                request_id=f"best-{value}"))
            self.assertEqual(r.score, want)
            self.assertIsNone(r.rank)  # sharded: no rank in the reply


class QueriesTest(ServedTest):
    """GetAround, GetRanks, Remove, Count, CountBetween against a model."""
    config = "[board qs]\nshards=4\n"

    def fill(self, board):
        rng = random.Random(5)
        model = {}
        for i in range(60):
            member, score = f"p{i:02d}", rng.randrange(-3, 4) * 5
            ts = 1763800000000 + rng.randrange(3)
            self.client.Update(UpdateRequest(
                board=board, member=member, value=score, mode=UpdateMode.SET,
                request_id=f"{board}-{i}", timestamp_ms=ts))
            model[member] = (score, ts)
        return model

    @staticmethod
    def order(model):
        return sorted(model, key=lambda m: (-model[m][0], model[m][1],
                                            m.encode()))

    def check(self, board, model):
        order = self.order(model)
        for i in range(0, len(order), 7):
            got = self.client.GetAround(
                GetAroundRequest(board=board, member=order[i], radius=2))
            lo, hi = max(0, i - 2), min(len(order), i + 3)
            self.assertEqual([(e.member, e.rank) for e in got],
                             [(order[j], j + 1) for j in range(lo, hi)])
        asked = order[::3] + ["ghost"]
        got = self.client.GetRanks(
            GetRanksRequest(board=board, members=asked))
        self.assertEqual([(r.member, r.found, r.rank) for r in got],
                         [(m, m in model,
                           order.index(m) + 1 if m in model else None)
                          for m in asked])
        self.assertEqual(self.client.Count(CountRequest(board=board)),
                         len(model))
        for lo, hi in ((-15, 15), (0, 0), (-5, 10), (20, 30)):
            self.assertEqual(
                self.client.CountBetween(CountBetweenRequest(
                    board=board, min_score=lo, max_score=hi)),
                sum(lo <= model[m][0] <= hi for m in model))
        for m in order[::11]:
            behind = sum(model[x][0] < model[m][0] for x in model)
            self.assertAlmostEqual(
                self.client.GetPercentile(
                    GetPercentileRequest(board=board, member=m)),
                100 * behind / len(model))
        for _ in range(20):
            drawn = self.client.Sample(SampleRequest(
                board=board, min_score=-5, max_score=5, count=4))
            members = [e.member for e in drawn]
            self.assertEqual(len(set(members)), len(members))
            self.assertEqual(len(members), min(4, sum(
                -5 <= model[m][0] <= 5 for m in model)))
            for e in drawn:
                self.assertTrue(-5 <= e.score <= 5)
                self.assertEqual(e.rank, order.index(e.member) + 1)
        for pct in (0, 25, 50, 99, 100):
            pos = min(max(math.ceil(len(model) * (100 - pct) / 100), 1),
                      len(model))
            self.assertEqual(
                self.client.GetScoreAtPercentile(
                    GetScoreAtPercentileRequest(board=board, pct=pct)),
                model[order[pos - 1]][0])

    def test_queries(self):
        for board in ("qo", "qs"):
            model = self.fill(board)
            self.check(board, model)
            for attempt in range(2):  # a retry is not applied again
                r = self.client.Remove(RemoveRequest(
                    board=board, member="p07", request_id="rm-1"))
                self.assertEqual((r.applied, r.removed),
                                 (attempt == 0, attempt == 0))
            del model["p07"]
            self.check(board, model)
            with self.assertRaises(NotFound):
                self.client.GetAround(
                    GetAroundRequest(board=board, member="p07", radius=1))


class SubscoresDataTest(ServedTest):
    """Subscores and member data against a model, ordinary and sharded."""
    config = ("[board raid]\nmode=best\nsubscores=asc,desc,asc\n"
              "[board raid_sh]\nmode=best\nsubscores=asc,desc,asc\n"
              "shards=4\n[board lim]\nsubscores=asc,desc,asc\n")
    DIRS = (1, -1, 1)  # asc, desc, asc: the sign that sorts lower first

    def key(self, score, subs):
        return (-score,) + tuple(d * x for d, x in zip(self.DIRS, subs))

    def order(self, model):
        return sorted(model, key=lambda m: self.key(*model[m][:2])
                      + (model[m][2], m.encode()))

    def run_model(self, board, seed):
        rng = random.Random(seed)
        model, data = {}, {}  # member -> (score, subs, ts); member -> dict
        t0 = 1763800000000
        for i in range(400):
            member = f"t{rng.randrange(30):02d}"
            ts = t0 + rng.randrange(6)
            op = rng.choice(("best", "best", "set", "inc", "inc", "data",
                             "remove"))
            subs = [rng.randrange(3) - 1, rng.randrange(3),
                    rng.choice((-2**63, 0, 2**63 - 1))]
            rid = f"{board}-{i}"
            if op == "remove":
                r = self.client.Remove(RemoveRequest(
                    board=board, member=member, request_id=rid))
                self.assertEqual(r.removed, member in model)
                model.pop(member, None)
                data.pop(member, None)
                continue
            if op == "data":
                kv = {"name": f"N{i}", "n": "x" * rng.randrange(5)}
                req = SetMemberDataRequest(board=board, member=member, data=kv)
                if member in model:
                    self.client.SetMemberData(req)
                    data[member] = kv
                else:
                    with self.assertRaises(NotFound):
                        self.client.SetMemberData(req)
                continue
            value = rng.randrange(4) if op != "inc" else rng.randrange(-1, 2)
            give_subs = op != "inc" or rng.random() < 0.5
            kv = ({"name": f"U{i}"} if rng.random() < 0.3 else None)
            req = UpdateRequest(
                board=board, member=member, value=value, request_id=rid,
                timestamp_ms=ts, subscores=subs if give_subs else None,
                data=kv, mode={"best": UpdateMode.BEST, "set": UpdateMode.SET,
                               "inc": UpdateMode.INCREMENT}[op])
            r = self.client.Update(req)
            old = model.get(member)
            if op == "inc":
                new = ((old[0] if old else 0) + value,
                       subs if give_subs else (old[1] if old else [0, 0, 0]))
            elif op == "set" or old is None or \
                    self.key(value, subs) < self.key(*old[:2]):
                new = (value, subs)
            else:
                new = old[:2]
            if old is None or (new[0], list(new[1])) != (old[0], list(old[1])):
                model[member] = (new[0], list(new[1]), ts)
            if kv is not None:
                data[member] = kv
            self.assertTrue(r.applied)
            self.assertEqual((r.score, r.subscores),
                             (model[member][0], model[member][1]))
            if rng.random() < 0.1:  # a retry changes nothing
                again = self.client.Update(req)
                self.assertFalse(again.applied)
                self.assertEqual(again.subscores, model[member][1])
        return model, data

    def check(self, board, model, data):
        order = self.order(model)
        page = self.client.GetTopN(
            GetTopNRequest(board=board, n=100, with_data=True))
        self.assertEqual(
            [(e.member, e.score, e.rank, e.subscores, e.data) for e in page],
            [(m, model[m][0], i + 1, model[m][1], data.get(m))
             for i, m in enumerate(order)])
        self.assertTrue(all(e.data is None for e in self.client.GetTopN(
            GetTopNRequest(board=board, n=100))))
        for i, m in enumerate(order):
            e = self.client.GetRank(GetRankRequest(board=board, member=m))
            self.assertEqual((e.score, e.rank, e.subscores),
                             (model[m][0], i + 1, model[m][1]))
            self.assertEqual(self.client.GetMemberData(
                GetMemberDataRequest(board=board, member=m)), data.get(m, {}))
        for i in range(0, len(order), 5):
            got = self.client.GetAround(GetAroundRequest(
                board=board, member=order[i], radius=1, with_data=True))
            lo, hi = max(0, i - 1), min(len(order), i + 2)
            self.assertEqual([(e.member, e.rank, e.data) for e in got],
                             [(order[j], j + 1, data.get(order[j]))
                              for j in range(lo, hi)])

    def test_model(self):
        for board in ("raid", "raid_sh"):
            model, data = self.run_model(board, 9)
            self.assertGreater(len(model), 10)
            self.check(board, model, data)

    def test_limits(self):
        self.client.Update(UpdateRequest(board="lim", member="lim", value=1,
                                         request_id="lim-0",
                                         subscores=[0, 0, 0]))
        for kv, want in (({f"k{i}": "" for i in range(17)},
                          "data: at most 16 keys, got 17"),
                         ({"k" * 65: ""}, "data: a key must be 1-64 bytes"),
                         ({"k": "v" * 257}, "must be 0-256 bytes, got 257")):
            with self.assertRaises(InvalidArgument) as c:
                self.client.SetMemberData(
                    SetMemberDataRequest(board="lim", member="lim", data=kv))
            self.assertIn(want, c.exception.message)
            with self.assertRaises(InvalidArgument) as c:
                self.client.Update(UpdateRequest(
                    board="lim", member="lim", value=5, request_id="lim-1",
                    subscores=[0, 0, 0], data=kv))
            self.assertIn(want, c.exception.message)
        self.assertEqual(self.client.GetRank(
            GetRankRequest(board="lim", member="lim")).score, 1)
        self.assertEqual(self.client.GetMemberData(
            GetMemberDataRequest(board="lim", member="lim")), {})


def wire_fields(struct):
    """The ids of the fields struct puts on the wire, in order."""
    buf = TTransport.TMemoryBuffer()
    struct.write(TBinaryProtocol.TBinaryProtocol(buf))
    proto = TBinaryProtocol.TBinaryProtocol(
        TTransport.TMemoryBuffer(buf.getvalue()))
    proto.readStructBegin()
    ids = []
    while True:
        _, ftype, fid = proto.readFieldBegin()
        if ftype == TType.STOP:
            return ids
        proto.skip(ftype)
        ids.append(fid)


def send_pre_1_0(client, name, fields):
    """Sends a call as a client generated from the IDL before 1.0 did: each
    argument a field of the call itself, (id, type, value), not one request
    struct."""
    p = client._oprot
    p.writeMessageBegin(name, TMessageType.CALL, 0)
    p.writeStructBegin(f"{name}_args")
    for fid, ftype, value in fields:
        p.writeFieldBegin(f"arg{fid}", ftype, fid)
        if ftype == TType.STRING:
            p.writeString(value)
        elif ftype == TType.I32:
            p.writeI32(value)
        elif ftype == TType.BOOL:
            p.writeBool(value)
        else:  # UpdateBatch's list<UpdateRequest>
            p.writeListBegin(TType.STRUCT, len(value))
            for v in value:
                v.write(p)
            p.writeListEnd()
        p.writeFieldEnd()
    p.writeFieldStop()
    p.writeStructEnd()
    p.writeMessageEnd()
    p.trans.flush()


class RequestShapeTest(ServedTest):
    """Every method takes one request struct; its options are optional
    fields with IDL defaults."""
    config = "[board shape]\nperiod=daily\naccept_late=true\nretention=2\n"
    # The options' defaults, as the IDL documents them.
    DEFAULTS = {"offset": 0, "periods_back": 0, "with_data": False,
                "window": False}

    def fill(self):
        """Today a 30, b 20, c 10 (a and b with data); yesterday a 5 (with
        other data) and y 99. Request ids make a second fill a no-op."""
        utc = datetime.timezone.utc
        noon = datetime.datetime.combine(
            datetime.datetime.now(utc).date() - datetime.timedelta(days=1),
            datetime.time(12), utc)
        yesterday = int(noon.timestamp() * 1000)
        for i, (member, value, ts, data) in enumerate([
                ("a", 5, yesterday, {"name": "old"}),
                ("y", 99, yesterday, None),
                ("a", 30, None, {"name": "A"}),
                ("b", 20, None, {"name": "B"}),
                ("c", 10, None, None)]):
            self.client.Update(UpdateRequest(
                board="shape", member=member, value=value, timestamp_ms=ts,
                data=data, request_id=f"shape-{i}"))
        self.assertEqual(self.client.Count(
            CountRequest(board="shape", periods_back=1)), 2)

    @staticmethod
    def shape(answer):
        if isinstance(answer, list):
            return [RequestShapeTest.shape(x) for x in answer]
        if isinstance(answer, Entry):
            return (answer.member, answer.score, answer.rank, answer.data)
        if isinstance(answer, RankOf):
            return (answer.member, answer.found, answer.score, answer.rank)
        if isinstance(answer, float):
            return round(answer, 9)
        return answer

    def test_required_fields_only(self):
        """A request built with its required fields only: the client fills
        in the IDL's defaults, and rankd answers the same when they are
        left off the wire: the current period, from the top, no data."""
        self.fill()
        b = "shape"
        top = [("a", 30, 1, None), ("b", 20, 2, None), ("c", 10, 3, None)]
        cases = [
            (GetRankRequest, dict(board=b, member="a"), top[0]),
            (GetTopNRequest, dict(board=b, n=10), top),
            (GetAroundRequest, dict(board=b, member="b", radius=1), top),
            (GetRanksRequest, dict(board=b, members=["a", "y"]),
             [("a", True, 30, 1), ("y", False, None, None)]),
            (CountRequest, dict(board=b), 3),
            (CountBetweenRequest, dict(board=b, min_score=0, max_score=100),
             3),
            (GetPercentileRequest, dict(board=b, member="b"),
             round(100 / 3, 9)),
            (GetScoreAtPercentileRequest, dict(board=b, pct=100), 30),
            (SampleRequest,
             dict(board=b, min_score=0, max_score=100, count=10), top),
            (GetMemberDataRequest, dict(board=b, member="a"), {"name": "A"}),
        ]
        for cls, required, want in cases:
            method = cls.__name__[:-len("Request")]
            with self.subTest(method):
                spec = [s for s in cls.thrift_spec if s is not None]
                options = [s[2] for s in spec if s[2] not in required]
                self.assertTrue(options)
                built = cls(**required)
                self.assertEqual({o: getattr(built, o) for o in options},
                                 {o: self.DEFAULTS[o] for o in options})
                bare = cls(**required, **dict.fromkeys(options))
                self.assertEqual(wire_fields(bare),
                                 [s[0] for s in spec if s[2] in required])
                for request in (built, bare):
                    got = self.shape(getattr(self.client, method)(request))
                    if cls is SampleRequest:  # in no particular order
                        got.sort()
                    self.assertEqual(got, want)

    def test_window_needs_a_board_with_one(self):
        """window=true (1.8) reads a board's rolling window: on a board
        without one (shape has period=daily, no window) every read that
        takes it is refused, naming the field."""
        b = "shape"
        for request in (
                GetRankRequest(board=b, member="a", window=True),
                GetTopNRequest(board=b, n=10, window=True),
                GetAroundRequest(board=b, member="a", radius=1, window=True),
                GetRanksRequest(board=b, members=["a"], window=True),
                CountRequest(board=b, window=True),
                CountBetweenRequest(board=b, min_score=0, max_score=9,
                                    window=True),
                GetPercentileRequest(board=b, member="a", window=True),
                GetScoreAtPercentileRequest(board=b, pct=50, window=True),
                SampleRequest(board=b, min_score=0, max_score=9, count=1,
                              window=True)):
            method = type(request).__name__[:-len("Request")]
            with self.subTest(method):
                with self.assertRaises(InvalidArgument) as ctx:
                    getattr(self.client, method)(request)
                self.assertIn("window: board 'shape' has no rolling window",
                              ctx.exception.message)

    def test_server_info(self):
        """rankd reports the IDL version this client was generated from
        (the IDL's own constant), its configured boards and uptime."""
        info = self.client.GetServerInfo(GetServerInfoRequest())
        self.assertEqual(IDL_VERSION, "1.8")
        self.assertEqual(info.idl_version, IDL_VERSION)
        self.assertRegex(info.version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(info.configured_boards, 1)
        self.assertGreaterEqual(info.uptime_seconds, 0)
        out = subprocess.run([RANKD, "--version"], capture_output=True,
                             text=True, check=True).stdout
        self.assertEqual(out, f"rankd {info.version} (IDL {IDL_VERSION})\n")

    def test_positional_calls_are_refused(self):
        """The shape before 1.0, positional arguments, is gone: the
        generated client refuses it before sending anything, and rankd
        answers a call encoded that way (by a client generated from the
        old IDL) with InvalidArgument, without reading it as another call."""
        self.fill()
        c = self.client
        for old in (lambda: c.GetRank("shape", "a"),
                    lambda: c.GetRank("shape", "a", 0),
                    lambda: c.GetTopN("shape", 10, 0, 0, False),
                    lambda: c.Remove("shape", "a", "old-1"),
                    lambda: c.Count("shape", 0)):
            with self.assertRaises(TypeError):
                old()
        # Nothing was sent: the connection goes on.
        self.assertEqual(c.Count(CountRequest(board="shape")), 3)
        S, I32 = TType.STRING, TType.I32
        old_calls = [
            ("GetRank", [(1, S, "shape"), (2, S, "a"), (3, I32, 0)]),
            ("GetTopN", [(1, S, "shape"), (2, I32, 10), (3, I32, 0),
                         (4, I32, 0), (5, TType.BOOL, False)]),
            ("Count", [(1, S, "shape"), (2, I32, 0)]),
            ("Remove", [(1, S, "shape"), (2, S, "a"), (3, S, "old-2")]),
            ("UpdateBatch", [(1, TType.LIST, [UpdateRequest(
                board="shape", member="z", value=1, request_id="old-3")])]),
        ]
        client, transport = connect(self.port)
        try:
            for name, fields in old_calls:
                with self.subTest(name):
                    send_pre_1_0(client, name, fields)
                    with self.assertRaises(InvalidArgument):
                        getattr(client, "recv_" + name)()
        finally:
            transport.close()
        # Nothing changed: a still there, z not added.
        self.assertEqual(c.Count(CountRequest(board="shape")), 3)
        self.assertEqual(
            c.GetRank(GetRankRequest(board="shape", member="a")).score, 30)


# docs/operations.md's TLS example: stunnel terminates TLS in front of rankd.
STUNNEL_CONF = """\
foreground = yes
pid =
[rankd]
accept = 127.0.0.1:{accept}
connect = 127.0.0.1:{rankd_port}
cert = {dir}/rankd-cert.pem
key = {dir}/rankd-key.pem
"""


class TlsProxyTest(unittest.TestCase):
    """rankd behind stunnel: a TLS client is served, a plain one is not."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-tls-")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
             "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", os.path.join(cls.dir, "rankd-key.pem"),
             "-out", os.path.join(cls.dir, "rankd-cert.pem")],
            check=True, capture_output=True)
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.rankd_port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{cls.redis_port}"], cls.dir)

        def stunnel(port):
            conf = os.path.join(cls.dir, f"stunnel-{port}.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.write(STUNNEL_CONF.format(accept=port, dir=cls.dir,
                                            rankd_port=cls.rankd_port))
            return [shutil.which("stunnel4") or "stunnel", conf]
        cls.proxy, cls.port = start(stunnel, cls.dir)

    @classmethod
    def tearDownClass(cls):
        for proc in (cls.proxy, cls.rankd, cls.redis):
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(cls.dir)

    def test_tls_client_is_served(self):
        sock = TSSLSocket.TSSLSocket(
            "127.0.0.1", self.port, cert_reqs=ssl.CERT_REQUIRED,
            ca_certs=os.path.join(self.dir, "rankd-cert.pem"))
        sock.setTimeout(30000)
        transport = TTransport.TFramedTransport(sock)
        client = Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport))
        transport.open()
        try:
            r = client.Update(UpdateRequest(board="tls", member="ann",
                                            value=9, request_id="t1"))
            self.assertEqual((r.score, r.rank, r.applied), (9, 1, True))
            self.assertEqual(client.GetRank(
                GetRankRequest(board="tls", member="ann")).score, 9)
        finally:
            transport.close()

    def test_plain_client_is_refused(self):
        client, transport = connect(self.port)
        try:
            with self.assertRaises(Exception):
                client.GetRank(GetRankRequest(board="tls", member="ann"))
        finally:
            transport.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
