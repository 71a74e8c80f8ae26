#!/usr/bin/env bash
# What a translation unit that uses dlq costs to compile, against one that includes
# nlohmann/json alone (the floor), header-only and in compiled mode (CMake DLQ_COMPILED=ON,
# whose targets define DLQ_COMPILED_LIB / DLQ_COMPILED_REDIS / DLQ_COMPILED_SQLITE; the
# script passes the same definitions). The translation units are the files in
# tests/benchmarks/compile_time/. One run compiles each of them in each mode ROUNDS times,
# interleaved (round 1: every unit once, round 2: every unit again, …), and prints medians:
# wall time, CPU time (user + sys: steadier than wall on a shared machine), peak memory
# (/usr/bin/time), the ratios against the floor compiled with the same -O level in the same
# run, and how many DeadLetterQueue member functions the object file defines (in compiled
# mode only the implicit destructors: the front end was compiled once, in the library), and
# the object file's text (`size`: unlike the times, it does not depend on the machine's load).
# Two more rows show what header-only mode can reach: the Redis unit at -O0, and at "-fsy"
# (-fsyntax-only, against the floor's -fsyntax-only: preprocessing, parsing and template
# instantiation, no code generated). A header-only unit generates every function it reaches;
# what -O2 adds to the -fsy row is that code's optimisation and generation (docs/benchmarks.md,
# "What header-only mode can reach").
#
#   tests/benchmarks/compile_time.sh [ROUNDS]        (default 3; CXX=clang++ to change compiler)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src="$root/tests/benchmarks/compile_time"
cxx=${CXX:-g++}
rounds=${1:-3}
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "compile_time.sh: ROUNDS must be a positive number (got '$rounds')" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "compile_time.sh: /usr/bin/time is missing; install the 'time' package" >&2
  exit 2
fi

hiredis_flags=$(pkg-config --cflags hiredis 2>/dev/null || true)
compiled=(-DDLQ_COMPILED_LIB=1 -DDLQ_COMPILED_REDIS=1 -DDLQ_COMPILED_SQLITE=1)
# unit|opt|modes
units=(
  "floor|-O2|-"
  "floor|-O0|-"
  "floor|-fsy|-"
  "memory_send_replay|-O2|header-only compiled"
  "memory_send_replay|-O0|header-only compiled"
  "redis_construct|-O2|header-only compiled"
  "redis_send_replay|-O2|header-only compiled"
  "redis_send_replay|-O0|header-only compiled"
  "redis_send_replay|-fsy|header-only compiled"
  "kv_memory_send_replay|-O2|header-only compiled"
  "kv_sqlite_send_replay|-O2|header-only compiled"
  "kv_redis_send_replay|-O2|header-only compiled"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results="$work/results"
: >"$results"
for ((round = 1; round <= rounds; round++)); do
  echo "compile_time.sh: round $round of $rounds" >&2
  for spec in "${units[@]}"; do
    IFS='|' read -r unit opt modes <<<"$spec"
    for mode in $modes; do
      defs=()
      [ "$mode" = compiled ] && defs=("${compiled[@]}")
      obj="$work/$unit.o"
      rm -f "$obj"
      flags=("$opt" -c -o "$obj")
      [ "$opt" = -fsy ] && flags=(-fsyntax-only)
      # shellcheck disable=SC2086  # hiredis_flags is a list of flags
      if ! /usr/bin/time -o "$work/time" -f "%e %U %S %M" \
           "$cxx" -std=c++17 "${flags[@]}" -I"$root/include" $hiredis_flags \
           ${defs[@]+"${defs[@]}"} "$src/$unit.cpp" 2>"$work/err"; then
        echo "compile_time.sh: $unit ($mode, $opt) does not compile:" >&2
        cat "$work/err" >&2
        exit 1
      fi
      fns=0
      [ -f "$obj" ] && fns=$(nm -C --defined-only "$obj" |
              awk '$2 != "n" { sub(/^[0-9a-f]+ . /, ""); if (index($0, "dlq::DeadLetterQueue<") == 1) n[$0] = 1 }
                   END { print length(n) }')
      text=0
      [ -f "$obj" ] && text=$(size "$obj" | awk 'NR == 2 { print $1 }')
      echo "$unit $mode $opt $(tail -1 "$work/time") $fns $text" >>"$results"
    done
  done
done

python3 - "$results" "$rounds" "$("$cxx" --version | head -1)" <<'PY'
import statistics, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    unit, mode, opt, wall, user, sys_, rss, fns, text = line.split()
    key = (unit, mode, opt)
    if key not in rows:
        rows[key] = []
        order.append(key)
    rows[key].append((float(wall), float(user) + float(sys_), int(rss) / 1024, int(fns),
                      int(text) / 1024))
med = {k: [statistics.median(x[i] for x in v) for i in range(5)] for k, v in rows.items()}
names = {
    "floor": "nlohmann/json.hpp + empty main (floor)",
    "memory_send_replay": "DLQ<MemoryStorage>: send + replay_all",
    "redis_construct": "DLQ<RedisListStorage>: construct only",
    "redis_send_replay": "DLQ<RedisListStorage>: send + replay_all",
    "kv_memory_send_replay": "DLQ<KeyValueStorage<MemoryStore>>: send + replay",
    "kv_sqlite_send_replay": "DLQ<KeyValueStorage<SqliteStore>>: send + replay",
    "kv_redis_send_replay": "DLQ<KeyValueStorage<RedisStore>>: send + replay",
}
print(f"compile time per translation unit: {sys.argv[3]}, -std=c++17, -c; "
      f"medians of {sys.argv[2]} interleaved rounds")
print(f"{'translation unit':<50} {'mode':<11} {'opt':<4} {'wall s':>7} {'cpu s':>6} "
      f"{'peak MB':>8} {'x floor cpu':>11} {'x floor wall':>12} {'DLQ fns':>7} {'text KB':>7}")
for key in order:
    unit, mode, opt = key
    wall, cpu, mb, fns, text = med[key]
    fwall, fcpu = med[("floor", "-", opt)][:2]
    print(f"{names[unit]:<50} {mode:<11} {opt:<4} {wall:7.2f} {cpu:6.2f} {mb:8.0f} "
          f"{cpu / fcpu:11.2f} {wall / fwall:12.2f} {int(fns):7d} {text:7.0f}")
PY
