"""update.lua called directly (FCALL, as rankd loads it), for what no call
through rankd is known to reach: an update that fails with an error of its
own, after others of its batch were applied. And the libraries of other
builds: a rankd that loads its own deletes those no connected client is
named after (src/redis/backend.c, "Old libraries").

Usage: test_update_script.py RANKD STUBS_DIR
"""
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
import unittest

RANKD = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import UpdateRequest  # noqa: E402
from servers import connect, start, stop  # noqa: E402


def resp(*args):
    """A RESP command of bulk strings (bytes or str)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Reader:
    """Just enough of a RESP2 reader for these replies."""

    def __init__(self, sock):
        self.f = sock.makefile("rb")

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return int(rest) if kind == b":" else rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode(errors="replace"))
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError(line)


class UpdateScriptTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-update-script-")
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{cls.redis_port}"], cls.dir)
        # One update through rankd loads the library.
        client, transport = connect(cls.port)
        client.Update(UpdateRequest(board="load", member="m", value=1,
                                    request_id="load-1"))
        transport.close()
        cls.sock = socket.create_connection(("127.0.0.1", cls.redis_port))
        cls.reader = Reader(cls.sock)

    @classmethod
    def tearDownClass(cls):
        cls.sock.close()
        assert stop(cls.rankd, cls.dir, cls.port) == 0
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.reader.read()

    def function(self):
        libs = self.call("FUNCTION", "LIST")
        for lib in libs:
            fields = dict(zip(lib[::2], lib[1::2]))
            for f in fields[b"functions"]:
                name = dict(zip(f[::2], f[1::2]))[b"name"].decode()
                # (Its library's other function, the window's roll, is
                # named after it, with "_roll".)
                if (name.startswith("rankd_update_")
                        and not name.endswith("_roll")):
                    return name
        self.fail(f"no update function in {libs}")

    def test_a_layout_move_of_many_records(self):
        """A hash of the layout being left that holds more records than Lua
        can unpack into one command's arguments (12,000 live ones, all bound
        for one hash of the new layout) moves whole: the HSET is cut into
        parts (it failed with "too many results to unpack", and the update
        with it)."""
        keys = [f"rk:{{bulk}}:{s}" for s in "ztqdca"]
        self.call("HSET", "rk:{bulk}:q", "s", "2", "o", "1", "m", "0")
        # Live in bucket 2127555 (mod 16: 3, the top 4 bits of the value);
        # odd selectors (bytes 2-4 of the field): bound for hash 1 of 2.
        records = []
        for i in range(12000):
            records += [b"\0" + struct.pack(">I", 2 * i + 1)[1:] + b"fieldx",
                        b"\x30\0\0\1"]
        self.call("HSET", "rk:{bulk}:q:1:0", *records)
        good = (b"\1\1\1\16\6\10" + b"fp01bulkreq-1-" + b"\1\2\3\4\5\6"
                + b"\0\0\0\0\0\0\0\12")
        reply = self.call(
            "FCALL", self.function(), "6", *keys,
            "2127555", "2127554", "2127553", "2127552", "2127551",
            "1914804900000", "1", "desc", "ordinal", "0", "0", "", "",
            "alice", good)
        self.assertIsInstance(reply, list, reply)
        self.assertEqual((reply[0], reply[2]), (10, 1), reply)
        # The 12,000 records, and perhaps the update's own.
        self.assertIn(self.call("HLEN", "rk:{bulk}:q:2:1"), (12000, 12001))
        self.assertEqual(self.call("HEXISTS", "rk:{bulk}:q:2:1",
                                   records[-2]), 1)
        self.assertEqual(self.call("EXISTS", "rk:{bulk}:q:1:0"), 0)

    def test_an_update_failing_keeps_what_the_call_leaves(self):
        """The batch's second update fails with an error of its own (a
        'what' shorter than it says): the first stays applied and answered,
        the call ends as usual, and the period's keys get their expiry (the
        error raised out of the call skipped it: the keys lived for good)."""
        keys = [f"rk:{{day}}:p:2026-11-28:{s}" for s in "zt"] + [
            "rk:{day}:q"] + [f"rk:{{day}}:p:2026-11-28:{s}" for s in "dca"]
        # INCREMENT, no subscores, data given (empty), id 14 bytes, prefix
        # 6, value 8 (10); the second claims 14 bytes of id it lacks.
        good = (b"\1\1\1\16\6\10" + b"fp01request-1-" + b"\1\2\3\4\5\6"
                + b"\0\0\0\0\0\0\0\12")
        bad = b"\1\1\1\16\6\10" + b"fp02"
        expire_at = "4102444800000"
        reply = self.call(
            "FCALL", self.function(), "6", *keys,
            "2127555", "2127554", "2127553", "2127552", "2127551",
            "1914804900000", "1", "desc", "ordinal", "0", expire_at, "", "",
            "alice", good, "bob", bad)
        self.assertIsInstance(reply, list, reply)
        self.assertEqual((reply[0], reply[2]), (10, 1), reply)  # score, applied
        self.assertIsInstance(reply[4], RuntimeError)
        self.assertEqual(self.call("ZCARD", keys[0]), 1)
        for key in (keys[0], keys[1]):
            self.assertGreater(self.call("PTTL", key), 0, key)
        self.assertIsNone(self.call("HGET", keys[1], "bob"))


def library(name):
    """A library as an old build of rankd left it (its text matters not)."""
    return (f"#!lua name={name}\n"
            f"redis.register_function('{name.replace('rankd_', 'rankd_update_')}',"
            " function() return 1 end)")


class OldLibrariesTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rankd-old-libraries-")
        self.redis, self.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], self.dir)
        self.socks = []
        self.rankd = None

    def tearDown(self):
        for s in self.socks:
            s.close()
        if self.rankd is not None:
            assert stop(self.rankd, self.dir, self.port) == 0
        self.redis.terminate()
        self.redis.wait(30)
        shutil.rmtree(self.dir)

    def connection(self):
        sock = socket.create_connection(("127.0.0.1", self.redis_port))
        self.socks.append(sock)
        reader = Reader(sock)

        def call(*args):
            sock.sendall(resp(*args))
            return reader.read()
        return call, sock

    def libraries(self, call):
        return sorted(dict(zip(lib[::2], lib[1::2]))[b"library_name"].decode()
                      for lib in call("FUNCTION", "LIST"))

    def wait_gone(self, call, name):
        deadline = time.monotonic() + 10
        while name in self.libraries(call) and time.monotonic() < deadline:
            time.sleep(0.05)

    def update(self, request_id):
        client, transport = connect(self.port)
        try:
            return client.Update(UpdateRequest(board="b", member="m", value=1,
                                               request_id=request_id))
        finally:
            transport.close()

    def test_old_libraries_go_unless_a_connected_rankd_is_named_after_them(self):
        call, _ = self.connection()
        gone, kept = "rankd_00000000000000aa", "rankd_00000000000000bb"
        for name in (gone, kept):
            self.assertEqual(call("FUNCTION", "LOAD", library(name)), name.encode())
        # An old rankd still running: its connections carry its library's
        # name.
        old, old_sock = self.connection()
        self.assertEqual(old("CLIENT", "SETNAME", kept), "OK")
        # Another application's library is not rankd's to delete.
        self.assertEqual(call("FUNCTION", "LOAD", library("other_lib")),
                         b"other_lib")

        self.rankd, self.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{self.redis_port}"], self.dir)
        self.assertEqual(self.update("u-1").score, 1)  # loads, cleans up
        self.wait_gone(call, gone)
        libs = self.libraries(call)
        own = [n for n in libs if n not in (kept, "other_lib")]
        self.assertEqual(len(own), 1, libs)
        self.assertNotIn(gone, libs)
        self.assertIn(kept, libs)
        self.assertIn("other_lib", libs)
        # rankd's own connections are named after its library.
        self.assertIn(f" name={own[0]} ", call("CLIENT", "LIST").decode())

        # The old rankd gone, the next load deletes its library too. Here
        # the load is of rankd's own library, deleted as a newer build's
        # rankd would if this one were not connected (or by a FUNCTION
        # FLUSH): the call that found its function missing loads it again
        # and is applied.
        self.socks.remove(old_sock)
        old_sock.shutdown(socket.SHUT_RDWR)  # its reader's file keeps the fd
        old_sock.close()
        self.assertEqual(call("FUNCTION", "DELETE", own[0]), "OK")
        self.assertEqual(self.update("u-2").score, 2)
        self.wait_gone(call, kept)
        self.assertEqual(self.libraries(call), sorted([own[0], "other_lib"]))

    def test_a_redis_that_refuses_client_commands_still_serves(self):
        """CLIENT SETNAME and CLIENT LIST refused (an ACL without them):
        rankd serves all the same, and deletes nothing it cannot check."""
        call, _ = self.connection()
        old = "rankd_00000000000000aa"
        self.assertEqual(call("FUNCTION", "LOAD", library(old)), old.encode())
        self.assertEqual(call("ACL", "SETUSER", "default", "-client"), "OK")
        self.rankd, self.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{self.redis_port}"], self.dir)
        self.assertEqual(self.update("u-1").score, 1)
        self.assertEqual(self.update("u-2").score, 2)
        self.assertIn(old, self.libraries(call))
        self.assertEqual(len(self.libraries(call)), 2)


if __name__ == "__main__":
    unittest.main()
