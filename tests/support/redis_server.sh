#!/usr/bin/env bash
# Starts or stops the private redis-server that dlq's Redis tests talk to.
#   redis_server.sh start DIR   start one on a free loopback port, data in DIR, write DIR/url
#   redis_server.sh stop DIR    stop it and remove DIR
# ctest runs these as the setup and cleanup of the `redis` fixture; tests read DIR/url
# through the DLQ_TEST_REDIS_URL_FILE environment variable. It fails loudly (and so fails
# the tests that need it) when no server can be started: Redis tests never skip.
set -euo pipefail
cmd=${1:?usage: redis_server.sh start|stop DIR}
dir=${2:?usage: redis_server.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}

. "$(dirname "$0")/redis_support.sh"  # free_port, wait_ping, stop_pidfiles

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_server.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  if [ -f "$dir/pid" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --daemonize yes --pidfile "$dir/pid" --logfile "$dir/redis.log" \
      --enable-debug-command local >/dev/null
    if wait_ping "$port"; then
      echo "redis://127.0.0.1:$port/0" >"$dir/url"
      echo "redis-server $(cat "$dir/pid") listening on 127.0.0.1:$port"
      exit 0
    fi
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
  done
  echo "redis_server.sh: could not start redis-server; log:" >&2
  cat "$dir/redis.log" >&2 || true
  exit 1
  ;;
stop)
  stop_pidfiles "$dir/pid"
  rm -rf "$dir"
  ;;
*) echo "usage: redis_server.sh start|stop DIR" >&2; exit 2 ;;
esac
