"""A small rankd client in Python, on Debian's python3-thrift.

    thrift --gen py -out gen-py idl/ranking.thrift
    PYTHONPATH=gen-py python3 examples/python/leaderboard.py [HOST:PORT]

rankd's defaults: framed transport, binary protocol.
"""
import os
import sys

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from ranking import Ranking
from ranking.ttypes import NotFound, Unavailable, UpdateMode, UpdateRequest

address = (sys.argv[1] if len(sys.argv) > 1
           else os.environ.get("RANKD_ADDRESS", "127.0.0.1:9090"))
host, port = address.rsplit(":", 1)
socket = TSocket.TSocket(host, int(port))
socket.setTimeout(5000)
transport = TTransport.TFramedTransport(socket)
client = Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport))
transport.open()
board = "example_python"


def update(request, attempts=3):
    """Sends an update, retrying with the same request id: at most once."""
    for attempt in range(attempts):
        try:
            return client.Update(request)
        except Unavailable as e:  # Redis busy or restarting: safe to retry
            print("unavailable, retrying:", e.message)
    raise RuntimeError("rankd stayed unavailable")


for member, value in (("alice", 120), ("bob", 95), ("carol", 130)):
    r = update(UpdateRequest(board=board, member=member, value=value,
                             request_id=f"py-{member}-1", mode=UpdateMode.BEST,
                             data={"name": member.title()}))
    print(f"update {member}: score {r.score} rank {r.rank}")

# The same request again (a retry after a lost reply, say): not counted twice.
r = update(UpdateRequest(board=board, member="bob", value=95,
                         request_id="py-bob-1", mode=UpdateMode.BEST,
                         data={"name": "Bob"}))
print(f"retry bob: applied {r.applied}, score {r.score}")

for e in client.GetTopN(board, 3, 0, 0, True):  # with_data
    print(f"#{e.rank} {e.member} {e.score} {e.data['name'] if e.data else '-'}")
print("around alice:",
      " ".join(e.member for e in client.GetAround(board, "alice", 1, 0, False)))
ranks = client.GetRanks(board, ["bob", "nobody"], 0)
print("ranks:", ", ".join(f"{r.member}={r.rank if r.found else '-'}"
                          for r in ranks))
try:
    client.GetRank(board, "nobody", 0)
except NotFound as e:
    print("nobody:", e.message)
transport.close()
