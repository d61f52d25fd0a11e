#!/bin/sh
# Fails when gen-c_glib/ is not what idl/regen.sh produces from idl/:
# someone edited generated code by hand, or changed the IDL without
# regenerating.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/idl/regen.sh" "$tmp/gen"
if ! diff -ru "$root/gen-c_glib" "$tmp/gen"; then
  echo "gen-c_glib/ is stale: run idl/regen.sh and commit the result" >&2
  exit 1
fi
echo "gen-c_glib/ matches idl/ranking.thrift"
