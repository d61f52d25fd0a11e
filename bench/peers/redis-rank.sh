#!/bin/sh
# redis-rank.sh -- runs the redis-rank benchmark peer (redis-rank.mjs, see its
# header for the options), from any directory. On first use it installs the
# pinned npm packages into bench/peers/node_modules: `npm ci` from
# package-lock.json (or `npm install` if there is no lock). npm's output goes
# to stderr, so that stdout carries only the benchmark's report.
#
#   sh bench/peers/redis-rank.sh --redis 127.0.0.1:6379 --members 100000 --preload
#   sh bench/peers/redis-rank.sh --redis 127.0.0.1:6379 --members 100000 --op rank --json
set -eu
cd -- "$(dirname -- "$0")"
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "redis-rank.sh: $tool not found (Node.js 18 or newer is needed)" >&2
    exit 1
  }
done
if [ ! -d node_modules/redis-rank ]; then
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --silent >&2 ||
      { echo "redis-rank.sh: npm ci failed in $(pwd)" >&2; exit 1; }
  else
    npm install --no-audit --no-fund --silent >&2 ||
      { echo "redis-rank.sh: npm install failed in $(pwd)" >&2; exit 1; }
  fi
fi
exec node redis-rank.mjs "$@"
