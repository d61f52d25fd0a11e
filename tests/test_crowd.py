"""A crowd of bad clients: for 30 s, 200 connections at a time each
pipeline 1-64 random calls (some with ~0.5 MB replies), then read all of
the replies, some bytes of them, or none, and close or half-close at a
random point -- mid-request too. Afterwards every connection is gone within
the idle timeout (rankd_connections_open back to 0), rankd's heap is back
where it started, and a new client is served.

"Where it started" is rankd's heap in use (rankd_heap_in_use_bytes: what
malloc has handed out and not had back) after a first, short crowd, which
fills the caches. It may grow by HEAP_SLACK: a leak of 24 bytes a
connection over the crowd's ~11,000 connections would not fit. The RSS is
not what to compare: malloc keeps the free top of each worker's arena up to
its trim threshold (4 MiB, set for speed: see main.c), and how much of it
a burst of large replies leaves resident varies from run to run (0.2 to
2.9 MiB more after the crowd than before, with the heap in use within
0.13 MiB of where it was); the RSS is only held under that threshold for
each of the two workers.

Usage: test_crowd.py RANKD IDL
Starts its own redis-server and rankd processes on free loopback ports.
RANKD_CROWD_SECONDS shortens the run (default 30). RANKD_CROWD_TLS=1 sends
the crowd to a TLS listener (client certificates from certs.py) instead:
each connection a handshake, then the same abuse inside it (a half-close
there is a TCP one, without close_notify: rankd drops what it owed).
"""
import os
import random
import shutil
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
import unittest

RANKD, IDL = os.path.abspath(sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rankd_http  # noqa: E402
from rankd_http import get, start_rankd, start_redis, stop, wait_for  # noqa

STUBS = rankd_http.load_stubs(IDL)

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402
from ranking import Ranking  # noqa: E402
from ranking.ttypes import (  # noqa: E402
    CountRequest, GetAroundRequest, GetRankRequest, GetTopNRequest,
    UpdateRequest)

SECONDS = float(os.environ.get("RANKD_CROWD_SECONDS", "30"))
TLS = os.environ.get("RANKD_CROWD_TLS") == "1"
WARM_UP_SECONDS = 5
CLIENTS = 200
IDLE_TIMEOUT_S = 10
IO_THREADS = 2
HEAP_SLACK = 256 * 1024          # bytes
ARENA_KEEP_KIB = 4 * 1024        # RANK_MALLOC_TRIM_BYTES, in KiB
BOARD = "crowd"


def frame(send):
    """The framed bytes of one call, encoded by the generated client."""
    buf = TTransport.TMemoryBuffer()
    send(Ranking.Client(TBinaryProtocol.TBinaryProtocol(buf)))
    body = buf.getvalue()
    return struct.pack(">I", len(body)) + body


def calls():
    """A few kinds of call, (frame, weight): mostly small, some large."""
    return [
        (frame(lambda c: c.send_Count(CountRequest(board=BOARD))), 10),
        (frame(lambda c: c.send_GetRank(GetRankRequest(
            board=BOARD, member="m7"))), 10),
        (frame(lambda c: c.send_GetTopN(GetTopNRequest(
            board=BOARD, n=10))), 10),
        (frame(lambda c: c.send_Update(UpdateRequest(
            board="crowd-writes", member="w", value=1,
            request_id="same-id"))), 5),
        (frame(lambda c: c.send_GetTopN(GetTopNRequest(
            board=BOARD, n=500, with_data=True))), 2),
        (frame(lambda c: c.send_GetAround(GetAroundRequest(
            board=BOARD, member="m250", radius=100, with_data=True))), 1),
        (b"\x00\x00\x00\x05garb", 1),  # not a call: closes its connection
    ]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def sanitized(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def run_crowd(port, kinds, seconds, seed0, tls=None):
    """CLIENTS clients for seconds (over TLS with the ssl context tls);
    returns the connections made."""
    end = time.monotonic() + seconds
    crowd = [Crowd(port, kinds, seed0 + i, end, tls)
             for i in range(CLIENTS)]
    threads = [threading.Thread(target=c.run) for c in crowd]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(c.rounds for c in crowd)


def metric(http, name):
    for line in get(http, "/metrics")[2].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name}")


class Crowd:
    """One client of the crowd, over and over until the end."""

    def __init__(self, port, kinds, seed, end, tls=None):
        self.port, self.end, self.tls = port, end, tls
        self.rng = random.Random(seed)
        self.frames = [f for f, _ in kinds]
        self.weights = [w for _, w in kinds]
        self.rounds = 0

    def once(self):
        rng = self.rng
        n = rng.randint(1, 64)
        picked = rng.choices(self.frames, self.weights, k=n)
        data = b"".join(picked)
        s = socket.create_connection(("127.0.0.1", self.port), timeout=20)
        try:
            # Small and large receive windows (not below loopback's 64 KiB
            # segments: the kernel then sends a segment per 200 ms timer).
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                         rng.choice([1 << 17, 1 << 20]))
            if self.tls is not None:
                s = self.tls.wrap_socket(s, server_hostname="127.0.0.1")
            # Sometimes only part of the requests, cut anywhere.
            cut = len(data) if rng.random() < 0.7 else rng.randrange(len(data))
            s.sendall(data[:cut])
            how = rng.choice(["half-close", "close", "close"])
            if how == "half-close":
                # The TCP half-close itself, under TLS too.
                socket.socket.shutdown(s, socket.SHUT_WR)
            read = rng.choice(["all", "some", "none"])
            if read == "all":
                # Every reply to a whole request (rankd closes early on
                # garbage, or on a half-close once it has answered).
                whole, at = 0, 0
                for f in picked:
                    at += len(f)
                    whole += at <= cut
                self.read_replies(s, whole)
            elif read == "some":
                got, want = 0, rng.randrange(1, 200000)
                while got < want:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += len(chunk)
        except OSError:
            pass  # rankd closed on us (garbage, a cut request): fine
        finally:
            if self.rng.random() < 0.5:
                # A reset rather than a FIN.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             struct.pack("ii", 1, 0))
            s.close()
        self.rounds += 1

    @staticmethod
    def read_replies(s, n):
        buf = b""
        for _ in range(n):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(
                    ">I", buf[:4])[0]:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return
                buf += chunk
            buf = buf[4 + struct.unpack(">I", buf[:4])[0]:]

    def run(self):
        while time.monotonic() < self.end:
            try:
                self.once()
            except OSError:
                pass  # refused or reset while connecting: try again


