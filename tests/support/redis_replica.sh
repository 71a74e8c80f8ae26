#!/usr/bin/env bash
# Starts or stops a private master and one replica of it, for the replica-acknowledged
# writes tests (RedisListOptions::replicas_to_ack).
#   redis_replica.sh start DIR   start both on free loopback ports, data in DIR/{master,replica},
#                                wait until the replica is in sync, write DIR/env
#   redis_replica.sh stop DIR    stop both (SIGCONT first: a test may have frozen the replica)
#                                and remove DIR
# DIR/env holds the lines MASTER_URL=…, REPLICA_URL=… and REPLICA_PID=…; tests read it through
# DLQ_TEST_REDIS_REPLICA_ENV_FILE. It fails loudly when the pair cannot be started: the tests
# never skip.
set -euo pipefail
cmd=${1:?usage: redis_replica.sh start|stop DIR}
dir=${2:?usage: redis_replica.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}

. "$(dirname "$0")/redis_support.sh"  # free_port, wait_ping, stop_pidfiles

start_one() {  # start_one NAME PORT [extra redis-server arguments]
  local name=$1 port=$2
  shift 2
  mkdir -p "$dir/$name"
  "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$name" \
    --daemonize yes --pidfile "$dir/$name/pid" --logfile "$dir/$name/redis.log" "$@" >/dev/null
  wait_ping "$port"
}

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_replica.sh: redis-server not found" >&2; exit 1; }
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  for attempt in 1 2 3 4 5; do
    master=$(free_port)
    replica=$(free_port)
    [ "$master" != "$replica" ] || continue
    if start_one master "$master" --repl-diskless-sync-delay 0 && start_one replica "$replica" --replicaof 127.0.0.1 "$master"; then
      for _ in $(seq 1 200); do
        if redis-cli -p "$replica" info replication 2>/dev/null | grep -q 'master_link_status:up' &&
           redis-cli -p "$master" info replication 2>/dev/null | grep -q '^slave0:.*state=online'; then
          {
            echo "MASTER_URL=redis://127.0.0.1:$master/0"
            echo "REPLICA_URL=redis://127.0.0.1:$replica/0"
            echo "REPLICA_PID=$(cat "$dir/replica/pid")"
          } >"$dir/env"
          echo "master $(cat "$dir/master/pid") on 127.0.0.1:$master, replica $(cat "$dir/replica/pid") on 127.0.0.1:$replica"
          exit 0
        fi
        sleep 0.05
      done
    fi
    stop_pidfiles "$dir/replica/pid" "$dir/master/pid"
  done
  echo "redis_replica.sh: could not start a master and an in-sync replica; logs:" >&2
  cat "$dir"/*/redis.log >&2 || true
  exit 1
  ;;
stop)
  stop_pidfiles "$dir/replica/pid" "$dir/master/pid"
  rm -rf "$dir"
  ;;
*) echo "usage: redis_replica.sh start|stop DIR" >&2; exit 2 ;;
esac
