"""Who may call what: roles per board ([grant NAME] sections, --grant)
against a real rankd and redis-server, through the generated Python client.

Every method family under every grant (none, read, write, admin, all, and
limited to board patterns): allowed calls work; refused ones answer
PermissionDenied naming the method, the board, the role and the identity,
and change nothing in Redis (every key's DUMP, streams by their entries,
before and after). Also: the defaults (no grant: read and write, no admin),
UpdateBatch and Enqueue refused whole for one board not granted, ListBoards
filtered by admin patterns, a config error naming its file, line and key,
SIGHUP reloading grants, rankd_calls_refused_total, the audit line of
DeleteBoard and ResetBoard, and whoami (GetServerInfo, rankctl whoami).

Usage: test_access.py RANKD STUBS_DIR
The identities under test come from CONNECT (below): anonymous over the
plain listener, a client certificate's name ("game", its CN) over the TLS
listener, and the test's own uid ("uid:N") over a unix socket; the matrix
runs for each, on a rankd serving all three.
"""
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import unittest
import urllib.request

RANKD = os.path.abspath(sys.argv[1])
RANKCTL = os.path.join(os.path.dirname(RANKD), "rankctl")
WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import (  # noqa: E402
    CountBetweenRequest, CountRequest, DeleteBoardRequest, EnqueueRequest,
    ExportRequest, GetAroundRequest, GetBoardInfoRequest, GetMemberDataRequest,
    GetPercentileRequest, GetQueueStatusRequest, GetRankRequest,
    GetRanksRequest, GetScoreAtPercentileRequest, GetServerInfoRequest,
    GetTopNRequest, ListBoardsRequest, PermissionDenied, RemoveRequest,
    ResetBoardRequest, SampleRequest, SetMemberDataRequest,
    UpdateBatchRequest, UpdateMode, UpdateRequest)
import certs  # noqa: E402
from servers import connect, free_port, start, stop, wait_for  # noqa: E402

# ---- identities: how the test reaches rankd as one ----


def connect_anonymous(server, identity):
    """A client on the plain listener: anonymous, whatever identity says."""
    return connect(server.port)


def framed_client(sock):
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TTransport
    from ranking import Ranking
    sock.setTimeout(60000)
    transport = TTransport.TFramedTransport(sock)
    transport.open()
    return (Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)),
            transport)


def connect_certificate(server, identity):
    """A client on the TLS listener holding identity's certificate (its
    CN is the identity)."""
    from thrift.transport import TSSLSocket
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(CERTS["ca"])
    ctx.load_cert_chain(*CERTS["client_" + identity])
    return framed_client(TSSLSocket.TSSLSocket(
        "127.0.0.1", server.tls_port, ssl_context=ctx,
        server_hostname="127.0.0.1"))


def connect_unix(server, identity):
    """A client on the unix socket: rankd knows it by its uid."""
    from thrift.transport import TSocket
    return framed_client(TSocket.TSocket(unix_socket=server.unix_path))


UID = f"uid:{os.getuid()}"
# identity name (the [grant NAME] it is granted by) -> connect function.
CONNECT = {"anonymous": connect_anonymous, "game": connect_certificate,
           UID: connect_unix}
CERTS = {}  # tests/certs.py's paths, made by AccessTest.setUpClass

# ---- the methods, by the role they need ----

_seq = [0]


def rid():
    _seq[0] += 1
    return f"t{os.getpid()}-{_seq[0]}"


def upd(board, member="bob", value=5):
    return UpdateRequest(board=board, member=member, value=value,
                         request_id=rid(), mode=UpdateMode.SET)


