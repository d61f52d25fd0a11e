"""TLS to Redis ([redis] tls*, --redis-tls*) through the generated Python
client, against real TLS-only redis-servers (--port 0 --tls-port) and a
real rankd: a plain node, with and without the client certificate Redis
asks for, a wrong CA, a wrong server name, the files reloaded on SIGHUP, a
replica (--tls-replication) that serves read_from=replica, and a Redis
Cluster (tls-cluster) whose slots move (MOVED, ASK) and whose master fails
over (CLUSTER FAILOVER) while rankd serves. Certificates come from
certs.py; the checks on Redis's side speak TLS themselves (Resp below).

Usage: test_redis_tls.py RANKD STUBS_DIR
RANKD_TEST_WRAPPER (as for the C tests), if set, is put in front of rankd.
"""
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import unittest

RANKD = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

from ranking.ttypes import (  # noqa: E402
    GetRankRequest, GetTopNRequest, Unavailable, UpdateMode, UpdateRequest)
from thrift.transport.TTransport import TTransportException  # noqa: E402
import certs  # noqa: E402
import servers  # noqa: E402
from servers import connect, free_port, start, stop  # noqa: E402

WRAPPER = shlex.split(os.environ.get("RANKD_TEST_WRAPPER", ""))
DEADLINE = 180 if WRAPPER else 60
# --redis-timeout: under valgrind a TLS handshake and the start-up commands
# take rankd seconds, and the connect deadline is this timeout.
TIMEOUT = "10" if WRAPPER else "2"
SHORT_TIMEOUT = "10" if WRAPPER else "0.5"
NODES = 6
SLOTS = 16384


def wait_for(what, condition, deadline=DEADLINE):
    return servers.wait_for(what, condition, deadline)


