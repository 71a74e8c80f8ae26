#!/usr/bin/env bash
# Instructions per entry (callgrind) of the memory backend, blocking and asynchronous
# (bench_instructions.cpp), built with g++ -O3 -DNDEBUG against this tree's headers and,
# when OTHER_TREE is given, against that tree's too (e.g. a `git worktree` of an older
# commit): the two are then run alternated, A = OTHER_TREE, B = this tree, and their ratio
# B/A printed. Instruction counts do not move with the machine's load.
#   tests/benchmarks/run_instructions.sh [OTHER_TREE] [N=20000] [PAIRS=3]
# Needs valgrind and Asio's headers (the library is header-only: no build directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
other=${1:-}
n=${2:-20000}
pairs=${3:-3}
dir=$(mktemp -d /tmp/dlq-instructions-XXXXXX)
trap 'rm -rf "$dir"' EXIT
build() {  # tree -> binary
  g++ -std=c++17 -O3 -DNDEBUG -Wall -Wextra -Werror -I"$1/include" \
    "$root/tests/benchmarks/bench_instructions.cpp" -o "$2" -pthread
}
build "$root" "$dir/B" &
[ -n "$other" ] && build "$other" "$dir/A" &
wait
count() {  # binary what -> instructions per entry inside measure_*
  valgrind --tool=callgrind --toggle-collect='measure_*' --callgrind-out-file=/dev/null \
    "$1" "$2" "$n" 2>&1 | awk -v n="$n" '/Collected/ {gsub(",", "", $4); printf "%.0f\n", $4 / n}'
}
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-14s %12s" "per entry" "this tree"
[ -n "$other" ] && printf " %12s %7s" "OTHER_TREE" "B/A"
printf "   (median of %s runs, n=%s)\n" "$pairs" "$n"
for w in send batch replay async_send1 async_send64 async_batch; do
  : >"$dir/a"; : >"$dir/b"
  for _ in $(seq "$pairs"); do
    [ -n "$other" ] && count "$dir/A" "$w" >>"$dir/a"
    count "$dir/B" "$w" >>"$dir/b"
  done
  b=$(med <"$dir/b")
  printf "%-14s %12s" "$w" "$b"
  if [ -n "$other" ]; then
    a=$(med <"$dir/a")
    printf " %12s %7s" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')"
  fi
  printf "\n"
done
