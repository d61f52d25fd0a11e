"""TLS on rankd's Thrift port (issue 51): a real rankd with a plain, a TLS
and a unix-socket listener side by side over a real redis-server, the
generated Python client over TSSLSocket with client certificates made by
certs.py, and hostile clients: garbage for a ClientHello, TLS 1.1, a
trickled handshake, 1,000 handshakes left half-way, expired, foreign and
missing certificates, reserved identities, renegotiation, and each port's
client on the other. Every failure is counted in /metrics. SIGHUP swaps
the certificates for new connections while an old one goes on.

Usage: test_tls.py RANKD IDL
RANKD_TEST_WRAPPER (e.g. valgrind) wraps rankd; under a wrapper only the
core runs (handshakes, calls, failed handshakes, a reload and the drain with
a handshake half-way): the floods would time valgrind out.
"""
import os
import resource
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

RANKD, IDL = os.path.abspath(sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import certs  # noqa: E402
import rankd_http  # noqa: E402
from rankd_http import get, start_rankd, start_redis, stop, wait_for  # noqa

rankd_http.load_stubs(IDL)

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TSSLSocket, TTransport  # noqa: E402
from ranking import Ranking  # noqa: E402
from ranking.ttypes import GetTopNRequest, UpdateRequest  # noqa: E402

# TSSLSocket checks the name with ssl.match_hostname, which warns.
warnings.simplefilter("ignore", DeprecationWarning)

WRAPPED = bool(rankd_http.wrapper())
HALF_WAY = 1000          # handshakes left half-way
STALL_S = 10             # RANK_REQUEST_READ_TIMEOUT_MS
SWEEP_S = 1              # the sweep runs once a second
BOARD = "tls"


def framed_call(send):
    buf = TTransport.TMemoryBuffer()
    send(Ranking.Client(TBinaryProtocol.TBinaryProtocol(buf)))
    body = buf.getvalue()
    return struct.pack(">I", len(body)) + body


def client_hello():
    """The first bytes a real TLS client sends (a ClientHello), captured
    from Python's ssl through a memory BIO."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class TlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="rankd-tls-")
        d = cls.dir = os.path.join(cls.work, "certs")
        cls.paths = certs.make(d, ["client", "anonymous", "uid:0"])
        # The files rankd reads (SIGHUP reads them again).
        cls.live = os.path.join(cls.work, "live")
        os.makedirs(cls.live)
        for name in ("server.pem", "server.key", "ca.pem"):
            shutil.copy(os.path.join(d, name), cls.live)
        cls.unix = os.path.join(cls.work, "rankd.sock")
        cls.tls_port = rankd_http.servers.free_port()
        os.environ["G_MESSAGES_DEBUG"] = "rankd"  # the peers' identities
        cls.redis, cls.redis_port = start_redis(cls.work)
        cls.rankd, cls.port, cls.http = start_rankd(
            RANKD, cls.work, cls.redis_port,
            ["--listen", f"unix:{cls.unix}",
             "--tls-listen", f"127.0.0.1:{cls.tls_port}",
             "--tls-cert", os.path.join(cls.live, "server.pem"),
             "--tls-key", os.path.join(cls.live, "server.key"),
             "--tls-ca", os.path.join(cls.live, "ca.pem"),
             "--max-connections", str(HALF_WAY + 200),
             "--idle-timeout", "60"])
        # start_rankd passes the plain --listen first: both are bound.
        wait_for("the TLS port", lambda: cls.connects(cls.tls_port))

    @classmethod
    def tearDownClass(cls):
        status = None
        try:
            status = cls.stop_rankd()
        finally:
            cls.redis.terminate()
            cls.redis.wait(30)
            shutil.rmtree(cls.work)
        if status not in (None, 0):
            raise AssertionError(f"rankd exited with status {status}")

    @classmethod
    def stop_rankd(cls):
        if cls.rankd is None:
            return None
        rankd, cls.rankd = cls.rankd, None
        return stop(rankd, cls.work, cls.port)

    @staticmethod
    def connects(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    # ---- helpers ----

    def log(self):
        with open(os.path.join(self.work, f"log-{self.port}"),
                  encoding="utf-8", errors="replace") as f:
            return f.read()

    def metric(self, name):
        for line in get(self.http, "/metrics")[2].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"no {name} in /metrics")

    def failures(self, reason):
        return self.metric(
            f'rankd_tls_handshake_failures_total{{reason="{reason}"}}')

    def context(self, cert="client", ca=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(ca or os.path.join(self.dir, "ca.pem"))
        if cert is not None:
            pem, key = (self.paths["client_" + cert] if cert in
                        ("client", "anonymous", "uid:0")
                        else (cert + ".pem", cert + ".key"))
            ctx.load_cert_chain(os.path.join(self.dir, pem),
                                os.path.join(self.dir, key))
        return ctx

    def tls_client(self, ctx=None, port=None):
        sock = TSSLSocket.TSSLSocket(
            "127.0.0.1", port or self.tls_port,
            ssl_context=ctx or self.context(), server_hostname="127.0.0.1")
        sock.setTimeout(30000)
        transport = TTransport.TFramedTransport(sock)
        transport.open()
        return (Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)),
                transport)

    def plain_client(self, unix=None):
        sock = (TSocket.TSocket(unix_socket=unix) if unix
                else TSocket.TSocket("127.0.0.1", self.port))
        sock.setTimeout(30000)
        transport = TTransport.TFramedTransport(sock)
        transport.open()
        return (Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)),
                transport)

    def round_trip(self, client, member):
        client.Update(UpdateRequest(board=BOARD, member=member, value=7,
                                    request_id="id-" + member))
        top = client.GetTopN(GetTopNRequest(board=BOARD, n=1000))
        self.assertIn(member, [e.member for e in top])

    def refused(self, ctx, reason, port=None):
        """A TLS client with ctx fails (in the handshake or, with TLS 1.3,
        on its first call), and the failure is counted under reason."""
        before = self.failures(reason)
        with self.assertRaises((ssl.SSLError, OSError,
                                TTransport.TTransportException)):
            client, transport = self.tls_client(ctx, port)
            try:
                client.GetTopN(GetTopNRequest(board=BOARD, n=1))
            finally:
                transport.close()
        wait_for(f"a {reason} failure counted",
                 lambda: self.failures(reason) >= before + 1)

    def until_logged(self, text, attempt):
        """Failures are logged once a second at most: attempt (a failing
        call) again until one of them is."""
        def once():
            if text in self.log():
                return True
            try:
                attempt()
            except (ssl.SSLError, OSError, TTransport.TTransportException):
                pass
            return text in self.log()
        wait_for(f"{text!r} in rankd's log", once)

    def tls_call(self, ctx):
        client, transport = self.tls_client(ctx)
        try:
            client.GetTopN(GetTopNRequest(board=BOARD, n=1))
        finally:
            transport.close()

    def closed_by_rankd(self, sock, deadline=30):
        """Reads until rankd closes sock; the bytes it sent."""
        sock.settimeout(deadline)
        got = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
        return got

    # ---- the tests ----

    def test_calls_over_tls_beside_plain(self):
        handshakes = self.metric("rankd_tls_handshakes_total")
        client, transport = self.tls_client()
        self.round_trip(client, "over-tls")
        plain, plain_transport = self.plain_client()
        self.round_trip(plain, "over-plain")
        # Both connections stay usable side by side.
        self.round_trip(client, "over-tls-again")
        transport.close()
        plain_transport.close()
        self.assertGreaterEqual(self.metric("rankd_tls_handshakes_total"),
                                handshakes + 1)
        self.assertIn("a TLSv1.3 connection from client", self.log())

    def test_tls12_served(self):
        # The identity (the CN by default) is logged at debug level.
        ctx = self.context()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        client, transport = self.tls_client(ctx)
        self.round_trip(client, "over-tls12")
        transport.close()
        self.assertIn("a TLSv1.2 connection from client", self.log())

    def test_option_errors(self):
        d = self.dir
        cases = [
            (["--listen", "none"], "--listen none: give a --tls-listen"),
            (["--tls-listen", "127.0.0.1:1"], "--tls-listen: needs --tls-cert"),
            (["--tls-cert", f"{d}/server.pem"], "--tls-cert: only with "
             "--tls-listen"),
            (["--tls-listen", "127.0.0.1:1", "--tls-cert", f"{d}/nothing.pem",
              "--tls-key", f"{d}/server.key"], "--tls-cert: cannot read"),
            (["--tls-listen", "127.0.0.1:1", "--tls-cert", f"{d}/server.pem",
              "--tls-key", f"{d}/server.key", "--tls-client-cert",
              "optional"], "--tls-client-cert: needs --tls-ca"),
            (["--tls-listen", "127.0.0.1:1", "--tls-cert", f"{d}/server.pem",
              "--tls-key", f"{d}/server.key", "--tls-identity", "serial"],
             "--tls-identity: "),
            (["--tls-listen", "unix:/nowhere", "--tls-cert",
              f"{d}/server.pem", "--tls-key", f"{d}/server.key"],
             "--tls-listen: 'unix:/nowhere': TLS is served on TCP"),
        ]
        for args, message in cases:
            out = subprocess.run([RANKD, "--redis", "127.0.0.1:1", *args],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertIn(message, out.stderr)
        # A key that is not the certificate's: at start, naming it.
        out = subprocess.run(
            [RANKD, "--redis", "127.0.0.1:1", "--tls-listen", "127.0.0.1:0",
             "--tls-cert", f"{d}/server.pem", "--tls-key",
             f"{d}/client-client.key"], capture_output=True, text=True,
            timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("is not the certificate", out.stderr)

    def test_tls11_refused(self):
        ctx = self.context()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        self.refused(ctx, "version")

    def test_garbage_instead_of_client_hello(self):
        before = self.failures("protocol")
        s = socket.create_connection(("127.0.0.1", self.tls_port))
        s.sendall(b"\x00garbage, not a ClientHello\r\n" * 20)
        self.closed_by_rankd(s)
        s.close()
        wait_for("a protocol failure counted",
                 lambda: self.failures("protocol") >= before + 1)
        client, transport = self.tls_client()
        self.round_trip(client, "after-garbage")
        transport.close()

    def test_plain_client_on_tls_port(self):
        before = self.failures("protocol")
        s = socket.create_connection(("127.0.0.1", self.tls_port))
        s.sendall(framed_call(lambda c: c.send_GetTopN(
            GetTopNRequest(board=BOARD, n=1))))
        got = self.closed_by_rankd(s)
        s.close()
        # No Thrift reply: at most a TLS alert (a record of type 21).
        self.assertTrue(got == b"" or got[0] == 21, got[:16])
        wait_for("a protocol failure counted",
                 lambda: self.failures("protocol") >= before + 1)

        def again():
            with socket.create_connection(("127.0.0.1", self.tls_port)) as s:
                s.sendall(b"\x00\x00\x00\x10\x80\x01" + b"\x00" * 14)
                self.closed_by_rankd(s)
        self.until_logged("TLS handshake with a client from 127.0.0.1 "
                          "failed (protocol)", again)

    def test_tls_client_on_plain_port(self):
        with self.assertRaises((ssl.SSLError, OSError)):
            with socket.create_connection(("127.0.0.1", self.port)) as raw:
                with self.context().wrap_socket(
                        raw, server_hostname="127.0.0.1") as s:
                    s.recv(1)
        self.assertIn("speaks TLS; this port expects plain Thrift", self.log())
        plain, transport = self.plain_client()
        self.round_trip(plain, "after-tls-on-plain")
        transport.close()

    def test_certificates_refused(self):
        self.refused(self.context("expired"), "certificate")
        self.refused(self.context("stranger"), "certificate")
        self.refused(self.context(None), "certificate")
        self.until_logged("certificate has expired",
                          lambda: self.tls_call(self.context("expired")))
        client, transport = self.tls_client()
        self.round_trip(client, "after-bad-certificates")
        transport.close()

    def test_reserved_identities_refused(self):
        self.refused(self.context("anonymous"), "reserved_identity")
        self.refused(self.context("uid:0"), "reserved_identity")
        self.until_logged("names 'anonymous', a reserved identity",
                          lambda: self.tls_call(self.context("anonymous")))

    def test_renegotiation_refused(self):
        ctx_args = ["-tls1_2", "-connect", f"127.0.0.1:{self.tls_port}",
                    "-cert", os.path.join(self.dir, "client-client.pem"),
                    "-key", os.path.join(self.dir, "client-client.key"),
                    "-CAfile", os.path.join(self.dir, "ca.pem")]
        proc = subprocess.Popen(["openssl", "s_client", *ctx_args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        # s_client asks for a renegotiation on a line "R" once connected.
        out = b""
        while b"Verification: OK" not in out and b"Verify return code" \
                not in out:
            line = proc.stdout.readline()
            self.assertTrue(line, out[-2000:])
            out += line
        proc.stdin.write(b"R\n")
        proc.stdin.flush()
        rest, _ = proc.communicate(timeout=30)
        out += rest
        self.assertIn(b"RENEGOTIATING", out)
        self.assertIn(b"no renegotiation", out)
        client, transport = self.tls_client()
        self.round_trip(client, "after-renegotiation")
        transport.close()

    def test_unix_socket_peer(self):
        client, transport = self.plain_client(unix=self.unix)
        self.round_trip(client, "over-unix")
        transport.close()
        self.assertIn(f"a connection on a unix socket from uid:{os.getuid()}",
                      self.log())

    def test_unix_socket_file(self):
        """A live rankd's socket is not taken over; a stale file is."""
        out = subprocess.run([RANKD, "--redis", f"127.0.0.1:{self.redis_port}",
                              "--listen", f"unix:{self.unix}"],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(f"cannot listen on unix:{self.unix}: in use",
                      out.stderr)
        stale = os.path.join(self.work, "stale.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(stale)
        s.close()  # the file stays, nothing listens
        proc = subprocess.Popen(
            [*rankd_http.wrapper(), RANKD, "--redis",
             f"127.0.0.1:{self.redis_port}", "--listen", f"unix:{stale}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def served():
                try:
                    client, transport = self.plain_client(unix=stale)
                except TTransport.TTransportException:
                    return False
                self.round_trip(client, "over-a-stale-socket-file")
                transport.close()
                return True
            wait_for("rankd on the stale socket file", served)
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(60), 0)
        self.assertFalse(os.path.exists(stale))

    @unittest.skipIf(WRAPPED, "a flood; the core runs under the wrapper")
    def test_stalled_handshakes_freed(self):
        """1,000 handshakes left half-way and one trickled a byte a second
        are closed on the stall clock; good clients are served meanwhile."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        hello = client_hello()
        timeouts = self.failures("timeout")
        half = []
        for i in range(HALF_WAY):
            s = socket.create_connection(("127.0.0.1", self.tls_port))
            # Nothing, or a ClientHello cut short.
            if i % 2:
                s.sendall(hello[:len(hello) // 2])
            half.append(s)
        trickled = {}

        def trickle():
            s = socket.create_connection(("127.0.0.1", self.tls_port))
            begin = time.monotonic()
            try:
                for b in hello:
                    s.sendall(bytes([b]))
                    time.sleep(1)  # the trickle itself: a byte a second
            except OSError:
                pass
            trickled["closed_after"] = time.monotonic() - begin
            s.close()
        t = threading.Thread(target=trickle)
        t.start()
        wait_for("the half-way handshakes open", lambda: self.metric(
            "rankd_tls_connections_open") >= HALF_WAY)
        client, transport = self.tls_client()
        self.round_trip(client, "beside-the-stalled")
        plain, plain_transport = self.plain_client()
        self.round_trip(plain, "plain-beside-the-stalled")
        t.join(STALL_S + 3 * SWEEP_S + 30)
        self.assertFalse(t.is_alive())
        self.assertLess(trickled["closed_after"], STALL_S + 3 * SWEEP_S)
        self.assertGreaterEqual(trickled["closed_after"], STALL_S - 1)
        wait_for("the stalled handshakes closed", lambda: self.metric(
            "rankd_tls_connections_open") <= 1, deadline=STALL_S + 10)
        self.assertGreaterEqual(self.failures("timeout"),
                                timeouts + HALF_WAY + 1)
        for s in half:
            self.assertEqual(self.closed_by_rankd(s, 5), b"")
            s.close()
        transport.close()
        plain_transport.close()
        wait_for("every connection freed", lambda: self.metric(
            "rankd_connections_open") == 0)

    def test_z_sighup_reload(self):
        """Runs last but one: it swaps the certificates the others use."""
        old_client, old_transport = self.tls_client()
        self.round_trip(old_client, "before-reload")
        # A reload that fails keeps what is in use.
        with open(os.path.join(self.live, "server.pem"), "w") as f:
            f.write("not a certificate\n")
        self.rankd.send_signal(signal.SIGHUP)
        wait_for("the failed reload in the log",
                 lambda: "SIGHUP: TLS reload failed" in self.log())
        client, transport = self.tls_client()
        self.round_trip(client, "after-failed-reload")
        transport.close()
        # Certificates of a new CA, for the server and its clients.
        new = os.path.join(self.work, "new-certs")
        certs.make(new, ["client"])
        for name in ("server.pem", "server.key", "ca.pem"):
            shutil.copy(os.path.join(new, name), self.live)
        self.rankd.send_signal(signal.SIGHUP)
        new_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        new_ctx.load_verify_locations(os.path.join(new, "ca.pem"))
        new_ctx.load_cert_chain(os.path.join(new, "client-client.pem"),
                                os.path.join(new, "client-client.key"))

        def new_served():
            try:
                c, t = self.tls_client(new_ctx)
                try:
                    self.round_trip(c, "after-reload")
                finally:
                    t.close()
                return True
            except (ssl.SSLError, OSError, TTransport.TTransportException):
                return False
        wait_for("a new connection with the new certificates", new_served)
        # The old CA's clients are refused now; the old connection stays.
        self.refused(self.context(), "certificate")
        self.round_trip(old_client, "old-connection-after-reload")
        old_transport.close()
        # And back, for the test after this one.
        for name in ("server.pem", "server.key", "ca.pem"):
            shutil.copy(os.path.join(self.dir, name), self.live)
        self.rankd.send_signal(signal.SIGHUP)

        def old_served():
            try:
                self.tls_call(self.context())
                return True
            except (ssl.SSLError, OSError, TTransport.TTransportException):
                return False
        wait_for("the first certificates back", old_served)

    def test_zz_drain_with_a_handshake_half_way(self):
        """Last: SIGTERM with a handshake half-way and a TLS connection
        open; rankd exits cleanly (no leak under valgrind)."""
        client, transport = self.tls_client()
        self.round_trip(client, "before-the-drain")
        half = socket.create_connection(("127.0.0.1", self.tls_port))
        half.sendall(client_hello()[:20])
        wait_for("the half-way handshake accepted", lambda: self.metric(
            "rankd_tls_connections_open") >= 2)
        self.assertEqual(self.stop_rankd(), 0)
        self.assertEqual(self.closed_by_rankd(half, 5), b"")
        half.close()
        transport.close()
        self.assertFalse(os.path.exists(self.unix),
                         "the unix socket's file is removed on exit")



class TlsOnlyTest(unittest.TestCase):
    """--listen none with a TLS listener only, client certificates
    optional, the identity from the URI name, and --max-connections
    counting handshakes."""

    MAX = 4

    def test_tls_only_optional_uri_max_connections(self):
        work = tempfile.mkdtemp(prefix="rankd-tls-only-")
        d = os.path.join(work, "certs")
        certs.make(d, ["client"])
        os.environ["G_MESSAGES_DEBUG"] = "rankd"
        redis, redis_port = start_redis(work)
        rankd, port = rankd_http.servers.start(lambda p: [
            *rankd_http.wrapper(), RANKD, "--redis",
            f"127.0.0.1:{redis_port}", "--listen", "none", "--tls-listen",
            f"127.0.0.1:{p}", "--tls-cert", f"{d}/server.pem", "--tls-key",
            f"{d}/server.key", "--tls-ca", f"{d}/ca.pem",
            "--tls-client-cert", "optional", "--tls-identity", "uri",
            "--max-connections", str(self.MAX)], work)
        held = []
        try:
            def log():
                with open(os.path.join(work, f"log-{port}")) as f:
                    return f.read()

            def call(ctx):
                sock = TSSLSocket.TSSLSocket(
                    "127.0.0.1", port, ssl_context=ctx,
                    server_hostname="127.0.0.1")
                transport = TTransport.TFramedTransport(sock)
                transport.open()
                client = Ranking.Client(
                    TBinaryProtocol.TBinaryProtocol(transport))
                client.Update(UpdateRequest(board=BOARD, member="m",
                                            value=1, request_id="tls-only"))
                transport.close()
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(f"{d}/ca.pem")
            call(ctx)  # no certificate: anonymous
            wait_for("the anonymous client logged",
                     lambda: "connection from anonymous" in log())
            ctx.load_cert_chain(f"{d}/client-client.pem",
                                f"{d}/client-client.key")
            call(ctx)
            wait_for("the URI identity logged", lambda:
                     "connection from spiffe://rankd.test/client" in log())
            # Handshakes are connections: MAX of them half-way, and the
            # next is refused.
            for _ in range(self.MAX + 1):
                held.append(socket.create_connection(("127.0.0.1", port)))
            # At least one is closed at once (more, if rankd has not yet
            # seen the earlier clients go).
            ready, _, _ = select.select(held, [], [], 30)
            self.assertTrue(ready)
            self.assertEqual(ready[0].recv(1), b"")
            wait_for("the refusal logged", lambda:
                     "refused a connection: --max-connections reached"
                     in log())
        finally:
            for s in held:
                s.close()
            status = stop(rankd, work, port)
            redis.terminate()
            redis.wait(30)
            shutil.rmtree(work)
        self.assertEqual(status, 0)


if __name__ == "__main__":
    unittest.main()
