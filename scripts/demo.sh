#!/usr/bin/env bash
# dlq's demo (the README's first command). On a fresh Debian 12 machine it installs what is
# missing, builds, and tells the whole story on the embedded SQLite store (no server needed):
# workers process a few thousand orders, the poison ones are dead-lettered after their
# retries, the operator looks at them grouped by error, the fix is deployed, replay brings
# them back, and every order ends processed — checked, with a short report.
#
#   scripts/demo.sh                              SQLite, in a fresh temporary directory
#   scripts/demo.sh --store redis://127.0.0.1:6379/0    the same story on Redis (any Redis URL:
#                                                rediss://…?ca_file=… for TLS, unix://…)
#   scripts/demo.sh --store postgres://user@127.0.0.1/db   on PostgreSQL: a server you run
#                                                (docs/postgres.md); the demo runs dlqctl migrate
#   scripts/demo.sh --jobs 10000                 more orders
#   scripts/demo.sh --no-install --build-dir DIR use binaries already built in DIR (as ctest
#                                                does); nothing is installed or built
#
# On Redis and PostgreSQL it uses its own queue name (dlq-demo-<pid>) and deletes its entries
# at the end.
# Exit status: 0 when every order was processed exactly as the story says, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

store=""
jobs=3000
install=1
build_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --store) store=${2:?--store needs a URL}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --no-install) install=0; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (see scripts/demo.sh --help)" >&2; exit 1 ;;
  esac
done
case "$jobs" in ''|*[!0-9]*) echo "demo.sh: --jobs takes a number" >&2; exit 1 ;; esac

# --- 0. what the demo needs -----------------------------------------------------------------
if [ "$install" = 1 ]; then
  packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libsqlite3-dev libcli11-dev
            libhiredis-dev)
  case "$store" in postgres://*|postgresql://*) packages+=(libpq-dev) ;; esac
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "demo.sh: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
fi
if [ -z "$build_dir" ]; then
  build_dir="$root/build-demo"
  # Only the two programs the demo runs, without optimisation: the story waits on SQLite's
  # fsyncs and the workers' backoff, not on the CPU, and -O0 compiles in 40% of the time of
  # -O3 (measurements: docs/demo.md).
  [ -x "$build_dir/examples/dlqctl/dlqctl" ] ||
    echo "demo.sh: building dlqctl and the worker in $build_dir (first run only: ~15 s on" \
         "2 idle cores, 1-2 minutes on a busy machine; then the story takes ~30 s)"
  mkdir -p "$build_dir"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE= -DDLQ_BUILD_TESTS=OFF \
        -DDLQ_BUILD_BENCHMARKS=OFF -DDLQ_BUILD_EXAMPLES=ON >"$build_dir/demo-configure.log" 2>&1 ||
    { cat "$build_dir/demo-configure.log"; exit 1; }
  cmake --build "$build_dir" --target dlqctl example_05_worker -j"$(nproc 2>/dev/null || echo 2)" \
    >"$build_dir/demo-build.log" 2>&1 || { tail -50 "$build_dir/demo-build.log"; exit 1; }
fi
dlqctl="$build_dir/examples/dlqctl/dlqctl"
worker="$build_dir/examples/example_05_worker"
for b in "$dlqctl" "$worker"; do
  [ -x "$b" ] || { echo "demo.sh: $b is missing; build it (or drop --build-dir)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/dlq-demo.XXXXXX")
queue=orders
if [ -z "$store" ]; then
  store="sqlite://$work/demo.db"
else
  queue="dlq-demo-$$"
