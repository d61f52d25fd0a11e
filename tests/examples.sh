#!/bin/sh
# The client examples (examples/python, examples/node) against a live
# rankd, each checked line by line against what its README shows.
# Usage: examples.sh RANKD
set -eu
rankd=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
rankd_pid=""
cleanup() {
  [ -z "$rankd_pid" ] || kill "$rankd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

printf '[board example_raid]\nsubscores=desc\n' >"$tmp/rankd.conf"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$rankd" --listen "127.0.0.1:$port" --config "$tmp/rankd.conf" \
  --data-dir "$tmp/data" >"$tmp/rankd.log" 2>&1 &
rankd_pid=$!
i=0
until python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 300 ] || ! kill -0 "$rankd_pid" 2>/dev/null; then
    echo "rankd did not start:" >&2; cat "$tmp/rankd.log" >&2; exit 1
  fi
  sleep 0.1 # polling a condition, with a bound
done

check() { # name expected-file actual-file
  if ! diff -u "$2" "$3"; then
    echo "$1: output differs from the expected (above)" >&2
    exit 1
  fi
  echo "$1: ok"
}

# Python, on Debian's python3-thrift.
mkdir "$tmp/gen-py"
thrift --gen py -out "$tmp/gen-py" "$root/idl/ranking.thrift"
PYTHONPATH="$tmp/gen-py" /usr/bin/python3 "$root/examples/python/leaderboard.py" \
  "127.0.0.1:$port" >"$tmp/python.out"
cat >"$tmp/python.want" <<'OUT'
update alice: score 120 rank 1
update bob: score 95 rank 2
update carol: score 130 rank 1
retry bob: applied False, score 95
#1 carol 130 Carol
#2 alice 120 Alice
#3 bob 95 Bob
around alice: carol alice bob
ranks: bob=3, nobody=-
nobody: member 'nobody' is not on board 'example_python'
OUT
check python "$tmp/python.want" "$tmp/python.out"

# Node, on the npm thrift package (installed from the lock file).
cp -r "$root/examples/node" "$tmp/node"
rm -rf "$tmp/node/node_modules" "$tmp/node/gen-nodejs"
(cd "$tmp/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && mkdir gen-nodejs \
  && thrift --gen js:node -out gen-nodejs "$root/idl/ranking.thrift")
(cd "$tmp/node" && node client.js "127.0.0.1:$port") >"$tmp/node.out"
cat >"$tmp/node.want" <<'OUT'
update alice: score 120 rank 1
update bob: score 95 rank 2
update carol: score 130 rank 1
retry bob: applied false, score 95
#1 carol 130 CAROL
#2 alice 120 ALICE
#3 bob 95 BOB
around alice: carol alice bob
nobody: member 'nobody' is not on board 'example_node'
max score: 9007199254740991 safe true
subscore: 9223372036854775807; toNumber(): Infinity; toNumber(true): 9223372036854776000
OUT
check node "$tmp/node.want" "$tmp/node.out"
kill -TERM "$rankd_pid"
wait "$rankd_pid"
rankd_pid=""
