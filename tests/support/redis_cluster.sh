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

. "$(dirname "$0")/redis_support.sh"  # cluster_start, cluster_stop
CLUSTER_TLS_SERVER_ARGS=()  # plain TCP (redis_tls_cluster.sh: the same cluster over TLS)
CLUSTER_CLI_ARGS=()

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_cluster.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  [ -n "$cli" ] || { echo "redis_cluster.sh: redis-cli not found (apt-get install redis-tools)" >&2; exit 1; }
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  cluster_start "$dir" || exit 1
  ports=($(cat "$dir/ports"))
  echo "redis://127.0.0.1:${ports[0]}" >"$dir/url"
  echo "redis cluster on 127.0.0.1:${ports[*]}"
  ;;
stop)
  [ -d "$dir" ] && cluster_stop "$dir"
  rm -rf "$dir"
  ;;
*) echo "usage: redis_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