fi
export DLQ_STORE="$store"
cleanup() {
  local rc=$?
  if [ "${store#sqlite}" = "$store" ]; then  # Redis: remove the demo's keys
    "$dlqctl" purge "$queue" --yes >/dev/null 2>&1 || true
    "$dlqctl" purge "$queue" --corrupt --yes >/dev/null 2>&1 || true
    [ -n "${drain_worker:-}" ] && "$worker" --store "$store" --queue "$queue" --worker drain \
      --fixed --idle-exit-ms 200 >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

bold=""; off=""
if [ -t 1 ]; then bold=$(printf '\033[1m'); off=$(printf '\033[0m'); fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
say_command() { printf '$ %s\n' "$*" | sed "s#$dlqctl#dlqctl#; s#$worker#worker#"; }
show() { say_command "$@"; "$@"; }
# Shows a command and its report (stderr); its stdout, a number for scripts, goes to
# $work/stdout for the checks.
report() { say_command "$@"; "$@" 2>&1 >"$work/stdout"; }
indent() { sed 's/^/   /'; }
number() {  # the number in the first match of pattern $1 on stdin; 0 when none
  local n
  n=$(grep -Eo "$1" | grep -Eo '[0-9]+' | head -1 || true)
  echo "${n:-0}"
}

# The rule of dlq::redact_url (include/dlq/redact.hpp): the user-info up to the last '@'
# before the query, and every password= value.
redacted_store=$(sed -E 's#^([A-Za-z][A-Za-z0-9+.-]*://)[^/?][^?]*@#\1***@#; s#(password=)[^&]*#\1***#g' <<<"$store")
printf '%sdlq demo%s: %d orders, store %s, queue %s\n' "$bold" "$off" "$jobs" "$redacted_store" "$queue"

case "$store" in
  postgres://*|postgresql://*)  # the tables are made explicitly, once per database
    step "0. The dlq tables are created in the database (idempotent; a deployment step)"
    show "$dlqctl" migrate | indent ;;
esac

# --- 1. produce -------------------------------------------------------------------------------
step "1. A producer enqueues $jobs orders; about 5% are poison for the worker's current version"
"$worker" --store "$store" --queue "$queue" --produce "$jobs" | indent
drain_worker=1

# --- 2. work ----------------------------------------------------------------------------------
step "2. Two workers (handler v1) process them: 3 attempts with backoff, then send_to_dlq"
"$worker" --store "$store" --queue "$queue" --worker billing-1 --done "$work/done" \
  >"$work/w1.log" 2>&1 &
w1=$!
"$worker" --store "$store" --queue "$queue" --worker billing-2 --done "$work/done" \
  >"$work/w2.log" 2>&1 &
w2=$!
wait $w1 || { cat "$work/w1.log"; exit 1; }
wait $w2 || { cat "$work/w2.log"; exit 1; }
indent <"$work/w1.log"
indent <"$work/w2.log"
processed_v1=$(( $(number '[0-9]+ processed' <"$work/w1.log") + $(number '[0-9]+ processed' <"$work/w2.log") ))
retried=$(( $(number '[0-9]+ after a retry' <"$work/w1.log") + $(number '[0-9]+ after a retry' <"$work/w2.log") ))

# --- 3. look ----------------------------------------------------------------------------------
step "3. The operator looks at the dead letters, grouped by error"
if [ "${store#sqlite}" != "$store" ]; then
  show "$dlqctl" queues | indent  # (on a shared Redis this lists every queue: skipped there)
else
  show "$dlqctl" count "$queue" | indent
fi
show "$dlqctl" errors "$queue" | tee "$work/errors.txt" | indent
dead=$("$dlqctl" count "$queue")
groups=$(number '[0-9]+ groups' <"$work/errors.txt")
first=$("$dlqctl" peek "$queue" --count 1 --json | sed -E 's/.*"id":"([^"]*)".*/\1/')
show "$dlqctl" show "$queue" "$first" | indent

# --- 4. fix and replay ------------------------------------------------------------------------
step "4. The fix is deployed (handler v2); replay brings the dead letters back"
report "$dlqctl" replay "$queue" --all --dry-run | indent
report "$dlqctl" replay "$queue" --all | indent
replayed=$(cat "$work/stdout")
"$worker" --store "$store" --queue "$queue" --worker billing-1 --fixed --done "$work/done" \
  >"$work/w3.log" 2>&1 || { cat "$work/w3.log"; exit 1; }
indent <"$work/w3.log"
processed_v2=$(number '[0-9]+ processed' <"$work/w3.log")
left=$("$dlqctl" count "$queue" 2>/dev/null)  # its note on stderr: "no dead letters in …"
distinct=$(sort -u "$work/done" | wc -l)
total_lines=$(wc -l <"$work/done")

# --- 5. report --------------------------------------------------------------------------------
step "5. Report"
ok=1
check() {  # check LABEL VALUE EXPECTED
  local mark="ok"
  if [ "$2" != "$3" ]; then mark="EXPECTED $3"; ok=0; fi
  printf '   %-44s %8s   %s\n' "$1" "$2" "$mark"
}
printf '   %-44s %8s\n' "orders produced" "$jobs"
printf '   %-44s %8s\n' "processed by v1 (after a transient retry)" "$processed_v1 ($retried)"
check "dead-lettered after 3 attempts" "$dead" "$((jobs - processed_v1))"
printf '   %-44s %8s\n' "distinct errors" "${groups:-?}"
check "replayed after the fix" "$replayed" "$dead"
check "processed by v2" "$processed_v2" "$replayed"
check "distinct orders processed" "$distinct" "$jobs"
check "orders processed twice" "$((total_lines - distinct))" "0"
check "dead letters left" "$left" "0"
if [ "$ok" = 1 ]; then
  printf '\n%sEvery order was processed; nothing was lost.%s\n' "$bold" "$off"
  exit 0
fi
printf '\n%sdemo.sh: the story did not end as it should (see above).%s\n' "$bold" "$off" >&2
exit 1