# name -> (role, uses a queued board, call(client, board))
METHODS = {
    "GetRank": ("read", False,
                lambda c, b: c.GetRank(GetRankRequest(board=b, member="alice"))),
    "GetTopN": ("read", False,
                lambda c, b: c.GetTopN(GetTopNRequest(board=b, n=10))),
    "GetAround": ("read", False, lambda c, b: c.GetAround(
        GetAroundRequest(board=b, member="alice", radius=1))),
    "GetRanks": ("read", False, lambda c, b: c.GetRanks(
        GetRanksRequest(board=b, members=["alice"]))),
    "Count": ("read", False, lambda c, b: c.Count(CountRequest(board=b))),
    "CountBetween": ("read", False, lambda c, b: c.CountBetween(
        CountBetweenRequest(board=b, min_score=0, max_score=100))),
    "GetPercentile": ("read", False, lambda c, b: c.GetPercentile(
        GetPercentileRequest(board=b, member="alice"))),
    "GetScoreAtPercentile": ("read", False, lambda c, b: c.GetScoreAtPercentile(
        GetScoreAtPercentileRequest(board=b, pct=50))),
    "Sample": ("read", False, lambda c, b: c.Sample(
        SampleRequest(board=b, min_score=0, max_score=100, count=1))),
    "GetMemberData": ("read", False, lambda c, b: c.GetMemberData(
        GetMemberDataRequest(board=b, member="alice"))),
    "GetQueueStatus": ("read", True, lambda c, b: c.GetQueueStatus(
        GetQueueStatusRequest(board=b))),
    "Update": ("write", False, lambda c, b: c.Update(upd(b))),
    "UpdateBatch": ("write", False, lambda c, b: c.UpdateBatch(
        UpdateBatchRequest(requests=[upd(b), upd(b, "carol")]))),
    "Enqueue": ("write", True, lambda c, b: c.Enqueue(
        EnqueueRequest(requests=[upd(b)]))),
    "Remove": ("write", False, lambda c, b: c.Remove(
        RemoveRequest(board=b, member="alice", request_id=rid()))),
    "SetMemberData": ("write", False, lambda c, b: c.SetMemberData(
        SetMemberDataRequest(board=b, member="alice", data={"k": "v2"}))),
    "DeleteBoard": ("admin", False, lambda c, b: c.DeleteBoard(
        DeleteBoardRequest(board=b, request_id=rid()))),
    "ResetBoard": ("admin", False, lambda c, b: c.ResetBoard(
        ResetBoardRequest(board=b, request_id=rid()))),
    "Export": ("admin", False, lambda c, b: c.Export(ExportRequest(board=b))),
    "GetBoardInfo": ("admin", False, lambda c, b: c.GetBoardInfo(
        GetBoardInfoRequest(board=b))),
}

# The boards: season_* are the ones pattern-limited grants cover.
BOARDS = {"season": ("season_1", "season_q"), "other": ("other_1", "other_q")}


def board_for(family, queued):
    return BOARDS[family][1 if queued else 0]


BASE_CONFIG = """\
[board season_q]
queue=on
[board other_q]
queue=on
"""

# Grant cases: name -> ({role: patterns}, the roles by board family).
ALL = ("read", "write", "admin")
CASES = {
    "none": ({}, {"season": (), "other": ()}),
    "read": ({"read": "*"}, {"season": ("read",), "other": ("read",)}),
    "write": ({"write": "*"}, {"season": ("write",), "other": ("write",)}),
    "admin": ({"admin": "*"}, {"season": ("admin",), "other": ("admin",)}),
    "all": ({r: "*" for r in ALL}, {"season": ALL, "other": ALL}),
    "season only": ({"read": "season_*", "write": "season_?;season_q",
                     "admin": "season_*"}, {"season": ALL, "other": ()}),
}


def grant_section(name, roles):
    return f"[grant {name}]\n" + "".join(
        f"{role}={patterns}\n" for role, patterns in roles.items())


# ---- Redis, read directly ----


