"""rankctl against a real rankd: tables, JSON and exit codes.

Usage: test_rankctl.py RANKD RANKCTL
Starts its own redis-server and rankd on free loopback ports.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

RANKD, RANKCTL = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from servers import free_port, start  # noqa: E402

CONFIG = "[board raid]\nsubscores=asc,desc\nmode=best\n"


class RankctlTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankctl-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--config", conf,
                       "--redis", f"127.0.0.1:{cls.redis_port}"], cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.rankd.terminate()
        assert cls.rankd.wait(30) == 0, "rankd did not exit cleanly"
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    def ctl(self, *args, code=0, connect=None):
        env = dict(os.environ,
                   RANKCTL_CONNECT=connect or f"127.0.0.1:{self.port}")
        r = subprocess.run([RANKCTL, *args], capture_output=True, text=True,
                           env=env, timeout=60)
        self.assertEqual(r.returncode, code, (args, r.stdout, r.stderr))
        return r.stdout, r.stderr

    def test_update_and_table(self):
        out, _ = self.ctl("update", "t", "alice", "120", "--mode", "best",
                          "--request-id", "t-1")
        self.assertEqual(out.split(), ["score", "120", "rank", "1",
                                       "applied", "yes"])
        self.ctl("update", "t", "bob", "95", "--request-id", "t-2")
        self.ctl("update", "t", "Zoë", "120", "--request-id", "t-3",
                 "--data", "name=Zoé", "--data", "country=FR")
        out, _ = self.ctl("update", "t", "alice", "120", "--mode", "best",
                          "--request-id", "t-1")
        self.assertIn("applied    no (a retry: already applied)", out)
        out, _ = self.ctl("top", "t")
        self.assertEqual(out, "RANK  MEMBER  SCORE\n"
                              "   1  alice     120\n"
                              "   2  Zoë       120\n"
                              "   3  bob        95\n")
        out, _ = self.ctl("top", "t", "2", "--offset", "1", "--with-data")
        self.assertEqual(out, "RANK  MEMBER  SCORE  DATA\n"
                              "   2  Zoë       120  country=FR name=Zoé\n"
                              "   3  bob        95\n")
        # Without --request-id, one is made and printed for a retry.
        _, err = self.ctl("update", "t", "carl", "1")
        self.assertRegex(err, r"request id: [0-9a-f-]{36}")

    def test_json(self):
        self.ctl("update", "j", "a", "10", "--request-id", "j-1",
                 "--data", 'quote="x"')
        self.ctl("update", "j", "b", "20", "--request-id", "j-2")
        out, _ = self.ctl("--json", "top", "j", "--with-data")
        self.assertEqual(json.loads(out), [
            {"rank": 1, "member": "b", "score": 20},
            {"rank": 2, "member": "a", "score": 10,
             "data": {"quote": '"x"'}}])
        out, _ = self.ctl("--json", "rank", "j", "a")
        self.assertEqual(json.loads(out),
                         [{"rank": 2, "member": "a", "score": 10}])
        out, _ = self.ctl("--json", "ranks", "j", "a", "ghost")
        self.assertEqual(json.loads(out), [
            {"member": "a", "found": True, "rank": 2, "score": 10},
            {"member": "ghost", "found": False}])
        self.assertEqual(json.loads(self.ctl("--json", "count", "j")[0]),
                         {"count": 2})
        self.assertEqual(
            json.loads(self.ctl("--json", "count-between", "j", "15",
                                "25")[0]), {"count": 1})
        self.assertEqual(
            json.loads(self.ctl("--json", "percentile", "j", "b")[0]),
            {"percentile": 50})
        self.assertEqual(
            json.loads(self.ctl("--json", "score-at-percentile", "j",
                                "100")[0]), {"score": 20})
        out, _ = self.ctl("--json", "update", "j", "a", "1",
                          "--request-id", "j-3")
        self.assertEqual(json.loads(out), {"score": 11, "rank": 2,
                                           "applied": True,
                                           "request_id": "j-3"})
        drawn = json.loads(self.ctl("--json", "sample", "j", "0", "100",
                                    "5")[0])
        self.assertEqual(sorted(e["member"] for e in drawn), ["a", "b"])

    def test_subscores_and_data(self):
        out, _ = self.ctl("--json", "update", "raid", "t7", "12",
                          "--subscore", "4", "--subscore", "93000",
                          "--request-id", "r-1")
        self.assertEqual(json.loads(out)["subscores"], [4, 93000])
        self.ctl("update", "raid", "t8", "12", "--subscore", "4",
                 "--subscore", "95000", "--request-id", "r-2")
        out, _ = self.ctl("top", "raid")
        self.assertEqual(out, "RANK  MEMBER  SCORE  SUBSCORES\n"
                              "   1  t8         12  4,95000\n"
                              "   2  t7         12  4,93000\n")
        self.ctl("set-data", "raid", "t7", "name=Seven", "tag=a=b")
        self.assertEqual(self.ctl("get-data", "raid", "t7")[0],
                         "name=Seven\ntag=a=b\n")
        self.assertEqual(json.loads(self.ctl("--json", "around", "raid", "t7",
                                             "1", "--with-data")[0])[1],
                         {"rank": 2, "member": "t7", "score": 12,
                          "subscores": [4, 93000],
                          "data": {"name": "Seven", "tag": "a=b"}})
        self.ctl("set-data", "raid", "t7")
        self.assertEqual(self.ctl("get-data", "raid", "t7")[0], "")
        self.assertEqual(self.ctl("remove", "raid", "t7", "--request-id",
                                  "r-3")[0], "removed\n")
        self.assertEqual(self.ctl("remove", "raid", "t7", "--request-id",
                                  "r-3")[0],
                         "not applied (a retry: already done)\n")

    def test_exit_codes(self):
        _, err = self.ctl("rank", "t", "nobody", code=1)
        self.assertIn("member 'nobody' is not on board 't'", err)
        self.ctl("get-data", "t", "nobody", code=1)
        _, err = self.ctl("update", "raid", "x", "1", "--subscore", "1",
                          code=2)
        self.assertIn("subscores: board 'raid' ranks by 2 subscores", err)
        _, err = self.ctl("update", "t", "x", "9007199254740992", code=2)
        self.assertIn("value:", err)
        self.ctl("top", "t", "0", code=2)
        self.ctl("top", code=2)
        self.ctl("frobnicate", code=2)
        self.ctl("top", "t", "--bogus", code=2)
        self.ctl("update", "t", "x", "ten", code=2)
        _, err = self.ctl("count", "t", code=3,
                          connect=f"127.0.0.1:{free_port()}")
        self.assertIn("cannot reach rankd", err)

    def test_help(self):
        out, _ = self.ctl("--help")
        self.assertIn("Examples:", out)
        self.assertIn("rankctl top run_hero 5", out)
        self.assertIn("Exit codes: 0 done, 1 not found, 2 invalid", out)


if __name__ == "__main__":
    unittest.main()
