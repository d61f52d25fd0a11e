"""A rankd that speaks TLS and asks for client certificates, for the client
tests (rankctl, rank-bench, the C client, the examples).

    tls = TlsRankd(rankd, redis_port, workdir, certs)  # certs: certs.make()
    tls.port        # TLS, client certificates from certs["ca"] required
    tls.plain_port  # the same rankd without TLS
    tls.stop()

start_tls_rankd is the one place that decides how: rankd's own TLS
listener (--tls-listen ADDR --tls-cert F --tls-key F --tls-ca F) beside
its plain one.

As a program it starts redis-server and a TLS rankd, then runs a command
with RANK_TLS_PORT, RANK_PLAIN_PORT and RANK_TLS_CERTS (the certificates'
directory) in its environment, and exits with its status:

    python3 tls_rankd.py RANKD -- PROGRAM ARGS...
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import certs as certs_module  # noqa: E402
from servers import free_port, start, wait_port  # noqa: E402

def start_tls_rankd(rankd, redis_port, workdir, certdir, extra=()):
    """Starts a rankd with a plain listener and a TLS one that requires a
    client certificate from the test CA. Returns (processes, tls_port,
    plain_port); processes in stop order."""
    tls_port = free_port()
    rankd_proc, plain_port = start(
        lambda p: [rankd, "--listen", f"127.0.0.1:{p}",
                   "--tls-listen", f"127.0.0.1:{tls_port}",
                   "--tls-cert", os.path.join(certdir, "server.pem"),
                   "--tls-key", os.path.join(certdir, "server.key"),
                   "--tls-ca", os.path.join(certdir, "ca.pem"),
                   "--redis", f"127.0.0.1:{redis_port}", *extra], workdir)
    if not wait_port(tls_port, rankd_proc):
        raise RuntimeError("rankd exited before its TLS port opened")
    return [rankd_proc], tls_port, plain_port


class TlsRankd:
    """redis-server, and a rankd reached over TLS (start_tls_rankd)."""

    def __init__(self, rankd, workdir, certdir, extra=()):
        self.dir = workdir
        self.certs = certdir
        self.redis, self.redis_port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1", "--port",
                       str(p), "--save", "", "--appendonly", "no"], workdir)
        try:
            self.procs, self.port, self.plain_port = start_tls_rankd(
                rankd, self.redis_port, workdir, certdir, extra)
        except BaseException:
            self.redis.terminate()
            self.redis.wait(30)
            raise

    def path(self, name):
        """A file of the certificates' directory (ca.pem, client-x.key)."""
        return os.path.join(self.certs, name)

    def stop(self):
        for proc in self.procs + [self.redis]:
            proc.terminate()
            proc.wait(30)


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: tls_rankd.py RANKD -- PROGRAM ARGS...\n")
        return 2
    workdir = tempfile.mkdtemp(prefix="rankd-tls-")
    certdir = os.path.join(workdir, "certs")
    certs_module.make(certdir, ["alice"])
    tls = TlsRankd(os.path.abspath(argv[1]), workdir, certdir)
    try:
        env = dict(os.environ, RANK_TLS_PORT=str(tls.port),
                   RANK_PLAIN_PORT=str(tls.plain_port),
                   RANK_TLS_CERTS=certdir)
        status = subprocess.run(argv[3:], env=env).returncode
    finally:
        tls.stop()
    if status == 0:
        shutil.rmtree(workdir)
    else:
        sys.stderr.write(f"tls_rankd.py: kept {workdir}\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