class Redis:
    """A minimal RESP client: the test's own view of what rankd wrote."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def __call__(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._read()

    def snapshot(self):
        """Every key and its value: DUMP, but a stream (a queued board's) by
        how many entries were ever added to it: the drain deletes applied
        entries in the background, and its consumer groups note when it
        last polled."""
        keys, cursor = [], b"0"
        while True:
            cursor, page = self("SCAN", cursor, "COUNT", 1000)
            keys += page
            if cursor == b"0":
                break
        state = {}
        for k in keys:
            if k == b"rk:queues":
                continue  # the drain's own registry, kept in the background
            if self("TYPE", k) == b"stream":
                info = self("XINFO", "STREAM", k)
                state[k] = ("stream", dict(zip(info[::2], info[1::2]))
                            .get(b"entries-added"))
            else:
                state[k] = self("DUMP", k)
        return state


# ---- rankd ----


class Rankd:
    """A rankd on a plain loopback listener with its config file, /metrics
    on a port of its own, its log kept; with listeners=True also a TLS
    listener asking for client certificates (tls_port) and a unix socket
    (unix_path)."""

    def __init__(self, workdir, redis_port, config, *args, listeners=False):
        self.dir = workdir
        self.conf = os.path.join(workdir, f"rankd-{free_port()}.conf")
        self.write_config(config)
        self.http = free_port()
        more = []
        if listeners:
            self.tls_port = free_port()
            self.unix_path = os.path.join(workdir, f"rankd-{self.tls_port}.sock")
            more = ["--listen", "unix:" + self.unix_path,
                    "--tls-listen", f"127.0.0.1:{self.tls_port}",
                    "--tls-cert", CERTS["server_cert"],
                    "--tls-key", CERTS["server_key"],
                    "--tls-ca", CERTS["ca"]]
        self.proc, self.port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                       "--redis", f"127.0.0.1:{redis_port}", "--config",
                       self.conf, "--metrics-listen", f"127.0.0.1:{self.http}",
                       *more, *args], workdir)
        self.log_path = os.path.join(workdir, f"log-{self.port}")

    def write_config(self, text):
        with open(self.conf, "w", encoding="utf-8") as f:
            f.write(text)

    def reload(self, text):
        """Writes the config and sends SIGHUP; returns once rankd says it
        reloaded (the next call is served under the new grants)."""
        before = self.log().count("SIGHUP: reloaded")
        self.write_config(text)
        self.proc.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: self.log().count("SIGHUP: reloaded")
                 > before, 30)

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def metrics(self):
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.http}/metrics", timeout=30) as r:
            return r.read().decode()

    def stop(self):
        assert stop(self.proc, self.dir, self.port) == 0, "rankd exit"


def denied_by(call, *args):
    """The PermissionDenied call(*args) answers, or None. (The generated
    exceptions are immutable: unittest cannot attach a traceback to one that
    escapes a test, so none may.)"""
    try:
        call(*args)
    except PermissionDenied as x:
        return x
    return None


def refused_count(metrics, identity, method, reason):
    m = re.search(r'^rankd_calls_refused_total\{identity="%s",method="%s",'
                  r'reason="%s"\} (\d+)$' % (re.escape(identity), method,
                                            reason), metrics, re.M)
    return int(m.group(1)) if m else 0


class AccessTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-access-")
        CERTS.update(certs.make(os.path.join(cls.dir, "certs"), ["game"]))
        cls.redis_proc, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port",
                       str(p), "--save", "", "--appendonly", "no"], cls.dir)
        cls.redis = Redis(cls.redis_port)
        # The test's own rankd, that may do anything: it sets boards up.
        cls.admin = Rankd(cls.dir, cls.redis_port, BASE_CONFIG,
                          "--grant", "anonymous=read,write,admin")
        cls.admin_client, cls.admin_transport = connect(cls.admin.port)

    @classmethod
    def tearDownClass(cls):
        cls.admin_transport.close()
        cls.admin.stop()
        cls.redis_proc.terminate()
        cls.redis_proc.wait(30)
        shutil.rmtree(cls.dir)

    def populate(self):
        """Every board of BOARDS with alice (with data) and dave, whatever
        the last call did to it; the queues drained."""
        c = self.admin_client
        for family in BOARDS.values():
            for board in family:
                c.UpdateBatch(UpdateBatchRequest(requests=[
                    UpdateRequest(board=board, member=m, value=v,
                                  request_id=rid(), mode=UpdateMode.SET)
                    for m, v in (("alice", 10), ("dave", 20))]))
                c.SetMemberData(SetMemberDataRequest(
                    board=board, member="alice", data={"k": "v"}))
        for board in (BOARDS["season"][1], BOARDS["other"][1]):
            wait_for(f"{board}'s queue drained", lambda: c.GetQueueStatus(
                GetQueueStatusRequest(board=board)).backlog == 0, 30)

    def assert_denied(self, x, method, board, role, identity):
        self.assertIsInstance(x, PermissionDenied)
        self.assertEqual(x.method, method)
        self.assertEqual(x.board, board)
        self.assertEqual(x.role, role)
        self.assertEqual(x.identity,
                         None if identity == "anonymous" else identity)
        self.assertIn(method, x.message)
        if board is not None:
            self.assertIn(f"'{board}'", x.message)
        self.assertIn(f"role {role}", x.message)
        self.assertIn("anonymous callers" if identity == "anonymous"
                      else f"'{identity}'", x.message)

    def check_call(self, server, client, identity, name, board, allowed):
        """One call of name on board: it works when allowed, else it answers
        PermissionDenied and Redis is as it was."""
        role, _, call = METHODS[name]
        self.populate()
        before = self.redis.snapshot()
        x = denied_by(call, client, board)
        if x is None:
            self.assertTrue(allowed, f"{name} on {board} was allowed")
            if name == "DeleteBoard":
                # The setup rankd still holds the board's layout as
                # recorded, and would not record it (nor list the board)
                # again: a reload makes it forget.
                self.admin.reload(BASE_CONFIG)
            return
        self.assertFalse(allowed, f"{name} on {board}: {x.message}")
        self.assert_denied(x, name, board, role, identity)
        after = self.redis.snapshot()
        changed = sorted(k for k in set(before) | set(after)
                         if before.get(k) != after.get(k))
        self.assertEqual(changed, [], f"refused {name} on {board} changed "
                         f"Redis: {[(k, before.get(k), after.get(k)) for k in changed][:3]}")

    def run_matrix(self, identity):
        """Every case of CASES for identity, over one rankd reloaded between
        them; every method on a board of each family."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG, listeners=True)
        try:
            for case, (grants, expect) in CASES.items():
                with self.subTest(identity=identity, case=case):
                    server.reload(BASE_CONFIG + grant_section(identity, grants)
                                  # another identity's grants are not its own
                                  + grant_section("somebody-else",
                                                  {r: "*" for r in ALL}))
                    client, transport = CONNECT[identity](server, identity)
                    try:
                        # whoami: who rankd sees on this connection.
                        info = client.GetServerInfo(GetServerInfoRequest())
                        self.assertEqual(info.identity, None if identity
                                         == "anonymous" else identity)
                        self.assertEqual(info.tls, identity == "game")
                        for name, (role, queued, _) in METHODS.items():
                            for family in BOARDS:
                                self.check_call(
                                    server, client, identity, name,
                                    board_for(family, queued),
                                    role in expect[family])
                        self.check_list_boards(client, identity, expect)
                    finally:
                        transport.close()
        finally:
            server.stop()

    def check_list_boards(self, client, identity, expect):
        admin = [f for f in BOARDS if "admin" in expect[f]]
        listed, after = set(), ""

        def list_all():
            nonlocal after
            while True:
                page = client.ListBoards(ListBoardsRequest(after=after,
                                                           limit=2))
                listed.update(b.board for b in page.boards)
                if page.next_after is None:
                    return
                after = page.next_after

        x = denied_by(list_all)
        if x is not None:
            self.assertEqual(admin, [])
            self.assert_denied(x, "ListBoards", None, "admin", identity)
            return
        self.assertTrue(admin)
        for family, boards in BOARDS.items():
            for b in boards:
                self.assertEqual(b in listed, family in admin, (b, listed))

    # ---- the tests ----

    def test_matrix(self):
        for identity in CONNECT:
            self.run_matrix(identity)

    def test_defaults_read_write_no_admin(self):
        """No grant at all: everyone reads and writes, nobody is admin."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG)
        client, transport = connect(server.port)
        try:
            for name, (role, queued, _) in METHODS.items():
                self.check_call(server, client, "anonymous", name,
                                board_for("other", queued), role != "admin")
            info = client.GetServerInfo(GetServerInfoRequest())
            self.assertIsNone(info.identity)
            self.assertFalse(info.tls)
            self.assertEqual(info.grants, ["read:*", "write:*"])
            with self.assertRaises(PermissionDenied) as cm:
                client.DeleteBoard(DeleteBoardRequest(board="other_1",
                                                      request_id="rd"))
            self.assertIn("no grant is configured", cm.exception.message)
            if os.path.exists(RANKCTL):
                # rankctl import writes (UpdateBatch): without admin it
                # cannot read the board's options (GetBoardInfo), and sends
                # each record with a request id of its own.
                csv = os.path.join(self.dir, "import.csv")
                with open(csv, "w", encoding="utf-8") as f:
                    f.write("member,score,timestamp_ms,subscores,data\n"
                            + "".join(f'"i{i}",{i},{1000 + i},,\n'
                                      for i in range(5)))
                for repeated in (0, 5):
                    out = subprocess.run(
                        [RANKCTL, "--connect", f"127.0.0.1:{server.port}",
                         "--json", "import", "imported", csv],
                        capture_output=True, text=True)
                    self.assertEqual(out.returncode, 0, out.stderr)
                    self.assertIn(f'"repeated":{repeated}', out.stdout)
                    # ... and says so, once.
                    self.assertEqual(out.stderr.count(
                        "no admin role on board 'imported'"), 1, out.stderr)
                self.assertEqual(client.Count(CountRequest(board="imported")),
                                 5)
        finally:
            transport.close()
            server.stop()

    def test_batch_refused_whole(self):
        """UpdateBatch and Enqueue with one board not granted: nothing of
        them is applied, and the refusal names that board."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG + grant_section(
            "anonymous", {"read": "*", "write": "season_*"}))
        client, transport = connect(server.port)
        try:
            self.populate()
            before = self.redis.snapshot()
            with self.assertRaises(PermissionDenied) as cm:
                client.UpdateBatch(UpdateBatchRequest(requests=[
                    upd("season_1", "x1"), upd("season_1", "x2"),
                    upd("other_1", "x3"), upd("season_1", "x4")]))
            self.assert_denied(cm.exception, "UpdateBatch", "other_1",
                               "write", "anonymous")
            with self.assertRaises(PermissionDenied) as cm:
                client.Enqueue(EnqueueRequest(requests=[
                    upd("season_q", "y1"), upd("other_q", "y2")]))
            self.assert_denied(cm.exception, "Enqueue", "other_q", "write",
                               "anonymous")
            self.assertEqual(self.redis.snapshot(), before)
            # The same batch on granted boards only is applied.
            res = client.UpdateBatch(UpdateBatchRequest(requests=[
                upd("season_1", "x1"), upd("season_1", "x2")])).results
            self.assertTrue(all(r.response.applied for r in res))
            # The connection stays usable after a refusal.
            self.assertEqual(client.Count(CountRequest(board="other_1")), 2)
        finally:
            transport.close()
            server.stop()

    def test_reload_metrics_audit_whoami(self):
        """Grants change with SIGHUP, on the next call; refusals are counted
        by identity, method and reason; DeleteBoard and ResetBoard leave an
        audit line allowed or not; GetServerInfo and rankctl whoami say who
        the connection is."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG + grant_section(
            "anonymous", {"read": "season_*"}))
        client, transport = connect(server.port)
        try:
            self.populate()
            info = client.GetServerInfo(GetServerInfoRequest())
            self.assertEqual(info.grants, ["read:season_*"])
            with self.assertRaises(PermissionDenied):
                client.DeleteBoard(DeleteBoardRequest(board="season_1",
                                                      request_id="audit-1"))
            with self.assertRaises(PermissionDenied):
                client.Count(CountRequest(board="other_1"))
            m = server.metrics()
            self.assertEqual(refused_count(m, "anonymous", "DeleteBoard",
                                           "no_role"), 1)
            self.assertEqual(refused_count(m, "anonymous", "Count",
                                           "board_not_granted"), 1)
            self.assertRegex(m, r'rankd_requests_total\{method="Count",'
                                r'outcome="denied"\} 1\n')
            self.assertIn("audit: DeleteBoard board 'season_1' by anonymous,"
                          " request id 'audit-1': refused: PermissionDenied",
                          server.log())
            # The same connection, the next call: the new grants.
            server.reload(BASE_CONFIG + grant_section(
                "anonymous", {"read": "*", "admin": "season_*"}))
            self.assertEqual(client.Count(CountRequest(board="other_1")), 2)
            self.assertEqual(client.GetServerInfo(GetServerInfoRequest())
                             .grants, ["admin:season_*", "read:*"])
            r = client.ResetBoard(ResetBoardRequest(board="season_1",
                                                    request_id="audit-2"))
            self.assertTrue(r.applied)
            self.assertIn("audit: ResetBoard board 'season_1' by anonymous, "
                          "request id 'audit-2': done", server.log())
            # A reload with an error keeps the grants in force.
            before = server.log().count("reload failed")
            server.write_config(BASE_CONFIG + "[grant anonymous]\nread=a{b\n")
            server.proc.send_signal(signal.SIGHUP)
            wait_for("the failed reload", lambda: server.log().count(
                "reload failed") > before, 30)
            self.assertEqual(client.Count(CountRequest(board="other_1")), 2)
            # rankctl whoami, in a table and in JSON.
            if os.path.exists(RANKCTL):
                out = subprocess.run(
                    [RANKCTL, "--connect", f"127.0.0.1:{server.port}",
                     "whoami"], capture_output=True, text=True, check=True)
                self.assertRegex(out.stdout, r"identity\s+\(anonymous\)")
                self.assertRegex(out.stdout, r"grants\s+admin:season_\* "
                                             r"read:\*")
                out = subprocess.run(
                    [RANKCTL, "--connect", f"127.0.0.1:{server.port}",
                     "--json", "whoami"], capture_output=True, text=True,
                    check=True)
                self.assertEqual(out.stdout.strip(), '{"identity":null,'
                                 '"tls":false,"grants":["admin:season_*",'
                                 '"read:*"]}')
                out = subprocess.run(
                    [RANKCTL, "--connect", f"127.0.0.1:{server.port}",
                     "delete-board", "other_1", "--yes"],
                    capture_output=True, text=True)
                self.assertEqual(out.returncode, 5, out.stderr)
                self.assertIn("DeleteBoard on board 'other_1' needs role "
                              "admin", out.stderr)
        finally:
            transport.close()
            server.stop()

    def test_frozen_client_sees_missing_result(self):
        """A client built from the 1.0 IDL does not know PermissionDenied: a
        refused call is a TApplicationException MISSING_RESULT to it, and
        its connection stays usable (what idl/ranking.thrift says)."""
        frozen = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "compat", "ranking-1.0.thrift")
        stubs = tempfile.mkdtemp(prefix="frozen-", dir=self.dir)
        subprocess.run(["thrift", "--gen", "py", "-out", stubs, frozen],
                       check=True)
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG + grant_section(
            "anonymous", {"read": "season_*"}))
        script = f"""
