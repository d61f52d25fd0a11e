"""Rolling windows (window=N) against a model: random updates, retries and
removes over many simulated periods, on daily boards in Europe/Paris across
both daylight-saving days of a year, an hourly board across the repeated
hour, a custom one; increment and best, one shard and four, asc and desc,
with and without subscores, ordinal and competition ranks. After every
period change (its roll waited for in Redis) and after rounds of updates
within a period, every read with window=true is compared with the model.

The clock is rankd's test clock: RANKD_TEST_CLOCK_FILE names a file of Unix
ms that rankd reads as now; the test moves it. The simulated year is the
next calendar year, so that what rankd writes with an absolute expiry
(period keys, request-id records) is in Redis's future.

Usage: test_window.py RANKD STUBS_DIR
RANKD_WINDOW_SEED fixes the random seed (printed on a failure).
"""
import datetime
import json
import math
import os
import random
import shlex
import shutil
import socket
import sys
import tempfile
import time
import unittest
from zoneinfo import ZoneInfo

RANKD = os.path.abspath(sys.argv[1])
WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import (  # noqa: E402
    CountBetweenRequest, CountRequest, GetAroundRequest, GetPercentileRequest,
    GetRankRequest, GetRanksRequest, GetScoreAtPercentileRequest,
    GetTopNRequest, InvalidArgument, NotFound, RemoveRequest, SampleRequest,
    UpdateBatchRequest, UpdateRequest)
from servers import connect, start, stop  # noqa: E402

SEED = int(os.environ.get("RANKD_WINDOW_SEED", random.randrange(1 << 30)))
PARIS = ZoneInfo("Europe/Paris")
HOUR_MS = 3_600_000
# Members: a few dozen, some whose bytes order differently from their text.
MEMBERS = [f"m{i}" for i in range(24)] + ["A", "a", "Z", "é", "m1x", "_"]
ROLL_DEADLINE = 20.0
# Whether a read of a sharded board during a roll must see the old window
# or the new one whole: rankd rolls each shard on its own (window.lua), so
# a read merges shards as each is.
SHARDS_ROLL_TOGETHER = False
# RANKD_WINDOW_PERIODS_ONLY=1: the model's periods only (no window reads).
WINDOWS = not os.environ.get("RANKD_WINDOW_PERIODS_ONLY")


# ---- Redis, for the roll's state (no client library on the machine) ----

