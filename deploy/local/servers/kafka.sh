# shellcheck shell=bash
# deploy/local/servers/kafka.sh: the component kafka, one Apache Kafka node
# (KRaft, broker + controller in one JVM) on the jars that
# deploy/local/kafka/pom.xml names, and the kafka_* functions that
# servers/kafka-cluster.sh runs its nodes with. Sourced by
# deploy/local/infra.sh (functions: servers/lib.sh).

KAFKA_PORT=${KAFKA_PORT:-29092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-29093}
KAFKA_HEAP=${KAFKA_HEAP:--Xmx512m}
KAFKA_POM=$SCRIPT_DIR/kafka/pom.xml

kafka_packages() { java_maven_packages "$KAFKA_POM" "$STATE_DIR/kafka/libs"; }

# The node the kafka_* functions below act on: the single broker here, a
# cluster node in kafka_cluster_paths (servers/kafka-cluster.sh). Every node
# runs the same jars.
kafka_paths() {
  K_LIBS=$STATE_DIR/kafka/libs
  kafka_node_paths "$STATE_DIR/kafka"
  K_PORT=$KAFKA_PORT
  K_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT
}

kafka_node_paths() {
  K_HOME=$1
  K_DATA=$K_HOME/data
  K_CONF=$K_HOME/config
  K_LOGS=$K_HOME/logs
  K_PID=$K_HOME/kafka.pid
}

# The broker jars come from Maven Central via deploy/local/kafka/pom.xml (no
# Debian package exists). Cached per state folder, keyed by the pom's hash, so
# only the first run (or a pom change) calls Maven.
kafka_fetch_libs() { maven_fetch_libs kafka "$KAFKA_POM" "$K_LIBS"; }

# log4j2 configs: the broker logs to a size-capped file; CLI tools log
# warnings to stderr only.
kafka_write_log_config() {
  cat >"$K_CONF/log4j2.properties" <<'EOF'
# written by deploy/local/infra.sh
status = warn
# Keep logging until the JVM is gone: log4j's own shutdown hook would stop it
# while Kafka's shutdown hook is still working, hiding slow or failed stops.
shutdownHook = disable
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.statechange.name = state.change.logger
logger.statechange.level = warn
EOF
  cat >"$K_CONF/tools-log4j2.properties" <<'EOF'
# written by deploy/local/infra.sh
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
EOF
}

# server.properties of the node K_* names, rewritten at each start so port
# changes in the environment take effect: NODE_ID, the quorum's VOTERS
# (id@host:port,...), and the REPLICAS and MIN_ISR of every topic (the
# internal ones included) unless a topic says otherwise.
kafka_write_config() {
  local node_id=$1 voters=$2 replicas=$3 min_isr=$4
  mkdir -p -- "$K_CONF" "$K_DATA" "$K_LOGS" "$K_HOME/tmp"
  kafka_write_log_config
  cat >"$K_CONF/server.properties" <<EOF
# written by deploy/local/infra.sh at each start; edits are lost
process.roles=broker,controller
node.id=$node_id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$K_PORT,CONTROLLER://127.0.0.1:$K_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$K_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$K_DATA
num.partitions=6
default.replication.factor=$replicas
auto.create.topics.enable=true
offsets.topic.replication.factor=$replicas
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
min.insync.replicas=$min_isr
group.initial.rebalance.delay.ms=0
# After a SIGKILL the controller keeps the dead incarnation's registration
# until its session times out (default 9 s) and rejects the restarted broker
# (DUPLICATE_BROKER_REGISTRATION) meanwhile: a short session makes a restart
# after a crash quick (bench/README.md, "Local servers"). The nodes talk over
# loopback, so there are no false timeouts to fear.
broker.session.timeout.ms=2500
broker.heartbeat.interval.ms=500
EOF
}

