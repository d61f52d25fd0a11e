#!/bin/bash
# growth.sh -- what a board whose request-id records grow costs Redis, step
# by step: the layout of record hashes doubles as the records pass 48 a
# hash, and every record is moved then (README.md, "Request-id records").
#
# Starts a redis-server and rankd on free loopback ports, gives MEMBERS
# members a score, then sends STEPS steps of STEP pipelined Updates (4
# clients x 16 in flight, each with a request id of its own; step i uses
# seed i, so two builds get the same updates) and prints, for each step,
# the updates, Redis CPU µs per update and the board's layout before and
# after (size, and the size being left while records move); then the sum
# over all steps. The steps that cross a doubling are the cost of growth;
# the others are an update on a layout that holds. Run two builds one
# after the other (RANKD=...) and compare the sums: the same updates, the
# same doublings.
#
# Usage: bench/growth.sh          (after building into build/)
# Environment: BUILD=build RANKD=$BUILD/rankd MEMBERS=200000 STEPS=32
#              STEP=100000 STEP_SECONDS=0 (else each step runs that many
#              seconds instead of STEP updates) OUT=bench/results/growth-<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
bench_setup growth
rankd=${RANKD:-$rankd}
steps=${STEPS:-32}
step=${STEP:-100000}
step_seconds=${STEP_SECONDS:-0}
if [ "$step_seconds" -gt 0 ]; then
  length=(--duration "$step_seconds")
else
  length=(--requests "$step")
fi

free_port redis_port
start_redis "$redis_port"
redis_pid=${pids[-1]}
free_port port
start_rankd "$port" "$redis_port"

bench_meta "RANKD=$rankd MEMBERS=$members STEPS=$steps STEP=$step STEP_SECONDS=$step_seconds bench/growth.sh" |
  tee "$out/meta.txt"
"$bench" --port "$port" --members "$members" --preload-only -c 16 >/dev/null 2>&1
echo "| step | updates | Redis µs/update | layout before | layout after |" | tee "$out/steps.md"
echo "|---:|---:|---:|---|---|" | tee -a "$out/steps.md"
for i in $(seq 1 "$steps"); do
  before=$(record_layout "$redis_port" bench-0)
  "$bench" --port "$port" --members "$members" --mix update=1 -c 4 \
    --pipeline 16 "${length[@]}" --warmup 0 --seed "$i" --json \
    --cpu "redis=$redis_pid" >"$out/step-$i.json"
  after=$(record_layout "$redis_port" bench-0)
  python3 - "$out/step-$i.json" "$i" "$before" "$after" <<'EOF' | tee -a "$out/steps.md"
import json, sys
d = json.load(open(sys.argv[1]))
n = d["ops"]["update"]["count"]
print(f"| {sys.argv[2]} | {n} | {d['cpu_us_per_op']['redis']:.2f} "
      f"| {sys.argv[3].strip()} | {sys.argv[4].strip()} |")
EOF
done
python3 - "$out" "$steps" <<'EOF' | tee "$out/summary.txt"
import json, sys
n = cpu = 0
for i in range(1, int(sys.argv[2]) + 1):
    d = json.load(open(f"{sys.argv[1]}/step-{i}.json"))
    c = d["ops"]["update"]["count"]
    n += c
    cpu += c * d["cpu_us_per_op"]["redis"]
print(f"all steps: {n} updates, Redis {cpu / 1e6:.1f} s, "
      f"{cpu / n:.2f} µs per update")
EOF
echo "results in $out"
