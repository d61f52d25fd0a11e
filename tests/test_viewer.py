"""The board viewer in a real browser: Debian's headless Chromium loads
rankd's pages, runs their script, and the rendered DOM must show each
board's top entries in rank order, with member names and data as text.

Usage: test_viewer.py RANKD IDL
Starts its own redis-server and rankd on free loopback ports; needs
/usr/bin/chromium.
"""
import html.parser
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse

RANKD, IDL = os.path.abspath(sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rankd_http  # noqa: E402
from rankd_http import (DEADLINE, get, start_rankd, start_redis,  # noqa: E402
                        stop, wait_for)

STUBS = rankd_http.load_stubs(IDL)

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402
from ranking import Ranking  # noqa: E402
from ranking.ttypes import GetTopNRequest, UpdateRequest  # noqa: E402

CHROMIUM = "/usr/bin/chromium"

CONFIG = """\
[board plain]
[board sharded]
shards=4
[board daily]
period=daily
retention=2
[board subs]
subscores=asc,desc
[board zqueued]
queue=on
[board zrolling]
period=daily
window=3
retention=2
"""

SCRIPT_MEMBER = "<script>alert(1)</script>"
IMG_MEMBER = "<img src=x onerror=\"document.title='pwned'\">"


class Rows(html.parser.HTMLParser):
    """The table's header cells and body rows (cell texts), the page's
    <script> and <img> elements, and its title."""

    def __init__(self):
        super().__init__()
        self.head, self.rows, self.scripts, self.imgs = [], [], [], 0
        self.links = []
        self.title = ""
        self._cell = None
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a.get("src"))
        elif tag == "img":
            self.imgs += 1
        elif tag == "title":
            self._in = "title"
        elif tag == "tr" and "data-rank" in a:
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a" and a.get("href", "").startswith("/?board="):
            self.links.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "title":
            self._in = None
        elif tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell)
            (self.head if tag == "th" else self.rows[-1]).append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        elif self._in == "title":
            self.title += data


class ViewerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-viewer-")
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        cls.redis, cls.redis_port = start_redis(cls.dir)
        cls.rankd, cls.port, cls.http = start_rankd(
            RANKD, cls.dir, cls.redis_port, ["--config", conf])
        sock = TSocket.TSocket("127.0.0.1", cls.port)
        sock.setTimeout(60000)
        cls.transport = TTransport.TFramedTransport(sock)
        cls.transport.open()
        cls.client = Ranking.Client(
            TBinaryProtocol.TBinaryProtocol(cls.transport))
        cls.fill()

    @classmethod
    def tearDownClass(cls):
        cls.transport.close()
        status = stop(cls.rankd, cls.dir, cls.port)
        cls.redis.terminate()
        cls.redis.wait(30)
        shutil.rmtree(cls.dir)
        assert status == 0, f"rankd exited with {status} on SIGTERM"

    @classmethod
    def update(cls, board, member, value, data=None, subscores=None):
        cls.rid = getattr(cls, "rid", 0) + 1
        cls.client.Update(UpdateRequest(
            board=board, member=member, value=value, request_id=str(cls.rid),
            data=data, subscores=subscores))

    @classmethod
    def fill(cls):
        # 120 members: the page shows the best 100. Two hostile names.
        for i in range(118):
            cls.update("plain", f"player-{i:03d}", 1000 + i * 7,
                       {"name": f"Player {i}", "country": "FR" if i % 2
                        else "JP"})
        cls.update("plain", SCRIPT_MEMBER, 5000,
                   {"name": "<b>bold</b> & \"quoted\"", "country": "<i>"})
        cls.update("plain", IMG_MEMBER, 4000, {"name": "</td></tr><tr>"})
        for i in range(30):
            cls.update("sharded", f"s{i}", (i * 37) % 101,
                       {"team": f"t{i % 3}"})
        for i in range(5):
            cls.update("daily", f"d{i}", i)
        # Equal scores, ordered by the subscores (asc, then desc).
        cls.update("subs", "slow", 10, subscores=[3, 0])
        cls.update("subs", "fast", 10, subscores=[1, 5])
        cls.update("subs", "fast-more", 10, subscores=[1, 9])
        cls.update("subs", "big", -5, subscores=[2**62, -(2**62)])
        cls.update("adhoc-board", "only", 42, {"note": "not in the file"})

    def top(self, board):
        """GetTopN(board, 100, with_data) from Thrift, as /api/top has it."""
        return [{"rank": e.rank, "member": e.member, "score": e.score,
                 "subscores": [str(s) for s in e.subscores or []],
                 "data": e.data or {}}
                for e in self.client.GetTopN(
                    GetTopNRequest(board=board, n=100, with_data=True))]

    def browse(self, path, *extra):
        """Chromium's rendered DOM of path (or what extra asks for)."""
        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.dir)
        try:
            r = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                 "--no-first-run", "--disable-extensions",
                 "--disable-dev-shm-usage", "--window-size=1200,900",
                 "--virtual-time-budget=10000", f"--user-data-dir={profile}",
                 *(extra or ["--dump-dom"]),
                 f"http://127.0.0.1:{self.http}{path}"],
                capture_output=True, text=True, timeout=60, check=False)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return r.stdout

    def rendered(self, board):
        dom = self.browse("/?board=" + urllib.parse.quote(board))
        page = Rows()
        page.feed(dom)
        return dom, page

    def expected_rows(self, entries):
        keys = sorted({k for e in entries for k in e["data"]})
        width = max((len(e["subscores"]) for e in entries), default=0)
        rows = [[str(e["rank"]), e["member"], str(e["score"]),
                 *e["subscores"], *(e["data"].get(k, "") for k in keys)]
                for e in entries]
        return keys, width, rows

    def test_api_matches_thrift_for_every_kind_of_board(self):
        for board in ("plain", "sharded", "daily", "subs", "adhoc-board"):
            status, ctype, body = get(
                self.http, "/api/top?board=" + urllib.parse.quote(board)
                + "&n=100")
            self.assertEqual((status, ctype), (200, "application/json"), body)
            self.assertNotIn("<", body)  # escaped, even inside strings
            got = json.loads(body)
            self.assertEqual(got["board"], board)
            self.assertEqual(got["entries"], self.top(board), board)
        self.assertEqual(len(self.top("plain")), 100)
        self.assertEqual(len(self.top("sharded")), 30)
        self.assertEqual([e["member"] for e in self.top("subs")],
                         ["fast-more", "fast", "slow", "big"])
        daily = json.loads(get(self.http, "/api/top?board=daily")[2])
        past = json.loads(get(self.http,
                              "/api/top?board=daily&periods_back=1")[2])
        self.assertEqual((daily["period"], len(daily["entries"])),
                         ("daily", 5))
        self.assertEqual(past["entries"], [])
        self.assertNotEqual(past["period_label"], daily["period_label"])
        status, _, body = get(self.http, "/api/top?board=a%7Bb")
        self.assertEqual(status, 400)
        self.assertIn("board", json.loads(body)["error"])
        self.assertEqual(get(self.http, "/api/top?board=plain&n=0")[0], 400)
        self.assertEqual(get(self.http, "/api/top")[0], 400)

    def test_board_list(self):
        """The boards that exist: the configured ones and those written to
        (adhoc-board is in no file), with their members."""
        _, ctype, body = get(self.http, "/api/boards")
        self.assertEqual(ctype, "application/json")
        boards = json.loads(body)["boards"]
        self.assertEqual([b["name"] for b in boards],
                         ["adhoc-board", "daily", "plain", "sharded", "subs",
                          "zqueued", "zrolling"])
        self.assertEqual((boards[0]["configured"], boards[0]["members"]),
                         (False, 1))
        self.assertEqual((boards[2]["configured"], boards[2]["members"]),
                         (True, 120))
        self.assertEqual(boards[3]["shards"], 4)
        self.assertEqual(boards[4]["subscores"], ["asc", "desc"])
        page = Rows()
        page.feed(self.browse("/"))
        self.assertEqual(page.links, ["/?board=adhoc-board", "/?board=daily",
                                      "/?board=plain", "/?board=sharded",
                                      "/?board=subs", "/?board=zqueued",
                                      "/?board=zrolling"])

    def test_rolling_window(self):
        """window=1 reads the board's rolling window (IDL 1.8), without
        member data; refused where the board has none."""
        top = json.loads(get(self.http, "/api/top?board=zrolling&window=1")[2])
        self.assertEqual((top["window"], top["read_window"], top["entries"]),
                         (3, True, []))
        top = json.loads(get(self.http, "/api/top?board=zrolling")[2])
        self.assertEqual((top["window"], top["read_window"]), (3, False))
        status, _, body = get(self.http, "/api/top?board=daily&window=1")
        self.assertEqual(status, 400)
        self.assertIn("window: board 'daily' has no rolling window",
                      json.loads(body)["error"])
        for query in ("board=zrolling&window=2",
                      "board=zrolling&window=1&periods_back=1"):
            status, _, body = get(self.http, "/api/top?" + query)
            self.assertEqual(status, 400, query)
            self.assertIn("window", json.loads(body)["error"], query)
        dom = self.browse("/?board=zrolling&window=1")
        self.assertIn("rolling window of 3", dom)
        self.assertIn("the last 3 periods, to ", dom)
        self.assertIn("No entries.", dom)

    def test_queued_board_shows_its_backlog(self):
        top = json.loads(get(self.http, "/api/top?board=zqueued")[2])
        self.assertEqual(top["queue"],
                         {"backlog": 0, "pending": 0, "oldest_age_ms": 0})
        self.assertNotIn("queue", json.loads(
            get(self.http, "/api/top?board=plain")[2]))
        dom, _ = self.rendered("zqueued")
        self.assertIn("queue: empty", dom)

    def test_board_page_shows_the_top_as_text(self):
        entries = self.top("plain")
        self.assertEqual(entries[0]["member"], SCRIPT_MEMBER)
        keys, _, rows = self.expected_rows(entries)
        dom, page = self.rendered("plain")
        self.assertEqual(page.head, ["Rank", "Member", "Score", *keys])
        self.assertEqual(len(page.rows), 100)
        self.assertEqual(page.rows, rows)
        self.assertEqual(page.rows[0][:3], ["1", SCRIPT_MEMBER, "5000"])
        self.assertEqual(page.rows[0][3:],
                         ["<i>", "<b>bold</b> & \"quoted\""])
        self.assertEqual(page.rows[1][:3], ["2", IMG_MEMBER, "4000"])
        # The hostile names are text, not elements: the page's only script
        # is its own, no image was made, and the title was not rewritten.
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", dom)
        self.assertEqual(page.scripts, ["/viewer.js"])
        self.assertEqual(page.imgs, 0)
        self.assertEqual(page.title, "plain · rankd")

    def test_subscores_sharded_and_unconfigured_boards(self):
        for board in ("subs", "sharded", "adhoc-board"):
            keys, width, rows = self.expected_rows(self.top(board))
            _, page = self.rendered(board)
            self.assertEqual(page.rows, rows, board)
            self.assertEqual(len(page.head), 3 + width + len(keys), board)
        self.assertEqual(page.rows, [["1", "only", "42", "not in the file"]])

    def test_screenshot(self):
        png = os.path.join(self.dir, "plain.png")
        self.browse("/?board=plain", f"--screenshot={png}")
        with open(png, "rb") as f:
            head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(head[12:16], b"IHDR")
        self.assertEqual(struct.unpack(">II", head[16:24]), (1200, 900))
        self.assertGreater(os.path.getsize(png), 10000)


