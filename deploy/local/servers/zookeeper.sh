# shellcheck shell=bash
# deploy/local/servers/zookeeper.sh: the component zookeeper, one standalone
# Apache ZooKeeper server on the jars that deploy/local/zookeeper/pom.xml
# names, for the ClickHouse cluster (servers/clickhouse-cluster.sh). Sourced
# by deploy/local/infra.sh (functions: servers/lib.sh).

ZOOKEEPER_PORT=${ZOOKEEPER_PORT:-22181}
ZOOKEEPER_HEAP=${ZOOKEEPER_HEAP:--Xmx128m}
ZOOKEEPER_POM=$SCRIPT_DIR/zookeeper/pom.xml

zookeeper_packages() { java_maven_packages "$ZOOKEEPER_POM" "$STATE_DIR/zookeeper/libs"; }

zookeeper_paths() {
  Z_HOME=$STATE_DIR/zookeeper
  Z_LIBS=$Z_HOME/libs
  Z_DATA=$Z_HOME/data
  Z_CONF=$Z_HOME/config
  Z_LOGS=$Z_HOME/logs
  Z_PID=$Z_HOME/zookeeper.pid
}

# Rewritten at each start so a port change takes effect. tickTime 1000 lets
# ClickHouse ask for short sessions (minimum 2 ticks); see
# clickhouse_cluster_write_node_config (servers/clickhouse-cluster.sh). Small preallocated log files and
# automatic purging keep the folder small; fsync stays on.
zookeeper_write_config() {
  mkdir -p -- "$Z_CONF" "$Z_DATA" "$Z_LOGS" "$Z_HOME/tmp"
  cat >"$Z_CONF/zoo.cfg" <<EOF
# written by deploy/local/infra.sh at each start; edits are lost
tickTime=1000
dataDir=$Z_DATA
clientPort=$ZOOKEEPER_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
preAllocSize=4096
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
EOF
  cat >"$Z_CONF/logback.xml" <<EOF
<!-- written by deploy/local/infra.sh -->
<configuration>
  <appender name="file" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>$Z_LOGS/zookeeper.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>$Z_LOGS/zookeeper.log.%i</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>20MB</maxFileSize>
    </triggeringPolicy>
    <encoder>
      <pattern>%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="file"/>
  </root>
</configuration>
EOF
}

zookeeper_conf_port() { sed -n 's/^clientPort=//p' "$Z_CONF/zoo.cfg"; }

# The answer to a four-letter command (srvr, ruok, ...) on the client port.
zookeeper_4lw() {
  # shellcheck disable=SC2016 # $0 and $1 belong to the inner shell
  timeout 3 bash -c 'exec 5<>"/dev/tcp/127.0.0.1/$0" && printf %s "$1" >&5 && cat <&5' \
    "$ZOOKEEPER_PORT" "$1" 2>/dev/null
}

zookeeper_start() {
  zookeeper_paths
  if live_pid "$Z_PID" "$Z_CONF/zoo.cfg" >/dev/null; then
    [[ $(zookeeper_conf_port) == "$ZOOKEEPER_PORT" ]] ||
      die "zookeeper of $STATE_DIR already runs on port $(zookeeper_conf_port), not ZOOKEEPER_PORT=$ZOOKEEPER_PORT; run 'down zookeeper' first"
    return 0
  fi
  require_free_port zookeeper ZOOKEEPER_PORT "$ZOOKEEPER_PORT"
  maven_fetch_libs zookeeper "$ZOOKEEPER_POM" "$Z_LIBS"
  zookeeper_write_config
  local -a heap
  read -r -a heap <<<"$ZOOKEEPER_HEAP"
  log "zookeeper: starting on 127.0.0.1:$ZOOKEEPER_PORT"
  spawn "$Z_PID" "$Z_LOGS/zookeeper.out" java "${heap[@]}" -XX:+UseSerialGC \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.io.tmpdir="$Z_HOME/tmp" \
    -Dlogback.configurationFile="$Z_CONF/logback.xml" \
    -cp "$Z_LIBS/*" org.apache.zookeeper.server.ZooKeeperServerMain "$Z_CONF/zoo.cfg"
}

# Ready means: the server says it serves (standalone mode).
zookeeper_wait() {
  zookeeper_paths
  local deadline=$((SECONDS + READY_TIMEOUT))
  until [[ $(zookeeper_4lw srvr) == *"Mode: standalone"* ]]; do
    starting_or_die zookeeper "$Z_PID" "$Z_CONF/zoo.cfg" "$deadline" "$Z_LOGS/zookeeper.log" "$Z_LOGS/zookeeper.out"
    sleep 0.2
  done
}

zookeeper_stop() {
  zookeeper_paths
  stop_server zookeeper "$Z_PID" "$Z_CONF/zoo.cfg"
}

zookeeper_status() {
  zookeeper_paths
  local pid
  if pid=$(live_pid "$Z_PID" "$Z_CONF/zoo.cfg"); then
    status_line zookeeper running "$pid" "port=$(zookeeper_conf_port)"
  else
    status_line zookeeper stopped - "port=$ZOOKEEPER_PORT"
  fi
}

zookeeper_env() { echo "export ZOOKEEPER_ADDRESS=127.0.0.1:$ZOOKEEPER_PORT"; }
