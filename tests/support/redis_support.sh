# Shared by the fixture scripts that start private redis-servers for the tests
# (redis_server.sh, redis_cluster.sh, redis_replica.sh, redis_tls_server.sh,
# redis_tls_cluster.sh, redis_doctor_servers.sh, redis_sentinel.sh) and the TLS benchmark
# (tests/benchmarks/redis/run.sh): sourced, never run.
#   fixture_args USAGE CMD DIR the arguments of a fixture script `SCRIPT CMD DIR`: sets cmd and
#                              dir (a missing one fails with "usage: SCRIPT USAGE") and server
#                              (redis-server: $DLQ_REDIS_SERVER, else the one on PATH, else "")
#   need_server                fails the script unless $server names a redis-server
#   free_port                  a free loopback TCP port (python3; shuf as a fallback)
#   wait_ping PORT [ARGS…]     0 once redis-cli (with ARGS, e.g. --tls …) gets PONG from PORT,
#                              within 5 s; 1 otherwise
#   stop_pidfiles FILE…        stops every server whose pidfile is given: SIGCONT first (a test
#                              may have frozen it), SIGTERM, up to 5 s, then SIGKILL; removes
#                              the files
#   make_test_certs DIR        a test CA and certificates made with the openssl CLI in DIR
#                              (listed at the function); openssl's output in DIR/openssl.log
#   cluster_free_port          a free loopback port P <= 55535 whose bus port P+10000 is free
#   cluster_start DIR          starts 3 masters (data, logs and pids in DIR), creates the
#                              cluster and waits until all agree; writes DIR/ports. Uses
#                              $server and $cli, and the arrays CLUSTER_TLS_SERVER_ARGS (when
#                              not empty: nodes listen on --tls-port only, with these options)
#                              and CLUSTER_CLI_ARGS (redis-cli options, e.g. --tls --cacert …);
#                              CLUSTER_REPLICAS (default 0; 1: a replica per master, waited
#                              for until in sync, DIR/replicas holds "replica-port
#                              master-port" lines) and CLUSTER_NODE_TIMEOUT (ms, default 5000)
#   cluster_stop DIR           stops the nodes of cluster_start

fixture_args() {
  local usage
  usage="usage: $(basename "$0") $1"
  cmd=${2:?$usage}
  dir=${3:?$usage}
  server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}
}

need_server() {
  [ -n "$server" ] && return 0
  echo "$(basename "$0"): redis-server not found (apt-get install redis-server)" >&2
  exit 1
}

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

