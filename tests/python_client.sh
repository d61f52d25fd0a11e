#!/bin/sh
# Cross-language check: generates Python stubs from idl/ at test time and
# runs a Python test (test_python_client.py unless SCRIPT names another;
# Debian's python3-thrift) against a real rankd.
# Usage: python_client.sh RANKD IDL OUTDIR [SCRIPT]
set -eu
rankd=$1 idl=$2 out=$3 script=${4:-test_python_client.py}
rm -rf "$out"
mkdir -p "$out"
thrift --gen py -out "$out" "$idl"
# Debian's python3-thrift is installed for /usr/bin/python3; a python3
# earlier on PATH (pyenv, a venv) may not see it.
exec /usr/bin/python3 "$(dirname "$0")/$script" "$rankd" "$out"