# A JVM for Kafka's command line tools: C1 only and serial GC start faster.
kafka_java_cli() {
  java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$K_CONF/tools-log4j2.properties" \
    -cp "$K_LIBS/*" "$@"
}

# Kafka 4.x brokers need Java 17 or newer; say so instead of a class version
# error in the broker log.
kafka_check_java() {
  local version
  version=$(java -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p')
  if ! [[ $version =~ ^[0-9]+$ ]] || ((version < 17)); then
    die "kafka: needs Java 17 or newer; 'java' is version '${version:-unknown}'"
  fi
}

# A Kafka cluster id: 16 random bytes, base64url without padding. Like Kafka's
# own random-uuid, never one starting with '-': the tools' argument parser would
# take it for an option (a fresh clone's first start failed on one).
kafka_new_cluster_id() {
  local id
  while id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n') && [[ $id == -* ]]; do :; done
  printf '%s' "$id"
}

# KRaft needs its log dir formatted (meta.properties) once, before first
# start, with the id of the cluster it belongs to (NAME is for the log).
kafka_format() {
  local name=$1 cluster_id=$2 t0
  [[ -f $K_DATA/meta.properties ]] && return 0
  t0=$(now_us)
  log "$name: formatting $K_DATA"
  kafka_java_cli kafka.tools.StorageTool format --ignore-formatted \
    --cluster-id "$cluster_id" --config "$K_CONF/server.properties" >&2 ||
    die "$name: formatting the log dir failed"
  log "$name: formatted in $(since "$t0")"
}

kafka_conf_port() { sed -n 's/^listeners=PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$K_CONF/server.properties"; }

# Where in each broker's log (by K_HOME) its readiness is to be read from:
# the log's size when this `up` launched it. A broker not in it already ran.
declare -A KAFKA_LOG_OFFSETS=()

# Starts the JVM of the node K_* names with HEAP (JVM options), and notes in
# KAFKA_LOG_OFFSETS where in its log readiness is to be read from.
kafka_launch() {
  local name=$1 heap_options=$2
  local -a heap
  read -r -a heap <<<"$heap_options"
  KAFKA_LOG_OFFSETS[$K_HOME]=0
  [[ -f $K_LOGS/server.log ]] && KAFKA_LOG_OFFSETS[$K_HOME]=$(stat -c %s "$K_LOGS/server.log")
  log "$name: starting on 127.0.0.1:$K_PORT (controller $K_CONTROLLER_PORT)"
  spawn "$K_PID" "$K_LOGS/kafka.out" java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.io.tmpdir="$K_HOME/tmp" \
    -Dkafka.logs.dir="$K_LOGS" -Dlog4j2.configurationFile="$K_CONF/log4j2.properties" \
    -cp "$K_LIBS/*" kafka.Kafka "$K_CONF/server.properties"
}

kafka_start() {
  kafka_paths
  if live_pid "$K_PID" "$K_CONF/server.properties" >/dev/null; then
    [[ $(kafka_conf_port) == "$KAFKA_PORT" ]] ||
      die "kafka of $STATE_DIR already runs on port $(kafka_conf_port), not KAFKA_PORT=$KAFKA_PORT; run 'down kafka' first"
    return 0
  fi
  require_free_port kafka KAFKA_PORT "$KAFKA_PORT"
  require_free_port kafka KAFKA_CONTROLLER_PORT "$KAFKA_CONTROLLER_PORT"
  kafka_check_java
  kafka_fetch_libs
  # Single node: every replication factor and ISR minimum is 1.
  kafka_write_config 1 "1@127.0.0.1:$KAFKA_CONTROLLER_PORT" 1 1
  kafka_format kafka "$(kafka_new_cluster_id)"
  kafka_launch kafka "$KAFKA_HEAP"
}

# True once the broker logged "Kafka Server started" after FROM, a byte offset
# (the file may have rolled over meanwhile: then read it from its start).
kafka_started_line() {
  local file=$K_LOGS/server.log from=$1
  [[ -f $file ]] || return 1
  (($(stat -c %s "$file") >= from)) || from=0
  tail -c "+$((from + 1))" "$file" | grep -q 'Kafka Server started'
}

# Ready means: the process lives, the broker port accepts connections and the
# broker logged that it started (KRaft: registered with the controller) since
# this `up` launched it, if it did.
kafka_wait_node() {
  local name=$1 deadline=$((SECONDS + READY_TIMEOUT)) from=${KAFKA_LOG_OFFSETS[$K_HOME]:-}
  while :; do
    live_pid "$K_PID" "$K_CONF/server.properties" >/dev/null ||
      die_with_logs "$name exited during startup" "$K_LOGS/server.log" "$K_LOGS/kafka.out"
    if port_open "$K_PORT" && { [[ -z $from ]] || kafka_started_line "$from"; }; then
      return 0
    fi
    ((SECONDS < deadline)) ||
      die_with_logs "$name not ready after ${READY_TIMEOUT}s" "$K_LOGS/server.log" "$K_LOGS/kafka.out"
    sleep 0.2
  done
}

kafka_wait() {
  kafka_paths
  kafka_wait_node kafka
}

kafka_stop() {
  kafka_paths
  stop_server kafka "$K_PID" "$K_CONF/server.properties"
}

kafka_status() {
  kafka_paths
  local pid
  if pid=$(live_pid "$K_PID" "$K_CONF/server.properties"); then
    status_line kafka running "$pid" "port=$(kafka_conf_port) controller=$KAFKA_CONTROLLER_PORT"
  else
    status_line kafka stopped - "port=$KAFKA_PORT controller=$KAFKA_CONTROLLER_PORT"
  fi
}

kafka_env() { echo "export KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT"; }
