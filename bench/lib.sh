# lib.sh -- helpers shared by the bench scripts (sourced, bash).

# Ports free_port has handed out in this shell.
ports_drawn=" "
# Sets the variable named $1 to a free loopback port that this shell has
# not been handed before: ports drawn before their servers bind them are
# all free at each draw, and the kernel can hand out the same one twice.
free_port() { # variable
  local p
  while :; do
    p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    case "$ports_drawn" in
      *" $p "*) ;;
      *) break ;;
    esac
  done
  ports_drawn="$ports_drawn$p "
  printf -v "$1" '%s' "$p"
}

# A board's layout of request-id record hashes, from its meta hash: its
# size and the size it is leaving while records move (empty when none).
record_layout() { # redis-port board
  redis-cli -p "$1" HMGET "rk:{$2}:q" s o | paste -sd' '
}

# Waits until something listens on 127.0.0.1:port; fails if pid exits first
# or after 30 s.
wait_port() { # port pid
  for _ in $(seq 1 600); do
    if ! kill -0 "$2" 2>/dev/null; then return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05 # polling a condition, with a bound
  done
  return 1
}

# The machine, Redis and commit lines at the head of every result.
bench_meta() { # command-line
  echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "redis: $(redis-server --version | awk '{print $3}')"
  echo "command: $1"
  echo "rankd commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
}

# The settings every two-setup script shares, from the environment (see its
# header), and the cleanup of what it starts (pids): sets build, members,
# rounds, duration, warmup, conns, top_n, out, bench, rankd, work.
bench_setup() { # name
  build=${BUILD:-$root/build}
  members=${MEMBERS:-200000}
  rounds=${ROUNDS:-3}
  duration=${DURATION:-8}
  warmup=${WARMUP:-2}
  conns=${CONNECTIONS:-64}
  top_n=${TOP_N:-10}
  out=${OUT:-$here/results/$1-$(date -u +%Y%m%dT%H%M%SZ)}
  bench=$build/bench/rank-bench
  rankd=$build/rankd
  mkdir -p "$out"
  work=$(mktemp -d)
  pids=()
  trap 'stop_all; rm -rf "$work"' EXIT
}

stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

# A redis-server without persistence on port, in $work, stopped by stop_all
# (after bench_setup).
start_redis() { # port [extra args...]
  local port=$1
  shift
  mkdir -p "$work/redis-$port"
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$work/redis-$port" "$@" >"$work/redis-$port.log" 2>&1 &
  pids+=($!)
  wait_port "$port" "$!" || { echo "redis-server did not start" >&2; exit 1; }
}

# Certificates for a run over TLS (tests/certs.py): a CA, rankd's for
# 127.0.0.1 and localhost, and a client's named "bench", in dir. Sets
# rankd_tls (rankd's options for them, after --tls-listen ADDR) and
# bench_tls (rank-bench's).
make_tls_certs() { # dir
  python3 "$root/tests/certs.py" "$1" bench >/dev/null
  rankd_tls=(--tls-cert "$1/server.pem" --tls-key "$1/server.key"
    --tls-ca "$1/ca.pem")
  bench_tls=(--tls-ca "$1/ca.pem" --tls-cert "$1/client-bench.pem"
    --tls-key "$1/client-bench.key")
}

# $rankd on port against the Redis on redis-port, its log in
# $work/rankd.log, stopped by stop_all (after bench_setup); its pid in
# rankd_pid.
start_rankd() { # port redis-port [extra args...]
  local port=$1 redis=$2
  shift 2
  "$rankd" --listen "127.0.0.1:$port" --redis "127.0.0.1:$redis" "$@" \
    >"$work/rankd.log" 2>&1 &
  rankd_pid=$!
  pids+=("$rankd_pid")
  wait_port "$port" "$rankd_pid" || { echo "rankd did not start" >&2; exit 1; }
}
