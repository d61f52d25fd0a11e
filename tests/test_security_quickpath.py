#!/usr/bin/env python3
"""test_security_quickpath.py -- docs/security.md's quick path works as
written.

Usage: test_security_quickpath.py SOURCE_DIR BUILD_DIR

Takes the three sh blocks of the page's "The quick path" section and runs
them in a scratch directory whose build/ is BUILD_DIR: the first makes the
CA, the certificates and the config; the second starts rankd (its embedded
Redis included), on a free port instead of 9443; the third calls it as
the game server and as ops. Checks what the page says they print: whoami's
identity, TLS and grants, the refused delete (exit 5, the message naming
method, board, role and identity), and the ops delete going through.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import free_port, wait_port  # noqa: E402


def quick_path_blocks(page):
    with open(page, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## The quick path", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 3, f"expected 3 sh blocks, found {len(blocks)}"
    return blocks


def main():
    source, build = (os.path.abspath(a) for a in sys.argv[1:3])
    make, serve, call = quick_path_blocks(
        os.path.join(source, "docs", "security.md"))
    work = tempfile.mkdtemp(prefix="rankd-quickpath-")
    os.symlink(build, os.path.join(work, "build"))
    port = free_port()
    serve = serve.replace("127.0.0.1:9443", f"127.0.0.1:{port}")
    call = call.replace("127.0.0.1:9443", f"127.0.0.1:{port}")
    assert str(port) in serve and str(port) in call, "the port moved"

    subprocess.run(["bash", "-euc", make], cwd=work, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(os.path.join(work, "rankd.log"), "w")
    # exec: the shell becomes rankd, so its signal reaches rankd.
    rankd = subprocess.Popen(["bash", "-euc", "exec " + serve.strip()],
                             cwd=work, stdout=log, stderr=subprocess.STDOUT)
    ok = False
    try:
        if not wait_port(port, rankd, deadline=60):
            raise AssertionError("rankd exited before it listened")
        out = subprocess.run(["bash", "-euc", call], cwd=work,
                             capture_output=True, text=True, timeout=120)
        print(out.stdout, out.stderr, sep="\n")
        assert out.returncode == 0, out.returncode
        assert re.search(r"identity\s+game-server", out.stdout), "whoami"
        assert re.search(r"tls\s+yes", out.stdout), "whoami tls"
        assert re.search(r"grants\s+read:\* write:\*", out.stdout), "grants"
        assert "refused: exit 5" in out.stdout, "the refused delete"
        assert ("DeleteBoard on board 'season_1' needs role admin; identity "
                "'game-server' has no such role on any board") in out.stderr, out.stderr
        # The ops delete went through: its answer is printed, no error.
        assert out.stderr.count("rankctl:") == 1, out.stderr
        ok = True
    finally:
        rankd.send_signal(signal.SIGTERM)
        status = rankd.wait(60)
        log.close()
        with open(os.path.join(work, "rankd.log"), encoding="utf-8") as f:
            text = f.read()
        if not ok or status != 0:
            print(text[-20000:])
        assert status == 0, f"rankd exit status {status}"
        assert ("audit: DeleteBoard board 'season_1' by 'game-server' (TLS)"
                in text and "refused: PermissionDenied" in text)
        assert "audit: DeleteBoard board 'season_1' by 'ops' (TLS)" in text
    shutil.rmtree(work)
    print("the quick path works as written")


if __name__ == "__main__":
    main()
