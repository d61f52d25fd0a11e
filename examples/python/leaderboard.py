"""A small rankd client in Python, on Debian's python3-thrift.

    mkdir -p gen-py && thrift --gen py -out gen-py idl/ranking.thrift
    PYTHONPATH=gen-py /usr/bin/python3 examples/python/leaderboard.py [HOST:PORT]

rankd's defaults: framed transport, binary protocol. The address comes from
the first argument, else RANKD_ADDRESS, else 127.0.0.1:9090.

TLS, from the environment (any of these turns it on; so does RANKD_TLS=1):
RANKD_TLS_CA (PEM CAs that rankd's certificate must chain to; default the
system's), RANKD_TLS_CERT and RANKD_TLS_KEY (this client's certificate and
key, for a rankd that asks for one), RANKD_TLS_SERVER_NAME (the name or IP
address rankd's certificate must carry; default the host).
"""
import os
import ssl
import sys

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TSSLSocket, TTransport

from ranking import Ranking
from ranking.ttypes import (
    GetAroundRequest, GetRankRequest, GetRanksRequest, GetTopNRequest,
    NotFound, Unavailable, UpdateMode, UpdateRequest)

BOARD = "example_python"


def tls_context():
    """An SSL context from RANKD_TLS_*, or None (plain TCP)."""
    env = os.environ
    names = ("RANKD_TLS_CA", "RANKD_TLS_CERT", "RANKD_TLS_KEY",
             "RANKD_TLS_SERVER_NAME")
    if env.get("RANKD_TLS") != "1" and not any(env.get(n) for n in names):
        return None
    # Verifies rankd's certificate and name; TLS 1.2 at least, as rankd.
    context = ssl.create_default_context(cafile=env.get("RANKD_TLS_CA"))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if env.get("RANKD_TLS_CERT") or env.get("RANKD_TLS_KEY"):
        context.load_cert_chain(env["RANKD_TLS_CERT"], env["RANKD_TLS_KEY"])
    return context


class Connection:
    """One framed, binary-protocol connection to rankd, reopened on demand."""

    def __init__(self, address):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.tls = tls_context()
        self.server_name = os.environ.get("RANKD_TLS_SERVER_NAME") or self.host
        self.transport = None
        self.client = None
        self.open()

    def open(self):
        if self.tls is not None:
            # The context checks the certificate and server_hostname
            # during the handshake (check_hostname); thrift's own second
            # check (ssl.match_hostname, deprecated) is not needed.
            socket = TSSLSocket.TSSLSocket(
                self.host, self.port, ssl_context=self.tls,
                server_hostname=self.server_name,
                validate_callback=lambda cert, hostname: None)
        else:
            socket = TSocket.TSocket(self.host, self.port)
        socket.setTimeout(5000)  # ms: a lost reply becomes an error
        self.transport = TTransport.TFramedTransport(socket)
        self.client = Ranking.Client(
            TBinaryProtocol.TBinaryProtocol(self.transport))
        self.transport.open()

    def reopen(self):
        # After a transport error the connection's state is unknown (half a
        # reply may be in flight): never reuse it.
        self.transport.close()
        self.open()


def update(conn, request, attempts=3, fail_first=False):
    """Sends an update, retrying with the same request id: rankd applies it
    at most once, however many attempts reach it. fail_first simulates a
    reply lost on the way back: rankd applied the update, we never saw it."""
    for attempt in range(1, attempts + 1):
        try:
            response = conn.client.Update(request)
            if fail_first and attempt == 1:
                raise TTransport.TTransportException(
                    TTransport.TTransportException.TIMED_OUT,
                    "reply lost (simulated)")
            return response
        except TTransport.TTransportException as e:
            print(f"{request.member} {request.value:+d}: {e.message}; "
                  f"retrying with request id {request.request_id}")
            conn.reopen()
        except Unavailable as e:  # Redis busy or failing over: safe to retry
            print(f"{request.member}: unavailable ({e.message}), retrying")
    raise RuntimeError(f"no answer after {attempts} attempts")


def main():
    address = (sys.argv[1] if len(sys.argv) > 1
               else os.environ.get("RANKD_ADDRESS", "127.0.0.1:9090"))
    conn = Connection(address)

    # Best scores, each with member data (shown by with_data reads below).
    for member, value in (("alice", 120), ("bob", 95), ("carol", 130)):
        r = update(conn, UpdateRequest(
            board=BOARD, member=member, value=value, mode=UpdateMode.BEST,
            request_id=f"py-{member}-1", data={"name": member.title()}))
        print(f"update {member}: score {r.score} rank {r.rank}")

    # An INCREMENT whose reply is lost, then retried: counted once, so bob
    # has 95 + 10, not 95 + 20.
    r = update(conn, UpdateRequest(
        board=BOARD, member="bob", value=10, mode=UpdateMode.INCREMENT,
        request_id="py-bob-2"), fail_first=True)
    print(f"bob +10: applied {r.applied}, score {r.score} (counted once)")

    # Each method takes one request struct; the options left out take the
    # IDL's defaults: the current period (periods_back 0), from the top
    # (offset 0), without member data (with_data false).
    e = conn.client.GetRank(GetRankRequest(board=BOARD, member="alice"))
    print(f"alice: rank {e.rank}, score {e.score}")
    for e in conn.client.GetTopN(GetTopNRequest(board=BOARD, n=3,
                                                with_data=True)):
        print(f"#{e.rank} {e.member} {e.score} "
              f"{e.data['name'] if e.data else '-'}")
    around = conn.client.GetAround(GetAroundRequest(board=BOARD,
                                                    member="alice", radius=1))
    print("around alice:", " ".join(f"{e.member}(#{e.rank})" for e in around))
    ranks = conn.client.GetRanks(GetRanksRequest(board=BOARD,
                                                 members=["bob", "nobody"]))
    print("ranks:", ", ".join(f"{r.member}={r.rank if r.found else '-'}"
                              for r in ranks))
    try:
        conn.client.GetRank(GetRankRequest(board=BOARD, member="nobody"))
    except NotFound as e:
        print("nobody:", e.message)
    conn.transport.close()


if __name__ == "__main__":
    main()
