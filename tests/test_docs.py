#!/usr/bin/env python3
"""test_docs.py -- every file the documentation names exists.

Usage: test_docs.py SOURCE_DIR

Scans README.md, docs/**/*.md, bench/README.md, examples/**/README.md and
tests/compat/README.md for repository paths -- words starting with src/,
tests/, bench/, idl/, docs/, packaging/, examples/, gen-c_glib/ or .ci/, in
prose, code spans and code blocks alike -- and for the targets of relative
Markdown links, and fails naming each one that does not exist. Files move
(the tree was split into folders by layer), and a page that names a file
no longer there sends its reader nowhere.

Not checked: URLs, placeholders (a path with <...>, $ or {...}), and what
builds or benches write (build*/, bench/results/). A glob (src/*.c) must
match something. Also checks that README.md stays a front door (at most
400 lines) and bench/README.md a reference, not a notebook (at most 600).
"""

import glob
import os
import re
import sys

PREFIXES = ("src", "tests", "bench", "idl", "docs", "packaging", "examples",
            "gen-c_glib", ".ci")
# A repository path: one of the prefixes at the start of a word (not inside
# a URL or another path: no word character, '/', '.', '-' or ':' before it).
PATH_RE = re.compile(r"(?<![\w/.:~-])((?:%s)/[^\s`'\"()\[\],;|]*)"
                     % "|".join(re.escape(p) for p in PREFIXES))
LINK_RE = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MAX_LINES = {"README.md": 400, "bench/README.md": 600}
GENERATED = ("bench/results/",)


def anchors(root, page):
    """The anchors GitHub makes of a page's headings."""
    found = set()
    in_code = False
    with open(os.path.join(root, page), encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                title = line.lstrip("#").strip().lower()
                slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
                found.add(slug)
    return found


def pages(root):
    names = ["README.md", "bench/README.md", "tests/compat/README.md"]
    names += glob.glob("docs/**/*.md", root_dir=root, recursive=True)
    names += glob.glob("examples/**/README.md", root_dir=root, recursive=True)
    return sorted(n for n in set(names)
                  if os.path.isfile(os.path.join(root, n)))


def exists(root, path):
    full = os.path.join(root, path)
    if any(c in path for c in "*?["):
        return bool(glob.glob(full, recursive=True))
    return os.path.exists(full)


def skipped(path):
    return (any(c in path for c in "<>${}") or path.startswith(GENERATED))


def check_page(root, page):
    problems = []
    here = os.path.dirname(page)
    with open(os.path.join(root, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        for m in PATH_RE.finditer(line):
            path = m.group(1).split("#", 1)[0].rstrip(".:")
            # A word like src/net's names the folder.
            path = re.sub(r"'s$", "", path)
            if not skipped(path) and not exists(root, path):
                problems.append("%s:%d: %s does not exist" % (page, number,
                                                              path))
        for m in LINK_RE.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            if target.startswith("#"):
                target = os.path.basename(page) + target
            target, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(here, target))
            if path.startswith(".."):
                problems.append("%s:%d: link %s leaves the repository"
                                % (page, number, m.group(1)))
            elif not skipped(path) and not exists(root, path):
                problems.append("%s:%d: link %s: %s does not exist"
                                % (page, number, m.group(1), path))
            elif (anchor and path.endswith(".md")
                  and anchor not in anchors(root, path)):
                problems.append("%s:%d: link %s: %s has no heading #%s"
                                % (page, number, m.group(1), path, anchor))
    limit = MAX_LINES.get(page)
    if limit is not None and len(lines) - 1 > limit:
        problems.append("%s: %d lines, at most %d" % (page, len(lines) - 1,
                                                      limit))
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_docs.py SOURCE_DIR")
    root = sys.argv[1]
    found = pages(root)
    for required in ("README.md", "bench/README.md"):
        if required not in found:
            sys.exit("%s is missing" % required)
    problems = []
    for page in found:
        problems += check_page(root, page)
    for p in problems:
        print(p)
    print("%d pages checked, %d problems" % (len(found), len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
