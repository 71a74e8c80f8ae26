#!/usr/bin/env bash
# Starts or stops the private 3-master Redis Cluster that dlq's cluster tests talk to.
#   redis_cluster.sh start DIR   start 3 masters on free loopback ports, data in DIR, create
#                                the cluster, wait for cluster_state:ok on all three, write
#                                DIR/url (the first node) and DIR/ports (one port a line)
#   redis_cluster.sh stop DIR    stop them and remove DIR
# ctest runs these as the setup and cleanup of the `redis_cluster` fixture; tests read DIR/url
# through the DLQ_TEST_REDIS_CLUSTER_URL_FILE environment variable. It fails loudly (and so
# fails the tests that need it) when no cluster can be started: cluster tests never skip.
set -euo pipefail
cmd=${1:?usage: redis_cluster.sh start|stop DIR}
dir=${2:?usage: redis_cluster.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}
cli=${DLQ_REDIS_CLI:-$(command -v redis-cli || true)}

. "$(dirname "$0")/redis_support.sh"  # stop_pidfiles (free_port is this script's own)

# A free port P <= 55535 whose cluster bus port P+10000 is free too (Redis needs both).
free_port() {
  /usr/bin/python3 - <<'PY' 2>/dev/null || shuf -i 20000-55000 -n 1
import random, socket
for _ in range(200):
    p = random.randint(20000, 55000)
    ok = True
    for q in (p, p + 10000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(p)
        break
PY
}

stop_all() { stop_pidfiles "$dir"/pid-*; }

fail() {
  echo "redis_cluster.sh: $*" >&2
  for log in "$dir"/redis-*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -20 "$log" >&2; }; done
  stop_all
  exit 1
}

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_cluster.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  [ -n "$cli" ] || { echo "redis_cluster.sh: redis-cli not found (apt-get install redis-tools)" >&2; exit 1; }
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  ports=()
  for i in 1 2 3; do
    started=
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \
        --cluster-node-timeout 5000 --daemonize yes --pidfile "$dir/pid-$port" \
        --logfile "$dir/redis-$port.log" >/dev/null || true
      for _ in $(seq 1 100); do
        if "$cli" -p "$port" ping 2>/dev/null | grep -q PONG; then started=1; break; fi
        sleep 0.05
      done
      if [ -n "$started" ]; then break; fi
      [ -f "$dir/pid-$port" ] && kill "$(cat "$dir/pid-$port")" 2>/dev/null || true
      rm -f "$dir/pid-$port"
    done
    [ -n "$started" ] || fail "could not start redis-server node $i"
    ports+=("$port")
  done
  "$cli" --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" \
    "127.0.0.1:${ports[2]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; fail "redis-cli --cluster create failed"; }
  # Every node must agree before tests start (at most 20 s).
  for _ in $(seq 1 400); do
    ok=0
    for p in "${ports[@]}"; do
      if "$cli" -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then ok=$((ok + 1)); fi
    done
    [ "$ok" -eq 3 ] && break
    sleep 0.05
  done
  [ "$ok" -eq 3 ] || fail "cluster_state is not ok on all three nodes after 20 s"
  # ... and on the slot map: all 16384 slots assigned, as seen from each node.
  for p in "${ports[@]}"; do
    for _ in $(seq 1 200); do
      "$cli" -p "$p" cluster info | grep -q 'cluster_slots_ok:16384' && break
      sleep 0.05
    done
  done
  printf '%s\n' "${ports[@]}" >"$dir/ports"
  echo "redis://127.0.0.1:${ports[0]}" >"$dir/url"
  echo "redis cluster on 127.0.0.1:${ports[*]}"
  ;;
stop)
  [ -d "$dir" ] && stop_all
  rm -rf "$dir"
  ;;
*) echo "usage: redis_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
