#!/usr/bin/env bash
# dlq's test command (the README's). On a fresh Debian 12 machine, as root, it installs what
# is missing, then configures, builds and runs every test in three configurations:
#   gcc-17     g++,     C++17, warnings as errors, header-only, a Release build (-O3
#              -DNDEBUG: what a packager or a newcomer types; g++ warns about some code only
#              when it optimises, so the whole tree is compiled that way here), plus the header
#              self-containment objects, the CMake consumer tests (against a header-only and
#              a compiled install, and as a subproject both ways) and the console's browser
#              (headless Chromium) and Prometheus tests
#   clang-20   clang++, C++20, warnings as errors, AddressSanitizer + UndefinedBehaviorSanitizer,
#              compiled mode (-DDLQ_COMPILED=ON: the library targets hold the shipped
#              instantiations; the others are header-only), and the TLS tests against real
#              TLS redis-servers, the Redis Sentinel tests (master, replica, three
#              sentinels, failovers; label `sentinel`), the Redis Cluster failover tests
#              (three masters with a replica each; label `failover`) and the PostgreSQL
#              tests (a private server, tests/support/postgres.sh; label `postgres`) —
#              server-heavy: this configuration only, under the sanitizers
#   tsan       clang++, C++17, ThreadSanitizer, header-only: builds and runs only the tests in
#              which threads share one queue (the list below), so it stays a few minutes
# and, when named, gcc-20 (g++, C++20, ASan + UBSan, header-only). The budget: well under 45
# minutes on the 2-core machine. Each configuration's build runs while the tests of the one
# before run, at nice 19 (tsan, then clang-20, then gcc-17: the longest build overlaps the
# longest tests); still, building dominates (~7 s of CPU per test object at
# -O0); a fourth full configuration took it past an hour. So each configuration adds what
# the others lack: g++ and clang++, C++17 and C++20, header-only and compiled, ASan + UBSan
# and TSan. Header self-containment objects (154, ~260 CPU-s at -O3) are built in gcc-17
# only (DLQ_HEADER_TESTS): whether a header includes what it uses does not depend on the
# standard, and the C++20 configuration compiles every header through the tests. They and
# the benchmarks no test runs wait for no test, so they are built last, during gcc-17's
# tests at nice 19 (the CPU the tests leave idle), off the critical path
# (DLQ_COMPILE_CHECKS_LATER; docs/contributing.md, "How long CI takes").
# Tests that need Redis get a private redis-server on a free loopback port, started and
# stopped by ctest (tests/support/redis_server.sh); nothing needs a server started by hand.
#
#   scripts/test.sh            tsan, clang-20 and gcc-17
#   scripts/test.sh --quick    gcc-17 only
#   scripts/test.sh gcc-20 …   the named configurations
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config nlohmann-json3-dev catch2
          libhiredis-dev redis-server redis-tools libsqlite3-dev libcli11-dev libbenchmark-dev
          python3 python3-redis libcpp-httplib-dev chromium chromium-driver python3-selenium
          prometheus libasio-dev openssl libssl-dev postgresql-15 libpq-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packaged redis-server and postgresql-15 may start system instances; the tests never
# use them (each test run starts private servers on free loopback ports).
# The console's script (web/console.js) must pass ESLint: web/package.json and its lock pin
# it, `npm ci` installs it into web/node_modules (not committed; skipped while that install
# is newer than the lock), ~1 min the first time, a second after. Debian's nodejs and npm
# when the machine has no npm (a Node.js from elsewhere brings its own).
lint_failed=0
if ! command -v npm >/dev/null 2>&1; then
  echo "test.sh: installing nodejs npm"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
echo "=== eslint: web/console.js"
if ! { [ web/node_modules/.package-lock.json -nt web/package-lock.json ] ||
       (cd web && npm ci --no-audit --no-fund --loglevel=error); } ||
   ! (cd web && npm run --silent lint); then
  lint_failed=1
fi

