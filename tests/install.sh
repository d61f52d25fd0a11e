#!/bin/sh
# cmake --install puts every file where the README says, and what it
# installed runs: rankd starts on the sample config (as shipped, and with its
# commented examples switched on), rankctl reaches it, and the systemd unit
# names the installed rankd and config. systemd itself is not run.
# Usage: install.sh BUILD_DIR
#
# Two installs: --prefix /usr staged under DESTDIR (the layout of a system
# install: config in /etc; the unit must not name the staging root), and
# --prefix DIR (everything under DIR; the unit must follow the prefix given
# at install time).
set -eu
build=$1
source_dir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
rankd_pid=""
cleanup() {
  [ -z "$rankd_pid" ] || kill "$rankd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "install.sh: $*" >&2; exit 1; }

# The build's sysconfdir: "etc" unless configured otherwise.
sysconfdir=$(sed -n 's/^CMAKE_INSTALL_SYSCONFDIR:PATH=//p' "$build/CMakeCache.txt")

# check ROOT PREFIX CONFIG: the files installed under ROOT (a DESTDIR, or
# empty) for PREFIX, the config at CONFIG, and the unit naming them.
check() {
  root=$1 prefix=$2 config=$3
  bin=$root$prefix/bin
  unit=$root$prefix/lib/systemd/system/rankd.service
  for f in "$bin/rankd" "$bin/rankctl" "$root$prefix/share/rankd/ranking.thrift" \
           "$root$config" "$unit" "$root$prefix/share/doc/rankd/README.md"; do
    [ -f "$f" ] || fail "not installed: $f"
  done
  for f in "$bin/rankd" "$bin/rankctl"; do
    [ -x "$f" ] || fail "not executable: $f"
  done
  cmp "$root$prefix/share/rankd/ranking.thrift" "$source_dir/idl/ranking.thrift"
  cmp "$root$config" "$source_dir/packaging/rankd.conf"
  cmp "$root$prefix/share/doc/rankd/README.md" "$source_dir/README.md"
  # The pages README.md links to, at the same relative paths.
  for page in $(cd "$source_dir" && find docs -type f -name '*.md'); do
    cmp "$root$prefix/share/doc/rankd/$page" "$source_dir/$page" ||
      fail "not installed as in the source: $page"
  done
  # The unit: the installed paths, reload by SIGHUP, a user of its own,
  # hardening; nothing left unfilled, no staging root.
  for line in \
      "ExecStart=$prefix/bin/rankd --config $config --data-dir /var/lib/rankd" \
      'ExecReload=/bin/kill -HUP $MAINPID' \
      "EnvironmentFile=-${config%.conf}.env" \
      "Documentation=file://$prefix/share/doc/rankd/README.md" \
      Restart=on-failure DynamicUser=yes StateDirectory=rankd \
      NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
      WantedBy=multi-user.target; do
    grep -qxF -- "$line" "$unit" || { cat "$unit" >&2; fail "$unit lacks: $line"; }
  done
  if grep -q '@[A-Z_]*@' "$unit" || { [ -n "$root" ] && grep -qF "$root" "$unit"; }; then
    fail "$unit: an unfilled @VAR@ or the staging root"
  fi
  "$bin/rankd" --help | grep -q -- "--config" || fail "installed rankd --help"
  "$bin/rankctl" --help | grep -q "Examples:" || fail "installed rankctl --help"
  [ "$("$bin/rankctl" --version)" = "rankctl $("$bin/rankd" --version | sed 's/^rankd //')" ] \
    || fail "rankctl and rankd versions differ"
}

# serve BIN N CONFIG: starts BIN/rankd on CONFIG (with its embedded Redis in
# $tmp/data-N), waits until BIN/rankctl gets an answer, makes one update and
# stops it. rankd exits at once (status 2) on a config it does not accept.
serve() {
  bin=$1 n=$2
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin/rankd" --listen "127.0.0.1:$port" --config "$3" \
    --data-dir "$tmp/data-$n" >"$tmp/rankd-$n.log" 2>&1 &
  rankd_pid=$!
  i=0
  until "$bin/rankctl" --connect "127.0.0.1:$port" count board >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 300 ] || ! kill -0 "$rankd_pid" 2>/dev/null; then
      cat "$tmp/rankd-$n.log" >&2
      fail "installed rankd did not serve with $3"
    fi
    sleep 0.1 # polling a condition, with a bound
  done
  RANKCTL_CONNECT="127.0.0.1:$port" "$bin/rankctl" update board ann 7 \
    --request-id "install-$n" >/dev/null
  [ "$("$bin/rankctl" --connect "127.0.0.1:$port" count board)" = 1 ] \
    || fail "count after one update"
  kill -TERM "$rankd_pid"
  wait "$rankd_pid" || fail "rankd exited with status $? on SIGTERM"
  rankd_pid=""
}

