"""Helpers of the HTTP-port tests (test_metrics.py, test_viewer.py): Python
stubs generated from the IDL, a Redis and a rankd with --metrics-listen on
free loopback ports, HTTP GETs, and waiting for conditions (no fixed sleeps).

RANKD_TEST_WRAPPER (as for the C tests), if set, is put in front of rankd's
command line, e.g. "valgrind --error-exitcode=99 --leak-check=full".
"""
import http.client
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import start  # noqa: E402

# Generous: rankd may run under valgrind.
DEADLINE = float(os.environ.get("RANKD_TEST_DEADLINE", "60"))


def load_stubs(idl):
    """Generates the Python client from idl and puts it on sys.path."""
    out = tempfile.mkdtemp(prefix="rankd-stubs-")
    subprocess.run(["thrift", "--gen", "py", "-out", out, idl], check=True)
    sys.path.insert(0, out)
    return out


def wrapper():
    return shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))


def wait_for(what, predicate, deadline=DEADLINE):
    """Polls predicate until it returns a true value; returns that value."""
    end = time.monotonic() + deadline
    last = None
    while time.monotonic() < end:
        last = predicate()
        if last:
            return last
        time.sleep(0.02)  # polling a condition, with a deadline
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def start_redis(workdir, port=None):
    if port is None:
        return start(lambda p: ["redis-server", "--bind", "127.0.0.1",
                                "--port", str(p), "--save", "",
                                "--appendonly", "no"], workdir)
    # The same port again: wait until it answers.
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port",
                             str(port), "--save", "", "--appendonly", "no"],
                            cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    return proc, port


HTTP_LINE = re.compile(r"serving metrics, health and the board viewer on "
                       r"http://127\.0\.0\.1:(\d+)/")


def start_rankd(rankd, workdir, redis_port, extra=(), metrics=True):
    """rankd on a free Thrift port; with metrics, --metrics-listen on port 0
    and the port it bound read from its log. Returns (proc, port, http)."""
    opts = ["--metrics-listen", "127.0.0.1:0"] if metrics else []
    proc, port = start(lambda p: [*wrapper(), rankd, "--listen",
                                  f"127.0.0.1:{p}", "--redis",
                                  f"127.0.0.1:{redis_port}", *opts, *extra],
                       workdir)
    if not metrics:
        return proc, port, None
    log = os.path.join(workdir, f"log-{port}")

    def http_port():
        with open(log, encoding="utf-8", errors="replace") as f:
            m = HTTP_LINE.search(f.read())
        return int(m.group(1)) if m else None
    return proc, port, wait_for("rankd's HTTP port in its log", http_port)


def get(port, path, method="GET"):
    """(status, content type, body as text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        conn.close()


def stop(proc, workdir=None, port=None):
    """servers.stop, with the deadline of these tests."""
    return servers.stop(proc, workdir, port, DEADLINE)