def crc16(data):
    """CRC16-XMODEM, as Redis Cluster computes a key's slot."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def board_slot(board):
    return crc16(board.encode()) % SLOTS


class Resp:
    """A Redis connection over TLS with the test's client certificate: a
    command in, its reply out (errors as RespError)."""

    class Error(Exception):
        pass

    def __init__(self, port, d):
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
        ctx.load_cert_chain(os.path.join(d, "server.pem"),
                            os.path.join(d, "server.key"))
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("Redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return Resp.Error(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"not RESP: {line!r}")

    def pipeline(self, *commands):
        out = b""
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return [self._reply() for _ in commands]

    def call(self, *args):
        reply = self.pipeline(args)[0]
        if isinstance(reply, Resp.Error):
            raise reply
        return reply


def set_to(board, member, value, rid):
    return UpdateRequest(board=board, member=member, value=value,
                         request_id=rid, mode=UpdateMode.SET)


def add(board, member, delta, rid):
    return UpdateRequest(board=board, member=member, value=delta,
                         request_id=rid, mode=UpdateMode.INCREMENT)


class Base(unittest.TestCase):
    """Certificates, TLS-only Redis servers and rankds in one directory."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rankd-redis-tls-")
        certs.make(cls.dir)
        cls.procs = []

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                proc.wait(60)
        shutil.rmtree(cls.dir)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    @classmethod
    def tls_args(cls, port, auth_clients="yes"):
        return ["--port", "0", "--tls-port", str(port),
                "--tls-cert-file", cls.path("server.pem"),
                "--tls-key-file", cls.path("server.key"),
                "--tls-ca-cert-file", cls.path("ca.pem"),
                "--tls-auth-clients", auth_clients]

    @classmethod
    def start_redis(cls, *extra, auth_clients="yes"):
        proc, port = start(
            lambda p: ["redis-server", "--bind", "127.0.0.1",
                       *cls.tls_args(p, auth_clients), "--save", "",
                       "--appendonly", "no", *extra], cls.dir)
        cls.procs.append(proc)
        return proc, port

    @classmethod
    def client_cert(cls):
        return ["--redis-tls-cert", cls.path("server.pem"),
                "--redis-tls-key", cls.path("server.key")]

    def start_rankd(self, *args):
        proc, port = start(
            lambda p: [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{p}",
                       "--io-threads", "2", *args], self.dir)
        self.addCleanup(self.stop_rankd, proc, port)
        return proc, port

    def stop_rankd(self, proc, port):
        if proc.poll() is None:
            self.assertEqual(stop(proc, self.dir, port), 0,
                             "rankd did not exit cleanly")

    def log(self, port):
        with open(self.path(f"log-{port}"), encoding="utf-8",
                  errors="replace") as f:
            return f.read()

    def client(self, port):
        client, transport = connect(port)
        self.addCleanup(transport.close)
        return client

    def served(self, c):
        """rankd reaches Redis: a read answers (waits until it does)."""
        def ok():
            try:
                c.GetTopN(GetTopNRequest(board="ready", n=1))
                return True
            except Unavailable:
                return False
        wait_for("rankd to reach Redis", ok)
        return c

    def rankd_fails(self, *args, config=None):
        """rankd refuses to start: (exit status, what it said)."""
        argv = [*WRAPPER, RANKD, "--listen", f"127.0.0.1:{free_port()}"]
        if config is not None:
            conf = self.path("bad.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.write(config)
            argv += ["--config", conf]
        done = subprocess.run(argv + list(args), capture_output=True,
                              text=True, timeout=DEADLINE, cwd=self.dir)
        self.assertNotEqual(done.returncode, 0, done.stderr)
        return done.returncode, done.stderr


class PlainNodeTest(Base):
    """One TLS-only Redis that asks for client certificates."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.redis, cls.redis_port = cls.start_redis()

    def test_served_over_tls(self):
        """Update, GetRank and GetTopN through a Redis reached over TLS
        only; what landed is in Redis; every rankd connection there is
        named by rankd (start-up commands ran over TLS)."""
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("ca.pem"), *self.client_cert(),
            "--redis-timeout", TIMEOUT)
        c = self.served(self.client(port))
        for i, member in enumerate(("a", "b", "c")):
            r = c.Update(set_to("tls", member, 10 * (i + 1), f"tls-{i}"))
            self.assertTrue(r.applied)
        self.assertEqual(c.GetRank(GetRankRequest(board="tls",
                                                  member="b")).rank, 2)
        top = c.GetTopN(GetTopNRequest(board="tls", n=2))
        self.assertEqual([(e.member, e.score) for e in top],
                         [("c", 30), ("b", 20)])
        # A retry is not applied twice: the request-id records are there.
        self.assertFalse(c.Update(set_to("tls", "a", 10, "tls-0")).applied)
        with Resp(self.redis_port, self.dir) as r:
            self.assertEqual(r.call("ZCARD", "rk:{tls}:z"), 3)
            names = [line for line in r.call("CLIENT", "LIST").splitlines()
                     if " name=rankd_" in line]
        self.assertGreaterEqual(len(names), 2)  # one link per io thread
        self.assertIn("redis TLS on", self.log(port))

    def test_big_replies_cross_records(self):
        """Replies larger than one TLS record (16 KiB) and many pipelined
        calls: every byte is read, none is left in the session."""
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("ca.pem"), *self.client_cert(),
            "--redis-timeout", TIMEOUT)
        c = self.served(self.client(port))
        for j in range(2000):
            c.Update(set_to("big", f"member-{j:05d}-" + "x" * 40, j,
                            f"big-{j}"))
        top = c.GetTopN(GetTopNRequest(board="big", n=800))
        self.assertEqual(len(top), 800)
        self.assertEqual(top[0].score, 1999)
        self.assertEqual(top[-1].score, 1200)

    def test_no_client_certificate(self):
        """Redis asks for a client certificate and rankd has none: calls
        answer Unavailable, the log says why (once per attempt), rankd
        stays up and exits cleanly."""
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("ca.pem"), "--redis-timeout", "0.5")
        c = self.client(port)
        with self.assertRaises(Unavailable):
            c.GetRank(GetRankRequest(board="tls", member="a"))
        name = f"redis 127.0.0.1:{self.redis_port}: TLS"
        wait_for("the reason in the log", lambda: name in self.log(port))
        line = next(x for x in self.log(port).splitlines() if name in x)
        self.assertRegex(line, "certificate required|closed the connection")
        self.assertIn("retrying in", line)
        self.assertIsNone(rankd.poll())

    def test_wrong_ca(self):
        """A CA that did not sign Redis's certificate: calls answer
        Unavailable and the log names the verification failure."""
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("other-ca.pem"),
            *self.client_cert(), "--redis-timeout", "0.5")
        c = self.client(port)
        with self.assertRaises(Unavailable) as caught:
            c.Update(set_to("tls", "z", 1, "wrong-ca"))
        self.assertIn("certificate verify failed", caught.exception.message)
        wait_for("the reason in the log", lambda: (
            f"redis 127.0.0.1:{self.redis_port}: TLS handshake failed: "
            "certificate verify failed") in self.log(port))
        self.assertIsNone(rankd.poll())

    def test_server_name(self):
        """--redis-tls-server-name: the name the certificate must carry
        (localhost is in it; another name is refused)."""
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("ca.pem"), *self.client_cert(),
            "--redis-tls-server-name", "localhost", "--redis-timeout", TIMEOUT)
        self.served(self.client(port)).Update(set_to("named", "a", 1,
                                                     "named-1"))
        rankd, port = self.start_rankd(
            "--redis", f"127.0.0.1:{self.redis_port}", "--redis-tls",
            "--redis-tls-ca", self.path("ca.pem"), *self.client_cert(),
            "--redis-tls-server-name", "redis.elsewhere.example",
            "--redis-timeout", "0.5")
        with self.assertRaises(Unavailable):
            self.client(port).Update(set_to("named", "a", 1, "named-2"))
        wait_for("the mismatch in the log", lambda: "certificate verify "
                 "failed" in self.log(port))

    def test_config_keys_and_sighup(self):
        """The [redis] keys do what the options do; SIGHUP reads the files
        again: a CA that does not fit makes new connections fail, a file
        that does not load leaves the loaded one, the right CA back
        serves again."""
        ca = self.path("reloaded-ca.pem")
        shutil.copy(self.path("ca.pem"), ca)
        conf = self.path("sighup.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(f"""\
[redis]
nodes=127.0.0.1:{self.redis_port}
tls=true
tls_ca={ca}
tls_cert={self.path("server.pem")}
tls_key={self.path("server.key")}
tls_server_name=127.0.0.1
""")
        rankd, port = self.start_rankd("--config", conf,
                                       "--redis-timeout", SHORT_TIMEOUT)
        c = self.served(self.client(port))
        self.assertTrue(c.Update(set_to("hup", "a", 1, "hup-1")).applied)

        def hup(expect):
            before = self.log(port).count(expect)
            rankd.send_signal(signal.SIGHUP)
            wait_for(expect, lambda: self.log(port).count(expect) > before)

        def kill_rankd_links():
            with Resp(self.redis_port, self.dir) as r:
                for line in r.call("CLIENT", "LIST").splitlines():
                    if " name=rankd_" in line:
                        r.pipeline(("CLIENT", "KILL", "ID",
                                    line.split()[0].split("=")[1]))

        def served():
            try:
                c.GetRank(GetRankRequest(board="hup", member="a"))
                return True
            except Unavailable:
                return False

        # Not PEM: the loaded CA stays, and reconnections still verify.
        with open(ca, "w", encoding="utf-8") as f:
            f.write("not a certificate\n")
        hup("Redis TLS files not reloaded, the loaded ones stay")
        kill_rankd_links()
        wait_for("served after a reconnection", served)
        # Another CA: new connections are refused.
        shutil.copy(self.path("other-ca.pem"), ca)
        hup("SIGHUP: reloaded the Redis TLS files")
        kill_rankd_links()
        wait_for("the new CA refusing Redis",
                 lambda: "certificate verify failed" in self.log(port))
        self.assertFalse(served())
        # The right one again: served once the back-off has passed.
        shutil.copy(self.path("ca.pem"), ca)
        hup("SIGHUP: reloaded the Redis TLS files")
        wait_for("served again", served)

    def test_bad_settings_fail_start(self):
        node = f"127.0.0.1:{self.redis_port}"
        status, err = self.rankd_fails(
            "--redis", node, "--redis-tls", "--redis-tls-ca",
            self.path("missing.pem"))
        self.assertEqual(status, 1)
        self.assertIn("cannot load the CA file " + self.path("missing.pem"),
                      err)
        status, err = self.rankd_fails(
            "--redis", node, "--redis-tls", "--redis-tls-cert",
            self.path("server.pem"))
        self.assertEqual(status, 2)
        self.assertIn("--redis-tls-cert: a client certificate needs its key",
                      err)
        status, err = self.rankd_fails(
            "--redis", node, "--redis-tls", "--redis-tls-cert",
            self.path("server.pem"), "--redis-tls-key",
            self.path("client-client.key"))
        self.assertIn("the key %s is not the certificate %s's"
                      % (self.path("client-client.key"),
                         self.path("server.pem")), err)
        status, err = self.rankd_fails(
            "--redis", node, "--redis-tls-ca", self.path("ca.pem"))
        self.assertIn("--redis-tls-ca: given without --redis-tls", err)
        status, err = self.rankd_fails("--redis-tls")
        self.assertIn("--redis-tls: no Redis node is reached over TCP", err)
        status, err = self.rankd_fails(
            config=f"[redis]\nnodes={node}\ntls=yes\n")
        self.assertIn("[redis] tls: must be one of false, true, got 'yes'",
                      err)
        status, err = self.rankd_fails(
            config=f"[redis]\nnodes={node}\ntls_ca={self.path('ca.pem')}\n")
        self.assertIn("[redis] tls_ca: given without --redis-tls", err)
        status, err = self.rankd_fails(
            config=f"[redis]\nnodes={node}\ntls=true\ntls_key=k.pem\n")
        self.assertIn("[redis] tls_key: a client certificate needs its key",
                      err)


class ReplicaTest(Base):
    """A TLS primary and a replica that replicates over TLS
    (--tls-replication), which serves a read_from=replica board."""

    def test_reads_from_a_tls_replica(self):
        primary, primary_port = self.start_redis()
        replica, replica_port = self.start_redis(
            "--tls-replication", "yes", "--replicaof", "127.0.0.1",
            str(primary_port))

        def synced():
            with Resp(replica_port, self.dir) as r:
                return "master_link_status:up" in r.call("INFO",
                                                         "replication")
        wait_for("the replica to sync over TLS", synced)
        conf = self.path("replica.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(f"""\
[redis]
nodes=127.0.0.1:{primary_port}
replicas=127.0.0.1:{primary_port}=127.0.0.1:{replica_port}
tls=true
tls_ca={self.path("ca.pem")}
tls_cert={self.path("server.pem")}
tls_key={self.path("server.key")}

[board rr]
read_from=replica
max_replica_lag_ms=10000
""")
        rankd, port = self.start_rankd("--config", conf,
                                       "--redis-timeout", TIMEOUT)
        c = self.served(self.client(port))
        self.assertTrue(c.Update(set_to("rr", "a", 7, "rr-1")).applied)

        def replica_reads():
            with Resp(replica_port, self.dir) as r:
                stats = r.call("INFO", "commandstats")
            return sum(int(line.split("calls=")[1].split(",")[0])
                       for line in stats.splitlines()
                       if line.startswith(("cmdstat_evalsha", "cmdstat_hmget",
                                           "cmdstat_zrange",
                                           "cmdstat_zrevrange",
                                           "cmdstat_zrank", "cmdstat_fcall")))
        before = replica_reads()

        def read_from_replica():
            r = c.GetRank(GetRankRequest(board="rr", member="a"))
            top = c.GetTopN(GetTopNRequest(board="rr", n=1))
            self.assertEqual((r.score, top[0].score), (7, 7))
            return replica_reads() > before + 5
        wait_for("reads answered by the replica", read_from_replica)


class ClusterTest(Base):
    """3 masters and 3 replicas, TLS only, the bus and replication over TLS
    too (tls-cluster, tls-replication): CLUSTER SLOTS names TLS ports, and
    rankd reaches every node over TLS, through moves and a failover."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ports = []
        for _ in range(NODES):
            proc, port = cls.start_redis(
                "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
                "--cluster-port", str(free_port()),
                "--tls-cluster", "yes", "--tls-replication", "yes",
                "--cluster-config-file", f"nodes-{os.urandom(4).hex()}.conf")
            cls.ports.append(port)
        subprocess.run(
            ["redis-cli", "--tls", "--cacert", cls.path("ca.pem"),
             "--cert", cls.path("server.pem"), "--key", cls.path("server.key"),
             "--cluster", "create",
             *[f"127.0.0.1:{p}" for p in cls.ports],
             "--cluster-replicas", "1", "--cluster-yes"],
            check=True, capture_output=True, timeout=DEADLINE)
        cls.wait_cluster_ok()

    @classmethod
    def cmd(cls, port, *args):
        with Resp(port, cls.dir) as r:
            return r.call(*args)

    @classmethod
    def wait_cluster_ok(cls):
        """Every node says cluster_state:ok and every master has a replica
        that acknowledges its writes (a probe key of one of its slots, then
        WAIT 1): only then does CLUSTER SLOTS list the replicas."""
        def ok():
            for p in cls.ports:
                if "cluster_state:ok" not in cls.cmd(p, "CLUSTER", "INFO"):
                    return False
                role = cls.cmd(p, "ROLE")
                if role[0] == "master" and not role[2]:
                    return False
                if role[0] == "master":
                    key = next(f"{{probe-{k}}}" for k in range(100000)
                               if cls.master_of(p, board_slot(f"probe-{k}"))
                               == p)
                    with Resp(p, cls.dir) as r:
                        if r.pipeline(("SET", key, 1, "PX", 5000),
                                      ("WAIT", 1, 100))[1] < 1:
                            return False
            return True
        wait_for("the cluster to be ok", ok)

    @classmethod
    def master_of(cls, port, slot):
        for start_slot, end_slot, master, *_ in cls.cmd(port, "CLUSTER",
                                                        "SLOTS"):
            if start_slot <= slot <= end_slot:
                return master[1]
        return 0

    @classmethod
    def replica_of(cls, master):
        role = cls.cmd(master, "ROLE")
        return int(role[2][0][1]) if role[0] == "master" and role[2] else 0

    def start_cluster_rankd(self):
        conf = self.path("cluster.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write("[board ct_sh]\nshards=10\n"
                    "[board ct_tc]\nread_cache=tracked\n")
        return self.start_rankd(
            "--redis-cluster", f"127.0.0.1:{self.ports[0]}", "--config", conf,
            "--redis-tls", "--redis-tls-ca", self.path("ca.pem"),
            *self.client_cert(), "--redis-timeout", TIMEOUT)

    def test_1_tls_ports_in_the_map(self):
        """CLUSTER SLOTS, asked over TLS, names the TLS ports rankd is
        to connect to (the plain ports are off)."""
        def named():
            ports = set()
            for _, _, master, *replicas in self.cmd(self.ports[0], "CLUSTER",
                                                    "SLOTS"):
                ports.add(master[1])
                ports.update(r[1] for r in replicas)
            return ports
        wait_for("every node in the map", lambda: named() == set(self.ports))

    def test_2_served_moved_ask(self):
        """Boards and shards over every master; a slot moved (MOVED) and
        one half-way through a move (ASK) are followed, over TLS."""
        rankd, port = self.start_cluster_rankd()
        c = self.served(self.client(port))
        for i in range(40):
            c.Update(add("ct_sh", f"m{i}", i, f"sh-{i}"))
            c.Update(add("ct_plain", f"m{i}", i, f"pl-{i}"))
        self.assertEqual(c.GetRank(GetRankRequest(board="ct_sh",
                                                  member="m39")).rank, 1)
        self.assertEqual(len(c.GetTopN(GetTopNRequest(board="ct_plain",
                                                      n=50))), 40)
        masters = {self.master_of(self.ports[0],
                                  board_slot(f"ct_sh/{s}")) for s in range(10)}
        self.assertGreaterEqual(len(masters), 2)
        # Every master has rankd's connections, over TLS (nothing else
        # is open).
        for m in masters:
            self.assertIn(" name=rankd_", self.cmd(m, "CLIENT", "LIST"))
        # MOVED: the slot of ct_mv given to another master under rankd.
        c.Update(add("ct_mv", "x", 5, "mv-1"))
        slot, source, target = self.move_begin("ct_mv")
        self.move_keys(slot, source, target)
        self.move_finish(slot, target)
        r = c.Update(add("ct_mv", "x", 2, "mv-2"))
        self.assertEqual(r.score, 7)
        self.assertEqual(self.cmd(target, "EXISTS", "rk:{ct_mv}:z"), 1)
        # The read cache's tracking session: its own connections to every
        # node of the map, over TLS too.
        c.Update(add("ct_tc", "t", 1, "tc-1"))
        tc_master = self.master_of(self.ports[0], board_slot("ct_tc"))

        def tracked():
            c.GetTopN(GetTopNRequest(board="ct_tc", n=1))
            return " name=rankd-tracking " in self.cmd(tc_master, "CLIENT",
                                                       "LIST")
        wait_for("rankd's tracking connection", tracked)
        # ASK: the sorted set moved, the slot still the source's; a read
        # of it is asked of the target.
        c.Update(add("ct_ask", "y", 9, "ask-1"))
        slot, source, target = self.move_begin("ct_ask")
        self.move_keys(slot, source, target, "rk:{ct_ask}:z")
        top = c.GetTopN(GetTopNRequest(board="ct_ask", n=10))
        self.assertEqual([(e.member, e.score) for e in top], [("y", 9)])
        self.move_keys(slot, source, target)
        self.move_finish(slot, target)
        self.assertEqual(c.Update(add("ct_ask", "y", 1, "ask-2")).score, 10)

    def move_begin(self, board):
        slot = board_slot(board)
        source = self.master_of(self.ports[0], slot)
        target = next(p for p in self.ports if p != source
                      and self.cmd(p, "ROLE")[0] == "master")
        source_id = self.cmd(source, "CLUSTER", "MYID")
        target_id = self.cmd(target, "CLUSTER", "MYID")
        self.cmd(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        self.cmd(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        return slot, source, target

    def move_keys(self, slot, source, target, only=None):
        for key in self.cmd(source, "CLUSTER", "GETKEYSINSLOT", slot, 1000):
            if only is None or key == only:
                self.assertEqual(self.cmd(
                    source, "MIGRATE", "127.0.0.1", target, key, 0, 5000),
                    "OK")

    def move_finish(self, slot, target):
        target_id = self.cmd(target, "CLUSTER", "MYID")
        for p in self.ports:
            if self.cmd(p, "ROLE")[0] == "master":
                self.cmd(p, "CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def test_3_failover_while_serving(self):
        """CLUSTER FAILOVER on the replica of a board's master while
        writers update it: every update acknowledged is counted once, the
        writers go on after it, and the board is whole on the new
        master."""
        rankd, port = self.start_cluster_rankd()
        board, members = "ct_fo", 5
        slot = board_slot(board)
        master = self.master_of(self.ports[0], slot)
        replica = self.replica_of(master)
        self.assertNotEqual(replica, 0)
        sums = [[0] * members for _ in range(3)]
        done = [0] * 3
        errors, unavailable = [], [0]
        stopping = threading.Event()

        def writer(k):
            c, t = connect(port)
            i = 0
            try:
                while not (stopping.is_set() and i >= 50):
                    m, delta = i % members, (i * 7919) % 23 - 11
                    req = add(board, f"w{k}-m{m}", delta, f"w{k}-{i}")
                    while True:  # the same request_id until acknowledged
                        try:
                            c.Update(req)
                            break
                        except Unavailable:
                            unavailable[0] += 1
                        except TTransportException:
                            t.close()
                            c, t = connect(port)
                    sums[k][m] += delta
                    done[k] += 1
                    i += 1
            except Exception as e:  # reported by the test
                errors.append(e)
            t.close()

        threads = [threading.Thread(target=writer, args=(k,))
                   for k in range(3)]
        for th in threads:
            th.start()
        wait_for("updates under way", lambda: sum(done) > 150)
        self.assertEqual(self.cmd(replica, "CLUSTER", "FAILOVER"), "OK")
        wait_for("the failover", lambda: self.master_of(replica, slot)
                 == replica and self.replica_of(replica) == master)
        self.wait_cluster_ok()
        at_failover = sum(done)
        wait_for("updates after the failover",
                 lambda: sum(done) > at_failover + 300 or errors)
        stopping.set()
        for th in threads:
            th.join(DEADLINE)
        self.assertEqual(errors, [])
        c = self.client(port)
        for k in range(3):
            for m in range(members):
                r = c.GetRank(GetRankRequest(board=board, member=f"w{k}-m{m}"))
                self.assertEqual(r.score, sums[k][m], f"w{k}-m{m}")
        self.assertEqual(self.cmd(replica, "EXISTS", f"rk:{{{board}}}:z"), 1)
        self.assertIsNone(rankd.poll())
        print(f"\nfailover: {sum(done)} updates, {unavailable[0]} answered "
              f"Unavailable and retried", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