# 1. A system install, staged.
stage=$tmp/root
DESTDIR=$stage cmake --install "$build" --prefix /usr >"$tmp/install-1.log"
case "$sysconfdir" in
  /*) config=$sysconfdir/rankd/rankd.conf ;;
  *) config=/etc/rankd/rankd.conf ;;
esac
check "$stage" /usr "$config"
# Those files and no others.
extra=$(cd "$stage" && find . -type f | sed 's/^\.//' | grep -v \
  -e '^/usr/bin/rankd$' -e '^/usr/bin/rankctl$' \
  -e '^/usr/share/rankd/ranking.thrift$' -e "^$config\$" \
  -e '^/usr/lib/systemd/system/rankd.service$' \
  -e '^/usr/share/doc/rankd/README.md$' \
  -e '^/usr/share/doc/rankd/docs/.*\.md$' || true)
[ -z "$extra" ] || fail "installed more than expected: $extra"
serve "$stage/usr/bin" 1 "$stage$config"
# The unit's syntax, where systemd-analyze is installed (it needs no running
# systemd); ExecStart must name an existing file, so the staged one.
if command -v systemd-analyze >/dev/null 2>&1; then
  sed "s|^ExecStart=/usr/bin/rankd|ExecStart=$stage/usr/bin/rankd|" \
    "$stage/usr/lib/systemd/system/rankd.service" >"$tmp/rankd.service"
  # It only warns about unknown keys: any word on the unit is a failure.
  systemd-analyze verify --man=no "$tmp/rankd.service" >"$tmp/verify.log" 2>&1 \
    || { cat "$tmp/verify.log" >&2; fail "systemd-analyze verify rejects the unit"; }
  ! grep -F "rankd.service" "$tmp/verify.log" >&2 \
    || fail "systemd-analyze verify warns about the unit"
fi

# The commented examples, switched on (all but the [redis] section, which
# names a Redis that is not there), must be valid too.
awk '/^# \[redis\]/ { stop = 1 }
     !stop && /^# (\[board |[a-z_]+=)/ { sub(/^# /, "") }
     { print }' "$stage$config" >"$tmp/examples.conf"
grep -q '^\[board daily_run_hero\]' "$tmp/examples.conf" || fail "examples not switched on"
serve "$stage/usr/bin" 2 "$tmp/examples.conf"

# 2. Under a prefix of its own (unless the build put the config at an
# absolute path, outside any prefix).
case "$sysconfdir" in
  /*) echo "install.sh: sysconfdir $sysconfdir is absolute: --prefix DIR install skipped" ;;
  *)
    prefix=$tmp/prefix
    cmake --install "$build" --prefix "$prefix" >"$tmp/install-2.log"
    check "" "$prefix" "$prefix/$sysconfdir/rankd/rankd.conf"
    serve "$prefix/bin" 3 "$prefix/$sysconfdir/rankd/rankd.conf"
    ;;
esac
echo "install.sh: installed and ran"
