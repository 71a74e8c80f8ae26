# Shared by the fixture scripts that start private redis-servers for the tests
# (redis_server.sh, redis_cluster.sh, redis_replica.sh, redis_tls_server.sh,
# redis_doctor_servers.sh): sourced, never run.
#   free_port                  a free loopback TCP port (python3; shuf as a fallback)
#   wait_ping PORT [ARGS…]     0 once redis-cli (with ARGS, e.g. --tls …) gets PONG from PORT,
#                              within 5 s; 1 otherwise
#   stop_pidfiles FILE…        stops every server whose pidfile is given: SIGCONT first (a test
#                              may have frozen it), SIGTERM, up to 5 s, then SIGKILL; removes
#                              the files

free_port() {
  python3 - <<'PY' 2>/dev/null || shuf -i 20000-60000 -n 1
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

wait_ping() {
  local port=$1
  shift
  for _ in $(seq 1 100); do
    redis-cli "$@" -p "$port" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  return 1
}

stop_pidfiles() {
  # Read every pid first: redis-server removes its own pidfile as it exits, so a file seen a
  # moment ago may be gone by the time it is read (set -e would then fail the stop).
  local pids=() f pid
  for f in "$@"; do
    pid=$(cat "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$@"
}
