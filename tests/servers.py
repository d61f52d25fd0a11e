"""Test helpers: start a server on a free loopback port and wait for it.

No fixed sleeps: a start waits until the port answers (or the process dies,
then retries on another port).
"""
import os
import socket
import subprocess
import sys
import time


# Every port free_port has handed out in this process.
_handed_out = set()


def free_port():
    """A loopback port nothing listens on, and never one this process was
    given before: a caller that has not bound its port yet (rankd's metrics
    port, chosen before its Thrift port) would otherwise share it with the
    next caller, and that rankd, which binds the first and exits on the
    second, answers the wait for its ports before it is gone."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def wait_port(port, proc, deadline=30.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.01)  # polling a condition, with a deadline
    raise RuntimeError(f"port {port} did not open")


def start(argv_for_port, workdir):
    for _ in range(5):
        port = free_port()
        with open(os.path.join(workdir, f"log-{port}"), "w") as log:
            proc = subprocess.Popen(argv_for_port(port), cwd=workdir,
                                    stdout=log, stderr=subprocess.STDOUT)
        if wait_port(port, proc):
            return proc, port
    raise RuntimeError(f"could not start {argv_for_port(0)[0]}")


def stop(proc, workdir=None, port=None, deadline=60):
    """SIGTERM; the exit status (0: clean). Given the workdir and port start
    ran it with, a server that did not exit cleanly has its log copied to
    stderr: a sanitizer's report is there, and the workdir goes next."""
    proc.terminate()
    status = proc.wait(deadline)
    if status != 0 and workdir is not None:
        with open(os.path.join(workdir, f"log-{port}"), encoding="utf-8",
                  errors="replace") as f:
            sys.stderr.write(f"--- the log of the server on port {port} "
                             f"(exit status {status}):\n" + f.read()[-20000:])
    return status


def connect(port):
    """A generated Ranking client on a framed binary connection to rankd
    (the stubs' directory must be on sys.path): (client, transport)."""
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport
    from ranking import Ranking
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(60000)
    transport = TTransport.TFramedTransport(sock)
    transport.open()
    return (Ranking.Client(TBinaryProtocol.TBinaryProtocol(transport)),
            transport)


def wait_for(what, condition, deadline):
    """Polls condition (a function) until it is true; fails after deadline
    seconds, naming what. Returns the seconds it took."""
    begin = time.monotonic()
    while time.monotonic() < begin + deadline:
        if condition():
            return time.monotonic() - begin
        time.sleep(0.001)  # polling a condition, with a deadline
    raise AssertionError(f"timed out waiting for {what}")


def request_id_records(redis_port, board):
    """Request-id records written on an unsharded, unperiodic board's keys
    in the window, from its meta hash (rk:{board}:q: a count per bucket)."""
    out = subprocess.run(
        ["redis-cli", "-p", str(redis_port), "HGETALL", f"rk:{{{board}}}:q"],
        capture_output=True, text=True, check=True).stdout.split()
    return sum(int(v) for k, v in zip(out[::2], out[1::2]) if k.isdigit())