class Resp:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        out = b"*%d\r\n" % len(parts) + b"".join(
            b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        self.sock.sendall(out)
        return self._read()

    def _read(self):
        line = self.file.readline()[:-2]
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError(f"bad reply {line!r}")

    def close(self):
        self.sock.close()


class Either:
    """A method of either connection of the test, picked at each call."""

    def __init__(self, test):
        self.test = test

    def __getattr__(self, method):
        return getattr(self.test.client, method)


# ---- periods ----

def _offset_text(dt):
    off = int(dt.utcoffset().total_seconds()) // 60
    sign = "+" if off >= 0 else "-"
    return f"{sign}{abs(off) // 60:02d}:{abs(off) % 60:02d}"


class Rule:
    """A board's periods: index (consecutive integers), start, end, label."""

    def __init__(self, kind, tz=PARIS, seconds=0, epoch=0):
        self.kind, self.tz, self.seconds, self.epoch = kind, tz, seconds, epoch

    def index(self, t_ms):
        if self.kind == "daily":
            return datetime.datetime.fromtimestamp(
                t_ms / 1000, self.tz).date().toordinal()
        if self.kind == "hourly":  # whole-hour offsets (Paris)
            return t_ms // HOUR_MS
        return (t_ms // 1000 - self.epoch) // self.seconds

    def bounds(self, i):
        if self.kind == "daily":
            def midnight(d):
                return int(datetime.datetime(
                    d.year, d.month, d.day, tzinfo=self.tz).timestamp() * 1000)
            d = datetime.date.fromordinal(i)
            return midnight(d), midnight(d + datetime.timedelta(days=1))
        if self.kind == "hourly":
            return i * HOUR_MS, (i + 1) * HOUR_MS
        s = (self.epoch + i * self.seconds) * 1000
        return s, s + self.seconds * 1000

    def label(self, i):
        if self.kind == "daily":
            return datetime.date.fromordinal(i).isoformat()
        if self.kind == "hourly":
            dt = datetime.datetime.fromtimestamp(i * 3600, self.tz)
            return dt.strftime("%Y-%m-%dT%H:%M") + _offset_text(dt)
        return f"n{i}"


# ---- the model ----

class Board:
    def __init__(self, name, rule, window, mode, shards=1, order="desc",
                 subscores=(), retention=None, rank="ordinal"):
        self.name, self.rule, self.window, self.mode = name, rule, window, mode
        self.shards, self.asc, self.subdirs = shards, order == "asc", subscores
        self.retention = window - 1 if retention is None else retention
        self.rank_kind = rank
        self.pool = MEMBERS  # the members updates pick from
        self.extra = []      # more config lines
        self.periods = {}   # period index -> member -> (score, subs, time)
        self.sent = []      # recent requests of this step, for retries
        self.removes = []   # recent removes of this step, for retries
        self.ids = 0
        self.ts = {}        # period index -> last timestamp used in it

    def config(self):
        kind = self.rule.kind
        lines = [f"[board {self.name}]", f"period={kind}",
                 f"window={self.window}", f"mode={self.mode}",
                 f"retention={self.retention}", "accept_late=true",
                 f"order={'asc' if self.asc else 'desc'}",
                 f"rank={self.rank_kind}"]
        if kind == "custom":
            lines += [f"period_seconds={self.rule.seconds}",
                      f"period_epoch={self.rule.epoch}"]
        else:
            lines.append("timezone=Europe/Paris")
        if self.shards > 1:
            lines.append(f"shards={self.shards}")
        if self.subdirs:
            lines.append("subscores=" + ",".join(self.subdirs))
        lines += self.extra
        return "\n".join(lines) + "\n"

    # one period, as any periodic board

    def better(self, a, b):
        """(score, subs) a strictly better than b."""
        if a[0] != b[0]:
            return a[0] < b[0] if self.asc else a[0] > b[0]
        for x, y, d in zip(a[1], b[1], self.subdirs):
            if x != y:
                return x < y if d == "asc" else x > y
        return False

    def apply(self, period, member, value, subs, t):
        """An update of member in period; its score there after it."""
        entries = self.periods.setdefault(period, {})
        old = entries.get(member)
        zero = tuple(0 for _ in self.subdirs)
        if self.mode == "increment":
            new = ((old[0] if old else 0) + value,
                   subs if subs is not None else (old[1] if old else zero))
        else:
            new = (value, subs if subs is not None else zero)
            if old is not None and not self.better(new, old[:2]):
                new = old[:2]
        if old is None or new != old[:2]:
            entries[member] = (new[0], new[1], t)
        return entries[member][0]

    def remove(self, period, member):
        return self.periods.get(period, {}).pop(member, None) is not None

    def score_in(self, period, member):
        e = self.periods.get(period, {}).get(member)
        return e[0] if e else 0

    # the window

    def window_periods(self, current):
        return range(current - self.window + 1, current + 1)

    def labels(self, current):
        return ",".join(self.rule.label(i)
                        for i in reversed(self.window_periods(current)))

    def entries(self, current):
        """The window's entries, ranked: [(member, score, subs, time)]."""
        per = {}
        for p in self.window_periods(current):
            for m, e in self.periods.get(p, {}).items():
                per.setdefault(m, []).append(e)
        out = []
        for m, es in per.items():
            if self.mode == "increment":
                last = max(es, key=lambda e: e[2])
                out.append((m, sum(e[0] for e in es), last[1], last[2]))
            else:
                best = es[0]
                for e in es[1:]:
                    if self.better(e[:2], best[:2]):
                        best = e
                t = min(e[2] for e in es if e[:2] == best[:2])
                out.append((m, best[0], best[1], t))
        out.sort(key=self.sort_key)
        return out

    def sort_key(self, e):
        m, score, subs, t = e
        subkey = tuple(x if d == "asc" else -x
                       for x, d in zip(subs, self.subdirs))
        return (score if self.asc else -score, subkey, t, m.encode())

    def score_better(self, a, b):
        return a < b if self.asc else a > b

    def ranks(self, entries):
        """member -> rank by the board's rank kind."""
        out = {}
        for i, e in enumerate(entries):
            if self.rank_kind == "competition":
                out[e[0]] = 1 + sum(1 for f in entries
                                    if self.score_better(f[1], e[1]))
            else:
                out[e[0]] = i + 1
        return out

    def next_id(self):
        self.ids += 1
        return f"{self.name}-{self.ids}"


def boards():
    daily, hourly = Rule("daily"), Rule("hourly")
    custom = Rule("custom", seconds=1800, epoch=0)
    return [
        Board("d_inc", daily, 3, "increment", retention=3),
        Board("d_inc4", daily, 3, "increment", shards=4, rank="competition"),
        Board("d_best", daily, 3, "best"),
        Board("d_best4s", daily, 3, "best", shards=4,
              subscores=("desc", "asc"), retention=3),
        Board("d_asc_best4", daily, 3, "best", shards=4, order="asc"),
        Board("d_asc_comp", daily, 3, "increment", order="asc",
              rank="competition"),
        Board("d_inc_sub", daily, 3, "increment", subscores=("asc",)),
        Board("h_inc4", hourly, 4, "increment", shards=4, retention=5),
        Board("c_best_sub", custom, 2, "best", subscores=("asc",)),
    ]


# The boards of test_window_read_during_roll, and their members.
ROLL_MEMBERS = 6000


def ROLL_BOARDS():
    daily = Rule("daily")
    out = [Board("roll_inc", daily, 3, "increment"),
           Board("roll_best4", daily, 3, "best", shards=4, retention=3),
           Board("roll_sub4", daily, 3, "increment", shards=4,
                 subscores=("desc",), order="asc")]
    for b in out:
        b.pool = [f"r{i}" for i in range(ROLL_MEMBERS)]
        # Redis expires request-id record hashes by its own clock, which
        # the test clock's jumps of days leave behind: with 1-hour buckets
        # mod 16, records days old would count as live again, and pile up
        # by thousands in the few hashes a shrinking layout moves them to
        # (one HSET of them all: past Lua's unpack limit). 30-day records
        # keep the roll boards' days in one or two buckets.
        b.extra = ["dedup_window=2592000"]
    return out


def paris_ms(y, mo, d, h=0, mi=0, s=0, ms=0):
    return int(datetime.datetime(y, mo, d, h, mi, s, tzinfo=PARIS)
               .timestamp() * 1000) + ms


def last_sunday(year, month):
    d = datetime.date(year, month + 1, 1) - datetime.timedelta(days=1)
    return d - datetime.timedelta(days=(d.weekday() + 1) % 7)


def timeline(rng, year):
    """The clock's instants, increasing: daily steps across the spring
    change (some skipping 2..5 days), hourly ones across the autumn
    change's repeated hour, daily ones across the autumn change."""
    spring, autumn = last_sunday(year, 3), last_sunday(year, 10)
    out = []

    def day(d, *when):
        for w in when:
            if w == "first":
                out.append(paris_ms(d.year, d.month, d.day))
            elif w == "last":
                nxt = d + datetime.timedelta(days=1)
                out.append(paris_ms(nxt.year, nxt.month, nxt.day) - 1)
            else:
                out.append(paris_ms(d.year, d.month, d.day, *w))

    s = spring - datetime.timedelta(days=5)
    for k, skip in enumerate([0, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 2, 1, 3, 1,
                              1, 5, 1, 1]):
        s += datetime.timedelta(days=skip)
        if s == spring:
            day(s, "first", (1, 59), (3, 0), "last")
        elif k % 3 == 0:
            day(s, (rng.randrange(24), rng.randrange(60)), "last")
        elif k % 3 == 1:
            day(s, "first", (rng.randrange(12, 24), rng.randrange(60)))
        else:
            day(s, (rng.randrange(24), rng.randrange(60)))
    a = autumn - datetime.timedelta(days=2)
    day(a, (12, 0))
    # Hourly across the repeated hour, from 22:00 the evening before: hours
    # after it (4: 02:00+02:00, 5: 02:00+01:00), some skipping 2 or more.
    t0 = paris_ms(autumn.year, autumn.month, autumn.day) - 2 * HOUR_MS
    for h in (0, 1.5, 2, 3, 4, 4.5, 5, 6, 9, 14):
        t = t0 + int(h * HOUR_MS) + rng.randrange(30) * 60_000
        out.append(t)
    for skip in [1, 1, 1, 1, 4]:
        a = max(a, datetime.datetime.fromtimestamp(
            t / 1000, PARIS).date()) + datetime.timedelta(days=skip)
        day(a, (rng.randrange(24), rng.randrange(60)))
    assert out == sorted(out), "the timeline goes back"
    return out


class WindowTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-window-")
        cls.rng = random.Random(SEED)
        cls.year = datetime.datetime.now(datetime.timezone.utc).year + 1
        cls.times = timeline(cls.rng, cls.year)
        cls.clock_file = os.path.join(cls.dir, "clock")
        cls.set_clock(cls.times[0])
        cls.boards = boards()
        cls.roll_boards = ROLL_BOARDS()
        conf = os.path.join(cls.dir, "rankd.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write("\n".join(b.config()
                               for b in cls.boards + cls.roll_boards))
        cls.redis, cls.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                       "--save", "", "--appendonly", "no"], cls.dir)
        os.environ["RANKD_TEST_CLOCK_FILE"] = cls.clock_file
        cls.rankd, cls.port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                       "--config", conf,
                       "--redis", f"127.0.0.1:{cls.redis_port}",
                       "--io-threads", "2"], cls.dir)
        # Two connections, on rankd's two io threads (each with its own
        # record of the rolls it saw done): calls go to either at random.
        cls.connections = [connect(cls.port) for _ in range(2)]
        cls.pick = random.Random(SEED + 2)
        cls.resp = Resp(cls.redis_port)
        cls.log = open(os.path.join(cls.dir, "ops.jsonl"), "w",
                       encoding="utf-8")
        cls.counts = {}
        cls.failed = False

    @classmethod
    def tearDownClass(cls):
        for _, transport in cls.connections:
            transport.close()
        cls.resp.close()
        cls.log.close()
        status = stop(cls.rankd, cls.dir, cls.port)
        cls.redis.terminate()
        cls.redis.wait(30)
        if status == 0 and not cls.failed and \
                not os.environ.get("RANKD_WINDOW_KEEP"):
            shutil.rmtree(cls.dir)
        else:
            sys.stderr.write(f"kept {cls.dir}\n")
        assert status == 0, "rankd did not exit cleanly"

    @property
    def client(self):
        return self.pick.choice(self.connections)[0]

    @classmethod
    def set_clock(cls, t_ms):
        cls.now = t_ms
        tmp = cls.clock_file + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(str(t_ms))
        os.replace(tmp, cls.clock_file)

    def note(self, **what):
        self.log.write(json.dumps(what, ensure_ascii=False) + "\n")
        key = what["op"] + ("-retry" if what.get("retry") else "")
        if what["op"] == "update" and what["period"] != what.get("current"):
            key += "-late"
        self.counts[key] = self.counts.get(key, 0) + 1

    def fail_with(self, board, call, expected, got):
        cur = board.rule.index(self.now)
        model = board.entries(cur)
        recent = {board.rule.label(p): e
                  for p, e in sorted(board.periods.items())
                  if p > cur - board.window - 2}
        self.log.flush()
        type(self).failed = True
        self.fail(
            f"seed {SEED}, board {board.name}, clock {self.now} "
            f"(period {board.rule.label(cur)}), {call}:\n"
            f"  expected {expected!r}\n  got      {got!r}\n"
            f"  the model's window: {model}\n"
            f"  periods: {recent}\n"
            f"  operations: {os.path.join(self.dir, 'ops.jsonl')}")

    # ---- the roll ----

    def window_keys(self, board):
        if board.shards == 1:
            return [f"rk:{{{board.name}}}:w"]
        return [f"rk:s:{{{board.name}/{i}}}:w" for i in range(board.shards)]

    def wait_roll(self, board):
        want = board.labels(board.rule.index(self.now)).encode()
        end = time.monotonic() + ROLL_DEADLINE
        states = None
        while time.monotonic() < end:
            states = [self.resp.call("HMGET", k, "n", "s")
                      for k in self.window_keys(board)]
            if all(n is None and s == want for n, s in states):
                return
            time.sleep(0.002)  # polling a condition, with a deadline
        type(self).failed = True
        keys = sorted(
            k for k in self.resp.call("KEYS", f"*{board.name}*")
            if k.startswith((f"rk:{{{board.name}}}:".encode(),
                             f"rk:s:{{{board.name}/".encode())))
        self.fail(f"seed {SEED}: board {board.name}: the roll to {want!r} "
                  f"did not complete in {ROLL_DEADLINE} s: {states}; "
                  f"its keys: {keys}")

    # ---- updates ----

    def timestamp(self, board, period):
        """A time in period: in the current one, at or after the clock's
        last one there, now and then the same as the last (a tie)."""
        start, end = board.rule.bounds(period)
        last = board.ts.get(period)
        if period != board.rule.index(self.now):
            return self.rng.randrange(start, end)
        if last is None:
            t = max(start, self.now - 1000)
        elif self.rng.random() < 0.2:
            t = last
        else:
            t = last + self.rng.choice([1, 2, 5, 1000])
        t = min(max(t, start), end - 1)
        board.ts[period] = t
        return t

    def random_update(self, board, late=False):
        rng = self.rng
        cur = board.rule.index(self.now)
        period = cur
        if late:
            period = cur - rng.randint(1, board.retention)
        member = rng.choice(board.pool)
        if board.mode == "increment":
            value = rng.randint(-6, 12)
        else:
            value = rng.randint(-10, 40)
        subs = None
        if board.subdirs and (board.mode == "best" or rng.random() < 0.6):
            subs = tuple(rng.randint(0, 2) for _ in board.subdirs)
        t = self.timestamp(board, period)
        return dict(board=board, period=period, member=member, value=value,
                    subs=subs, t=t, request_id=board.next_id())

    def request(self, u):
        return UpdateRequest(
            board=u["board"].name, member=u["member"], value=u["value"],
            request_id=u["request_id"], timestamp_ms=u["t"],
            subscores=list(u["subs"]) if u["subs"] is not None else None)

    def answered(self, u, response, retry):
        board = u["board"]
        self.note(op="update", board=board.name, member=u["member"],
                  value=u["value"], subs=u["subs"], t=u["t"],
                  request_id=u["request_id"], retry=retry,
                  period=board.rule.label(u["period"]),
                  current=board.rule.label(board.rule.index(self.now)))
        if retry:
            want = (board.score_in(u["period"], u["member"]), False)
        else:
            want = (board.apply(u["period"], u["member"], u["value"],
                                u["subs"], u["t"]), True)
            board.sent.append(u)
        got = (response.score, response.applied)
        if got != want:
            self.fail_with(board, f"Update {u['member']} {u['value']} "
                           f"{u['subs']} t={u['t']} id={u['request_id']}"
                           f" retry={retry}", want, got)

    def update_round(self, board, ops):
        """ops random operations: updates (some late, some retried), removes
        (some retried), alone or in a batch."""
        rng = self.rng
        batch = []
        # Retries of updates whose period is still kept: one that a period
        # change took past retention is refused as too old (InvalidArgument,
        # before its request id is looked up), as any update of it is.
        oldest = board.rule.index(self.now) - board.retention
        for _ in range(ops):
            r = rng.random()
            kept = [u for u in board.sent[-8:] if u["period"] >= oldest]
            if r < 0.12 and kept:
                batch.append((rng.choice(kept), True))
            elif r < 0.22:
                self.flush(batch)
                batch = []
                self.remove(board, retry=bool(board.removes)
                            and rng.random() < 0.3)
            elif r < 0.32:
                batch.append((self.random_update(board, late=True), False))
            else:
                batch.append((self.random_update(board), False))
            if rng.random() < 0.5:
                self.flush(batch)
                batch = []
        self.flush(batch)

    def flush(self, batch):
        if not batch:
            return
        if len(batch) == 1 and self.rng.random() < 0.5:
            u, retry = batch[0]
            self.answered(u, self.client.Update(self.request(u)), retry)
            return
        # A request id twice in one batch: the second is a retry.
        seen, marked = set(), []
        for u, retry in batch:
            marked.append((u, retry or u["request_id"] in seen))
            seen.add(u["request_id"])
        res = self.client.UpdateBatch(UpdateBatchRequest(
            requests=[self.request(u) for u, _ in marked])).results
        for (u, retry), r in zip(marked, res):
            if r.response is None:
                self.fail_with(u["board"], "UpdateBatch", "a response", r)
            self.answered(u, r.response, retry)

    def remove(self, board, retry):
        cur = board.rule.index(self.now)
        if retry:
            member, rid = self.rng.choice(board.removes)
        else:
            member, rid = self.rng.choice(board.pool), board.next_id()
        self.note(op="remove", board=board.name, member=member,
                  request_id=rid, retry=retry, period=board.rule.label(cur))
        got = self.client.Remove(RemoveRequest(
            board=board.name, member=member, request_id=rid))
        if retry:
            if got.applied:
                self.fail_with(board, f"Remove {member} id={rid} (a retry)",
                               "applied=False", got)
            return
        want = board.remove(cur, member)
        board.removes.append((member, rid))
        if (got.applied, got.removed) != (True, want):
            self.fail_with(board, f"Remove {member} id={rid}",
                           (True, want), (got.applied, got.removed))

    # ---- the reads, window=true, against the model ----

    def entry_of(self, board, e, rank):
        m, score, subs, _ = e
        return (m, score, rank, list(subs) if board.subdirs else None)

    def got_entry(self, x):
        return (x.member, x.score, x.rank, x.subscores)

    def check(self, board, back=None):
        """Every read of the window (back None) or of the period back
        periods before the current one against the model."""
        rng, name = self.rng, board.name
        c = Either(self)
        cur = board.rule.index(self.now)
        if back is None:
            view, model = {"window": True}, board.entries(cur)
        else:
            view = {"periods_back": back}
            model = sorted(((m, *e) for m, e in
                            board.periods.get(cur - back, {}).items()),
                           key=board.sort_key)
        ranks = board.ranks(model)
        by_member = {e[0]: e for e in model}
        total = len(model)
        want_all = [self.entry_of(board, e, ranks[e[0]]) for e in model]

        def expect(call, want, got):
            if want != got:
                self.fail_with(board, f"{call} {view}", want, got)

        # The whole board, a page of 1000 at a time.
        for off in range(0, max(total, 1), 1000):
            got = c.GetTopN(GetTopNRequest(board=name, n=1000, offset=off,
                                           **view))
            expect(f"GetTopN n=1000 offset={off}", want_all[off:off + 1000],
                   [self.got_entry(x) for x in got])
        off = total // 3
        got = c.GetTopN(GetTopNRequest(board=name, n=5, offset=off,
                                       **view))
        expect(f"GetTopN n=5 offset={off}", want_all[off:off + 5],
               [self.got_entry(x) for x in got])
        expect("Count", total, c.Count(CountRequest(board=name, **view)))

        # Every member (a sample of a big board's, and some absent ones).
        asked = MEMBERS if board.pool is MEMBERS else \
            rng.sample(board.pool, 100) + MEMBERS[:5]
        for m in asked:
            try:
                x = c.GetRank(GetRankRequest(board=name, member=m,
                                             **view))
                got = self.got_entry(x)
            except NotFound:
                got = "NotFound"
            want = (self.entry_of(board, by_member[m], ranks[m])
                    if m in by_member else "NotFound")
            expect(f"GetRank {m}", want, got)

        asked = rng.sample(board.pool, 10)
        got = c.GetRanks(GetRanksRequest(board=name, members=asked,
                                         **view))
        want = [(m, True, by_member[m][1], ranks[m]) if m in by_member
                else (m, False, None, None) for m in asked]
        expect(f"GetRanks {asked}", want,
               [(r.member, r.found, r.score, r.rank) for r in got])

        scores = [e[1] for e in model] or [0]
        lo_s, hi_s = min(scores) - 3, max(scores) + 3
        for _ in range(3):
            a, b = sorted(rng.randint(lo_s, hi_s) for _ in range(2))
            want = sum(1 for e in model if a <= e[1] <= b)
            expect(f"CountBetween {a} {b}", want, c.CountBetween(
                CountBetweenRequest(board=name, min_score=a, max_score=b,
                                    **view)))

        for m in rng.sample(board.pool, 4):
            call = f"GetAround {m} radius 2 {view}"
            try:
                got = [self.got_entry(x) for x in c.GetAround(
                    GetAroundRequest(board=name, member=m, radius=2,
                                     **view))]
            except NotFound:
                got = "NotFound"
            if m in by_member:
                i = next(k for k, e in enumerate(model) if e[0] == m)
                want = want_all[max(0, i - 2):i + 3]
            else:
                want = "NotFound"
            expect(call, want, got)

        for m in rng.sample(board.pool, 4):
            try:
                got = c.GetPercentile(GetPercentileRequest(
                    board=name, member=m, **view))
            except NotFound:
                got = "NotFound"
            if m in by_member:
                s = by_member[m][1]
                better = sum(1 for e in model if board.score_better(e[1], s))
                equal = sum(1 for e in model if e[1] == s)
                want = 100.0 * (total - better - equal) / total
            else:
                want = "NotFound"
            if got != want and not (isinstance(got, float)
                                    and isinstance(want, float)
                                    and abs(got - want) < 1e-9):
                self.fail_with(board, f"GetPercentile {m} {view}", want, got)

        for pct in (0.0, 37.5, 50.0, 99.0, 100.0):
            try:
                got = c.GetScoreAtPercentile(GetScoreAtPercentileRequest(
                    board=name, pct=pct, **view))
            except NotFound:
                got = "NotFound"
            if total:
                pos = min(max(math.ceil(total * (100.0 - pct) / 100.0), 1),
                          total)
                want = model[pos - 1][1]
            else:
                want = "NotFound"
            expect(f"GetScoreAtPercentile {pct}", want, got)

        for _ in range(2):
            a, b = sorted(rng.randint(lo_s, hi_s) for _ in range(2))
            count = rng.choice([1, 3, 10, 100])
            got = c.Sample(SampleRequest(board=name, min_score=a,
                                         max_score=b, count=count,
                                         **view))
            in_range = {e[0] for e in model if a <= e[1] <= b}
            call = f"Sample {a} {b} count={count} {view}"
            members = [x.member for x in got]
            expect(call + ": how many", min(count, len(in_range)),
                   len(members))
            expect(call + ": distinct", len(members), len(set(members)))
            for x in got:
                if x.member not in in_range:
                    self.fail_with(board, call, f"members of {in_range}", x)
                expect(call + f": {x.member}",
                       self.entry_of(board, by_member[x.member],
                                     ranks[x.member]),
                       self.got_entry(x))

    # ---- the run ----

    def test_window_model(self):
        begin = time.monotonic()
        rng = self.rng
        last = {b.name: None for b in self.boards}
        checks = rolls = 0
        sizes = []
        for t in self.times:
            self.set_clock(t)
            self.note(op="clock", t=t)
            for board in self.boards:
                board.sent, board.removes = [], []
                cur = board.rule.index(t)
                changed = last[board.name] != cur
                last[board.name] = cur
                if changed and WINDOWS:
                    rolls += 1
                    if rng.random() < 0.3:
                        # Updates first: the first of them starts the
                        # roll, which must keep them.
                        self.update_round(board, 6)
                    else:
                        self.client.Count(CountRequest(board=board.name,
                                                       window=True))
                    self.wait_roll(board)
                    self.check(board)
                    checks += 1
                self.update_round(board, rng.randint(10, 30))
                if WINDOWS:
                    self.check(board)
                    checks += 1
                    sizes.append(len(board.entries(cur)))
                # The periods themselves, now and then (always without
                # windows): what the windows combine.
                if not WINDOWS or rng.random() < 0.15:
                    self.check(board, rng.choice(
                        [0, rng.randint(0, board.retention)]))
                    checks += 1
        took = time.monotonic() - begin
        sys.stderr.write(f"seed {SEED}: {len(self.times)} clock steps, "
                         f"{rolls} period changes waited for, {checks} "
                         f"checks of every read, {took:.1f} s; window sizes "
                         f"{min(sizes, default=0)}-{max(sizes, default=0)}, "
                         f"operations {sorted(self.counts.items())}\n")

    def fill_for_roll(self, board, day):
        """Thousands of members in the periods of the window at day (its
        roll waited for); the oldest period holds a third of its own,
        which leave the window with it. Returns the period of day."""
        rng = random.Random(SEED + day.toordinal())
        for back in (2, 1, 0):
            d = day - datetime.timedelta(days=back)
            self.set_clock(paris_ms(d.year, d.month, d.day, 12))
            cur = board.rule.index(self.now)
            self.client.Count(CountRequest(board=board.name, window=True))
            self.wait_roll(board)
            members = range(ROLL_MEMBERS) if back == 2 else \
                range(ROLL_MEMBERS // 3, ROLL_MEMBERS)
            reqs = []
            for i in members:
                t = self.now + i % 7
                v = rng.randint(-50, 100)
                m = f"r{i}"
                subs = tuple(rng.randint(0, 2) for _ in board.subdirs) \
                    if board.subdirs else None
                board.apply(cur, m, v, subs, t)
                reqs.append(UpdateRequest(
                    board=board.name, member=m, value=v, timestamp_ms=t,
                    subscores=list(subs) if subs else None,
                    request_id=board.next_id(), with_rank=False))
            for k in range(0, len(reqs), 1000):
                res = self.client.UpdateBatch(UpdateBatchRequest(
                    requests=reqs[k:k + 1000])).results
                refused = [r for r in res if r.response is None]
                self.assertEqual(refused, [], board.name)
            board.ts[cur] = self.now + 6
        return cur

    def test_window_read_during_roll(self):
        """A read while a roll runs answers the old window or the new one,
        whole (on a sharded board, each shard's: SHARDS_ROLL_TOGETHER):
        thousands of members, so that the roll takes chunks. Runs after
        test_window_model (by name), on a clock past its year."""
        if not WINDOWS:
            self.skipTest("RANKD_WINDOW_PERIODS_ONLY")
        day = datetime.date(self.year + 1, 1, 10)
        seen = {}
        for board in self.roll_boards[:2]:
            cur = self.fill_for_roll(board, day)
            old = board.entries(cur)
            self.set_clock(paris_ms(day.year, day.month, day.day + 1, 12))
            new = board.entries(board.rule.index(self.now))
            self.assertNotEqual(len(old), len(new))

            # Each shard rolls on its own: a read of a sharded board may
            # merge shards rolled with shards not yet rolled (each whole).
            # The views allowed: for each set of shards rolled, the new
            # window's entries of those shards and the old one's of the
            # others (unsharded: old or new).
            shard_of = self.shards_of(board, cur - board.window, cur + 1)
            views = {}
            for rolled in range(1 << board.shards):
                if SHARDS_ROLL_TOGETHER and rolled not in (
                        0, (1 << board.shards) - 1):
                    continue
                view = sorted([e for e in old
                               if not rolled >> shard_of[e[0]] & 1]
                              + [e for e in new
                                 if rolled >> shard_of[e[0]] & 1],
                              key=board.sort_key)
                views[rolled] = (len(view),
                                 tuple((e[0], e[1]) for e in view[:10]))
            everything = (1 << board.shards) - 1
            want = board.labels(board.rule.index(self.now)).encode()
            answers = []
            end = time.monotonic() + ROLL_DEADLINE
            done = False
            while not done:
                self.assertLess(time.monotonic(), end, "the roll never ended")
                states = [self.resp.call("HMGET", k, "n", "s")
                          for k in self.window_keys(board)]
                done = all(n is None and st == want for n, st in states)
                n = self.client.Count(CountRequest(board=board.name,
                                                   window=True))
                got = self.client.GetTopN(GetTopNRequest(
                    board=board.name, n=10, window=True))
                got = tuple((x.member, x.score) for x in got)
                count_as = {r for r, v in views.items() if v[0] == n}
                top_as = {r for r, v in views.items() if v[1] == got}
                if not count_as or not top_as:
                    self.fail_with(
                        board, "Count, GetTopN n=10 during the roll",
                        f"one of the views (old, new, or shards of each): "
                        f"{sorted(views.values())[:4]}...", (n, got))
                answers.append("old" if count_as == top_as == {0} else
                               "new" if count_as == top_as == {everything}
                               else "mixed")
            self.assertEqual(answers[-1], "new")
            seen[board.name] = answers
            self.check(board)
        sys.stderr.write("reads during the roll (Count and GetTopN both "
                         "old, both new, else): " + ", ".join(
                             f"{b}: {ans.count('old')}, {ans.count('new')}, "
                             f"{ans.count('mixed')}"
                             for b, ans in seen.items()) + "\n")

    def shards_of(self, board, first, last):
        """member -> its shard, from the times hashes of periods first ..
        last - 1 in Redis."""
        out = {}
        for i, key in enumerate(self.window_keys(board)):
            base = key[:-1]  # rk:{board}: or rk:s:{board/i}:
            for p in range(first, last):
                for m in self.resp.call(
                        "HKEYS", f"{base}p:{board.rule.label(p)}:t"):
                    out[m.decode()] = i
        return out

    def test_window_refusals(self):
        """window=true reads the current window only, without data, of a
        board that has one: else InvalidArgument naming the field."""
        if not WINDOWS:
            self.skipTest("RANKD_WINDOW_PERIODS_ONLY")
        for request, field in [
                (GetTopNRequest(board="d_inc", n=5, periods_back=1,
                                window=True), "window"),
                (GetTopNRequest(board="d_inc", n=5, with_data=True,
                                window=True), "with_data"),
                (GetAroundRequest(board="d_inc", member="m1", radius=1,
                                  with_data=True, window=True), "with_data"),
                (GetTopNRequest(board="no_window", n=5, window=True),
                 "window")]:
            method = {GetTopNRequest: "GetTopN",
                      GetAroundRequest: "GetAround"}[type(request)]
            with self.assertRaises(InvalidArgument) as cm:
                getattr(self.client, method)(request)
            self.assertTrue(cm.exception.message.startswith(field + ":"),
                            cm.exception.message)

    def test_window_updates_during_roll(self):
        """Updates (of the period that enters, of those that stay, of the
        one that leaves), retries and removes while a roll builds the next
        window a chunk at a time, and another period ends meanwhile: once
        the last roll is done, the window is the model's, every entry.
        Runs last (by name), on a clock past the others'."""
        if not WINDOWS:
            self.skipTest("RANKD_WINDOW_PERIODS_ONLY")
        report = []
        for i, board in enumerate(self.roll_boards):
            day = datetime.date(self.year + 1, 1, 20 + 4 * i)
            nxt = day + datetime.timedelta(days=1)
            self.fill_for_roll(board, day)
            self.set_clock(paris_ms(nxt.year, nxt.month, nxt.day, 12))
            board.sent, board.removes = [], []
            want = board.labels(board.rule.index(self.now)).encode()
            end = time.monotonic() + ROLL_DEADLINE
            rounds = during = 0
            moved = False
            while True:
                self.assertLess(time.monotonic(), end, "the roll never ended")
                states = [self.resp.call("HMGET", k, "n", "s")
                          for k in self.window_keys(board)]
                done = all(n is None and st == want for n, st in states)
                if done and moved:
                    break
                if done or rounds == 2 and not moved:
                    # Another period ends, while the roll runs (or just
                    # after it).
                    after = nxt + datetime.timedelta(days=1)
                    self.set_clock(paris_ms(after.year, after.month,
                                            after.day, 12))
                    want = board.labels(board.rule.index(self.now)).encode()
                    moved = True
                during += any(n is not None for n, _ in states)
                # The first round's first call starts the roll.
                self.update_round(board, 4)
                rounds += 1
            self.update_round(board, 10)
            self.check(board)
            report.append(f"{board.name}: {rounds} rounds of 4 operations, "
                          f"{during} seen with the roll under way")
        sys.stderr.write("updates during the roll: " + "; ".join(report)
                         + "\n")


if __name__ == "__main__":
    unittest.main()
