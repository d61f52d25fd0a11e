"""rankctl against a real rankd: tables, JSON and every exit code.

Usage: test_rankctl.py RANKD RANKCTL
Starts its own redis-server and rankds on free loopback ports: one as
configured by default, one buffered+compact, one whose Redis is down (for
Unavailable), and a stand-in Thrift server that answers every call with a
TApplicationException, junk or a closed connection (for exit codes 3 and 4);
and a rankd reached over TLS that requires a client certificate
(tls_rankd.py), for --tls-* and $RANKCTL_TLS_*.
RANKCTL_WRAPPER (e.g. "valgrind --error-exitcode=99 ...") runs each rankctl
under it.
"""
import json
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import threading
import unittest

RANKD, RANKCTL = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.Thrift import TApplicationException, TMessageType  # noqa: E402
from thrift.transport import TTransport  # noqa: E402

import certs  # noqa: E402
from servers import free_port, request_id_records, start  # noqa: E402
from tls_rankd import TlsRankd  # noqa: E402

WRAPPER = shlex.split(os.environ.get("RANKCTL_WRAPPER", ""))
CONFIG = """[board raid]
subscores=asc,desc
mode=best

[board daily]
period=daily
retention=2

[board rolling]
period=daily
window=3
retention=2

[board hist_7d]
period=daily
window=7
retention=6
accept_late=true

[board rt_sub]
subscores=asc,desc

[board rt_sub_copy]
subscores=asc,desc

[board rt_sh]
shards=4

[board rt_sh_copy]
shards=4

[board big_sh]
shards=4

[board cfg_only]

[board rq]
queue=on
"""
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def doc_window_example():
    """docs/configuration.md's "last 7 days" board, as written: its [board]
    section, and its shell session as (command, expected output) pairs."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "docs", "configuration.md")
    with open(path, encoding="utf-8") as f:
        text = f.read().split('### A "last 7 days" board', 1)[1]
    ini, rest = text.split("```ini\n", 1)[1].split("```\n", 1)
    session = rest.split("```\n", 2)[1]
    steps = []
    for line in session.splitlines():
        if line.startswith("$ "):
            steps.append([line[2:], ""])
        else:
            steps[-1][1] += line + "\n"
    return ini, steps


DOC_WINDOW_INI, DOC_WINDOW_STEPS = doc_window_example()
CONFIG += "\n" + DOC_WINDOW_INI


class StandIn:
    """A Thrift server (framed, binary) that reads one call per connection
    and answers as `mode` says: "exception" (a TApplicationException),
    "junk" (a frame that is no Thrift message) or "close" (nothing)."""

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.calls = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.answer(conn)

    def answer(self, conn):
        head = self.read(conn, 4)
        if head is None:
            return
        body = self.read(conn, struct.unpack(">i", head)[0])
        proto = TBinaryProtocol.TBinaryProtocol(
            TTransport.TMemoryBuffer(body))
        name, _, seqid = proto.readMessageBegin()
        self.calls.append(name)
        if self.mode == "close":
            return
        out = TTransport.TMemoryBuffer()
        if self.mode == "exception":
            reply = TBinaryProtocol.TBinaryProtocol(out)
            reply.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
            TApplicationException(TApplicationException.INTERNAL_ERROR,
                                  "stand-in says no").write(reply)
            reply.writeMessageEnd()
        else:
            out.write(b"\x00\x00\x00\x07garbage")
        data = out.getvalue()
        conn.sendall(struct.pack(">i", len(data)) + data)

    @staticmethod
    def read(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def close(self):
        self.sock.close()


class RankctlTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankctl-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.procs = []
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = cls.start_rankd(
            "--config", conf, "--redis", f"127.0.0.1:{cls.redis_port}")
        cls.rankd_compact, cls.port_compact = cls.start_rankd(
            "--redis", f"127.0.0.1:{cls.redis_port}",
            "--transport", "buffered", "--protocol", "compact")
        # Redis on a port nobody listens on: every call is Unavailable.
        cls.rankd_down, cls.port_down = cls.start_rankd(
            "--redis", f"127.0.0.1:{free_port()}", "--redis-timeout", "0.2")

    @classmethod
    def start_rankd(cls, *args):
        proc, port = start(
            # export and the board commands need admin, granted on purpose.
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--grant",
                       "anonymous=read,write,admin", *args], cls.dir)
        cls.procs.append(proc)
        return proc, port

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            proc.terminate()
            assert proc.wait(30) == 0, "rankd did not exit cleanly"
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    def ctl(self, *args, code=0, port=None, env=None):
        """Runs rankctl (RANKCTL_CONNECT: our rankd, or port); checks its
        exit code; returns stdout and stderr."""
        environ = dict(os.environ,
                       RANKCTL_CONNECT=f"127.0.0.1:{port or self.port}")
        environ.update(env or {})
        r = subprocess.run([*WRAPPER, RANKCTL, *args], capture_output=True,
                           text=True, env=environ, timeout=120)
        self.assertEqual(r.returncode, code, (args, r.stdout, r.stderr))
        if code != 0:
            self.assertRegex(r.stderr, r"^rankctl: ", args)
        return r.stdout, r.stderr

    def json(self, *args):
        return json.loads(self.ctl("--json", *args)[0])

    # ---- output ----

    def test_update_fields_and_retry(self):
        out, _ = self.ctl("update", "u", "alice", "120", "--mode", "best",
                          "--request-id", "u-1")
        self.assertEqual(out, "score       120\n"
                              "rank        1\n"
                              "applied     yes\n"
                              "request_id  u-1\n")
        out, _ = self.ctl("update", "u", "alice", "120", "--mode", "best",
                          "--request-id", "u-1")
        self.assertIn("applied     no (a retry: nothing changed)\n", out)
        # Without --request-id, a random UUID, shown for a retry.
        out, _ = self.ctl("update", "u", "bob", "5")
        self.assertRegex(out, f"request_id  {UUID}\n")
        first = re.search(UUID, out).group(0)
        out, _ = self.ctl("update", "u", "bob", "5")
        self.assertNotIn(first, out)
        self.assertEqual(self.json("count", "u"), {"count": 2})
        self.assertEqual(
            self.json("update", "u", "alice", "-20", "--mode=increment",
                      "--request-id=u-2", "--timestamp-ms", "1000"),
            {"score": 100, "rank": 1, "applied": True, "request_id": "u-2"})

    def test_update_without_rank(self):
        # UpdateRequest.with_rank false: the answer has no rank row, and a
        # retry is still recognised.
        self.ctl("update", "wr", "bob", "50")
        out, _ = self.ctl("update", "wr", "alice", "20", "--without-rank",
                          "--request-id", "wr-1")
        self.assertEqual(out, "score       20\n"
                              "applied     yes\n"
                              "request_id  wr-1\n")
        self.assertEqual(
            self.json("update", "wr", "alice", "20", "--without-rank",
                      "--request-id", "wr-1"),
            {"score": 20, "applied": False, "request_id": "wr-1"})
        self.assertEqual(self.json("rank", "wr", "alice")["rank"], 2)
        # Only update takes it.
        _, err = self.ctl("enqueue", "wr", "alice", "1", "--without-rank",
                          code=2)
        self.assertIn("enqueue takes no --without-rank", err)

    def test_tables(self):
        for member, score in (("alice", "120"), ("bob", "95"), ("Zoë", "120"),
                              ("張偉", "1000000"), ("new\nline", "-3")):
            self.ctl("update", "tb", member, score, "--timestamp-ms",
                     str(1000 + len(member)))
        self.ctl("update", "tb", "bob", "0", "--data", "name=Bob Smith",
                 "--data", "country=FR")
        # Numbers right-aligned, text left; wide characters take two
        # columns; control characters cannot break a row.
        out, _ = self.ctl("top", "tb")
        self.assertEqual(out, "RANK  MEMBER         SCORE\n"
                              "   1  張偉         1000000\n"
                              "   2  Zoë              120\n"
                              "   3  alice            120\n"
                              "   4  bob               95\n"
                              "   5  new\\x0aline       -3\n")
        out, _ = self.ctl("top", "tb", "2", "--offset", "2", "--with-data")
        self.assertEqual(out, "RANK  MEMBER  SCORE  DATA\n"
                              "   3  alice     120\n"
                              "   4  bob        95  country=FR name=Bob Smith\n")
        out, _ = self.ctl("around", "tb", "alice", "1")
        self.assertEqual(out, "RANK  MEMBER  SCORE\n"
                              "   2  Zoë       120\n"
                              "   3  alice     120\n"
                              "   4  bob        95\n")
        out, _ = self.ctl("ranks", "tb", "bob", "ghost", "張偉")
        self.assertEqual(out, "RANK  MEMBER    SCORE\n"
                              "   4  bob          95\n"
                              "   -  ghost         -\n"
                              "   1  張偉    1000000\n")
        out, _ = self.ctl("rank", "tb", "bob")
        self.assertEqual(out, "RANK  MEMBER  SCORE\n   4  bob        95\n")
        out, _ = self.ctl("get-data", "tb", "bob")
        self.assertEqual(out, "KEY      VALUE\n"
                              "country  FR\n"
                              "name     Bob Smith\n")
        self.assertEqual(self.ctl("count", "tb")[0], "5\n")
        self.assertEqual(self.ctl("count-between", "tb", "95", "120")[0],
                         "3\n")
        self.assertEqual(self.ctl("percentile", "tb", "bob")[0], "20\n")
        self.assertEqual(
            self.ctl("score-at-percentile", "tb", "100")[0], "1000000\n")
        self.assertEqual(self.ctl("score-at-percentile", "tb", "0")[0],
                         "-3\n")
        self.assertEqual(
            self.ctl("score-at-percentile", "tb", "1e2")[0], "1000000\n")
        out, _ = self.ctl("sample", "tb", "100", "200")
        lines = out.splitlines()
        self.assertEqual(lines[0], "RANK  MEMBER  SCORE")
        self.assertEqual(sorted(lines[1:]), ["   2  Zoë       120",
                                             "   3  alice     120"])
        out, _ = self.ctl("top", "empty-board")
        self.assertEqual(out, "RANK  MEMBER  SCORE\n")

    def test_json(self):
        tricky = 'q"b\\s\t\x01é'
        self.ctl("update", "j", tricky, "10", "--data", f"k={tricky}")
        self.ctl("update", "j", "b", "9007199254740991")
        self.assertEqual(self.json("top", "j", "--with-data"), [
            {"rank": 1, "member": "b", "score": 9007199254740991},
            {"rank": 2, "member": tricky, "score": 10,
             "data": {"k": tricky}}])
        self.assertEqual(self.json("rank", "j", tricky),
                         {"rank": 2, "member": tricky, "score": 10})
        self.assertEqual(self.json("around", "j", "b", "0"),
                         [{"rank": 1, "member": "b",
                           "score": 9007199254740991}])
        self.assertEqual(self.json("ranks", "j", tricky, "ghost"), [
            {"member": tricky, "found": True, "rank": 2, "score": 10},
            {"member": "ghost", "found": False}])
        self.assertEqual(self.json("count", "j"), {"count": 2})
        self.assertEqual(self.json("count-between", "j", "0", "10"),
                         {"count": 1})
        self.assertEqual(self.json("percentile", "j", "b"),
                         {"percentile": 50})
        self.assertEqual(self.json("score-at-percentile", "j", "100"),
                         {"score": 9007199254740991})
        self.assertEqual(self.json("get-data", "j", tricky), {"k": tricky})
        self.assertEqual(self.json("get-data", "j", "b"), {})
        self.assertEqual(self.json("set-data", "j", "b", "x=1", "y="),
                         {"data": {"x": "1", "y": ""}})
        drawn = self.json("sample", "j", "-5", "9007199254740991", "5")
        self.assertEqual(sorted(e["member"] for e in drawn), ["b", tricky])
        self.assertEqual(self.json("remove", "j", "b", "--request-id", "j-r"),
                         {"removed": True, "applied": True,
                          "request_id": "j-r"})
        self.assertEqual(self.json("remove", "j", "b", "--request-id", "j-r"),
                         {"removed": False, "applied": False,
                          "request_id": "j-r"})
        self.assertEqual(self.json("top", "j", "--offset", "5"), [])

    def test_subscores_and_data(self):
        out = self.json("update", "raid", "t7", "12", "--subscore", "4",
                        "--subscore", "93000", "--request-id", "r-1")
        self.assertEqual(out["subscores"], [4, 93000])
        out, _ = self.ctl("update", "raid", "t8", "12", "--subscore", "4",
                          "--subscore", "-9223372036854775808",
                          "--request-id", "r-2")
        self.assertIn("subscores   4,-9223372036854775808\n", out)
        self.ctl("update", "raid", "t9", "12", "--subscore", "3",
                 "--subscore", "9223372036854775807", "--data", "name=Nine",
                 "--request-id", "r-3")
        # asc then desc: fewer characters first, then the higher subscore.
        out, _ = self.ctl("top", "raid", "--with-data")
        self.assertEqual(
            out, "RANK  MEMBER  SCORE  SUBSCORES               DATA\n"
                 "   1  t9         12  3,9223372036854775807   name=Nine\n"
                 "   2  t7         12  4,93000\n"
                 "   3  t8         12  4,-9223372036854775808\n")
        self.assertEqual(self.json("rank", "raid", "t8")["subscores"],
                         [4, -9223372036854775808])
        self.assertEqual(self.ctl("set-data", "raid", "t7", "name=Seven",
                                  "tag=a=b")[0], "data replaced: 2 keys\n")
        self.assertEqual(self.json("around", "raid", "t7", "1",
                                   "--with-data")[1],
                         {"rank": 2, "member": "t7", "score": 12,
                          "subscores": [4, 93000],
                          "data": {"name": "Seven", "tag": "a=b"}})
        self.assertEqual(self.ctl("set-data", "raid", "t7")[0],
                         "data deleted\n")
        self.assertEqual(self.ctl("get-data", "raid", "t7")[0], "KEY  VALUE\n")
        out, _ = self.ctl("remove", "raid", "t7", "--request-id", "r-4")
        self.assertEqual(out, "removed     yes\n"
                              "applied     yes\n"
                              "request_id  r-4\n")
        out, _ = self.ctl("remove", "raid", "t7", "--request-id", "r-4")
        self.assertIn("applied     no (a retry: nothing changed)\n", out)

    def test_periods_back(self):
        self.ctl("update", "daily", "p", "3")
        self.assertEqual(self.json("top", "daily", "--periods-back", "0"),
                         [{"rank": 1, "member": "p", "score": 3}])
        self.assertEqual(self.json("top", "daily", "--periods-back", "1"), [])
        self.assertEqual(self.json("count", "daily", "--periods-back=2"),
                         {"count": 0})
        _, err = self.ctl("count", "daily", "--periods-back", "3", code=2)
        self.assertIn("periods_back", err)

    def test_window(self):
        # Nothing has written the window's keys: it reads as an empty board.
        self.assertEqual(self.json("top", "rolling", "--window"), [])
        self.assertEqual(self.json("count", "rolling", "--window"),
                         {"count": 0})
        for args in (("rank", "rolling", "p"), ("around", "rolling", "p"),
                     ("percentile", "rolling", "p"),
                     ("score-at-percentile", "rolling", "50")):
            self.ctl(*args, "--window", code=1)
        for args in (("ranks", "rolling", "p", "q"),
                     ("count-between", "rolling", "0", "9"),
                     ("sample", "rolling", "0", "9")):
            self.ctl(*args, "--window")
        _, err = self.ctl("count", "daily", "--window", code=2)
        self.assertIn("window: board 'daily' has no rolling window", err)
        _, err = self.ctl("count", "rolling", "--window", "--periods-back",
                          "1", code=2)
        self.assertIn("window: reads the current window", err)
        _, err = self.ctl("top", "rolling", "--window", "--with-data", code=2)
        self.assertIn("with_data: a rolling window keeps no member data", err)
        _, err = self.ctl("get-data", "rolling", "p", "--window", code=2)
        self.assertIn("get-data takes no --window", err)

    def test_window_doc_example(self):
        """docs/configuration.md's "last 7 days" session runs as written:
        each command's output where the page shows one."""
        environ = dict(os.environ, RANKCTL_CONNECT=f"127.0.0.1:{self.port}",
                       PATH=os.path.dirname(RANKCTL) + ":"
                       + os.environ.get("PATH", ""))
        self.assertGreaterEqual(len(DOC_WINDOW_STEPS), 5)
        for command, want in DOC_WINDOW_STEPS:
            self.assertTrue(command.startswith("rankctl "), command)
            r = subprocess.run(command, shell=True, capture_output=True,
                               text=True, env=environ, timeout=120)
            self.assertEqual(r.returncode, 0, (command, r.stderr))
            if want:
                self.assertEqual(r.stdout, want, command)

    # ---- exit codes ----

    def test_not_found_is_1(self):
        self.ctl("update", "nf", "here", "1")
        for args, message in (
                (("rank", "nf", "ghost"), "member 'ghost' is not on"),
                (("around", "nf", "ghost"), "member 'ghost' is not on"),
                (("percentile", "nf", "ghost"), "member 'ghost' is not on"),
                (("get-data", "nf", "ghost"), "member 'ghost' is not on"),
                (("set-data", "nf", "ghost", "a=b"),
                 "member 'ghost' is not on"),
                (("score-at-percentile", "nf-empty", "50"), "no members")):
            _, err = self.ctl(*args, code=1)
            self.assertIn(message, err, args)
        _, err = self.ctl("rank", "nf", "ghost", code=1)
        self.assertEqual(err, "rankctl: member 'ghost' is not on board "
                              "'nf'\n")

    def test_invalid_is_2(self):
        # InvalidArgument from rankd: its message, naming the field.
        for args, field in ((("top", "iv", "0"), "n: must be 1-1000, got 0"),
                            (("around", "iv", "m", "101"), "radius"),
                            (("update", "iv", "x", "9007199254740992"),
                             "value:"),
                            (("update", "raid", "x", "1", "--subscore", "1"),
                             "subscores: board 'raid' ranks by 2"),
                            (("score-at-percentile", "iv", "101"), "pct"),
                            (("sample", "iv", "0", "1", "0"), "count"),
                            (("top", "bad{board"), "board"),
                            (("update", "iv", "x", "1", "--data", "=v"),
                             "data")):
            _, err = self.ctl(*args, code=2)
            self.assertIn(field, err, args)
        # Usage errors: 2 even with rankd out of reach (checked first).
        closed = free_port()
        for args, message in (
                ((), "no command"),
                (("frobnicate",), "unknown command 'frobnicate'"),
                (("top",), "usage: rankctl top BOARD [N]"),
                (("rank", "b"), "usage: rankctl rank BOARD MEMBER"),
                (("count", "b", "c"), "usage: rankctl count BOARD"),
                (("top", "b", "ten"), "N: "),
                (("top", "b", "99999999999"), "N: "),
                (("update", "b", "x", "1.5"), "VALUE: "),
                (("update", "b", "x", "1", "--subscore", "x"), "--subscore"),
                (("update", "b", "x", "1", "--mode", "worst"), "--mode"),
                (("update", "b", "x", "1", "--timestamp-ms", "1e3"),
                 "--timestamp-ms"),
                (("update", "b", "x", "1", "--data", "novalue"),
                 "'novalue' is not KEY=VALUE"),
                (("update", "b", "x", "1", "--data", "a=1", "--data", "a=2"),
                 "key 'a' given twice"),
                (("count-between", "b", "1", " 2"), "MAX: "),
                (("sample", "b", "0", "x"), "MAX: "),
                (("score-at-percentile", "b", "nan"), "PCT: 'nan'"),
                (("score-at-percentile", "b", "0x10"), "PCT: '0x10'"),
                (("score-at-percentile", "b", "50 "), "PCT: '50 '"),
                (("top", "b", "--offset", "-"), "--offset"),
                (("top", "b", "--offset"), "--offset needs a value"),
                (("top", "b", "--periods-back", "x"), "--periods-back"),
                (("count", "b", "--with-data"), "count takes no --with-data"),
                (("remove", "b", "m", "--mode", "set"), "remove takes no"),
                (("top", "b", "--bogus"), "unknown option --bogus"),
                (("--json=yes", "count", "b"), "--json takes no value"),
                (("--timeout", "0", "count", "b"), "--timeout"),
                (("--transport", "tcp", "count", "b"), "--transport"),
                (("--protocol", "json", "count", "b"), "--protocol"),
                (("--connect", "unix:/x", "count", "b"), "--connect"),
                (("--connect", "h:99999", "count", "b"), "--connect")):
            _, err = self.ctl(*args, code=2, port=closed)
            self.assertIn(message, err, args)
        _, err = self.ctl("count", "b", code=2,
                          env={"RANKCTL_CONNECT": "h:x"})
        self.assertIn("RANKCTL_CONNECT", err)

    def test_unavailable_is_3(self):
        _, err = self.ctl("count", "b", code=3, port=free_port())
        self.assertRegex(err, r"^rankctl: cannot reach rankd at "
                              r"127\.0\.0\.1:\d+: ")
        # Unavailable from rankd (its Redis is down): rankd's message; an
        # update that may have been applied names its request id for a retry.
        # (The wording depends on where rankd's link to the dead Redis is:
        # "Redis at ... is unavailable" or "lost the connection to Redis".)
        _, err = self.ctl("rank", "b", "m", code=3, port=self.port_down)
        self.assertRegex(err, r"^rankctl: .*Redis at 127\.0\.0\.1:\d+")
        _, err = self.ctl("update", "b", "m", "1", code=3,
                          port=self.port_down)
        self.assertRegex(err, f"to retry, reuse --request-id {UUID}")
        _, err = self.ctl("update", "b", "m", "1", "--request-id", "mine",
                          code=3, port=self.port_down)
        self.assertNotIn("to retry", err)
        # Framing or protocol unlike rankd's: it closes the connection.
        _, err = self.ctl("count", "b", code=3, port=self.port_compact)
        self.assertIn("do --transport and --protocol match", err)
        stand_in = StandIn("close")
        try:
            _, err = self.ctl("remove", "b", "m", code=3, port=stand_in.port)
            self.assertIn("no answer from rankd", err)
            self.assertRegex(err, f"to retry, reuse --request-id {UUID}")
            self.assertEqual(stand_in.calls, ["Remove"])
        finally:
            stand_in.close()

    def test_other_errors_are_4(self):
        for mode, message in (("exception", "stand-in says no"),
                              ("junk", "rankd: ")):
            stand_in = StandIn(mode)
            try:
                _, err = self.ctl("top", "b", code=4, port=stand_in.port)
                self.assertIn(message, err)
                self.assertEqual(stand_in.calls, ["GetTopN"])
            finally:
                stand_in.close()
        if os.path.exists("/dev/full"):
            with open("/dev/full", "w") as full:
                r = subprocess.run([*WRAPPER, RANKCTL, "--help"],
                                   stdout=full, stderr=subprocess.PIPE,
                                   text=True, timeout=120)
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn("writing the output failed", r.stderr)

    # ---- options ----

    def test_transport_and_protocol(self):
        self.ctl("update", "tp", "m", "7", "--request-id", "tp-1")
        out, _ = self.ctl("--transport", "buffered", "--protocol", "compact",
                          "rank", "tp", "m", port=self.port_compact)
        self.assertEqual(out, "RANK  MEMBER  SCORE\n   1  m           7\n")

    def test_connect_option_beats_environment(self):
        self.ctl("update", "cn", "m", "1", "--request-id", "cn-1")
        out, _ = self.ctl("--connect", f"127.0.0.1:{self.port}", "count",
                          "cn", "--timeout", "2.5", port=free_port())
        self.assertEqual(out, "1\n")
        # Options anywhere, -- ends them.
        self.ctl("update", "cn", "--request-id", "cn-2", "--", "--m", "5")
        self.assertEqual(self.json("rank", "cn", "--", "--m")["score"], 5)

    def test_help(self):
        out, _ = self.ctl("--help", port=free_port())
        self.assertIn("Examples:\n  rankctl update run_hero alice 120", out)
        for command in ("update", "rank", "top", "around", "ranks", "remove",
                        "count", "count-between", "percentile",
                        "score-at-percentile", "sample", "set-data",
                        "get-data", "import"):
            self.assertRegex(out, f"\n  {command} BOARD")
        self.assertRegex(" ".join(out.split()),
                         r"not spreadsheet-safe: .* beginning with =, \+, "
                         r"-, @")
        for code in ("0  done", "1  not found", "2  invalid",
                     "3  unavailable", "4  any other error"):
            self.assertIn(code, out)
        self.assertEqual(self.ctl("top", "-h")[0], out)
        self.assertRegex(self.ctl("--version")[0],
                         r"^rankctl \d+\.\d+\.\d+ \(IDL 1\.8\)\n$")

    # ---- the server, import ----

    def test_info(self):
        info = self.json("info")
        self.assertEqual(info["idl_version"], "1.8")
        self.assertRegex(info["version"], r"^\d+\.\d+\.\d+$")
        # The IDL's comment on ServerInfo.version names no other version.
        idl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                           "idl", "ranking.thrift")
        with open(idl, encoding="utf-8") as f:
            text = f.read()
        comment = re.search(r"struct ServerInfo \{\s*/\*\*(.*?)\*/",
                            text, re.S).group(1)
        for named in re.findall(r"\d+\.\d+\.\d+", comment):
            self.assertEqual(named, info["version"], comment)
        self.assertEqual(info["configured_boards"],
                         CONFIG.count("[board "))
        self.assertGreaterEqual(info["uptime_seconds"], 0)
        out, _ = self.ctl("info")
        self.assertRegex(out, r"^version +\d+\.\d+\.\d+\nidl_version +1\.8\n")

    def test_first_load_of_scripts_logs_as_normal(self):
        """Redis without rankd's scripts (every first start): loading them
        is logged as the normal event it is, without Redis's 'ERR Function
        not found', which reads as a failure."""
        self.ctl("update", "fl", "m", "1", "--request-id", "fl-1")
        logs = ""
        for name in os.listdir(self.dir):
            if name.startswith("log-"):
                with open(os.path.join(self.dir, name), encoding="utf-8",
                          errors="replace") as f:
                    logs += f.read()
        self.assertIn("loading update.lua into Redis", logs)
        for line in logs.splitlines():
            if "loading " in line:
                self.assertNotRegex(line, r"ERR|not found", line)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_import(self):
        csv = self.write("imp.csv", (
            "member,score,timestamp_ms,subscores,data\n"
            '"a,""b""",10,1000,,"{""name"":""A, B""}"\n'
            '"multi\nline",10,999,,\n'
            '"c",-5,1001,,\n'))
        out, err = self.ctl("import", "imp", csv)
        self.assertEqual(out, "3 records: 3 applied, 0 applied before (same "
                              "file, same request ids), 0 refused\n")
        # Equal scores: the earlier time first, as exported.
        self.assertEqual(
            self.json("top", "imp", "--with-data"),
            [{"rank": 1, "member": "multi\nline", "score": 10},
             {"rank": 2, "member": 'a,"b"', "score": 10,
              "data": {"name": "A, B"}},
             {"rank": 3, "member": "c", "score": -5}])
        # The same file again: the same request ids, nothing applied twice.
        self.ctl("update", "imp", "c", "100", "--mode", "set")
        self.assertEqual(self.json("import", "imp", csv),
                         {"records": 3, "applied": 0, "repeated": 3,
                          "refused": 0})
        self.assertEqual(self.json("rank", "imp", "c")["score"], 100)
        # JSON Lines, a refused record named by its line, the others applied.
        jsonl = self.write("imp.txt", (
            '{"member":"j1","score":7,"timestamp_ms":5}\n'
            '{"member":"' + "x" * 257 + '","score":1,"timestamp_ms":5}\n'
            '{"member":"j2","score":8,"timestamp_ms":5,"data":{"k":"v"}}\n'))
        out, err = self.ctl("import", "imp", jsonl, code=2)
        self.assertIn("ends in neither .csv nor .jsonl: give --format", err)
        out, err = self.ctl("import", "imp", jsonl, "--format", "jsonl",
                            code=2)
        self.assertIn("2 applied", out)
        self.assertIn("1 refused", out)
        self.assertRegex(err, r"line 2 \(member 'x+'\): member: must be "
                              r"1-256 bytes")
        self.assertEqual(self.json("get-data", "imp", "j2"), {"k": "v"})
        # A malformed file: refused whole, naming the line; nothing sent.
        bad = self.write("bad.csv", "member,score,timestamp_ms,subscores,data\n"
                                    '"ok",1,1,,\n"bad",x,1,,\n')
        _, err = self.ctl("import", "imp", bad, code=2)
        self.assertIn("line 3: score: 'x' is not an integer", err)
        self.assertEqual(self.json("ranks", "imp", "ok"),
                         [{"member": "ok", "found": False}])

    def test_import_fills_window_history(self):
        """An import of entries of past days (their timestamp_ms, on a
        board with accept_late) fills those days and the rolling window."""
        now = int(time.time() * 1000)
        csv = self.write("hist.csv", (
            "member,score,timestamp_ms,subscores,data\n"
            f'"a",5,{now - 3 * 86400000},,\n'
            f'"b",7,{now - 86400000},,\n'
            f'"c",9,{now},,\n'))
        self.ctl("import", "hist_7d", csv)
        self.ctl("update", "hist_7d", "a", "10")
        self.assertEqual(self.json("top", "hist_7d", "--window"),
                         [{"rank": 1, "member": "a", "score": 15},
                          {"rank": 2, "member": "c", "score": 9},
                          {"rank": 3, "member": "b", "score": 7}])
        self.assertEqual(self.json("top", "hist_7d"),
                         [{"rank": 1, "member": "a", "score": 10},
                          {"rank": 2, "member": "c", "score": 9}])

    def test_import_fits_calls_in_max_frame(self):
        """A record larger than rankd's --max-frame refuses the file by its
        line before anything is sent (exit 2, as a malformed file), not as
        rankd unavailable; records that each fit go in calls that fit."""
        header = "member,score,timestamp_ms,subscores,data\n"
        huge = self.write("huge.csv", header + '"ok",1,1,,\n"'
                          + "h" * (1024 * 1024) + '",2,1,,\n"ok2",3,1,,\n')
        _, err = self.ctl("import", "big_sh", huge, code=2)
        self.assertRegex(err, r"huge\.csv: line 3: the record takes \d+ "
                              r"bytes .* --max-frame of 1048576 bytes")
        self.assertEqual(self.json("count", "big_sh"), {"count": 0})
        # rankctl's --max-frame is rankd's: a larger one lets it through.
        _, err = self.ctl("import", "big_sh", huge, "--max-frame",
                          str(2 * 1024 * 1024), code=3)
        # 1,500 records of ~1.2 KB (a long member, data): 1,000 of them (a
        # call's worth on a sharded board) would be over 1 MiB.
        data = '"{' + ",".join(f'""k{i}"":""{"v" * 200}""'
                               for i in range(4)) + '}"'
        wide = self.write("wide.csv", header + "".join(
            f'"{i:04d}{"w" * 246}",{i},1,,{data}\n' for i in range(1500)))
        self.assertEqual(self.json("import", "big_sh", wide),
                         {"records": 1500, "applied": 1500, "repeated": 0,
                          "refused": 0})
        self.assertEqual(self.json("count", "big_sh"), {"count": 1500})

    def test_import_over_several_connections(self):
        """5,000 records go over 4 connections at once; the records of one
        member stay in the file's order (its last SET wins)."""
        lines = ["member,score,timestamp_ms,subscores,data"]
        for i in range(5000):
            lines.append(f'"p{i % 1200}",{i},{1000 + i},,')
        csv = self.write("many.csv", "\n".join(lines) + "\n")
        self.assertEqual(self.json("import", "many", csv),
                         {"records": 5000, "applied": 5000, "repeated": 0,
                          "refused": 0})
        self.assertEqual(self.json("count", "many"), {"count": 1200})
        # p7's records: 7, 1207, 2407, 3607, 4807: the last one stays.
        self.assertEqual(self.json("rank", "many", "p7")["score"], 4807)
        self.assertEqual(self.json("rank", "many", "p1199")["score"], 4799)
        self.assertEqual(self.json("import", "many", csv)["repeated"], 5000)
        # Sorted by member but with one twice: import sends by score, and
        # the member's records still go in the file's order.
        csv = self.write("twice.csv", "member,score,timestamp_ms,subscores,"
                         'data\n"a",-2,1,,\n"d",1,1,,\n"d",9,2,,\n"d",3,3,,\n'
                         '"e",-9,4,,\n')
        self.assertEqual(self.json("import", "twice", csv)["applied"], 5)
        self.assertEqual(self.json("rank", "twice", "d")["score"], 3)
        self.assertEqual([e["member"] for e in self.json("top", "twice")],
                         ["d", "a", "e"])

    def records(self, board):
        return request_id_records(self.redis_port, board)

    def test_import_records_calls_as_a_whole(self):
        """Into a plain board, import sends 250 records a call, each call
        recorded as a whole: one request-id record a call. A record refused
        in a call leaves the others to a call of their own; a second run
        applies nothing again. Into a sharded board: a record each."""
        lines = ["member,score,timestamp_ms,subscores,data"]
        for i in range(300):
            lines.append(f'"g{i}",{i},{1000 + i},,')
        lines[100] = '"' + "x" * 257 + '",1,1,,'
        csv = self.write("grouped.csv", "\n".join(lines) + "\n")
        want = {"records": 300, "applied": 299, "repeated": 0, "refused": 1}
        out, err = self.ctl("--json", "import", "grp", csv, code=2)
        self.assertEqual(json.loads(out), want)
        self.assertIn("line 101 (member 'xxx", err)
        self.assertEqual(self.json("count", "grp"), {"count": 299})
        # Calls of 250 records (50 the last), one of which had the refused
        # record: 1 recorded, and one of the 249 others of that one.
        self.assertEqual(self.records("grp"), 2)
        self.assertEqual(self.json("rank", "grp", "g299")["rank"], 1)
        out, _ = self.ctl("--json", "import", "grp", csv, code=2)
        self.assertEqual(json.loads(out),
                         dict(want, applied=0, repeated=299))
        self.assertEqual(self.records("grp"), 2)
        self.assertEqual(self.json("count", "grp"), {"count": 299})
        # The same calls over the buffered transport and compact protocol.
        compact = ("--transport", "buffered", "--protocol", "compact")
        out, _ = self.ctl(*compact, "--json", "import", "grp_c", csv,
                          code=2, port=self.port_compact)
        self.assertEqual(json.loads(out), want)
        out, _ = self.ctl(*compact, "--json", "import", "grp_c", csv,
                          code=2, port=self.port_compact)
        self.assertEqual(json.loads(out), dict(want, applied=0, repeated=299))
        self.assertEqual(self.records("grp_c"), 2)
        lines[100] = '"g99b",5,5,,'
        csv = self.write("sharded.csv", "\n".join(lines) + "\n")
        self.assertEqual(self.json("import", "rt_sh", csv),
                         dict(want, applied=300, refused=0))
        self.assertEqual(self.json("import", "rt_sh", csv),
                         dict(want, applied=0, repeated=300, refused=0))


    # ---- export, and the board commands ----

    def canonical_file(self, fmt, rows):
        """rows (member, score, time, subscores, data) in export's own form:
        sorted by member bytewise."""
        out = ["member,score,timestamp_ms,subscores,data"] if fmt == "csv" \
            else []
        for m, score, t, subs, data in sorted(rows,
                                              key=lambda r: r[0].encode()):
            if fmt == "csv":
                d = json.dumps(data, separators=(",", ":"),
                               ensure_ascii=False, sort_keys=True) \
                    if data else ""
                out.append('"%s",%d,%d,%s,%s' % (
                    m.replace('"', '""'), score, t,
                    ";".join(str(x) for x in subs),
                    '"%s"' % d.replace('"', '""') if d else ""))
            else:
                e = {"member": m, "score": score, "timestamp_ms": t}
                if subs:
                    e["subscores"] = subs
                if data:
                    e["data"] = data
                out.append(json.dumps(e, separators=(",", ":"),
                                      ensure_ascii=False))
        return "\n".join(out) + "\n"

    def round_trip(self, source, copy, fmt, rows):
        # The file is in export's form: exporting what it loaded gives it
        # back, byte for byte.
        path = self.write(f"{source}.{fmt}", self.canonical_file(fmt, rows))
        self.ctl("import", source, path)
        first = os.path.join(self.dir, f"{source}-1.{fmt}")
        stats = self.json("export", source, "--output", first)
        self.assertEqual((stats["entries"], stats["read"]),
                         (len(rows), len(rows)))
        self.assertGreater(stats["pages"], 1)
        with open(path, "rb") as a, open(first, "rb") as b:
            self.assertEqual(a.read(), b.read())
        # A live update (rankd's clock) joins; then export, import into an
        # empty board, export again: the same bytes, the same order.
        self.ctl("update", source, "live", "7", "--mode", "set",
                 *(["--subscore", "1", "--subscore", "2"]
                   if source == "rt_sub" else []))
        exported, _ = self.ctl("export", source, "--format", fmt)
        again_path = self.write(f"{copy}.{fmt}", exported)
        self.ctl("import", copy, again_path)
        second, _ = self.ctl("export", copy, "--format", fmt)
        self.assertEqual(second, exported)
        self.assertEqual(self.json("top", copy, "1000", "--with-data"),
                         self.json("top", source, "1000", "--with-data"))

    def test_export_import_round_trip(self):
        rows = [
            ("a", 10, 1000, [1, -5], {"name": "A"}),
            ("b", 10, 999, [1, -5], None),          # tie: earlier first
            ("c", 10, 999, [1, -5], {"k": "é,\"q\""}),  # same time: by id
            ("d", -(2**53 - 1), 5, [-(2**63), 2**63 - 1], None),
            ("e\nline", 2**53 - 1, 7289654399999, [0, 0], {"empty": ""}),
            ("f,\"x\"", 0, 0, [3, 3], None),
            # Formula characters first: written as they are (the round trip
            # is byte-exact; CSV export is not spreadsheet-safe, --help says).
            ("=1+1", 1, 1, [0, 0], None),
            ("+x", 1, 1, [0, 0], None),
            ("-3", 1, 1, [0, 0], None),
            ("@SUM(A1)", 1, 1, [0, 0], {"f": "=2"}),
        ]
        for i in range(2500):  # several Export pages
            rows.append((f"m{i:05d}", i % 50, 10_000 + i % 7, [i % 3, i % 5],
                         {"n": str(i)} if i % 11 == 0 else None))
        self.round_trip("rt_sub", "rt_sub_copy", "csv", rows)

    def test_export_round_trip_sharded_jsonl(self):
        rows = [(f"s{i}", i % 13, 500 + i % 4, [], {"t": "x"} if i % 2 else
                 None) for i in range(1800)]
        self.round_trip("rt_sh", "rt_sh_copy", "jsonl", rows)

    def test_export_refuses(self):
        _, err = self.ctl("export", "rt_sh", "--periods-back", "1", code=2)
        self.assertIn("periods_back", err)
        _, err = self.ctl("export", "a{b", code=2)
        self.assertIn("board", err)
        self.ctl("export", "x", port=self.port_down, code=3)

    def test_boards_and_board_info(self):
        self.ctl("update", "listed_one", "m", "3")
        boards = {b["board"]: b for b in self.json("boards")["boards"]}
        self.assertEqual(boards["listed_one"],
                         {"board": "listed_one", "configured": False,
                          "members": 1})
        self.assertEqual(boards["cfg_only"],
                         {"board": "cfg_only", "configured": True,
                          "members": 0})
        table, _ = self.ctl("boards")
        self.assertRegex(table, r"(?m)^BOARD +CONFIGURED +MEMBERS$")
        self.assertRegex(table, r"(?m)^listed_one +no +1$")
        info = self.json("board-info", "listed_one")
        self.assertEqual((info["board"], info["configured"], info["members"],
                          info["periods"]),
                         ("listed_one", False, 1, []))
        self.assertEqual(info["options"]["shards"], "1")
        self.assertGreater(info["keys"], 0)
        self.assertGreater(info["memory_bytes"], 0)
        self.assertTrue(info["stored_layout"].startswith("rankd-layout "))
        text, _ = self.ctl("board-info", "listed_one")
        self.assertRegex(text, r"(?m)^members +1$")

    def test_delete_and_reset_board(self):
        for m in ("a", "b", "c"):
            self.ctl("update", "doomed", m, "1")
        _, err = self.ctl("delete-board", "doomed", code=2)
        self.assertIn("add --yes", err)
        self.assertEqual(self.json("count", "doomed"), {"count": 3})
        out = self.json("delete-board", "doomed", "--yes", "--request-id",
                        "del-1")
        self.assertEqual(out["applied"], True)
        self.assertGreater(out["keys_removed"], 0)
        self.assertEqual(self.json("count", "doomed"), {"count": 0})
        self.assertNotIn("doomed", [b["board"] for b in
                                    self.json("boards")["boards"]])
        again = self.json("delete-board", "doomed", "--yes", "--request-id",
                          "del-1")
        self.assertEqual((again["applied"], again["keys_removed"]),
                         (False, out["keys_removed"]))
        # Reset: the entries go, the board stays; a retry changes nothing.
        self.ctl("update", "season", "a", "5", "--request-id", "s-a")
        out, _ = self.ctl("reset-board", "season", "--yes")
        self.assertRegex(out, r"(?m)^applied +yes$")
        self.assertEqual(self.json("count", "season"), {"count": 0})
        self.assertIn("season", [b["board"] for b in
                                 self.json("boards")["boards"]])
        retried = self.json("update", "season", "a", "5", "--request-id",
                            "s-a")
        self.assertEqual(retried["applied"], False)
        self.assertEqual(self.json("count", "season"), {"count": 0})
        # The same request id for the other kind of clear: refused.
        self.ctl("reset-board", "doomed", "--yes", "--request-id", "del-1",
                 code=2)


    def test_enqueue_and_queue_status(self):
        out = self.json("enqueue", "rq", "alice", "5", "--request-id", "q-1")
        self.assertRegex(out["queued"], r"^\d+-\d+$")
        self.assertEqual(out["request_id"], "q-1")
        self.ctl("enqueue", "rq", "alice", "7", "--data", "name=A")
        deadline = time.monotonic() + 60
        while self.json("queue-status", "rq")["backlog"] > 0:
            self.assertLess(time.monotonic(), deadline, "queue not drained")
            time.sleep(0.02)  # polling a condition, with a deadline
        self.assertEqual(self.json("rank", "rq", "alice")["score"], 12)
        self.assertEqual(self.json("get-data", "rq", "alice"), {"name": "A"})
        status = self.json("queue-status", "rq")
        self.assertEqual((status["queued"], status["pending"],
                          status["oldest_age_ms"], status["dead_lettered"]),
                         (True, 0, 0, 0))
        self.assertGreaterEqual(status["applied"], 2)
        table, _ = self.ctl("queue-status", "rq")
        self.assertRegex(table, r"(?m)^queued +yes$")
        # A board without a queue: refused, naming the option.
        _, err = self.ctl("enqueue", "cfg_only", "alice", "1", code=2)
        self.assertIn("queue=on", err)
        self.assertEqual(self.json("queue-status", "cfg_only")["queued"],
                         False)


