"""The client examples (examples/python, examples/node) against a real rankd.

Usage: test_examples.py RANKD
Starts its own redis-server and rankd (with the example_raid board the Node
example needs) on free loopback ports, generates each example's stubs with
`thrift`, installs the Node packages from the lock file (`npm ci`, into a
scratch copy), runs both examples and compares what they print, line by line,
with the lines below, which are also what each README shows. Then both again
over TLS with a client certificate (RANKD_TLS_*), against a rankd that
requires one (tls_rankd.py), and refused without one.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

RANKD = os.path.abspath(sys.argv[1])
del sys.argv[1:2]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IDL = os.path.join(ROOT, "idl", "ranking.thrift")
sys.path.insert(0, HERE)

import certs  # noqa: E402
from servers import start  # noqa: E402
from tls_rankd import TlsRankd  # noqa: E402

CONFIG = "[board example_raid]\nsubscores=desc\n"

PYTHON_PRINTS = """\
update alice: score 120 rank 1
update bob: score 95 rank 2
update carol: score 130 rank 1
bob +10: reply lost (simulated); retrying with request id py-bob-2
bob +10: applied False, score 105 (counted once)
alice: rank 2, score 120
#1 carol 130 Carol
#2 alice 120 Alice
#3 bob 105 Bob
around alice: carol(#1) alice(#2) bob(#3)
ranks: bob=3, nobody=-
nobody: member 'nobody' is not on board 'example_python'
"""

NODE_PRINTS = """\
update alice: score 120 rank 1
update bob: score 95 rank 2
update carol: score 130 rank 1
bob +10: reply lost (simulated); retrying with request id node-bob-2
bob +10: applied false, score 105 (counted once)
alice: rank 2, score 120
#1 carol 130 CAROL
#2 alice 120 ALICE
#3 bob 105 BOB
around alice: carol(#1) alice(#2) bob(#3)
nobody: member 'nobody' is not on board 'example_node'
20 calls at once: alice #2, bob #3, carol #1, top carol
max score: 9007199254740991 (Number.isSafeInteger: true)
team7 subscore: 9007199254740993 exact; toNumber() Infinity, \
toNumber(true) 9007199254740992
team9 subscore: -9223372036854775808 exact; toNumber() -Infinity, \
toNumber(true) -9223372036854776000
Number 2**53 + 1 is sent as 9007199254740992
"""


def readme_prints(example):
    """The first code block after "prints:" in the example's README."""
    with open(os.path.join(ROOT, "examples", example, "README.md"),
              encoding="utf-8") as f:
        m = re.search(r"prints:\n\n```\n(.*?)```\n", f.read(), re.S)
    assert m, f"examples/{example}/README.md shows no output"
    return m.group(1)


def run(argv, cwd, env=None, timeout=120, code=0):
    """Runs argv; its stdout (and stderr, when code is not 0)."""
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=timeout, check=False)
    if r.returncode != code:
        raise AssertionError(f"{argv} exited {r.returncode}, not {code}:\n"
                             f"{r.stdout}\n{r.stderr}")
    return r.stdout if code == 0 else r.stdout + r.stderr


def python_stubs(workdir):
    gen = os.path.join(workdir, "gen-py")
    os.mkdir(gen)
    run(["thrift", "--gen", "py", "-out", gen, IDL], workdir)
    return gen


def node_copy(workdir):
    """A scratch copy of examples/node: what is committed (no node_modules,
    no stubs), installed exactly as locked, and its stubs generated."""
    node = os.path.join(workdir, "node")
    os.mkdir(node)
    for name in ("package.json", "package-lock.json", "client.js"):
        shutil.copy(os.path.join(ROOT, "examples", "node", name), node)
    run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        node, timeout=180)
    os.mkdir(os.path.join(node, "gen-nodejs"))
    run(["thrift", "--gen", "js:node", "-out", "gen-nodejs", IDL], node)
    return node


def clean_env(**more):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RANKD_TLS")}
    env.update(more)
    return env


class ExamplesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-examples-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.redis = cls.rankd = None
        try:
            cls.redis, redis_port = start(
                lambda p: ["redis-server", "--bind", "127.0.0.1", "--port",
                           str(p), "--save", "", "--appendonly", "no"],
                cls.dir)
            cls.rankd, port = start(
                lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--config",
                           conf, "--redis", f"127.0.0.1:{redis_port}"],
                cls.dir)
        except BaseException:
            cls.stop()  # tearDownClass does not run after a failed setUp
            raise
        cls.address = f"127.0.0.1:{port}"

    @classmethod
    def stop(cls):
        """Stops rankd, then Redis; rankd's exit status."""
        code = 0
        for proc in (cls.rankd, cls.redis):
            if proc is not None:
                proc.terminate()
                status = proc.wait(30)
                code = status if proc is cls.rankd else code
        shutil.rmtree(cls.dir)
        return code

    @classmethod
    def tearDownClass(cls):
        code = cls.stop()
        assert code == 0, f"rankd exited {code} on SIGTERM"

    def test_readmes_show_what_the_examples_print(self):
        self.assertEqual(readme_prints("python"), PYTHON_PRINTS)
        self.assertEqual(readme_prints("node"), NODE_PRINTS)

    def test_python(self):
        gen = python_stubs(self.dir)
        # Debian's python3-thrift is installed for /usr/bin/python3 only.
        out = run(["/usr/bin/python3",
                   os.path.join(ROOT, "examples", "python", "leaderboard.py"),
                   self.address], self.dir, env=clean_env(PYTHONPATH=gen))
        self.assertEqual(out.splitlines(), PYTHON_PRINTS.splitlines())

    def test_node(self):
        node = node_copy(self.dir)
        # The address from the environment this time (the Python example
        # takes it as an argument).
        out = run(["node", "client.js"], node,
                  env=clean_env(RANKD_ADDRESS=self.address))
        self.assertEqual(out.splitlines(), NODE_PRINTS.splitlines())


class TlsExamplesTest(unittest.TestCase):
    """Both examples over TLS with a client certificate (RANKD_TLS_*), each
    against a fresh TLS rankd (the same output as over plain TCP), and a
    rankd that refuses them without a certificate."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rankd-examples-tls-")
        conf = os.path.join(self.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        self.certs = certs.make(os.path.join(self.dir, "certs"), ["game"])
        self.rankd = TlsRankd(RANKD, self.dir,
                              os.path.dirname(self.certs["ca"]),
                              extra=("--config", conf))
        self.address = f"127.0.0.1:{self.rankd.port}"

    def tearDown(self):
        self.rankd.stop()
        shutil.rmtree(self.dir)

    def tls_env(self, cert=True, **more):
        env = clean_env(RANKD_TLS_CA=self.certs["ca"], **more)
        if cert:
            env.update(RANKD_TLS_CERT=self.certs["client_game"][0],
                       RANKD_TLS_KEY=self.certs["client_game"][1])
        return env

    def test_python(self):
        gen = python_stubs(self.dir)
        example = os.path.join(ROOT, "examples", "python", "leaderboard.py")
        # -W error: no warning from the TLS path (thrift's deprecated
        # hostname check is left to the context's).
        out = run(["/usr/bin/python3", "-W", "error", example, self.address],
                  self.dir, env=self.tls_env(PYTHONPATH=gen))
        self.assertEqual(out.splitlines(), PYTHON_PRINTS.splitlines())
        # localhost: the certificate's DNS name is checked.
        out = run(["/usr/bin/python3", example,
                   f"localhost:{self.rankd.port}"], self.dir,
                  env=self.tls_env(PYTHONPATH=gen))
        self.assertIn("applied False", out)
        # No client certificate: rankd's side refuses every attempt.
        out = run(["/usr/bin/python3", example, self.address], self.dir,
                  env=self.tls_env(cert=False, PYTHONPATH=gen), code=1)
        self.assertIn("no answer after 3 attempts", out)

    def test_node(self):
        node = node_copy(self.dir)
        out = run(["node", "client.js"], node,
                  env=self.tls_env(RANKD_ADDRESS=self.address))
        self.assertEqual(out.splitlines(), NODE_PRINTS.splitlines())
        out = run(["node", "client.js", self.address], node,
                  env=self.tls_env(cert=False), code=3)
        self.assertIn("alert certificate required", out)
        # A name rankd's certificate does not carry.
        out = run(["node", "client.js", self.address], node,
                  env=self.tls_env(RANKD_TLS_SERVER_NAME="rankd.test"),
                  code=3)
        self.assertIn("does not match certificate", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
