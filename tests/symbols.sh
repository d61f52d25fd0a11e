#!/bin/sh
# Which code each program links: rankd none of the client side (the
# blocking client, import/export, rankctl's own functions), rankctl none of
# the server side (server, HTTP, methods, read cache, store, Redis).
#
# The lists come from the libraries themselves, so a function added to one
# is covered without editing this file: every global symbol a library
# defines (nm --defined-only --extern-only), and the functions of rankctl's
# own objects (static ones too: the binaries are not stripped). A name
# prefix check on top catches what a library would export under a new file;
# the generated code of the IDL (GEN_LIB), which both programs link, is
# left out of it (rank_server_info_* is the ServerInfo struct's).
#
# rankctl's own functions leave out what its objects hold but did not write:
# GLib's header inlines and the compiler's constructors (emitted at -O0),
# and names that the libraries both programs link (SHARED_LIB: common,
# wire) or the server libraries also define, statics of the same name
# (address.c's fail).
#
# usage: symbols.sh RANKD RANKCTL RANKCTL_OBJECTS GEN_LIB CLIENT_LIB --
#                   SERVER_LIB... -- SHARED_LIB...
#   RANKCTL_OBJECTS: rankctl's object files, ';'-separated ($<TARGET_OBJECTS>)
set -eu

if [ $# -lt 7 ]; then
  echo "usage: $0 RANKD RANKCTL RANKCTL_OBJECTS GEN_LIB CLIENT_LIB --" \
    "SERVER_LIB..." >&2
  exit 2
fi
rankd=$1
rankctl=$2
ctl_objects=$3
gen_lib=$4
client_lib=$5
shift 5
if [ "$1" != "--" ]; then
  echo "$0: expected -- before the server libraries" >&2
  exit 2
fi
shift
server_libs=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  server_libs="$server_libs $1"
  shift
done
if [ $# -lt 2 ]; then
  echo "$0: expected -- before the libraries both programs link" >&2
  exit 2
fi
shift
shared_libs="$*"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Global symbols defined by the given files, one a line, sorted.
# gcc-nm reads the link-time-optimised objects of the optimised builds
# (plain nm sees no symbol in them); it reads plain objects the same.
nm=nm
command -v gcc-nm >/dev/null 2>&1 && nm=gcc-nm

globals() {
  "$nm" --defined-only --extern-only "$@" 2>/dev/null |
    awk 'NF == 3 { print $3 }' | sort -u
}

# Every function and object a program defines, global or local; the
# compiler's clones (foo.cold, foo.isra.0) count as foo.
defined() {
  "$nm" --defined-only "$1" | awk 'NF == 3 { sub(/\..*/, "", $3); print $3 }' |
    sort -u
}

# The client side: the client library's globals, and rankctl's own
# functions (all static but main, which every program has; static data
# names such as "header" recur in other files).
globals "$client_lib" > "$work/client"
old_ifs=$IFS
IFS=';'
for obj in $ctl_objects; do
  "$nm" --defined-only "$obj" | awk 'NF == 3 && $2 ~ /^[tT]$/ { print $3 }'
done | sed 's/\..*//' | grep -v '^main$' | grep -Ev '^(_|g_|glib_)' |
  sort -u > "$work/rankctl-objects"
IFS=$old_ifs
# shellcheck disable=SC2086 # the lists are words
for lib in $server_libs $shared_libs; do
  defined "$lib"
done | sort -u > "$work/libraries"
comm -23 "$work/rankctl-objects" "$work/libraries" > "$work/rankctl-own"
# The server side: the server libraries' globals.
# shellcheck disable=SC2086
globals $server_libs > "$work/server"
# The generated code's functions, out of the prefix check.
defined "$gen_lib" > "$work/generated"

status=0

# found WHAT PROGRAM LIST PREFIXES: the symbols of LIST, or with one of the
# (extended regular expression) PREFIXES, that PROGRAM defines.
found() {
  defined "$2" > "$work/program"
  {
    comm -12 "$work/program" "$3"
    grep -E "^($4)" "$work/program" | comm -23 - "$work/generated"
  } | sort -u > "$work/found"
  if [ -s "$work/found" ]; then
    echo "FAIL: $(basename "$2") defines $(wc -l < "$work/found") $1 symbols:"
    head -n 40 "$work/found" | sed 's/^/  /'
    status=1
  else
    echo "ok: $(basename "$2") defines no $1 symbol" \
      "($(wc -l < "$3") names checked, and the prefixes $4)"
  fi
}

for list in client rankctl-own server; do
  if [ ! -s "$work/$list" ]; then
    echo "FAIL: no $list symbols found: are the paths right?" >&2
    exit 1
  fi
done

found "client library" "$rankd" "$work/client" \
  'rank_client_|rank_transfer_'
found "rankctl" "$rankd" "$work/rankctl-own" 'rankctl_'
server_prefixes='rank_server_|rank_handler_|rank_http_|rank_store_|rank_backend_'
server_prefixes="$server_prefixes|rank_cache_|rank_read_cache_|rank_tracking_"
server_prefixes="$server_prefixes|rank_queue_|rank_redis_link_|rank_embedded_redis_"
found "server" "$rankctl" "$work/server" "$server_prefixes"

exit $status
