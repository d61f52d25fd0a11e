"""rankctl import and export in bounded memory: the peak RSS of rankctl does
not grow with the file or the board.

Usage: test_transfer_memory.py RANKD RANKCTL
Starts a redis-server and a rankd on free loopback ports. Makes files of
200,000 and 1,000,000 entries in export's own form (bench/import_gen.py),
and a copy of the big one shuffled, with a stale record of every 97th
member placed before its own (its last SET wins). Each goes through
`rankctl import --sort-memory 8` into an empty board, so that the external
sort writes runs; each board comes back through `rankctl export
--sort-memory 8`. Checks: every board exports byte for byte as the file
made for it (so both orders and the duplicates came through the runs
right), and rankctl's peak RSS (ru_maxrss, through a small process that forks it) for 1,000,000
entries is within a few MiB of that for 200,000, for import in either
order and for export. Before the external sort, rankctl held every record:
a peak of about 350 MiB for 1,000,000 entries. (In a sanitizer build,
RANKD_SANITIZED set, only the round trips are checked.) rankd closes a connection
idle for 1 s: import reads and sorts its file for longer than that before
it sends (at 50M entries, over rankd's default 60 s), so it must send on
connections made after the reading (it once sent on the one it opened
first, and failed with "connection closed by peer").
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

RANKD, RANKCTL = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
del sys.argv[1:3]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from servers import start  # noqa: E402

GEN = os.path.join(HERE, "..", "bench", "import_gen.py")
SMALL, BIG = 200_000, 1_000_000
# What rankctl's peak may grow by from SMALL to BIG entries: the allocator's
# slack and the spill's last run. Holding the records would add hundreds.
SLACK_KIB = 12 * 1024


# Runs argv[1:] and prints "peak KIB" on stderr: its ru_maxrss. A process
# started by vfork (as subprocess does) counts its parent's peak as its own
# (Linux folds the old memory's peak in at exec): this one, small, forks.
PEAK = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print("peak", usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""

# argv: the file, the shuffled copy to write.
SHUFFLE = """
import random, sys
with open(sys.argv[1], encoding="utf-8") as f:
    header, *records = f.read().splitlines(keepends=True)
stale = []
for i, record in enumerate(records):
    member, score, time, subscores, data = record.rstrip("\\n").split(",", 4)
    if i % 97 == 0 and not data:
        stale.append(f"{member},{int(score) + 1},{int(time) - 1},,\\n")
random.Random(5).shuffle(records)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(header + "".join(stale) + "".join(records))
"""


class TransferMemoryTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="transfer-memory-")
        cls.redis, redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        cls.rankd, cls.port = start(
            lambda p: [RANKD, "--listen", f"127.0.0.1:{p}", "--redis",
                       f"127.0.0.1:{redis_port}", "--grant",
                       "anonymous=read,write,admin", "--idle-timeout", "1"],
            cls.dir)
        cls.files = {}
        for n in (SMALL, BIG):
            path = os.path.join(cls.dir, f"gen{n}.csv")
            with open(path, "w", encoding="utf-8") as f:
                subprocess.run([sys.executable, GEN, str(n), "csv"], stdout=f,
                               check=True)
            cls.files[n] = path

    @classmethod
    def tearDownClass(cls):
        cls.rankd.terminate()
        assert cls.rankd.wait(30) == 0, "rankd did not exit cleanly"
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)

    def ctl(self, *args):
        """Runs rankctl; returns its stdout and peak RSS in KiB."""
        env = dict(os.environ, RANKCTL_CONNECT=f"127.0.0.1:{self.port}",
                   TMPDIR=self.dir)
        r = subprocess.run([sys.executable, "-c", PEAK, RANKCTL, *args],
                           capture_output=True, text=True, env=env,
                           timeout=500)
        self.assertEqual(r.returncode, 0, (args, r.stdout, r.stderr))
        peak = re.search(r"^peak (\d+)$", r.stderr, re.M)
        self.assertIsNotNone(peak, r.stderr)
        return r.stdout, int(peak.group(1))

    def round_trip(self, board, source, expected):
        """Imports source into board, exports it: returns the peaks."""
        out, imported = self.ctl("--json", "import", "--sort-memory", "8",
                                 board, source)
        self.assertIn('"refused":0', out)
        export = os.path.join(self.dir, f"{board}.csv")
        _, exported = self.ctl("export", board, "--sort-memory", "8",
                               "--output", export)
        with open(export, "rb") as a, open(expected, "rb") as b:
            self.assertTrue(a.read() == b.read(),
                            f"{board}: the export differs from {expected}")
        # rankctl leaves no sort run behind.
        self.assertEqual([f for f in os.listdir(self.dir)
                          if f.startswith("rankctl-sort")], [])
        return imported, exported

    def test_peak_does_not_grow(self):
        small_in, small_out = self.round_trip("small", self.files[SMALL],
                                              self.files[SMALL])
        big_in, big_out = self.round_trip("big", self.files[BIG],
                                          self.files[BIG])
        # Shuffled, with stale records first: the file is read again by
        # member, then by place, through two spills of half the budget.
        # Made by another process: rankctl's peak counts what it shares
        # with this one until its exec.
        shuffled = os.path.join(self.dir, "shuffled.csv")
        subprocess.run([sys.executable, "-c", SHUFFLE, self.files[BIG],
                        shuffled], check=True)
        shuffled_in, _ = self.round_trip("shuffled", shuffled, self.files[BIG])
        peaks = dict(small_in=small_in, small_out=small_out, big_in=big_in,
                     big_out=big_out, shuffled_in=shuffled_in)
        print("rankctl peak RSS, KiB:", peaks, file=sys.stderr)
        if os.environ.get("RANKD_SANITIZED"):
            # AddressSanitizer holds freed memory in quarantine (256 MiB)
            # and maps shadow memory: RSS there follows what was
            # allocated. The plain build checks the bound.
            return
        self.assertLessEqual(big_in, small_in + SLACK_KIB, peaks)
        self.assertLessEqual(shuffled_in, small_in + SLACK_KIB, peaks)
        self.assertLessEqual(big_out, small_out + SLACK_KIB, peaks)


if __name__ == "__main__":
    unittest.main()