class CrowdTest(unittest.TestCase):

    def test_crowd(self):
        work = tempfile.mkdtemp(prefix="rankd-crowd-")
        redis, redis_port = start_redis(work)
        tls_opts, tls = [], None
        if TLS:
            import certs
            d = os.path.join(work, "certs")
            certs.make(d, ["crowd"])
            tls_port = rankd_http.servers.free_port()
            tls_opts = ["--tls-listen", f"127.0.0.1:{tls_port}",
                        "--tls-cert", os.path.join(d, "server.pem"),
                        "--tls-key", os.path.join(d, "server.key"),
                        "--tls-ca", os.path.join(d, "ca.pem")]
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            tls.load_verify_locations(os.path.join(d, "ca.pem"))
            tls.load_cert_chain(os.path.join(d, "client-crowd.pem"),
                                os.path.join(d, "client-crowd.key"))
        rankd, port, http = start_rankd(
            RANKD, work, redis_port,
            ["--idle-timeout", str(IDLE_TIMEOUT_S),
             "--io-threads", str(IO_THREADS), *tls_opts])
        crowd_port = tls_port if TLS else port
        try:
            sock = TSocket.TSocket("127.0.0.1", port)
            sock.setTimeout(60000)
            transport = TTransport.TFramedTransport(sock)
            transport.open()
            client = Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport))
            for i in range(500):
                client.Update(UpdateRequest(
                    board=BOARD, member=f"m{i}", value=i,
                    request_id=f"fill-{i}",
                    data={str(k): chr(97 + k) * 255 for k in range(4)}))
            kinds = calls()
            # Warm up: every kind of call once, read whole.
            for f, _ in kinds[:-1]:
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                s.sendall(f)
                (n,) = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))
                s.recv(n, socket.MSG_WAITALL)
                s.close()
            transport.close()
            run_crowd(crowd_port, kinds, WARM_UP_SECONDS, 1000, tls)
            wait_for("no connection open",
                     lambda: metric(http, "rankd_connections_open") == 0,
                     deadline=IDLE_TIMEOUT_S + 5)
            before = rss_kib(rankd.pid)
            heap_before = metric(http, "rankd_heap_in_use_bytes")

            rounds = run_crowd(crowd_port, kinds, SECONDS, 0, tls)

            # Every connection goes within the idle timeout.
            wait_for("rankd_connections_open back to 0",
                     lambda: metric(http, "rankd_connections_open") == 0,
                     deadline=IDLE_TIMEOUT_S + 5)
            after = rss_kib(rankd.pid)
            heap_after = metric(http, "rankd_heap_in_use_bytes")
            sys.stderr.write(f"{rounds} connections; rankd RSS {before} KiB"
                             f" before, {after} KiB after; heap in use"
                             f" {heap_before:.0f} B before, {heap_after:.0f}"
                             f" B after\n")
            self.assertGreater(rounds, CLIENTS)
            if TLS:
                # The crowd went through TLS, and every session is gone.
                self.assertGreater(metric(http, "rankd_tls_handshakes_total"),
                                   CLIENTS)
                self.assertEqual(metric(http, "rankd_tls_connections_open"), 0)
            if not sanitized(RANKD) and not rankd_http.wrapper():
                self.assertLessEqual(heap_after, heap_before + HEAP_SLACK)
                self.assertLessEqual(after,
                                     before + IO_THREADS * ARENA_KEEP_KIB)
            # And a new client is served.
            sock = TSocket.TSocket("127.0.0.1", port)
            sock.setTimeout(10000)
            transport = TTransport.TFramedTransport(sock)
            transport.open()
            client = Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport))
            self.assertEqual(client.Count(CountRequest(board=BOARD)), 500)
            self.assertEqual(client.GetRank(GetRankRequest(
                board="crowd-writes", member="w")).score, 1)
            transport.close()
            if TLS:
                from thrift.transport import TSSLSocket
                sock = TSSLSocket.TSSLSocket(
                    "127.0.0.1", crowd_port, ssl_context=tls,
                    server_hostname="127.0.0.1")
                sock.setTimeout(10000)
                transport = TTransport.TFramedTransport(sock)
                transport.open()
                client = Ranking.Client(
                    TBinaryProtocol.TBinaryProtocol(transport))
                self.assertEqual(client.Count(CountRequest(board=BOARD)), 500)
                transport.close()
        finally:
            status = stop(rankd)
            redis.terminate()
            redis.wait(30)
            if status != 0:
                with open(os.path.join(work, f"log-{port}")) as f:
                    sys.stderr.write(f.read())
            shutil.rmtree(work)
        self.assertEqual(status, 0)


if __name__ == "__main__":
    unittest.main()
