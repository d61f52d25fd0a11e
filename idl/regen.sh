#!/bin/sh
# Regenerates gen-c_glib/ from idl/ranking.thrift: runs the Thrift compiler,
# then idl/postprocess.py, which repairs what thrift 0.17's c_glib generator
# gets wrong (see that file). Run it after every change to idl/ and commit
# both. With an argument, writes into that directory instead (the test that
# checks gen-c_glib/ is up to date uses this).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../gen-c_glib"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
thrift --gen c_glib -out "$tmp" "$here/ranking.thrift"
python3 "$here/postprocess.py" "$tmp"/*.c
mkdir -p "$out"
rm -f "$out"/*.c "$out"/*.h
cp "$tmp"/*.c "$tmp"/*.h "$out"/