class RankctlTlsTest(unittest.TestCase):
    """rankctl over TLS with a client certificate (tls_rankd.py: a rankd
    that requires one from the test CA), by options and by $RANKCTL_TLS_*."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankctl-tls-")
        cls.certs = certs.make(os.path.join(cls.dir, "certs"), ["ops"])
        # Export is admin: granted on purpose to the client "ops"; plain
        # callers read (once a grant exists, nobody else has a role).
        cls.rankd = TlsRankd(RANKD, cls.dir,
                             os.path.dirname(cls.certs["ca"]),
                             extra=("--grant", "ops=read,write,admin",
                                    "--grant", "anonymous=read"))

    @classmethod
    def tearDownClass(cls):
        cls.rankd.stop()
        shutil.rmtree(cls.dir)

    def ctl(self, *args, code=0, env=None):
        """rankctl with no TLS settings of its own but those given; checks
        its exit code; returns stdout and stderr."""
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith("RANKCTL_TLS")}
        environ["RANKCTL_CONNECT"] = f"127.0.0.1:{self.rankd.port}"
        environ.update(env or {})
        r = subprocess.run([*WRAPPER, RANKCTL, *args], capture_output=True,
                           text=True, env=environ, timeout=120)
        self.assertEqual(r.returncode, code, (args, r.stdout, r.stderr))
        if code != 0:
            self.assertRegex(r.stderr, r"^rankctl: ", args)
        return r.stdout, r.stderr

    def flags(self, cert="client_ops", ca="ca"):
        out = ["--tls-ca", self.certs[ca]]
        if cert is not None:
            out += ["--tls-cert", self.certs[cert][0],
                    "--tls-key", self.certs[cert][1]]
        return out

    def env(self, cert="client_ops", ca="ca"):
        out = {"RANKCTL_TLS_CA": self.certs[ca]}
        if cert is not None:
            out.update(RANKCTL_TLS_CERT=self.certs[cert][0],
                       RANKCTL_TLS_KEY=self.certs[cert][1])
        return out

    def test_calls_with_options(self):
        out, _ = self.ctl(*self.flags(), "update", "tls_b", "ann", "30",
                          "--request-id", "tls-1")
        self.assertIn("applied     yes", out)
        self.ctl(*self.flags(), "update", "tls_b", "bob", "50")
        out, _ = self.ctl(*self.flags(), "top", "tls_b")
        self.assertEqual(out, "RANK  MEMBER  SCORE\n   1  bob        50\n"
                              "   2  ann        30\n")
        # The same rankd without TLS has them.
        out, _ = self.ctl("rank", "tls_b", "ann", env={
            "RANKCTL_CONNECT": f"127.0.0.1:{self.rankd.plain_port}"})
        self.assertIn("ann", out)
        # "localhost" is checked as a DNS name of rankd's certificate.
        out, _ = self.ctl(*self.flags(), "--connect",
                          f"localhost:{self.rankd.port}", "count", "tls_b")
        self.assertEqual(out, "2\n")

    def test_environment_and_export_import(self):
        env = self.env()
        rows = "".join(f'"m{i:04d}",{i},{1000 + i},,\n' for i in range(1500))
        path = os.path.join(self.dir, "in.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("member,score,timestamp_ms,subscores,data\n" + rows)
        stats = json.loads(self.ctl("--json", "import", "tls_io", path,
                                    env=env)[0])
        self.assertEqual(stats["applied"], 1500, stats)
        exported, _ = self.ctl("export", "tls_io", env=env)
        with open(path, encoding="utf-8") as f:
            self.assertTrue(exported == f.read(), exported[:300])
        copy = os.path.join(self.dir, "copy.csv")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(exported)
        self.ctl("import", "tls_io_copy", copy, env=env)
        again, _ = self.ctl("export", "tls_io_copy", env=env)
        self.assertEqual(again, exported)

    def test_options_beat_environment(self):
        # The environment names the wrong CA and a certificate rankd does
        # not trust; the command line wins.
        env = self.env(cert="stranger", ca="other_ca")
        out, _ = self.ctl(*self.flags(), "count", "tls_none", env=env)
        self.assertEqual(out, "0\n")
        _, err = self.ctl("count", "tls_none", env=env, code=3)
        self.assertIn("certificate verify failed", err)
        # RANKCTL_TLS=1 alone: TLS with the system's CAs, which do not know
        # the test CA.
        _, err = self.ctl("count", "tls_none", env={"RANKCTL_TLS": "1"},
                          code=3)
        self.assertIn("certificate verify failed", err)
        _, err = self.ctl("count", "tls_none", env={"RANKCTL_TLS": "yes"},
                          code=2)
        self.assertIn("RANKCTL_TLS: 'yes' is not 0 or 1", err)

    def test_refusals(self):
        # Wrong CA: the handshake fails.
        _, err = self.ctl(*self.flags(ca="other_ca"), "count", "b", code=3)
        self.assertIn("certificate verify failed", err)
        # A name rankd's certificate does not carry.
        _, err = self.ctl(*self.flags(), "--tls-server-name", "rankd.test",
                          "count", "b", code=3)
        self.assertIn("hostname mismatch", err)
        # No client certificate, one from another CA, an expired one.
        _, err = self.ctl(*self.flags(cert=None), "count", "b", code=3)
        self.assertIn("requires a client certificate", err)
        _, err = self.ctl(*self.flags(cert="stranger"), "count", "b", code=3)
        self.assertIn("refused this client's certificate", err)
        _, err = self.ctl(*self.flags(cert="expired"), "count", "b", code=3)
        self.assertIn("refused this client's certificate", err)
        # A plain client on the TLS port, a TLS one on the plain port.
        _, err = self.ctl("count", "b", code=3)
        self.assertIn("Is it a TLS port: --tls?", err)
        _, err = self.ctl(*self.flags(), "--timeout", "5", "count", "b",
                          env={"RANKCTL_CONNECT":
                               f"127.0.0.1:{self.rankd.plain_port}"},
                          code=3)
        self.assertIn("TLS handshake failed", err)

    def test_bad_settings_are_usage_errors(self):
        missing = os.path.join(self.dir, "nope.pem")
        # Checked before connecting, naming the option (or variable) and
        # the file: exit 2 whatever rankd does.
        _, err = self.ctl("--tls-ca", missing, "count", "b", code=2)
        self.assertIn(f"--tls-ca: cannot read '{missing}'", err)
        _, err = self.ctl("count", "b", code=2,
                          env=dict(self.env(), RANKCTL_TLS_KEY=missing))
        self.assertIn(f"RANKCTL_TLS_KEY: cannot read '{missing}'", err)
        _, err = self.ctl("--tls-cert", self.certs["client_ops"][0],
                          "count", "b", code=2)
        self.assertIn("--tls-cert needs --tls-key", err)
        # A file that is not what it should be.
        _, err = self.ctl("--tls-cert", self.certs["ca"], "--tls-key",
                          self.certs["client_ops"][1], "count", "b", code=2)
        self.assertIn(self.certs["client_ops"][1], err)
        _, err = self.ctl("--tls-ca", self.certs["client_ops"][1], "count",
                          "b", code=2)
        self.assertIn(f"--tls-ca: cannot load the CA file "
                      f"{self.certs['client_ops'][1]}", err)
        _, err = self.ctl("--tls-server-name=", "count", "b", code=2)
        self.assertIn("--tls-server-name: must not be empty", err)
        out, _ = self.ctl("--help")
        for option in ("--tls-ca FILE", "--tls-cert FILE", "--tls-key FILE",
                       "--tls-server-name NAME", "$RANKCTL_TLS_CA"):
            self.assertIn(option, out)


if __name__ == "__main__":
    unittest.main()