# The shortest build first: each next build overlaps the tests before it (below).
configs=(tsan clang-20 gcc-17)
# Tests in which several threads share one queue or store: run again under ThreadSanitizer.
tsan_tests=(test_core test_contract_memory test_kv test_contract_kv test_kv_sqlite
            test_contract_kv_sqlite test_job_queue test_filtered_replay_concurrent_removal
            test_contract_redis test_redis_list test_redis_shared_sends test_source_queue_memory test_source_queue_redis
            test_source_queue_sqlite test_console test_console_hostile_requests
            test_console_slow_clients test_console_unread_answers_alone test_console_audit test_asio_memory test_asio_redis test_asio_resp test_asio_cancel
            test_asio_redis_edges test_asio_redis_faults test_asio_source_queue)
if [ "${1:-}" = "--quick" ]; then
  configs=(gcc-17)
elif [ $# -gt 0 ]; then
  configs=("$@")
fi

jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=$lint_failed
failed_configs=()
[ "$lint_failed" -eq 0 ] || failed_configs+=(eslint)
timings=()
mkdir -p "$root/build-test"

# configure_and_build CONFIG: configures build-test/CONFIG and builds what its tests need;
# the output goes to build-test/CONFIG.build.log. Returns the build's status.
configure_and_build() {
  local config=$1 cxx std build_type=Debug extra
  case "$config" in
    gcc-17)   cxx=g++;     std=17; build_type=Release; extra=(-DDLQ_COMPILE_CHECKS_LATER=ON -DDLQ_CONSUMER_TESTS=ON -DDLQ_BROWSER_TESTS=ON -DDLQ_TLS_TESTS=OFF -DDLQ_SENTINEL_TESTS=OFF -DDLQ_FAILOVER_TESTS=OFF -DDLQ_POSTGRES_TESTS=OFF) ;;
    clang-20) cxx=clang++; std=20; extra=(-DDLQ_SANITIZE=address,undefined -DDLQ_COMPILED=ON -DDLQ_CONSUMER_TESTS=OFF -DDLQ_BUILD_BENCHMARKS=OFF -DDLQ_HEADER_TESTS=OFF) ;;
    gcc-20)   cxx=g++;     std=20; extra=(-DDLQ_SANITIZE=address,undefined -DDLQ_SENTINEL_TESTS=OFF -DDLQ_FAILOVER_TESTS=OFF -DDLQ_POSTGRES_TESTS=OFF -DDLQ_CONSUMER_TESTS=OFF -DDLQ_BUILD_BENCHMARKS=OFF -DDLQ_HEADER_TESTS=OFF) ;;
    tsan)     cxx=clang++; std=17; extra=(-DDLQ_SANITIZE=thread -DDLQ_CONSUMER_TESTS=OFF -DDLQ_BUILD_BENCHMARKS=OFF) ;;
  esac
  local build="$root/build-test/$config"
  echo "=== $config: $cxx, C++$std ${extra[*]}"
  # -g1 (line tables only): failures still point at file:line, and the debug info no test
  # reads stops costing ~13 % of every compile (the build is most of this script's time).
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
        -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_CXX_STANDARD="$std" -DCMAKE_CXX_STANDARD_REQUIRED=ON -DCMAKE_CXX_EXTENSIONS=OFF \
        -DDLQ_BUILD_TESTS=ON -DDLQ_BUILD_EXAMPLES=ON "${extra[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; return 1; }
  if [ "$config" = tsan ]; then
    cmake --build "$build" -j"$jobs" --target "${tsan_tests[@]}"
  else
    cmake --build "$build" -j"$jobs"
  fi
}

# run_tests CONFIG: runs the configuration's tests and adds them up.
run_tests() {
  local config=$1 build="$root/build-test/$1" select=() rc summary total nfail
  [ "$config" != tsan ] || select=(-R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$")
  local log="$build.ctest.log"
  echo "=== $config: tests"
  set +e
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
     ctest -j"$jobs" --output-on-failure --timeout 600 "${select[@]}") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  summary=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -1)
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
  nfail=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  passed=$((passed + ${total:-0} - ${nfail:-0}))
  failed=$((failed + ${nfail:-0}))
  if [ "$rc" -ne 0 ]; then
    failed_configs+=("$config")
    [ -n "$nfail" ] && [ "$nfail" -gt 0 ] || failed=$((failed + 1))
  fi
}

