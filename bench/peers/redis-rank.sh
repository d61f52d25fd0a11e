#!/bin/sh
# Runs redis-rank.mjs, installing its npm packages (package-lock.json) into
# bench/peers/node_modules on first use.
set -eu
cd "$(dirname "$0")"
if [ ! -d node_modules/redis-rank ]; then
  npm ci --no-audit --no-fund --silent >&2
fi
exec node redis-rank.mjs "$@"
