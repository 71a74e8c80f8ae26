#!/usr/bin/env bash
# Starts or stops the redis-servers `dlqctl doctor` is tested against, each configured the
# way the doctor must judge (tests/cli/test_doctor.py).
#   redis_doctor_servers.sh start DIR   start them on free loopback ports, data in DIR/NAME,
#                                       write DIR/env (NAME_URL=redis://127.0.0.1:PORT/0 lines)
#   redis_doctor_servers.sh stop DIR    stop them and remove DIR
# ctest runs these as the setup and cleanup of the `redis_doctor` fixture; the test reads
# DIR/env through DLQ_TEST_REDIS_DOCTOR_ENV_FILE. Servers (each from its own config file):
#   HEALTHY      noeviction, appendonly yes, maxmemory 256mb: every check OK
#   EVICTING     maxmemory-policy allkeys-lru (dead letters can be evicted): ERROR
#   NO_PERSIST   save "" and appendonly no (a restart loses everything): WARN
#   NO_CONFIG    CONFIG renamed away (rename-command CONFIG ""), as managed Redis does; and
#                an ACL user `limited` (password `limited`) denied scripts and SCAN
# It fails loudly when a server cannot be started: the doctor tests never skip.
set -euo pipefail
. "$(dirname "$0")/redis_support.sh"  # fixture_args, need_server, free_port, wait_ping, stop_pidfiles
fixture_args "start|stop DIR" "$@"

# The configuration lines of server NAME (beyond port, dir, pidfile and log).
config_of() {
  case "$1" in
  HEALTHY) printf '%s\n' 'save ""' 'appendonly yes' 'maxmemory 256mb' 'maxmemory-policy noeviction' ;;
  EVICTING) printf '%s\n' 'save ""' 'appendonly yes' 'maxmemory 64mb' 'maxmemory-policy allkeys-lru' ;;
  NO_PERSIST) printf '%s\n' 'save ""' 'appendonly no' 'maxmemory-policy noeviction' ;;
  NO_CONFIG) printf '%s\n' 'save ""' 'appendonly no' 'maxmemory-policy noeviction' \
    'rename-command CONFIG ""' 'user limited on >limited ~* &* +@all -@scripting -scan' ;;
  esac
}

# start_one NAME: starts it and appends NAME_URL to DIR/env.
start_one() {
  local name=$1 d=$dir/$1
  mkdir -p "$d"
  for _ in 1 2 3 4 5; do
    local port
    port=$(free_port)
    {
      echo "port $port"
      echo "bind 127.0.0.1"
      echo "dir $d"
      echo "daemonize yes"
      echo "pidfile $d/pid"
      echo "logfile $d/redis.log"
      config_of "$name"
    } >"$d/redis.conf"
    "$server" "$d/redis.conf" >/dev/null || true
    if wait_ping "$port"; then
      echo "${name}_URL=redis://127.0.0.1:$port/0" >>"$dir/env"
      echo "redis-server $(cat "$d/pid") ($name) on 127.0.0.1:$port"
      return 0
    fi
    [ -f "$d/pid" ] && kill "$(cat "$d/pid")" 2>/dev/null || true
    rm -f "$d/pid"
  done
  echo "redis_doctor_servers.sh: could not start redis-server ($name); log:" >&2
  cat "$d/redis.log" >&2 || true
  return 1
}

stop_all() { stop_pidfiles "$dir"/*/pid; }

case "$cmd" in
start)
  need_server
  [ -d "$dir" ] && { stop_all; rm -rf "$dir"; }
  mkdir -p "$dir"
  : >"$dir/env"
  for name in HEALTHY EVICTING NO_PERSIST NO_CONFIG; do
    start_one "$name" || { stop_all; exit 1; }
  done
  ;;
stop)
  [ -d "$dir" ] && stop_all
  rm -rf "$dir"
  ;;
*) echo "usage: redis_doctor_servers.sh start|stop DIR" >&2; exit 2 ;;
esac