def http_threads(pid):
    """libmicrohttpd's threads of pid serving a connection."""
    n = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm", encoding="utf-8") as f:
                n += f.read().strip() == "MHD-connection"
        except OSError:
            pass  # the thread ended
    return n


class InProcessTest(unittest.TestCase):
    """The viewer reads through rankd's workers in-process (no socket, no
    client): a Redis that does not answer gives 503 once rankd answers
    Unavailable (--redis-timeout), and SIGTERM with reads waiting on it
    ends cleanly: every read answers or its connection closes, rankd exits
    0 (under RANKD_TEST_WRAPPER, with nothing leaked)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rankd-viewer-inproc-")
        self.redis, self.redis_port = start_redis(self.dir)
        self.rankd, self.port, self.http = start_rankd(
            RANKD, self.dir, self.redis_port, ["--redis-timeout", "1"])

    def tearDown(self):
        self.redis.send_signal(signal.SIGCONT)
        status = 0
        if self.rankd.poll() is None:
            status = stop(self.rankd, self.dir, self.port)
        self.redis.terminate()
        self.redis.wait(30)
        shutil.rmtree(self.dir)
        self.assertEqual(status, 0, "rankd's exit status on SIGTERM")

    def test_unanswered_redis_is_503(self):
        self.assertEqual(get(self.http, "/api/top?board=b")[0], 200)
        self.redis.send_signal(signal.SIGSTOP)
        try:
            top = get(self.http, "/api/top?board=b")
            boards = get(self.http, "/api/boards")
        finally:
            self.redis.send_signal(signal.SIGCONT)
        self.assertEqual(top[0], 503, top[2])
        self.assertIn('"error":', top[2])
        self.assertEqual(boards[0], 503, boards[2])
        wait_for("reads again with Redis back",
                 lambda: get(self.http, "/api/top?board=b")[0] == 200)

    def test_sigterm_with_reads_in_flight(self):
        self.assertEqual(get(self.http, "/api/top?board=b")[0], 200)
        self.redis.send_signal(signal.SIGSTOP)
        got = []

        def read():
            try:
                got.append(get(self.http, "/api/top?board=b")[0])
            except OSError as e:  # closed as rankd stopped
                got.append(type(e).__name__)
        readers = [threading.Thread(target=read) for _ in range(4)]
        for t in readers:
            t.start()
        # libmicrohttpd runs a thread per connection; the reads wait on
        # Redis (--redis-timeout) in theirs.
        wait_for("the reads taken",
                 lambda: http_threads(self.rankd.pid) >= len(readers))
        status = stop(self.rankd, self.dir, self.port)
        for t in readers:
            t.join(DEADLINE)
        self.assertEqual(status, 0)
        self.assertEqual(len(got), len(readers), got)
        for g in got:
            self.assertIn(g, (503, "RemoteDisconnected",
                              "ConnectionResetError", "BrokenPipeError"))


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(STUBS, ignore_errors=True)
