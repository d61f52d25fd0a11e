#!/bin/sh
# cmake --install puts every file where the README says, and what it
# installed runs: rankd starts on the sample config, rankctl reaches it, and
# the systemd unit names the installed rankd and config.
# Usage: install.sh BUILD_DIR
set -eu
build=$1
tmp=$(mktemp -d)
rankd_pid=""
cleanup() {
  [ -z "$rankd_pid" ] || kill "$rankd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
DESTDIR="$tmp/root" cmake --install "$build" >"$tmp/install.log"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
root="$tmp/root$prefix"
case "$prefix" in /usr) etc="$tmp/root/etc" ;; *) etc="$root/etc" ;; esac
for f in "$root/bin/rankd" "$root/bin/rankctl" \
         "$root/share/rankd/ranking.thrift" "$etc/rankd/rankd.conf" \
         "$root/lib/systemd/system/rankd.service" \
         "$root/share/doc/rankd/README.md"; do
  [ -f "$f" ] || { echo "not installed: $f" >&2; exit 1; }
done
[ -x "$root/bin/rankd" ] && [ -x "$root/bin/rankctl" ]
unit="$root/lib/systemd/system/rankd.service"
grep -qx "ExecStart=$prefix/bin/rankd --config ${etc#"$tmp/root"}/rankd/rankd.conf --data-dir /var/lib/rankd" "$unit" \
  || { echo "unexpected ExecStart in $unit:" >&2; grep ExecStart "$unit" >&2; exit 1; }
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$unit"
"$root/bin/rankd" --help | grep -q -- "--redis-cluster"
"$root/bin/rankctl" --help | grep -q "Examples:"
cmp "$root/share/rankd/ranking.thrift" "$(dirname "$0")/../idl/ranking.thrift"

# The installed rankd on the installed sample config, with its embedded
# Redis; the installed rankctl talks to it.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/bin/rankd" --listen "127.0.0.1:$port" --config "$etc/rankd/rankd.conf" \
  --data-dir "$tmp/data" >"$tmp/rankd.log" 2>&1 &
rankd_pid=$!
i=0
until "$root/bin/rankctl" --connect "127.0.0.1:$port" count board >/dev/null 2>&1; do
  i=$((i + 1))
  if [ $i -gt 300 ] || ! kill -0 "$rankd_pid" 2>/dev/null; then
    echo "installed rankd did not serve:" >&2; cat "$tmp/rankd.log" >&2; exit 1
  fi
  sleep 0.1 # polling a condition, with a bound
done
RANKCTL_CONNECT="127.0.0.1:$port" "$root/bin/rankctl" update board ann 7 \
  --request-id install-1 >/dev/null
[ "$("$root/bin/rankctl" --connect "127.0.0.1:$port" count board)" = 1 ]
kill -TERM "$rankd_pid"
wait "$rankd_pid"
rankd_pid=""
echo "installed and ran: $prefix"
