#!/usr/bin/env bash
# Starts or stops the private 3-master Redis Cluster over TLS that dlq's TLS cluster tests
# talk to: the cluster of redis_cluster.sh (cluster_start of redis_support.sh) with the
# certificates of redis_tls_server.sh (make_test_certs), every node on `--port 0 --tls-port P
# --tls-cluster yes --tls-replication yes` (clients, the cluster bus and MIGRATE all in TLS)
# and `--tls-auth-clients yes` (mutual TLS: a client without a certificate of the test CA is
# refused, so a node the router discovers must get the URL's client certificate too).
#   redis_tls_cluster.sh start DIR   make certificates in DIR/certs, start and create the
#                                    cluster, write DIR/env and DIR/ports (one port a line)
#   redis_tls_cluster.sh stop DIR    stop the nodes and remove DIR
# DIR/env (KEY=VALUE lines, read through DLQ_TEST_REDIS_TLS_CLUSTER_ENV_FILE): CERTS (the
# certificates' directory), PORTS (the three TLS ports, comma-separated). It fails loudly when
# the cluster cannot be started: the tests never skip.
set -euo pipefail
cmd=${1:?usage: redis_tls_cluster.sh start|stop DIR}
dir=${2:?usage: redis_tls_cluster.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}
cli=${DLQ_REDIS_CLI:-$(command -v redis-cli || true)}

. "$(dirname "$0")/redis_support.sh"  # make_test_certs, cluster_start, cluster_stop

c=$dir/certs
CLUSTER_TLS_SERVER_ARGS=(--tls-cluster yes --tls-replication yes --tls-auth-clients yes
  --tls-cert-file "$c/server.crt" --tls-key-file "$c/server.key" --tls-ca-cert-file "$c/ca.crt")
CLUSTER_CLI_ARGS=(--tls --cacert "$c/ca.crt" --cert "$c/client.crt" --key "$c/client.key")

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_tls_cluster.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  [ -n "$cli" ] || { echo "redis_tls_cluster.sh: redis-cli not found (apt-get install redis-tools)" >&2; exit 1; }
  command -v openssl >/dev/null || { echo "redis_tls_cluster.sh: openssl not found (apt-get install openssl)" >&2; exit 1; }
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  mkdir -p "$dir"
  make_test_certs "$c" ||
    { echo "redis_tls_cluster.sh: openssl failed:" >&2; cat "$c/openssl.log" >&2; exit 1; }
  cluster_start "$dir" || exit 1
  ports=($(cat "$dir/ports"))
  { echo "CERTS=$c"; echo "PORTS=$(IFS=,; echo "${ports[*]}")"; } >"$dir/env"
  echo "redis cluster over TLS (mutual) on 127.0.0.1:${ports[*]}"
  ;;
stop)
  [ -d "$dir" ] && cluster_stop "$dir"
  rm -rf "$dir"
  ;;
*) echo "usage: redis_tls_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
