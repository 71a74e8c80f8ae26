#!/usr/bin/env bash
# Starts or stops a private Redis Cluster of three masters with one replica each, for the
# cluster failover tests (CLUSTER FAILOVER on a replica, a master killed with SIGKILL).
#   redis_cluster_replicas.sh start DIR   start 6 nodes on free loopback ports (node timeout
#                                  1000 ms: a killed master is failed over in ~2 s), create
#                                  the cluster, wait until every node agrees and every
#                                  replica is in sync; write DIR/ports (the masters, one a
#                                  line) and DIR/replicas ("replica-port master-port" lines);
#                                  the pid of the node on port P is in DIR/pid-P
#   redis_cluster_replicas.sh stop DIR    stop them (SIGCONT first) and remove DIR
# It fails loudly when no cluster can be started: the tests never skip.
set -euo pipefail
cmd=${1:?usage: redis_cluster_replicas.sh start|stop DIR}
dir=${2:?usage: redis_cluster_replicas.sh start|stop DIR}
server=${DLQ_REDIS_SERVER:-$(command -v redis-server || true)}
cli=${DLQ_REDIS_CLI:-$(command -v redis-cli || true)}

. "$(dirname "$0")/redis_support.sh"  # cluster_start, cluster_stop
CLUSTER_TLS_SERVER_ARGS=()
CLUSTER_CLI_ARGS=()
CLUSTER_REPLICAS=1
CLUSTER_NODE_TIMEOUT=1000

case "$cmd" in
start)
  [ -n "$server" ] || { echo "redis_cluster_replicas.sh: redis-server not found" >&2; exit 1; }
  [ -n "$cli" ] || { echo "redis_cluster_replicas.sh: redis-cli not found" >&2; exit 1; }
  if [ -d "$dir" ]; then "$0" stop "$dir" || true; fi
  cluster_start "$dir" || exit 1
  echo "redis cluster: masters $(tr '\n' ' ' <"$dir/ports"); replica master: $(tr '\n' ',' <"$dir/replicas")"
  ;;
stop)
  [ -d "$dir" ] && cluster_stop "$dir"
  rm -rf "$dir"
  ;;
*) echo "usage: redis_cluster_replicas.sh start|stop DIR" >&2; exit 2 ;;
esac
