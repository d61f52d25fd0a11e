#!/usr/bin/python3
"""A client generated from the frozen 1.0 IDL (tests/compat/ranking-1.0.thrift)
calls every method of the current rankd, and its answers hold: what a team
built against 1.0 keeps working whatever 1.x rankd it meets.

Usage: test_frozen_client.py RANKD FROZEN_IDL
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

RANKD = os.path.abspath(sys.argv.pop(1))
FROZEN = os.path.abspath(sys.argv.pop(1))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from servers import start  # noqa: E402

GEN = tempfile.mkdtemp(prefix="frozen-py-")
subprocess.run(["thrift", "--gen", "py", "-out", GEN, FROZEN], check=True)
sys.path.insert(0, GEN)

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from ranking import Ranking  # noqa: E402
from ranking.constants import IDL_VERSION  # noqa: E402
from ranking.ttypes import (  # noqa: E402
    CountBetweenRequest, CountRequest, GetAroundRequest, GetMemberDataRequest,
    GetPercentileRequest, GetRankRequest, GetRanksRequest,
    GetScoreAtPercentileRequest, GetServerInfoRequest, GetTopNRequest,
    InvalidArgument, NotFound, RemoveRequest, SampleRequest,
    SetMemberDataRequest, UpdateBatchRequest, UpdateMode, UpdateRequest)


class FrozenClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # Class cleanups run even when a later step here fails.
        cls.dir = tempfile.mkdtemp(prefix="frozen-")
        cls.addClassCleanup(shutil.rmtree, GEN)
        cls.addClassCleanup(shutil.rmtree, cls.dir)
        redis, redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.addClassCleanup(cls.stop, redis, False)
        rankd, cls.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--redis",
                       f"127.0.0.1:{redis_port}"], cls.dir)
        cls.addClassCleanup(cls.stop, rankd, True)
        cls.transport = TTransport.TFramedTransport(
            TSocket.TSocket("127.0.0.1", cls.port))
        cls.client = Ranking.Client(
            TBinaryProtocol.TBinaryProtocol(cls.transport))
        cls.transport.open()
        cls.addClassCleanup(cls.transport.close)

    @staticmethod
    def stop(proc, clean):
        proc.terminate()
        status = proc.wait(30)
        assert not clean or status == 0, "rankd did not exit cleanly"

    def test_every_method(self):
        c, b = self.client, "frozen"
        r = c.Update(UpdateRequest(board=b, member="a", value=30,
                                   request_id="f-1"))
        self.assertEqual((r.score, r.rank, r.applied), (30, 1, True))
        self.assertFalse(c.Update(UpdateRequest(
            board=b, member="a", value=30, request_id="f-1")).applied)
        results = c.UpdateBatch(UpdateBatchRequest(requests=[
            UpdateRequest(board=b, member="b", value=20, request_id="f-2",
                          data={"name": "B"}),
            UpdateRequest(board=b, member="c", value=10, request_id="f-3",
                          mode=UpdateMode.SET),
            UpdateRequest(board=b, member="", value=1, request_id="f-4")]))
        self.assertEqual([x.response.rank if x.response else None
                          for x in results.results], [2, 3, None])
        self.assertIn("member", results.results[2].invalid.message)
        self.assertEqual(c.GetRank(GetRankRequest(board=b, member="b")).rank, 2)
        with self.assertRaises(NotFound):
            c.GetRank(GetRankRequest(board=b, member="zz"))
        top = c.GetTopN(GetTopNRequest(board=b, n=2, with_data=True))
        self.assertEqual([(e.member, e.score, e.data) for e in top],
                         [("a", 30, None), ("b", 20, {"name": "B"})])
        with self.assertRaises(InvalidArgument):
            c.GetTopN(GetTopNRequest(board=b, n=0))
        self.assertEqual([e.member for e in c.GetAround(
            GetAroundRequest(board=b, member="b", radius=1))],
            ["a", "b", "c"])
        ranks = c.GetRanks(GetRanksRequest(board=b, members=["c", "zz"]))
        self.assertEqual([(x.found, x.rank) for x in ranks],
                         [(True, 3), (False, None)])
        self.assertEqual(c.Count(CountRequest(board=b)), 3)
        self.assertEqual(c.CountBetween(
            CountBetweenRequest(board=b, min_score=15, max_score=30)), 2)
        self.assertAlmostEqual(c.GetPercentile(
            GetPercentileRequest(board=b, member="b")), 100 / 3)
        self.assertEqual(c.GetScoreAtPercentile(
            GetScoreAtPercentileRequest(board=b, pct=100)), 30)
        sample = c.Sample(SampleRequest(board=b, min_score=10, max_score=20,
                                        count=5))
        self.assertEqual(sorted(e.member for e in sample), ["b", "c"])
        c.SetMemberData(SetMemberDataRequest(board=b, member="a",
                                             data={"k": "v"}))
        self.assertEqual(c.GetMemberData(
            GetMemberDataRequest(board=b, member="a")), {"k": "v"})
        removed = c.Remove(RemoveRequest(board=b, member="c",
                                         request_id="f-5"))
        self.assertTrue(removed.applied and removed.removed)
        self.assertEqual(c.Count(CountRequest(board=b)), 2)
        info = c.GetServerInfo(GetServerInfoRequest())
        self.assert_serves(info.idl_version)

    def assert_serves(self, version):
        """rankd serves a contract this 1.0 client can use: major 1, minor
        at least the frozen copy's."""
        major, minor = (int(x) for x in version.split("."))
        frozen_major, frozen_minor = (int(x) for x in IDL_VERSION.split("."))
        self.assertEqual(major, frozen_major, version)
        self.assertGreaterEqual(minor, frozen_minor, version)

    def test_node_client(self):
        """Node, on the npm thrift package of examples/node's lock file."""
        if shutil.which("node") is None or shutil.which("npm") is None:
            if os.environ.get("CI"):
                self.fail("node and npm are needed (sh .ci/deps test)")
            self.skipTest("node or npm not installed")
        here = os.path.dirname(os.path.abspath(__file__))
        examples = os.path.join(here, "..", "..", "examples", "node")
        node = os.path.join(self.dir, "node")
        os.mkdir(node)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(examples, name), node)
        shutil.copy(os.path.join(here, "frozen_client.js"), node)
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund",
                        "--loglevel=error"], cwd=node, check=True,
                       timeout=300)
        # The generated module names follow the file name: ranking_types.
        shutil.copy(FROZEN, os.path.join(node, "ranking.thrift"))
        os.mkdir(os.path.join(node, "gen-nodejs"))
        subprocess.run(["thrift", "--gen", "js:node", "-out", "gen-nodejs",
                        "ranking.thrift"], cwd=node, check=True)
        out = subprocess.run(["node", "frozen_client.js", str(self.port)],
                             cwd=node, check=True, capture_output=True,
                             text=True, timeout=60).stdout
        got = json.loads(out)
        self.assertEqual(got,
                         {"score": 7, "applied": [True, False], "rank": 1,
                          "top": ["n1"], "idl_version": got["idl_version"]})
        self.assert_serves(got["idl_version"])


if __name__ == "__main__":
    unittest.main()
