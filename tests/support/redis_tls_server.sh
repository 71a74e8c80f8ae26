#!/usr/bin/env bash
# Starts or stops the TLS redis-servers that dlq's TLS tests talk to.
#   redis_tls_server.sh start DIR   make certificates in DIR/certs, start the servers, write DIR/env
#   redis_tls_server.sh stop DIR    stop them and remove DIR
# ctest runs these as the setup and cleanup of the `redis_tls` fixture; tests read DIR/env
# (KEY=VALUE lines) through the DLQ_TEST_REDIS_TLS_ENV_FILE environment variable.
#
# Certificates: make_test_certs of redis_support.sh (a test CA; server.crt for localhost and
# 127.0.0.1, client.crt, other-ca.crt, expired.crt, wronghost.crt, client-other.crt).
# Servers (each on a free loopback port; port 0 = no plain port unless said):
#   TLS_PORT + PLAIN_PORT   server.crt, client certificates not required, and a plain port
#   MTLS_PORT               server.crt, client certificates required (tls-auth-clients yes)
#   EXPIRED_PORT            expired.crt
#   WRONGHOST_PORT          wronghost.crt
# It fails loudly when a server cannot be started: the TLS tests never skip.
set -euo pipefail
cmd=${1:?usage: redis_tls_server.sh start|stop DIR}
dir=${2:?usage: redis_tls_server.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}

. "$(dirname "$0")/redis_support.sh"  # free_port, wait_ping, stop_pidfiles, make_test_certs

# start NAME CERT AUTH_CLIENTS PLAIN(yes|no): prints the TLS port (and sets plain_port)
start_one() {
  local name=$1 cert=$2 auth=$3 plain=$4 c=$dir/certs
  for _ in 1 2 3 4 5; do
    local port pport=0
    port=$(free_port)
    [ "$plain" = yes ] && pport=$(free_port)
    mkdir -p "$dir/$name"
    "$server" --port "$pport" --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir/$name" --daemonize yes --pidfile "$dir/$name/pid" \
      --logfile "$dir/$name/redis.log" --tls-cert-file "$c/$cert.crt" \
      --tls-key-file "$c/$cert.key" --tls-ca-cert-file "$c/ca.crt" \
      --tls-auth-clients "$auth" >/dev/null
    if wait_ping "$port" --tls --insecure --cert "$c/client.crt" --key "$c/client.key"; then
      echo "${name}_PORT=$port" >>"$dir/env"
      [ "$plain" = yes ] && echo "PLAIN_PORT=$pport" >>"$dir/env"
      echo "redis-server $(cat "$dir/$name/pid") ($name) TLS on 127.0.0.1:$port"
      return 0
    fi
    [ -f "$dir/$name/pid" ] && kill "$(cat "$dir/$name/pid")" 2>/dev/null || true
    rm -f "$dir/$name/pid"
  done
  echo "redis_tls_server.sh: could not start redis-server ($name); log:" >&2
  cat "$dir/$name/redis.log" >&2 || true
  return 1
}

stop_all() { stop_pidfiles "$dir"/*/pid; }

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_tls_server.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  command -v openssl >/dev/null || { echo "redis_tls_server.sh: openssl not found (apt-get install openssl)" >&2; exit 1; }
  [ -d "$dir" ] && { stop_all; rm -rf "$dir"; }
  mkdir -p "$dir"
  make_test_certs "$dir/certs" ||
    { echo "redis_tls_server.sh: openssl failed:" >&2; cat "$dir/certs/openssl.log" >&2; exit 1; }
  echo "CERTS=$dir/certs" >"$dir/env"
  start_one TLS server no yes
  start_one MTLS server yes no
  start_one EXPIRED expired no no
  start_one WRONGHOST wronghost no no
  ;;
stop)
  stop_all
  rm -rf "$dir"
  ;;
*) echo "usage: redis_tls_server.sh start|stop DIR" >&2; exit 2 ;;
esac
