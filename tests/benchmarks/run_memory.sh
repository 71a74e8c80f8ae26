#!/usr/bin/env bash
# Runs the memory-backend benchmark and prints medians (entries/s) and ratios against the
# baselines measured in the same process.
#   tests/benchmarks/run_memory.sh [BUILD_DIR]      (default: build-bench, configured Release)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-bench}
if [ ! -x "$build/tests/benchmarks/bench_memory" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLQ_BUILD_TESTS=OFF \
        -DDLQ_BUILD_EXAMPLES=OFF -DDLQ_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" --target bench_memory -j2 >/dev/null
fi
reps=${DLQ_BENCH_REPETITIONS:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/tests/benchmarks/bench_memory" --benchmark_repetitions="$reps" \
  --benchmark_report_aggregates_only=true --benchmark_format=json >"$out"
python3 - "$out" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
med = {b["run_name"]: b["items_per_second"] for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
def row(name, base=None):
    v = med[name]
    ratio = f"  {v / med[base]:.2f}x {base}" if base else ""
    print(f"{name:<26} {v / 1e6:8.2f} M entries/s{ratio}")
print(f"memory backend, 200-byte JSON payloads, median of {data['benchmarks'][0].get('repetitions', '?')} runs")
row("BM_Send", "BM_Baseline_NaiveSend")
row("BM_SendBatch100", "BM_Baseline_NaiveSend")
row("BM_Baseline_NaiveSend")
row("BM_Baseline_DequePush")
row("BM_ReplayAll", "BM_Baseline_NaiveReplay")
row("BM_Baseline_NaiveReplay")
PY
