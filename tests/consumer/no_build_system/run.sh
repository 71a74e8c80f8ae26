#!/usr/bin/env bash
# Compiled mode without CMake (Meson, Bazel, a Makefile: README "Compiled mode without
# CMake"): compile src/memory.cpp and src/redis.cpp once with DLQ_COMPILED_LIB=1 and
# DLQ_COMPILED_REDIS=1, compile the consumer's own unit with the same definitions, link, run.
# The consumer's object file must define no DeadLetterQueue member but the implicit
# destructor (the members are in the library's objects); the same unit compiled header-only
# must define many (so the check can fail).
#
#   run.sh CXX DLQ_SOURCE_DIR WORK_DIR
set -euo pipefail
cxx=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
defs=(-DDLQ_COMPILED_LIB=1 -DDLQ_COMPILED_REDIS=1)
read -r -a hiredis_cflags <<<"$(pkg-config --cflags hiredis)"
read -r -a hiredis_libs <<<"$(pkg-config --libs hiredis)"
flags=(-std=c++17 -Wall -Wextra -Werror -I"$src/include" ${hiredis_cflags[@]+"${hiredis_cflags[@]}"})
main="$src/tests/consumer/find_package/main.cpp"

"$cxx" "${flags[@]}" "${defs[@]}" -c "$src/src/memory.cpp" -o "$work/memory.o"
"$cxx" "${flags[@]}" "${defs[@]}" -c "$src/src/redis.cpp" -o "$work/redis.o"
"$cxx" "${flags[@]}" "${defs[@]}" -DCONSUMER_WITH_REDIS -c "$main" -o "$work/main.o"
"$cxx" "$work/main.o" "$work/memory.o" "$work/redis.o" ${hiredis_libs[@]+"${hiredis_libs[@]}"} \
  -pthread -o "$work/consumer"
out=$("$work/consumer")
echo "$out"
grep -q "replayed 1, got" <<<"$out" || { echo "no_build_system: the memory queue did not replay" >&2; exit 1; }
grep -q "redis backend linked" <<<"$out" || { echo "no_build_system: no Redis backend" >&2; exit 1; }

members() {  # DeadLetterQueue members (not the destructor) that an object file defines
  nm -C --defined-only "$1" |
    awk '$2 != "n" { sub(/^[0-9a-f]+ . /, ""); if (index($0, "dlq::DeadLetterQueue<") == 1 && index($0, "::~DeadLetterQueue") == 0) n[$0] = 1 }
         END { print length(n) }'
}
compiled=$(members "$work/main.o")
"$cxx" "${flags[@]}" -DCONSUMER_WITH_REDIS -c "$main" -o "$work/main-header-only.o"
header_only=$(members "$work/main-header-only.o")
echo "DeadLetterQueue members defined by the consumer's unit: compiled $compiled, header-only $header_only"
if [ "$compiled" -ne 0 ]; then
  echo "no_build_system: in compiled mode the consumer's unit still defines $compiled members:" >&2
  nm -C --defined-only "$work/main.o" | grep 'dlq::DeadLetterQueue<' | grep -v '~DeadLetterQueue' >&2
  exit 1
fi
if [ "$header_only" -lt 5 ]; then
  echo "no_build_system: the header-only unit defines only $header_only members; the check proves nothing" >&2
  exit 1
fi