for config in "${configs[@]}"; do
  case "$config" in
    gcc-17|clang-20|gcc-20|tsan) ;;
    *) echo "test.sh: unknown configuration '$config' (gcc-17, clang-20, gcc-20, tsan)" >&2; exit 2 ;;
  esac
done

# The configurations are pipelined: while one configuration's tests run, the next one is
# built at the lowest CPU priority (nice 19), so the build takes only the CPU the tests
# leave idle (they spend much of their time waiting for servers and timers) and the tests
# run as they would alone. The build's output is printed when it is done.
build_pid=""
checks_pid=""
# A build still running when this script ends (interrupted, or a set -e exit) is stopped with it.
trap 'for p in $build_pid $checks_pid; do kill -- -"$p" 2>/dev/null || true; done' EXIT
build_start=$SECONDS
setsid bash -c "$(declare -f configure_and_build); $(declare -p root jobs tsan_tests); \
                configure_and_build ${configs[0]}" >"$root/build-test/${configs[0]}.build.log" 2>&1 &
build_pid=$!
for i in "${!configs[@]}"; do
  config=${configs[$i]}
  build_rc=0
  wait "$build_pid" || build_rc=$?
  build_pid=""
  cat "$root/build-test/$config.build.log" | grep -v '^\[[0-9]*/[0-9]*\] ' || true
  timings+=("$config build $((SECONDS - build_start)) s")
  next=$((i + 1))
  if [ "$next" -lt "${#configs[@]}" ]; then
    build_start=$SECONDS
    setsid nice -n 19 bash -c "$(declare -f configure_and_build); $(declare -p root jobs tsan_tests); \
                        configure_and_build ${configs[$next]}" \
      >"$root/build-test/${configs[$next]}.build.log" 2>&1 &
    build_pid=$!
  fi
  if [ "$build_rc" -ne 0 ]; then
    echo "test.sh: $config did not build (build-test/$config.build.log)"
    failed_configs+=("$config")
    failed=$((failed + 1))
    continue
  fi
  # The compile checks (gcc-17: DLQ_COMPILE_CHECKS_LATER, left out of the build above: the
  # header objects and the benchmarks no test runs) are built while the tests run, at nice
  # 19, in the CPU the tests leave idle; one that does not compile fails the configuration.
  checks_pid=""
  if [ "$config" = gcc-17 ]; then
    checks_start=$SECONDS
    setsid nice -n 19 cmake --build "$root/build-test/$config" -j"$jobs" --target dlq_compile_checks \
      >"$root/build-test/$config.compile-checks.log" 2>&1 &
    checks_pid=$!
  fi
  start=$SECONDS
  run_tests "$config"
  timings+=("$config tests $((SECONDS - start)) s")
  if [ -n "$checks_pid" ]; then
    checks_rc=0
    wait "$checks_pid" || checks_rc=$?
    checks_pid=""
    timings+=("$config compile checks $((SECONDS - checks_start)) s")
    if [ "$checks_rc" -ne 0 ]; then
      grep -v '^\[[0-9]*/[0-9]*\] ' "$root/build-test/$config.compile-checks.log" || true
      echo "test.sh: $config: a compile check failed: a header that does not compile on its own or a benchmark (build-test/$config.compile-checks.log)"
      failed_configs+=("$config-compile-checks")
      failed=$((failed + 1))
    fi
  fi
done

echo
echo "test.sh: wall times (a build overlaps the tests before it): $(IFS=','; echo "${timings[*]}" | sed 's/,/, /g'); total ${SECONDS} s"
if [ ${#failed_configs[@]} -gt 0 ]; then
  echo "test.sh: FAILED in: ${failed_configs[*]}"
fi
echo "dlq tests (${configs[*]}): $passed passed, $failed failed"
[ ${#failed_configs[@]} -eq 0 ]