import sys
sys.path[:0] = [{stubs!r}, {os.path.dirname(os.path.abspath(__file__))!r}]
from servers import connect
from ranking.ttypes import GetRankRequest
from thrift.Thrift import TApplicationException
c, t = connect({server.port})
try:
    c.GetRank(GetRankRequest(board="other_1", member="alice"))
except TApplicationException as x:
    print(x.type == TApplicationException.MISSING_RESULT, x.message)
print(c.GetRank(GetRankRequest(board="season_1", member="alice")).score)
"""
        try:
            self.populate()
            out = subprocess.run([sys.executable, "-c", script],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.stdout, "True GetRank failed: unknown "
                             "result\n10\n", out.stderr)
        finally:
            server.stop()

    def test_identity_without_section_has_nothing(self):
        """Once grants exist, a caller without a section of its own has no
        role: here anonymous, while another identity has every role."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG + grant_section(
            "web", {r: "*" for r in ALL}))
        client, transport = connect(server.port)
        try:
            self.assertEqual(client.GetServerInfo(GetServerInfoRequest())
                             .grants, [])
            with self.assertRaises(PermissionDenied) as cm:
                client.GetRank(GetRankRequest(board="season_1",
                                              member="alice"))
            self.assertIn("no such role on any board", cm.exception.message)
        finally:
            transport.close()
            server.stop()

    def test_grant_option(self):
        """--grant NAME=ROLE,...: those roles on every board, with the
        file's sections; a bad one stops rankd with a message."""
        server = Rankd(self.dir, self.redis_port, BASE_CONFIG,
                       "--grant", "anonymous=read", "--grant",
                       "anonymous=admin")
        client, transport = connect(server.port)
        try:
            self.assertEqual(client.GetServerInfo(GetServerInfoRequest())
                             .grants, ["admin:*", "read:*"])
            with self.assertRaises(PermissionDenied):
                client.Update(upd("season_1"))
        finally:
            transport.close()
            server.stop()
        for bad, says in (("anonymous", "is not NAME=ROLE"),
                          ("anonymous=read,root", "'root' is not a role"),
                          ("=read", "is not NAME=ROLE")):
            r = subprocess.run([RANKD, "--listen", "127.0.0.1:0", "--grant",
                                bad], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)

    def test_config_errors(self):
        """A [grant] section's mistakes stop rankd, naming file, line and
        key."""
        path = os.path.join(self.dir, "bad.conf")
        for text, says in (
                ("[grant web]\nread=*\nroot=*\n",
                 ":3: [grant web] root: unknown key (expected one of: read, "
                 "write, admin)"),
                ("[board a]\n\n[grant web]\nwrite=season_*;a{b\n",
                 ":4: [grant web] write: board pattern 'a{b'"),
                ("[grant web]\nadmin=\n",
                 ":2: [grant web] admin: name at least one board pattern"),
                ("[grant ]\nread=*\n", ":1: [grant ]: NAME must be"),
                ("[grant web]\nread=*\nread=x\n",
                 ":3: [grant web] read: repeats the key of line 2")):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            r = subprocess.run([RANKD, "--listen", "127.0.0.1:0", "--config",
                                path], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 2, (text, r.stderr))
            self.assertIn(path + says, r.stderr)

    def test_open_port_warning(self):
        """Beyond loopback, without grants: a loud warning at start; with a
        grant, none."""
        for grants, warns in (((), True),
                              (("--grant", "anonymous=read",
                                "--metrics-listen", f"0.0.0.0:{free_port()}"),
                               False)):
            # The warning comes before rankd serves, so before it reads its
            # SIGTERM: the whole of it is in the log once rankd is stopped.
            proc, port = start(
                lambda p: [RANKD, "--listen", f"0.0.0.0:{p}", "--redis",
                           f"127.0.0.1:{self.redis_port}", *grants], self.dir)
            self.assertEqual(stop(proc, self.dir, port), 0)
            with open(os.path.join(self.dir, f"log-{port}"),
                      encoding="utf-8") as f:
                log = f.read()
            self.assertIn("listening on 0.0.0.0", log)
            self.assertEqual("ANYONE WHO REACHES THIS PORT CAN READ AND WRITE"
                             " EVERY BOARD" in log, warns, log)
            if warns:
                self.assertIn("docs/security.md", log)
            # The viewer's reads are rankd's own: no grant limits them.
            self.assertEqual("serves the board viewer to anyone" in log,
                             "--metrics-listen" in grants, log)

if __name__ == "__main__":
    unittest.main(verbosity=2)
