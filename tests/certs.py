"""Test certificates, made with the openssl command: a CA, a server
certificate for 127.0.0.1 and localhost (a client one too: Redis Cluster
nodes use it both ways), client certificates by name, an
expired one, and one from another CA.

    python3 tests/certs.py DIR [CLIENT_NAME...]

writes DIR/ca.pem, DIR/server.pem + server.key, DIR/client-NAME.pem +
.key for each name (default: client), DIR/expired.pem + .key,
DIR/other-ca.pem and DIR/stranger.pem + .key (signed by the other CA).
From Python: certs.make(dir, names) returns the paths in a dict.
"""
import os
import subprocess
import sys


def _run(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ca(d, name, cn):
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650",
         "-subj", "/CN=" + cn, "-keyout", name + ".key", "-out",
         name + ".pem", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _leaf(d, name, cn, ca, ext, start=None, end=None):
    """A key and a certificate for cn signed by ca; ext: extension lines.
    start/end (YYYYMMDDHHMMSSZ) make its validity exact (openssl ca)."""
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-subj", "/CN=" + cn, "-keyout", name + ".key", "-out",
         name + ".csr", cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("\n".join(ext) + "\n")
    if start is None:
        _run("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
             "-CAkey", ca + ".key", "-CAcreateserial", "-days", "3650",
             "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)
        return
    # openssl x509 (3.0) cannot set a past validity; openssl ca can.
    db = os.path.join(d, name + ".db")
    open(db, "w").close()
    with open(os.path.join(d, name + ".cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=c\n[c]\ndatabase=%s\nnew_certs_dir=%s\n"
                "serial=%s\ndefault_md=sha256\npolicy=p\n"
                "unique_subject=no\n[p]\ncommonName=supplied\n"
                % (db, d, os.path.join(d, name + ".srl")))
    with open(os.path.join(d, name + ".srl"), "w") as f:
        f.write("01\n")
    _run("ca", "-batch", "-config", name + ".cnf", "-cert", ca + ".pem",
         "-keyfile", ca + ".key", "-in", name + ".csr", "-startdate", start,
         "-enddate", end, "-extfile", name + ".ext", "-notext", "-out",
         name + ".pem", cwd=d)


CLIENT_EXT = ["basicConstraints=CA:FALSE", "extendedKeyUsage=clientAuth"]


def make(d, names=("client",)):
    """Makes the certificates in d; returns {label: path}."""
    d = os.path.abspath(d)  # openssl runs in d
    os.makedirs(d, exist_ok=True)
    _ca(d, "ca", "rankd test CA")
    _ca(d, "other-ca", "another CA")
    _leaf(d, "server", "localhost", "ca",
          ["basicConstraints=CA:FALSE",
           "extendedKeyUsage=serverAuth,clientAuth",
           "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"])
    paths = {"ca": "ca.pem", "other_ca": "other-ca.pem",
             "server_cert": "server.pem", "server_key": "server.key"}
    for n in names:
        _leaf(d, "client-" + n, n, "ca",
              CLIENT_EXT + ["subjectAltName=DNS:%s.example,URI:spiffe://"
                            "rankd.test/%s,email:%s@example.com" % (n, n, n)])
        paths["client_" + n] = ("client-%s.pem" % n, "client-%s.key" % n)
    _leaf(d, "expired", names[0] if names else "client", "ca", CLIENT_EXT,
          start="20200101000000Z", end="20200102000000Z")
    _leaf(d, "stranger", names[0] if names else "client", "other-ca",
          CLIENT_EXT)
    paths["expired"] = ("expired.pem", "expired.key")
    paths["stranger"] = ("stranger.pem", "stranger.key")
    out = {}
    for k, v in paths.items():
        out[k] = (tuple(os.path.join(d, x) for x in v) if isinstance(v, tuple)
                  else os.path.join(d, v))
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    make(sys.argv[1], tuple(sys.argv[2:]) or ("client",))