# make_test_certs DIR (valid for a day, made at test time):
#   ca.crt             the test CA; server.crt (localhost, 127.0.0.1) and client.crt sign with it
#   other-ca.crt       a second CA that signed nothing the servers use (the "wrong CA")
#   expired.crt        a server certificate for localhost that expired yesterday
#   wronghost.crt      a server certificate for wrong.example only
#   client-other.crt   a client certificate signed by other-ca (refused by an mTLS server)
make_test_certs() {
  local c=$1
  mkdir -p "$c"
  _ssl() { openssl "$@" 2>>"$c/openssl.log" >/dev/null; }
  local key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  _ssl req -x509 "${key[@]}" -keyout "$c/ca.key" -out "$c/ca.crt" -days 2 -subj "/CN=dlq test CA"
  _ssl req -x509 "${key[@]}" -keyout "$c/other-ca.key" -out "$c/other-ca.crt" -days 2 \
    -subj "/CN=dlq other CA"
  # name CA CN SAN DAYS
  _leaf() {
    _ssl req "${key[@]}" -keyout "$c/$1.key" -out "$c/$1.csr" -subj "/CN=$3"
    printf '%s\n' "$4" >"$c/$1.ext"
    _ssl x509 -req -in "$c/$1.csr" -CA "$c/$2.crt" -CAkey "$c/$2.key" -CAcreateserial \
      -days "$5" -extfile "$c/$1.ext" -out "$c/$1.crt"
  }
  _leaf server ca localhost "subjectAltName=DNS:localhost,IP:127.0.0.1" 1
  _leaf expired ca localhost "subjectAltName=DNS:localhost,IP:127.0.0.1" -1
  _leaf wronghost ca wrong.example "subjectAltName=DNS:wrong.example" 1
  _leaf client ca "dlq test client" "extendedKeyUsage=clientAuth" 1
  _leaf client-other other-ca "dlq other client" "extendedKeyUsage=clientAuth" 1
  chmod 600 "$c"/*.key
}

cluster_free_port() {
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

cluster_stop() { stop_pidfiles "$1"/pid-*; }

_cluster_fail() {
  local dir=$1
  shift
  echo "cluster_start: $*" >&2
  for log in "$dir"/redis-*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -20 "$log" >&2; }; done
  cluster_stop "$dir"
  return 1
}

# One node on a free port (up to 5 tries); prints the port.
_cluster_node() {
  local dir=$1 port ports_args
  for _ in 1 2 3 4 5; do
    port=$(cluster_free_port)
    if [ ${#CLUSTER_TLS_SERVER_ARGS[@]} -gt 0 ]; then
      ports_args=(--port 0 --tls-port "$port" "${CLUSTER_TLS_SERVER_ARGS[@]}")
    else
      ports_args=(--port "$port")
    fi
    "$server" "${ports_args[@]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \
      --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-5000}" --daemonize yes --pidfile "$dir/pid-$port" \
      --logfile "$dir/redis-$port.log" >/dev/null || true
    if wait_ping "$port" "${CLUSTER_CLI_ARGS[@]}"; then echo "$port"; return 0; fi
    [ -f "$dir/pid-$port" ] && kill "$(cat "$dir/pid-$port")" 2>/dev/null || true
    rm -f "$dir/pid-$port"
  done
  return 1
}

# Whether `redis-cli CLUSTER INFO` on every port of $@ (after DIR) shows TEXT, within 20 s.
_cluster_all_say() {
  local text=$1 ok p
  shift
  for _ in $(seq 1 400); do
    ok=0
    for p in "$@"; do
      "$cli" "${CLUSTER_CLI_ARGS[@]}" -p "$p" cluster info 2>/dev/null | grep -q "$text" && ok=$((ok + 1))
    done
    [ "$ok" -eq $# ] && return 0
    sleep 0.05
  done
  return 1
}

# Whether every replica port of $@ reports its master link up (ROLE: connected), within 20 s.
_cluster_replicas_synced() {
  local ok p
  for _ in $(seq 1 400); do
    ok=0
    for p in "$@"; do
      "$cli" "${CLUSTER_CLI_ARGS[@]}" -p "$p" role 2>/dev/null | grep -qx connected && ok=$((ok + 1))
    done
    [ "$ok" -eq $# ] && return 0
    sleep 0.05
  done
  return 1
}

cluster_start() {
  local dir=$1 ports=() port i replicas=${CLUSTER_REPLICAS:-0}
  mkdir -p "$dir"
  for i in $(seq 1 $((3 * (1 + replicas)))); do
    port=$(_cluster_node "$dir") || { _cluster_fail "$dir" "could not start redis-server node $i"; return 1; }
    ports+=("$port")
  done
  local addrs=()
  for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
  "$cli" "${CLUSTER_CLI_ARGS[@]}" --cluster create "${addrs[@]}" --cluster-replicas "$replicas" \
    --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; _cluster_fail "$dir" "redis-cli --cluster create failed"; return 1; }
  # Every node must agree before tests start, on the state and on the slot map (all 16384
  # slots assigned, as seen from each node).
  _cluster_all_say cluster_state:ok "${ports[@]}" ||
    { _cluster_fail "$dir" "cluster_state is not ok on all nodes after 20 s"; return 1; }
  _cluster_all_say cluster_slots_ok:16384 "${ports[@]}" || true
  local masters=() pairs=() role
  for port in "${ports[@]}"; do
    role=$("$cli" "${CLUSTER_CLI_ARGS[@]}" -p "$port" role 2>/dev/null | tr '\n' ' ')
    case "$role" in
      master*) masters+=("$port") ;;
      slave*) pairs+=("$port $(awk '{print $3}' <<<"$role")") ;;
    esac
  done
  [ ${#masters[@]} -eq 3 ] || { _cluster_fail "$dir" "expected 3 masters, found ${#masters[@]}"; return 1; }
  if [ "$replicas" -gt 0 ]; then
    [ ${#pairs[@]} -eq 3 ] || { _cluster_fail "$dir" "expected 3 replicas, found ${#pairs[@]}"; return 1; }
    _cluster_replicas_synced $(printf '%s\n' "${pairs[@]}" | awk '{print $1}') ||
      { _cluster_fail "$dir" "the replicas are not in sync after 20 s"; return 1; }
    printf '%s\n' "${pairs[@]}" >"$dir/replicas"
  fi
  printf '%s\n' "${masters[@]}" >"$dir/ports"
}
