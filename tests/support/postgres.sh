#!/usr/bin/env bash
# Starts or stops the private PostgreSQL server that dlq's PostgreSQL tests talk to.
#   postgres.sh start DIR   initdb in a fresh temporary directory, start the server on a free
#                           loopback port (unix sockets in that directory too), write
#                           DIR/url (the libpq URL) and DIR/env (DLQ_TEST_POSTGRES_URL=…)
#   postgres.sh crash DIR   SIGKILL the server and every one of its processes (a crash: no
#                           shutdown checkpoint; what was acknowledged must be on disk)
#   postgres.sh restart DIR start it again on the same port and data (crash recovery)
#   postgres.sh stop DIR    stop it (immediate shutdown: no checkpoint, the data is thrown
#                           away; SIGKILL after 10 s) and remove both
#                           directories
# ctest runs these as the setup and cleanup of the `postgres` fixture; tests read DIR/url
# through DLQ_TEST_POSTGRES_URL_FILE. It fails loudly, printing the server's log, when the
# server cannot start: PostgreSQL tests never skip.
#
# PostgreSQL refuses to run as root: as root, the server runs as the system user `postgres`
# (Debian's postgresql package creates it), else `nobody`, and owns the data directory.
# fsync and synchronous_commit stay on (the durability tests rely on acknowledged = on
# disk). The binaries: $DLQ_POSTGRES_BINDIR, else /usr/lib/postgresql/15/bin.
set -euo pipefail
usage="usage: postgres.sh start|crash|restart|stop DIR"
cmd=${1:?$usage}
dir=${2:?$usage}
bindir=${DLQ_POSTGRES_BINDIR:-/usr/lib/postgresql/15/bin}

. "$(dirname "$0")/redis_support.sh"  # free_port

# Runs a PostgreSQL program as the server's user (itself unless root).
as_server() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$pg_user" -- "$@"
  else
    "$@"
  fi
}

pg_user=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
  if id postgres >/dev/null 2>&1; then pg_user=postgres; else pg_user=nobody; fi
fi

fail() {
  echo "postgres.sh: $*" >&2
  for log in "${data:-/nonexistent}/server.log" "${data:-/nonexistent}/initdb.log"; do
    [ -f "$log" ] && { echo "--- $log" >&2; cat "$log" >&2; }
  done
  exit 1
}

# Starts the server of $data on $port; 0 once it accepts connections.
start_server() {
  as_server "$bindir/pg_ctl" -D "$data/data" -l "$data/server.log" -w -t 30 \
    -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200" \
    start >/dev/null 2>&1
}

stop_server() {
  local data pid
  data=$(cat "$dir/datadir" 2>/dev/null) || return 0
  if [ -f "$data/data/postmaster.pid" ]; then
    pid=$(head -1 "$data/data/postmaster.pid")
    kill -CONT "$pid" 2>/dev/null || true  # a test may have frozen it
    as_server "$bindir/pg_ctl" -D "$data/data" -m immediate -w -t 10 stop >/dev/null 2>&1 ||
      kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$data"
}

case "$cmd" in
start)
  [ -x "$bindir/initdb" ] ||
    fail "$bindir/initdb not found (apt-get install postgresql-15, or set DLQ_POSTGRES_BINDIR)"
  if [ -f "$dir/datadir" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  data=$(mktemp -d "${TMPDIR:-/tmp}/dlq-pg-XXXXXX")
  echo "$data" >"$dir/datadir"
  chmod 700 "$data"
  [ "$(id -u)" -ne 0 ] || chown "$pg_user" "$data"
  # initdb's own files need no fsync (-N: a crash here just fails the fixture); the server's
  # fsync stays on.
  as_server "$bindir/initdb" -D "$data/data" -U dlq -A trust -E UTF8 --locale=C -N \
    >"$data/initdb.log" 2>&1 || fail "initdb failed"
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if start_server; then
      echo "$port" >"$dir/port"
      url="postgresql://dlq@127.0.0.1:$port/postgres"
      echo "$url" >"$dir/url"
      echo "DLQ_TEST_POSTGRES_URL=$url" >"$dir/env"
      echo "postgres $(head -1 "$data/data/postmaster.pid") listening on 127.0.0.1:$port (user $pg_user, data $data)"
      exit 0
    fi
    grep -q "could not bind\|already in use" "$data/server.log" 2>/dev/null || break
  done
  fail "could not start postgres (attempt $attempt, port ${port:-?})"
  ;;
crash)
  data=$(cat "$dir/datadir")
  pid=$(head -1 "$data/data/postmaster.pid")
  # The postmaster and its children (backends, checkpointer, WAL writer), all at once.
  kill -9 "$pid" $(ps -o pid= --ppid "$pid") 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  ;;
restart)
  data=$(cat "$dir/datadir")
  port=$(cat "$dir/port")
  start_server || fail "could not restart postgres on port $port"
  ;;
stop)
  stop_server
  rm -rf "$dir"
  ;;
*) echo "$usage" >&2; exit 2 ;;
esac
