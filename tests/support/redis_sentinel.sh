#!/usr/bin/env bash
# Starts or stops a private Redis Sentinel deployment for the Sentinel tests: one master,
# one replica of it and three sentinels (`redis-server --sentinel`) monitoring it as
# `mymaster` (quorum 2, down-after-milliseconds 1000, failover-timeout 3000), all on free
# loopback ports, data and configuration in DIR.
#   redis_sentinel.sh start DIR   start them, wait until the replica is in sync and every
#                                 sentinel sees the replica and the two other sentinels,
#                                 write DIR/env
#   redis_sentinel.sh restart DIR NAME [ARGS…]   start the server NAME (master, replica) again
#                                 after a test killed it, with the arguments it was started
#                                 with and ARGS
#   redis_sentinel.sh stop DIR    stop them all (SIGCONT first: a test may have frozen one)
#                                 and remove DIR
# DIR/env holds the lines URL=redis+sentinel://…/mymaster, MASTER_PORT=…, REPLICA_PORT=…,
# MASTER_PID=…, REPLICA_PID=… and SENTINEL_PORTS="p1 p2 p3"; tests read it. It fails loudly
# when the deployment cannot be started: the tests never skip.
set -euo pipefail
. "$(dirname "$0")/redis_support.sh"  # fixture_args, need_server, free_port, wait_ping, stop_pidfiles
fixture_args "start|restart|stop DIR" "$@"

pidfiles() {
  echo "$dir"/s1/pid "$dir"/s2/pid "$dir"/s3/pid "$dir"/replica/pid "$dir"/master/pid
}

start_server() {  # start_server NAME PORT [extra redis-server arguments]
  local name=$1 port=$2
  shift 2
  mkdir -p "$dir/$name"
  printf '%q ' "$port" "$@" >"$dir/$name/args"  # for restart
  "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$name" \
    --daemonize yes --pidfile "$dir/$name/pid" --logfile "$dir/$name/redis.log" "$@" >/dev/null
  wait_ping "$port"
}

start_sentinel() {  # start_sentinel NAME PORT MASTER_PORT
  local name=$1 port=$2 master=$3
  mkdir -p "$dir/$name"
  cat >"$dir/$name/sentinel.conf" <<CONF
port $port
bind 127.0.0.1
daemonize yes
pidfile $dir/$name/pid
logfile $dir/$name/sentinel.log
dir $dir/$name
sentinel monitor mymaster 127.0.0.1 $master 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 3000
sentinel parallel-syncs mymaster 1
CONF
  "$server" "$dir/$name/sentinel.conf" --sentinel >/dev/null
  wait_ping "$port"
  # A sentinel whose timer runs 2 s late (the process not scheduled, or stalled in the fsync of
  # its configuration, both seen on a loaded 2-core CI machine) enters TILT mode and takes no
  # action for 30 s: no failover within any test's wait (reproduced: sentinels frozen 2.5 s,
  # then the master killed, promoted after more than 30 s). The tests are about the clients
  # through a failover, not about that stall: the trigger is 10 s here (SENTINEL DEBUG, a
  # runtime setting, Redis 7.0), everything else is the sentinels' own timing.
  redis-cli -p "$port" sentinel debug tilt-trigger 10000 >/dev/null
}

ready() {  # every sentinel sees the replica and 2 other sentinels; the replica is in sync
  redis-cli -p "$replica" info replication 2>/dev/null | grep -q 'master_link_status:up' || return 1
  local p
  for p in "${sentinels[@]}"; do
    local info
    info=$(redis-cli -p "$p" sentinel master mymaster 2>/dev/null | tr '\n' ' ')
    grep -q 'num-slaves 1 ' <<<"$info" || return 1
    grep -q 'num-other-sentinels 2 ' <<<"$info" || return 1
  done
}

case "$cmd" in
start)
  need_server
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  for attempt in 1 2 3; do
    master=$(free_port)
    replica=$(free_port)
    sentinels=("$(free_port)" "$(free_port)" "$(free_port)")
    [ "$(printf '%s\n' "$master" "$replica" "${sentinels[@]}" | sort -u | wc -l)" = 5 ] || continue
    if start_server master "$master" --repl-diskless-sync-delay 0 &&
       start_server replica "$replica" --replicaof 127.0.0.1 "$master" &&
       start_sentinel s1 "${sentinels[0]}" "$master" &&
       start_sentinel s2 "${sentinels[1]}" "$master" &&
       start_sentinel s3 "${sentinels[2]}" "$master"; then
      for _ in $(seq 1 300); do  # sentinels find each other through hello messages (~2 s)
        if ready; then
          {
            echo "URL=redis+sentinel://127.0.0.1:${sentinels[0]},127.0.0.1:${sentinels[1]},127.0.0.1:${sentinels[2]}/mymaster"
            echo "MASTER_PORT=$master"
            echo "REPLICA_PORT=$replica"
            echo "MASTER_PID=$(cat "$dir/master/pid")"
            echo "REPLICA_PID=$(cat "$dir/replica/pid")"
            echo "SENTINEL_PORTS=${sentinels[*]}"
          } >"$dir/env"
          echo "master on 127.0.0.1:$master, replica on 127.0.0.1:$replica, sentinels on ${sentinels[*]}"
          exit 0
        fi
        sleep 0.05
      done
    fi
    # shellcheck disable=SC2046
    stop_pidfiles $(pidfiles)
  done
  echo "redis_sentinel.sh: could not start a master, a replica and three sentinels; logs:" >&2
  cat "$dir"/*/*.log >&2 || true
  exit 1
  ;;
restart)  # restart DIR NAME [ARGS…]: start the (killed) server NAME again, as it was started
          # and with ARGS (e.g. --replicaof 127.0.0.1 PORT: a replica of the new master at
          # once, not after the sentinels' reconfiguration, ~10 s); without, the sentinels
          # make it a replica of the current master (its data is gone: no RDB)
  name=${3:?usage: redis_sentinel.sh restart DIR master|replica [ARGS…]}
  eval "args=($(cat "$dir/$name/args"))"
  start_server "$name" "${args[@]}" "${@:4}"
  ;;
stop)
  # shellcheck disable=SC2046
  stop_pidfiles $(pidfiles)
  rm -rf "$dir"
  ;;
*) echo "usage: redis_sentinel.sh start|restart|stop DIR" >&2; exit 2 ;;
esac
