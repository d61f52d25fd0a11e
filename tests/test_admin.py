"""Board administration and Export through the generated Python client:
ListBoards, GetBoardInfo, DeleteBoard, ResetBoard and Export against a real
rankd and redis-server (their keys checked with redis-cli).

Usage: test_admin.py RANKD STUBS_DIR
RANKD_TEST_WRAPPER (as for the C tests), if set, is put in front of rankd
(valgrind); the large board is then smaller.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

RANKD = sys.argv[1]
WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
# The board whose delete must not hold Redis up (the bench does 1,000,000).
LARGE = 20_000 if WRAPPER else 100_000
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import (  # noqa: E402
    CountRequest, DeleteBoardRequest, ExportRequest, GetBoardInfoRequest,
    GetTopNRequest, InvalidArgument, ListBoardsRequest,
    ResetBoardRequest, UpdateBatchRequest, UpdateMode, UpdateRequest)
from servers import connect, start, stop  # noqa: E402

DAY_MS = 86_400_000
# 2026-11-20T12:00:00Z, and the two days before it.
T0 = 1_763_640_000_000

CONFIG = """\
[board cfg_empty]
[board sh]
shards=4
[board sub]
subscores=asc,desc
[board daily]
period=daily
retention=3
accept_late=true
[board g*]
shards=3
[board lb_sh]
shards=4
[board dense]
rank=dense
[board race_sh]
shards=4
[board race_day]
period=daily
[board race_shday]
period=daily
shards=3
"""



class AdminTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-admin-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}", "--config", conf,
                       "--redis", f"127.0.0.1:{cls.redis_port}",
                       # The admin methods, granted on purpose.
                       "--grant", "anonymous=read,write,admin"], cls.dir)
        cls.client, cls.transport = connect(cls.port)

    @classmethod
    def tearDownClass(cls):
        cls.transport.close()
        assert stop(cls.rankd, cls.dir, cls.port) == 0, \
            "rankd did not exit cleanly"
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    # ---- helpers ----

    def redis_cli(self, *args):
        out = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "--no-raw", *args],
            check=True, capture_output=True, text=True).stdout
        return out

    def keys(self):
        out = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "--scan"],
            check=True, capture_output=True).stdout
        return set(out.split(b"\n")) - {b""}

    def board_keys(self, board, admin=False):
        """Every key of board, by its exact prefixes; admin: only the
        records of DeleteBoard and ResetBoard, else all but them."""
        b = board.encode()
        own = b"rk:{" + b + b"}:"
        keys = {k for k in self.keys() if k.startswith(own) or (
            k.startswith(b"rk:s:{" + b + b"/")
            and k[len(b) + 7:].split(b"}:")[0].isdigit())}
        return {k for k in keys if k.startswith(own + b"x:") == admin}

    def fill(self, board, n, prefix="m", **kw):
        c = self.client
        for start_at in range(0, n, 1000):
            reqs = [UpdateRequest(board=board, member=f"{prefix}{i}",
                                  value=i % 97, request_id=f"{board}-{i}",
                                  mode=UpdateMode.SET, **kw)
                    for i in range(start_at, min(n, start_at + 1000))]
            res = c.UpdateBatch(UpdateBatchRequest(requests=reqs)).results
            self.assertTrue(all(r.response is not None for r in res), res[:3])

    def count(self, board):
        return self.client.Count(CountRequest(board=board))

    def all_boards(self, limit):
        seen, after, pages = [], None, 0
        while True:
            page = self.client.ListBoards(
                ListBoardsRequest(after=after, limit=limit))
            pages += 1
            self.assertLessEqual(len(page.boards), limit)
            seen += page.boards
            if page.next_after is None:
                return seen, pages
            after = page.next_after

    def export_all(self, board, count=1000, periods_back=0):
        entries, cursor = [], None
        while True:
            page = self.client.Export(ExportRequest(
                board=board, cursor=cursor, count=count,
                periods_back=periods_back))
            entries += page.entries
            if page.next_cursor is None:
                return entries
            cursor = page.next_cursor

    # ---- ListBoards ----

    def test_list_boards(self):
        self.fill("lb_a", 3)
        self.fill("lb_b", 5)
        self.fill("lb_sh", 7)
        boards, pages = self.all_boards(limit=2)
        names = [b.board for b in boards]
        self.assertEqual(names, sorted(set(names), key=str.encode))
        self.assertGreater(pages, 3)
        by_name = {b.board: b for b in boards}
        self.assertEqual((by_name["lb_a"].members, by_name["lb_a"].configured),
                         (3, False))
        self.assertEqual(by_name["lb_b"].members, 5)
        self.assertEqual((by_name["lb_sh"].members,
                          by_name["lb_sh"].configured),
                         (7, True))
        self.assertEqual((by_name["cfg_empty"].members,
                          by_name["cfg_empty"].configured), (0, True))
        one_page, _ = self.all_boards(limit=1000)
        self.assertEqual([b.board for b in one_page], names)

    def test_list_boards_refuses_bad_limit(self):
        for limit in (0, 1001):
            with self.assertRaises(InvalidArgument) as cm:
                self.client.ListBoards(ListBoardsRequest(limit=limit))
            self.assertIn("limit", cm.exception.message)

    # ---- GetBoardInfo ----

    def test_board_info(self):
        self.fill("sh", 20, prefix="info")
        info = self.client.GetBoardInfo(GetBoardInfoRequest(board="sh"))
        self.assertTrue(info.configured)
        self.assertEqual(info.options["shards"], "4")
        self.assertEqual(info.options["order"], "desc")
        self.assertEqual(info.members, self.count("sh"))
        self.assertEqual(info.keys, len(self.board_keys("sh")))
        self.assertGreater(info.memory_bytes, 0)
        self.assertTrue(info.stored_layout.startswith("rankd-layout "),
                        info.stored_layout)
        self.assertEqual(info.periods, [])

        fresh = self.client.GetBoardInfo(GetBoardInfoRequest(board="nobody"))
        self.assertEqual((fresh.configured, fresh.members, fresh.keys,
                          fresh.memory_bytes, fresh.stored_layout),
                         (False, 0, 0, 0, None))

    def test_board_info_samples_record_hashes(self):
        """A layout of more than 256 record hashes is counted by 256 of
        them, evenly spread: GetBoardInfo's MEMORY USAGE commands stop
        growing with the layout (8,192 hashes took 0.25 s, one each), and
        its keys and memory stay within a few % of the exact sums."""
        self.fill("records", 20_000)
        meta = self.redis_cli("HGET", "rk:{records}:q", "s")
        hashes = int(meta.strip().strip('"'))
        self.assertGreater(hashes, 256, meta)
        keys = self.board_keys("records")
        exact = sum(int(self.redis_cli("MEMORY", "USAGE", k).split()[-1])
                    for k in keys)

        def memory_calls():
            stats = self.redis_cli("INFO", "commandstats")
            m = re.search(r"cmdstat_memory:calls=(\d+)", stats)
            return int(m.group(1)) if m else 0

        before = memory_calls()
        info = self.client.GetBoardInfo(GetBoardInfoRequest(board="records"))
        self.assertLessEqual(memory_calls() - before, 256 + 10)
        self.assertAlmostEqual(info.keys, len(keys), delta=len(keys) * 0.05)
        self.assertAlmostEqual(info.memory_bytes, exact, delta=exact * 0.05)

    def test_board_info_periods(self):
        c = self.client
        # Three days: today (rankd's clock) and two before, by timestamp.
        info = c.GetBoardInfo(GetBoardInfoRequest(board="daily"))
        self.assertEqual(info.options["period"], "daily")
        now = int(time.time() * 1000)
        for back in (0, 1, 2):
            c.Update(UpdateRequest(board="daily", member="p", value=1,
                                   request_id=f"day-{back}",
                                   timestamp_ms=now - back * DAY_MS))
        info = c.GetBoardInfo(GetBoardInfoRequest(board="daily"))
        self.assertEqual(len(info.periods), 3)
        self.assertEqual(info.periods, sorted(info.periods, reverse=True))
        self.assertTrue(c.DeleteBoard(DeleteBoardRequest(
            board="daily", request_id="daily-del")).applied)
        self.assertEqual(self.board_keys("daily"), set())
        self.assertEqual(c.GetBoardInfo(GetBoardInfoRequest(
            board="daily")).periods, [])

    # ---- DeleteBoard ----

    def test_delete_touches_no_other_board(self):
        # Names a glob pattern would confuse with "g*".
        for b in ("g*", "g", "gx", "g*x", "g*/1", "ga"):
            self.fill(b, 30, prefix="d")
        before = {b: (self.count(b), self.board_keys(b))
                  for b in ("g", "gx", "g*x", "g*/1", "ga")}
        self.assertTrue(self.board_keys("g*"))
        r = self.client.DeleteBoard(DeleteBoardRequest(board="g*",
                                                       request_id="del-1"))
        self.assertTrue(r.applied)
        self.assertGreater(r.keys_removed, 3)
        self.assertEqual(self.board_keys("g*"), set())
        # What stays is the request id's record, for the dedup window.
        self.assertEqual(len(self.board_keys("g*", admin=True)), 1)
        self.assertEqual(self.count("g*"), 0)
        for b, (n, keys) in before.items():
            self.assertEqual((self.count(b), self.board_keys(b)), (n, keys), b)
        names = [x.board for x in self.all_boards(1000)[0]]
        self.assertIn("g*", names)  # configured: it is still a board
        again = self.client.DeleteBoard(DeleteBoardRequest(board="g*",
                                                           request_id="del-1"))
        self.assertEqual((again.applied, again.keys_removed),
                         (False, r.keys_removed))
        with self.assertRaises(InvalidArgument) as cm:
            self.client.ResetBoard(ResetBoardRequest(board="g*",
                                                     request_id="del-1"))
        self.assertIn("request_id", cm.exception.message)

    def test_deleted_board_leaves_the_list(self):
        self.fill("gone", 10)
        self.assertIn("gone", [b.board for b in self.all_boards(1000)[0]])
        self.client.DeleteBoard(DeleteBoardRequest(board="gone",
                                                   request_id="x"))
        self.assertNotIn("gone", [b.board for b in self.all_boards(1000)[0]])
        # An update retried after a delete is applied again: the board and
        # its request ids are gone.
        r = self.client.Update(UpdateRequest(board="gone", member="m1",
                                             value=5, request_id="gone-1",
                                             mode=UpdateMode.SET))
        self.assertTrue(r.applied)

    def test_delete_refuses_bad_fields(self):
        for req, field in ((DeleteBoardRequest(board="", request_id="r"),
                            "board"),
                           (DeleteBoardRequest(board="b", request_id=""),
                            "request_id")):
            with self.assertRaises(InvalidArgument) as cm:
                self.client.DeleteBoard(req)
            self.assertIn(field, cm.exception.message)

    def test_delete_large_board_never_blocks(self):
        """No Redis command of the delete over 10 ms (SLOWLOG)."""
        self.fill("big", LARGE, prefix="member-")
        self.redis_cli("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        self.redis_cli("SLOWLOG", "RESET")
        r = self.client.DeleteBoard(DeleteBoardRequest(board="big",
                                                       request_id="big-1"))
        self.assertTrue(r.applied)
        self.assertEqual(self.count("big"), 0)
        self.assertEqual(self.redis_cli("SLOWLOG", "LEN").strip(),
                         "(integer) 0", self.redis_cli("SLOWLOG", "GET"))
        self.redis_cli("CONFIG", "SET", "slowlog-log-slower-than", "10000")

    def updating(self, board, stop, errors, members=300, prefix="m",
                 done=None):
        """Updates board (+1 to random members, each with a request id of
        its own) on a connection of its own until stop is set; done, if
        given, is set after the first batch."""
        client, transport = connect(self.port)
        i = 0
        try:
            while not stop.is_set():
                i += 1
                reqs = [UpdateRequest(
                    board=board,
                    member=f"{prefix}{(i * 7919 + k * 13) % members}",
                    value=1, request_id=f"{threading.get_ident()}-{i}-{k}")
                    for k in range(8)]
                for r in client.UpdateBatch(
                        UpdateBatchRequest(requests=reqs)).results:
                    if r.response is None:
                        errors.append(r)
                if done is not None:
                    done.set()
        except Exception as e:  # noqa: BLE001 (reported by the test)
            errors.append(e)
        finally:
            transport.close()

    def assert_consistent(self, board, shards):
        """Each scope's sorted set and times hash hold the same members,
        and GetTopN lists each member once."""
        for tag in ([f"rk:{{{board}}}:"] if shards == 1 else
                    [f"rk:s:{{{board}/{i}}}:" for i in range(shards)]):
            scopes = {k[:-1] for k in self.keys()
                      if k.startswith(tag.encode()) and k.endswith(b":z")}
            for z in scopes:
                z = z.decode() + "z"
                t = z[:-1] + "t"
                zcard = int(self.redis_cli("ZCARD", z).split()[-1])
                hlen = int(self.redis_cli("HLEN", t).split()[-1])
                self.assertEqual(zcard, hlen, z)
        top = self.client.GetTopN(GetTopNRequest(board=board, n=1000))
        members = [e.member for e in top]
        self.assertEqual(len(members), len(set(members)), board)
        self.assertEqual(len(members), self.count(board), board)

    def test_clear_during_updates_keeps_keys_together(self):
        """DeleteBoard and ResetBoard while updates run: afterwards every
        member is on the board once and its keys agree (issue 49: the keys
        went key by key as SCAN found them, and a board came out with its
        sorted set holding more entries than its times hash). Other keys
        spread a board's keys over SCAN's pages."""
        self.redis_cli("EVAL", "for i = 1, 20000 do "
                       "redis.call('SET', 'filler:' .. i, i) end", "0")
        try:
            for board, shards in (("race", 1), ("race_sh", 4),
                                  ("race_day", 1), ("race_shday", 3)):
                for round_ in range(4):
                    stop, errors = threading.Event(), []
                    threads = [threading.Thread(
                        target=self.updating, args=(board, stop, errors))
                        for _ in range(3)]
                    for t in threads:
                        t.start()
                    # Wait for the board to be under way (a condition, with
                    # a deadline).
                    end = time.monotonic() + 30
                    while self.count(board) < 50 and time.monotonic() < end:
                        time.sleep(0.01)
                    for k in range(3):
                        rid = f"{board}-clear-{round_}-{k}"
                        if (round_ + k) % 2 == 0:
                            self.client.DeleteBoard(DeleteBoardRequest(
                                board=board, request_id=rid))
                        else:
                            self.client.ResetBoard(ResetBoardRequest(
                                board=board, request_id=rid))
                    stop.set()
                    for t in threads:
                        t.join(60)
                    self.assertEqual(errors, [])
                    self.assert_consistent(board, shards)
        finally:
            self.redis_cli("EVAL", "for i = 1, 20000 do "
                           "redis.call('DEL', 'filler:' .. i) end", "0")

    def test_admin_calls_cost_what_the_board_costs(self):
        """GetBoardInfo, DeleteBoard and ResetBoard name a board's keys:
        on a node of 100,000 other keys they send a few commands, and no
        SCAN (issue 49: a SCAN over every key of the node, 2 s for one
        GetBoardInfo on a Redis of 1M keys)."""
        self.fill("cost", 50)
        self.fill("race_shday", 50)
        self.redis_cli("EVAL", "for i = 1, 100000 do "
                       "redis.call('SET', 'other:' .. i, i) end", "0")
        try:
            keys = len(self.board_keys("race_shday"))
            self.redis_cli("CONFIG", "RESETSTAT")
            c = self.client
            for board in ("nobody", "cost"):
                c.GetBoardInfo(GetBoardInfoRequest(board=board))
            info = c.GetBoardInfo(GetBoardInfoRequest(board="race_shday"))
            c.ResetBoard(ResetBoardRequest(board="cost", request_id="c-1"))
            c.DeleteBoard(DeleteBoardRequest(board="race_shday",
                                             request_id="c-2"))
            stats = self.redis_cli("INFO", "commandstats")
            self.assertEqual(info.keys, keys)
            self.assertEqual(len(info.periods), 1)
            self.assertEqual(self.board_keys("race_shday"), set())
            self.assertEqual(self.count("cost"), 0)
            self.assertNotIn("cmdstat_scan:", stats)
            calls = sum(int(line.split("calls=")[1].split(",")[0])
                        for line in stats.splitlines()
                        if line.startswith("cmdstat_"))
            self.assertLess(calls, 400, stats)
        finally:
            self.redis_cli("EVAL", "for i = 1, 100000 do "
                           "redis.call('DEL', 'other:' .. i) end", "0")

    # ---- ResetBoard ----

    def test_reset_keeps_layout_and_request_ids(self):
        c = self.client
        self.fill("dense", 40)
        layout = c.GetBoardInfo(GetBoardInfoRequest(board="dense"))
        r = c.ResetBoard(ResetBoardRequest(board="dense", request_id="rs-1"))
        self.assertTrue(r.applied)
        self.assertEqual(self.count("dense"), 0)
        info = c.GetBoardInfo(GetBoardInfoRequest(board="dense"))
        self.assertEqual(info.stored_layout, layout.stored_layout)
        # A retry of an update from before the reset is still known.
        again = c.Update(UpdateRequest(board="dense", member="m1", value=1,
                                       request_id="dense-1",
                                       mode=UpdateMode.SET))
        self.assertFalse(again.applied)
        self.assertEqual(self.count("dense"), 0)
        self.assertIn("dense", [b.board for b in self.all_boards(1000)[0]])
        self.assertFalse(c.ResetBoard(ResetBoardRequest(
            board="dense", request_id="rs-1")).applied)

    # ---- Export ----

    def test_export_pages_every_entry(self):
        c = self.client
        reqs = [UpdateRequest(board="sh", member=f"e{i}", value=i * 10,
                              request_id=f"exp-{i}", mode=UpdateMode.SET,
                              timestamp_ms=T0 + i,
                              data={"name": f"E{i}"} if i % 3 == 0 else None)
                for i in range(250)]
        c.UpdateBatch(UpdateBatchRequest(requests=reqs))
        got = {e.member: e for e in self.export_all("sh", count=10)
               if e.member.startswith("e")}
        self.assertEqual(len(got), 250)
        for i in range(250):
            e = got[f"e{i}"]
            self.assertEqual((e.score, e.timestamp_ms), (i * 10, T0 + i))
            self.assertEqual(e.data, {"name": f"E{i}"} if i % 3 == 0 else None)
            self.assertIsNone(e.subscores)

    def test_export_subscores_and_order_keys(self):
        c = self.client
        c.Update(UpdateRequest(board="sub", member="a", value=5,
                               request_id="s-a", subscores=[-3, 2**62],
                               timestamp_ms=T0, mode=UpdateMode.SET))
        c.Update(UpdateRequest(board="sub", member="b", value=-(2**53 - 1),
                               request_id="s-b", subscores=[7, -(2**63)],
                               timestamp_ms=T0 + 5, mode=UpdateMode.SET))
        got = {e.member: e for e in self.export_all("sub")}
        self.assertEqual((got["a"].score, got["a"].subscores,
                          got["a"].timestamp_ms), (5, [-3, 2**62], T0))
        self.assertEqual((got["b"].score, got["b"].subscores,
                          got["b"].timestamp_ms),
                         (-(2**53 - 1), [7, -(2**63)], T0 + 5))

    def test_export_under_updates_keeps_every_member(self):
        """Every member on the board for the whole export is in it exactly
        once, with a score it had during the export, while updates move
        members (issue 49: ZSCAN missed members an update re-added under a
        new order key; 48,989 of 50,000 came out)."""
        n = 5_000 if WRAPPER else 20_000
        self.fill("exp_upd", n, prefix="x")
        start = {f"x{i}": i % 97 for i in range(n)}
        stop, errors, started = threading.Event(), [], threading.Event()
        threads = [threading.Thread(
            target=self.updating, args=("exp_upd", stop, errors, n, "x",
                                        started))
            for _ in range(2)]
        for t in threads:
            t.start()
        try:
            self.assertTrue(started.wait(30))
            entries = self.export_all("exp_upd", count=100)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        self.assertEqual(errors, [])
        members = [e.member for e in entries]
        self.assertEqual(len(members), len(set(members)))
        got = {e.member: e.score for e in entries}
        final = {e.member: e.score for e in self.export_all("exp_upd")}
        for m, s in start.items():
            self.assertIn(m, got)
            # +1 updates only: a score it had during the export.
            self.assertTrue(s <= got[m] <= final[m], (m, s, got[m], final[m]))

    def test_export_refuses_bad_fields(self):
        for req, field in ((ExportRequest(board="sh", count=0), "count"),
                           (ExportRequest(board="sh", count=1001), "count"),
                           (ExportRequest(board="sh", cursor="9:0"), "cursor"),
                           (ExportRequest(board="sh", cursor="zz"), "cursor"),
                           (ExportRequest(board="daily", periods_back=9),
                            "periods_back")):
            with self.assertRaises(InvalidArgument) as cm:
                self.client.Export(req)
            self.assertIn(field, cm.exception.message)

    def test_export_refuses_a_cursor_that_is_not_utf8(self):
        """A cursor of bytes that are not UTF-8 (sent as they are, which the
        generated client's writeString cannot do): the InvalidArgument names
        the cursor and reaches the client, its message printable ASCII."""
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport
        from ranking import Ranking

        class RawStrings(TBinaryProtocol.TBinaryProtocol):
            def writeString(self, s):
                self.writeBinary(s if isinstance(s, bytes) else s.encode())

        sock = TSocket.TSocket("127.0.0.1", self.port)
        sock.setTimeout(60000)
        transport = TTransport.TFramedTransport(sock)
        transport.open()
        try:
            client = Ranking.Client(RawStrings(transport))
            for cursor in (b"\xff\xfe:0", b"0:\xc3", b"\xe2\x82" * 40):
                with self.assertRaises(InvalidArgument) as cm:
                    client.Export(ExportRequest(board="sh", cursor=cursor))
                message = cm.exception.message
                self.assertIn("cursor", message)
                self.assertTrue(message.isascii() and message.isprintable(),
                                message)
            # The connection is still good.
            self.assertEqual(client.Export(ExportRequest(
                board="never_written")).entries, [])
        finally:
            transport.close()

    def test_export_empty_board(self):
        self.assertEqual(self.export_all("never_written"), [])


if __name__ == "__main__":
    unittest.main()
