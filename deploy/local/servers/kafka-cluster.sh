# shellcheck shell=bash
# deploy/local/servers/kafka-cluster.sh: the component kafka-cluster, three
# Kafka KRaft nodes k1..k3 (each broker + controller, one quorum), run by the
# kafka_* functions of servers/kafka.sh on the single broker's jars. Sourced
# by deploy/local/infra.sh (functions: servers/lib.sh).

KAFKA_CLUSTER_PORTS=${KAFKA_CLUSTER_PORTS:-29111,29112,29113}
KAFKA_CLUSTER_CONTROLLER_PORTS=${KAFKA_CLUSTER_CONTROLLER_PORTS:-29121,29122,29123}
KAFKA_CLUSTER_HEAP=${KAFKA_CLUSTER_HEAP:--Xmx384m}
KAFKA_CLUSTER_NODES=(1 2 3)

kafka_cluster_packages() { kafka_packages; }

# The node N of the cluster (k1..k3) for the kafka_* functions: its folder,
# ports, and the jars of the single broker's cache.
kafka_cluster_paths() {
  local n=$1 nodes=${#KAFKA_CLUSTER_NODES[@]}
  KC_HOME=$STATE_DIR/kafka-cluster
  # shellcheck disable=SC2034 # read by the kafka_* functions (servers/kafka.sh)
  K_LIBS=$STATE_DIR/kafka/libs
  kafka_node_paths "$KC_HOME/k$n"
  K_PORT=$(nth_port kafka-cluster KAFKA_CLUSTER_PORTS "$nodes" "$n")
  K_CONTROLLER_PORT=$(nth_port kafka-cluster KAFKA_CLUSTER_CONTROLLER_PORTS "$nodes" "$n")
}

# What ITEM, a function, prints for each node (run after kafka_cluster_paths,
# with the node's number), comma-separated.
kafka_cluster_list() {
  local item=$1 n items=()
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    items+=("$("$item" "$n")")
  done
  (IFS=, && printf '%s\n' "${items[*]}")
}

# Every node is a voter of the one controller quorum.
kafka_cluster_voter() { printf '%s@127.0.0.1:%s' "$1" "$K_CONTROLLER_PORT"; }

# A node's address for clients (KAFKA_CLUSTER_BROKERS).
kafka_cluster_broker() { printf '127.0.0.1:%s' "$K_PORT"; }

# All nodes are formatted with the same cluster id, made once.
kafka_cluster_id() {
  local file=$STATE_DIR/kafka-cluster/cluster.id
  if [[ ! -s $file ]]; then
    mkdir -p -- "$(dirname -- "$file")"
    kafka_new_cluster_id >"$file"
  fi
  cat -- "$file"
}

# Starts the nodes that do not run (after a crash of one, only that one).
# Each waits for a quorum (two nodes) before it reports started, so all are
# launched first and awaited in kafka_cluster_wait.
kafka_cluster_start() {
  local n voters cluster_id
  voters=$(kafka_cluster_list kafka_cluster_voter)
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    if live_pid "$K_PID" "$K_CONF/server.properties" >/dev/null; then
      [[ $(kafka_conf_port) == "$K_PORT" ]] ||
        die "kafka-cluster node k$n of $STATE_DIR already runs on port $(kafka_conf_port), not $K_PORT; run 'down kafka-cluster' first"
      continue
    fi
    require_free_port "kafka-cluster k$n" KAFKA_CLUSTER_PORTS "$K_PORT"
    require_free_port "kafka-cluster k$n" KAFKA_CLUSTER_CONTROLLER_PORTS "$K_CONTROLLER_PORT"
    kafka_check_java
    kafka_fetch_libs
    cluster_id=$(kafka_cluster_id)
    # Three nodes: three copies of every partition, a write acknowledged by two.
    kafka_write_config "$n" "$voters" 3 2
    kafka_format "kafka-cluster k$n" "$cluster_id"
    kafka_launch "kafka-cluster k$n" "$KAFKA_CLUSTER_HEAP"
  done
}

kafka_cluster_wait() {
  local n
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    kafka_wait_node "kafka-cluster k$n"
  done
}

# All at once: a node stopped alone hands its partitions over first, which
# needs a quorum that the last nodes stopped one by one would no longer have.
kafka_cluster_stop() {
  local n failed=0
  local -a stoppers=()
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    stop_server "kafka-cluster k$n" "$K_PID" "$K_CONF/server.properties" &
    stoppers+=($!)
  done
  for n in "${stoppers[@]}"; do wait "$n" || failed=1; done
  ((failed == 0)) || die "kafka-cluster: a node did not stop"
}

kafka_cluster_status() {
  local n pid
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    if pid=$(live_pid "$K_PID" "$K_CONF/server.properties"); then
      status_line "kafka-k$n" running "$pid" "port=$(kafka_conf_port) controller=$K_CONTROLLER_PORT"
    else
      status_line "kafka-k$n" stopped - "port=$K_PORT controller=$K_CONTROLLER_PORT"
    fi
  done
}

kafka_cluster_env() { echo "export KAFKA_CLUSTER_BROKERS=$(kafka_cluster_list kafka_cluster_broker)"; }
