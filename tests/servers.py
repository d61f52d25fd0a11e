"""Test helpers: start a server on a free loopback port and wait for it.

No fixed sleeps: a start waits until the port answers (or the process dies,
then retries on another port).
"""
import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
