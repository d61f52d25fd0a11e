#!/usr/bin/python3
"""The compatibility gate itself: check_idl.py passes the current IDL
against the frozen 1.0 copy, fails on every change README.md's
"Compatibility" forbids (each made to a copy of the frozen IDL here), and
passes every change it allows.

Usage: test_check_idl.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else ".")
HERE = os.path.join(SOURCE, "tests", "compat")
FROZEN = os.path.join(HERE, "ranking-1.0.thrift")
CHECK = os.path.join(HERE, "check_idl.py")

with open(FROZEN, encoding="utf-8") as f:
    FROZEN_TEXT = f.read()


def in_block(text, opening, old, new):
    """Replaces old by new inside the block that starts with opening (a
    struct or the service), once; fails if it is not there."""
    start = text.index(opening)
    end = text.index("\n}", start) + 1
    block = text[start:end]
    assert old in block, (opening, old)
    return text[:start] + block.replace(old, new, 1) + text[end:]


def replace(text, old, new):
    assert old in text, old
    return text.replace(old, new)


# (name, what the checker must say, edit of the frozen text)
FORBIDDEN = [
    ("field removed", "field 3 (periods_back) removed",
     lambda t: in_block(t, "struct GetRankRequest {",
                        "  3: optional i32 periods_back = 0\n", "")),
    ("field renumbered", "field 3 (periods_back) removed",
     lambda t: in_block(t, "struct GetRankRequest {",
                        "3: optional i32 periods_back", "4: optional i32 periods_back")),
    ("field renamed", "field 2 renamed n -> count",
     lambda t: in_block(t, "struct GetTopNRequest {", "2: required i32 n",
                        "2: required i32 count")),
    ("field type changed", "GetTopNRequest.n: type changed i32 -> i64",
     lambda t: in_block(t, "struct GetTopNRequest {", "2: required i32 n",
                        "2: required i64 n")),
    ("element type changed",
     "Entry.subscores: type changed list<i64> -> list<i32>",
     lambda t: in_block(t, "struct Entry {", "optional list<i64> subscores",
                        "optional list<i32> subscores")),
    ("optional made required", "GetTopNRequest.offset: made required",
     lambda t: in_block(t, "struct GetTopNRequest {",
                        "3: optional i32 offset", "3: required i32 offset")),
    ("new required field", "CountRequest.tenant: a new required field",
     lambda t: in_block(t, "struct CountRequest {",
                        "  2: optional i32 periods_back = 0\n",
                        "  2: optional i32 periods_back = 0\n"
                        "  3: required string tenant\n")),
    ("method removed", "method Count removed",
     lambda t: re.sub(r"\n  i64 Count\(1: CountRequest request\)\n    throws[^\n]*\n",
                      "\n", t)),
    ("return type changed", "method Count: return type changed i64 -> i32",
     lambda t: replace(t, "i64 Count(1: CountRequest request)",
                       "i32 Count(1: CountRequest request)")),
    ("argument added", "method GetRank: arguments changed",
     lambda t: replace(t, "GetRank(1: GetRankRequest request)",
                       "GetRank(1: GetRankRequest request, 2: i32 extra)")),
    ("argument type changed", "method Count: arguments changed",
     lambda t: replace(t, "i64 Count(1: CountRequest request)",
                       "i64 Count(1: GetRankRequest request)")),
    ("exception removed", "method GetRank: exception 2 not_found (exception NotFound) removed",
     lambda t: in_block(t, "  Entry GetRank(", "2: NotFound not_found, ", "")),
    ("struct removed", "struct RemoveResponse removed",
     lambda t: t.replace("RemoveResponse", "RemovalResponse")),
    ("enum value removed", "enum UpdateMode: value SET removed",
     lambda t: in_block(t, "enum UpdateMode {", "  SET = 3\n", "")),
    ("enum value renumbered", "enum UpdateMode: SET renumbered 3 -> 4",
     lambda t: in_block(t, "enum UpdateMode {", "SET = 3", "SET = 4")),
    ("const removed", "const IDL_VERSION removed",
     lambda t: replace(t, 'const string IDL_VERSION = "1.0"\n', "")),
    ("namespace changed", "namespaces changed",
     lambda t: replace(t, "namespace py ranking\n", "namespace py rankd\n")),
    ("service renamed", "service Ranking removed or renamed",
     lambda t: replace(t, "service Ranking {", "service Leaderboard {")),
]

ALLOWED = [
    ("new method",
     lambda t: in_block(t, "service Ranking {",
                        "  /** Records a score change; idempotent by request_id. */\n",
                        "  i64 Ping(1: GetServerInfoRequest request)\n"
                        "  /** Records a score change; idempotent by request_id. */\n")),
    ("new optional field",
     lambda t: in_block(t, "struct GetRankRequest {",
                        "  3: optional i32 periods_back = 0\n",
                        "  3: optional i32 periods_back = 0\n"
                        "  4: optional bool with_data = false\n")),
    ("new struct, enum and const",
     lambda t: replace(t, "struct UpdateRequest {",
                       "struct Extra {\n  1: optional i64 x\n}\n"
                       "enum Color { RED = 1 }\n"
                       "const i32 LIMIT = 5\n"
                       "struct UpdateRequest {")),
    ("new enum value",
     lambda t: in_block(t, "enum UpdateMode {", "  SET = 3\n",
                        "  SET = 3,\n  MAX = 4\n")),
    ("comments changed",
     lambda t: replace(t, "/** The member is not on the board. */",
                       "/** The member is not on the board (any period). */")),
]


def run_check(old, new):
    return subprocess.run([sys.executable, CHECK, old, new],
                          capture_output=True, text=True, timeout=120)


class GateTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def mutated(self, edit):
        text = edit(FROZEN_TEXT)
        self.assertNotEqual(text, FROZEN_TEXT)
        path = os.path.join(self.dir.name, "ranking.thrift")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_current_idl_grows_the_frozen_one(self):
        r = run_check(FROZEN, os.path.join(SOURCE, "idl", "ranking.thrift"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("compatible:", r.stdout)

    def test_frozen_copy_states_its_version(self):
        self.assertIn('const string IDL_VERSION = "1.0"', FROZEN_TEXT)

    def test_each_forbidden_change_fails(self):
        for name, says, edit in FORBIDDEN:
            with self.subTest(name):
                r = run_check(FROZEN, self.mutated(edit))
                self.assertEqual(r.returncode, 1, (name, r.stdout, r.stderr))
                self.assertIn(says, r.stdout, name)

    def test_each_allowed_change_passes(self):
        for name, edit in ALLOWED:
            with self.subTest(name):
                r = run_check(FROZEN, self.mutated(edit))
                self.assertEqual(r.returncode, 0, (name, r.stdout, r.stderr))


if __name__ == "__main__":
    unittest.main()
