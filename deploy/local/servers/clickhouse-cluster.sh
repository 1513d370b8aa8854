# shellcheck shell=bash
# deploy/local/servers/clickhouse-cluster.sh: the component clickhouse-cluster,
# four servers ch1..ch4 of Debian's clickhouse-server 18.16 over the ZooKeeper
# of servers/zookeeper.sh, run by the clickhouse_* functions of
# servers/clickhouse.sh. Sourced by deploy/local/infra.sh (functions:
# servers/lib.sh).

CLICKHOUSE_CLUSTER_HTTP_PORTS=${CLICKHOUSE_CLUSTER_HTTP_PORTS:-28201,28202,28203,28204}
CLICKHOUSE_CLUSTER_TCP_PORTS=${CLICKHOUSE_CLUSTER_TCP_PORTS:-29201,29202,29203,29204}
CLICKHOUSE_CLUSTER_INTERSERVER_PORTS=${CLICKHOUSE_CLUSTER_INTERSERVER_PORTS:-29301,29302,29303,29304}
CLICKHOUSE_NODES=(ch1 ch2 ch3 ch4)

clickhouse_bin() {
  command -v clickhouse-server 2>/dev/null && return 0
  [[ -x /usr/sbin/clickhouse-server ]] && echo /usr/sbin/clickhouse-server
}

clickhouse_cluster_packages() {
  clickhouse_bin >/dev/null || echo clickhouse-server
  command -v curl >/dev/null || echo curl
}

# A cluster node's config: a copy of the packaged config.xml (Debian's 18.16) with every path pointed into C_HOME, the
# ports HTTP and TCP, 127.0.0.1 only, and no other-protocol ports; the
# replication port INTERSERVER (on 127.0.0.1) only when given. Rewritten at
# each start so port changes take effect; checked afterwards, so a
# differently laid out config.xml fails loudly instead of using /var/lib.
clickhouse_write_config() {
  local http=$1 tcp=$2 interserver=${3:-} src=/etc/clickhouse-server data logs tag interserver_sed
  mkdir -p -- "$C_CONF" "$C_DATA" "$C_LOGS"
  interserver_sed='/<interserver_http_port>/d'
  if [[ -n $interserver ]]; then
    interserver_sed="s|<interserver_http_port>[0-9]*</interserver_http_port>|<interserver_http_port>$interserver</interserver_http_port>\n    <interserver_http_host>127.0.0.1</interserver_http_host>|"
  fi
  data=$(sed_repl "$C_DATA")
  logs=$(sed_repl "$C_LOGS")
  cp -- "$src/users.xml" "$C_CONF/users.xml"
  mkdir -p -- "$C_CONF/users.d"
  cp -- "$REPO_ROOT/deploy/clickhouse/storage-profile.xml" "$C_CONF/users.d/storage-profile.xml"
  sed -e "s|<log>[^<]*</log>|<log>$logs/clickhouse-server.log</log>|" \
    -e "s|<errorlog>[^<]*</errorlog>|<errorlog>$logs/clickhouse-server.err.log</errorlog>|" \
    -e "s|<size>1000M</size>|<size>100M</size>|" \
    -e "s|<count>10</count>|<count>3</count>|" \
    -e "s|<http_port>[0-9]*</http_port>|<http_port>$http</http_port>|" \
    -e "s|<tcp_port>[0-9]*</tcp_port>|<tcp_port>$tcp</tcp_port>\n    <listen_host>127.0.0.1</listen_host>|" \
    -e "$interserver_sed" \
    -e '/<\(https_port\|tcp_port_secure\|mysql_port\|postgresql_port\|grpc_port\)>/d' \
    -e "s|<path>/var/lib/clickhouse/</path>|<path>$data/</path>|" \
    -e "s|<tmp_path>[^<]*</tmp_path>|<tmp_path>$data/tmp/</tmp_path>|" \
    -e "s|<user_files_path>[^<]*</user_files_path>|<user_files_path>$data/user_files/</user_files_path>|" \
    -e "s|<format_schema_path>[^<]*</format_schema_path>|<format_schema_path>$data/format_schemas/</format_schema_path>|" \
    "$src/config.xml" >"$C_CONF/config.xml.tmp"
  for tag in log errorlog path tmp_path user_files_path format_schema_path; do
    grep -q "<$tag>$C_HOME/" "$C_CONF/config.xml.tmp" ||
      die "clickhouse: $src/config.xml has no <$tag> line to point into $C_HOME"
  done
  if grep -q '/var/lib/clickhouse\|/var/log/clickhouse' "$C_CONF/config.xml.tmp"; then
    die "clickhouse: the config copy still names a system path; $src/config.xml changed"
  fi
  mv -- "$C_CONF/config.xml.tmp" "$C_CONF/config.xml"
}

# Node N's paths (clickhouse_home_paths) and ports: CN_NAME, CN_HTTP, CN_TCP,
# CN_INTERSERVER, CN_SHARD.
clickhouse_cluster_node() {
  local n=$1
  CN_NAME=${CLICKHOUSE_NODES[$n - 1]}
  CN_HTTP=$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_HTTP_PORTS "${#CLICKHOUSE_NODES[@]}" "$n")
  CN_TCP=$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_TCP_PORTS "${#CLICKHOUSE_NODES[@]}" "$n")
  CN_INTERSERVER=$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_INTERSERVER_PORTS "${#CLICKHOUSE_NODES[@]}" "$n")
  CN_SHARD=0$(((n + 1) / 2))
  clickhouse_home_paths "$STATE_DIR/clickhouse-cluster/$CN_NAME"
}

# remote_servers' <replica> of node N.
clickhouse_cluster_replica_xml() {
  printf '                <replica><host>127.0.0.1</host><port>%s</port></replica>\n' \
    "$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_TCP_PORTS "${#CLICKHOUSE_NODES[@]}" "$1")"
}

# What makes node CN_* a member of the clusters, in config.d (merged into
# config.xml by the server): the clusters, ZooKeeper, its macros and the DDL
# queue; small caches and fewer background threads, as four servers share
# this machine; debug logging instead of trace. Short ZooKeeper sessions: a
# replica restarted after a SIGKILL waits until its old session has expired
# before it takes part again.
clickhouse_cluster_write_node_config() {
  mkdir -p -- "$C_CONF/config.d" "$C_CONF/users.d"
  cat >"$C_CONF/config.d/cluster.xml" <<EOF
<?xml version="1.0"?>
<!-- written by deploy/local/infra.sh at each start; edits are lost -->
<yandex>
    <logger>
        <level>debug</level>
    </logger>
    <mark_cache_size>134217728</mark_cache_size>
    <uncompressed_cache_size>134217728</uncompressed_cache_size>
    <remote_servers replace="replace">
        <events_1x2>
            <shard>
                <internal_replication>true</internal_replication>
$(clickhouse_cluster_replica_xml 1)
$(clickhouse_cluster_replica_xml 2)
            </shard>
        </events_1x2>
        <events_2x2>
            <shard>
                <internal_replication>true</internal_replication>
$(clickhouse_cluster_replica_xml 1)
$(clickhouse_cluster_replica_xml 2)
            </shard>
            <shard>
                <internal_replication>true</internal_replication>
$(clickhouse_cluster_replica_xml 3)
$(clickhouse_cluster_replica_xml 4)
            </shard>
        </events_2x2>
    </remote_servers>
    <zookeeper replace="replace">
        <node>
            <host>127.0.0.1</host>
            <port>$ZOOKEEPER_PORT</port>
        </node>
        <session_timeout_ms>5000</session_timeout_ms>
    </zookeeper>
    <macros replace="replace">
        <shard>$CN_SHARD</shard>
        <replica>$CN_NAME</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
EOF
  cat >"$C_CONF/users.d/cluster-node.xml" <<'EOF'
<?xml version="1.0"?>
<!-- written by deploy/local/infra.sh at each start; edits are lost -->
<yandex>
    <profiles>
        <default>
            <background_pool_size>4</background_pool_size>
            <background_schedule_pool_size>4</background_schedule_pool_size>
            <max_memory_usage_for_all_queries>2000000000</max_memory_usage_for_all_queries>
        </default>
    </profiles>
</yandex>
EOF
}

# Starts the nodes that do not run (after a kill, only that one).
clickhouse_cluster_start() {
  local n
  for n in "${!CLICKHOUSE_NODES[@]}"; do
    clickhouse_cluster_node $((n + 1))
    if live_pid "$C_PID" "$C_CONF/config.xml" >/dev/null; then
      [[ $(clickhouse_conf_port) == "$CN_HTTP" ]] ||
        die "clickhouse-cluster $CN_NAME of $STATE_DIR already runs on port $(clickhouse_conf_port), not $CN_HTTP; run 'down clickhouse-cluster' first"
      continue
    fi
    require_free_port "clickhouse-cluster $CN_NAME" CLICKHOUSE_CLUSTER_HTTP_PORTS "$CN_HTTP"
    require_free_port "clickhouse-cluster $CN_NAME" CLICKHOUSE_CLUSTER_TCP_PORTS "$CN_TCP"
    require_free_port "clickhouse-cluster $CN_NAME" CLICKHOUSE_CLUSTER_INTERSERVER_PORTS "$CN_INTERSERVER"
    clickhouse_write_config "$CN_HTTP" "$CN_TCP" "$CN_INTERSERVER"
    clickhouse_cluster_write_node_config
    log "clickhouse-cluster: starting $CN_NAME on 127.0.0.1:$CN_HTTP (native $CN_TCP, replication $CN_INTERSERVER)"
    spawn "$C_PID" "$C_LOGS/stdout.log" "$(clickhouse_bin)" --config-file="$C_CONF/config.xml"
  done
}

# Ready means: every node answers a query that reads ZooKeeper.
clickhouse_cluster_wait() {
  local n deadline=$((SECONDS + READY_TIMEOUT))
  for n in "${!CLICKHOUSE_NODES[@]}"; do
    clickhouse_cluster_node $((n + 1))
    until [[ $(curl -fsS --max-time 3 "http://127.0.0.1:$CN_HTTP/" \
      --data-binary "SELECT count() > 0 FROM system.zookeeper WHERE path = '/'" 2>/dev/null) == 1 ]]; do
      starting_or_die "clickhouse-cluster $CN_NAME" "$C_PID" "$C_CONF/config.xml" "$deadline" \
        "$C_LOGS/clickhouse-server.err.log" "$C_LOGS/stdout.log"
      sleep 0.2
    done
  done
}

clickhouse_cluster_stop() {
  local n
  for n in "${!CLICKHOUSE_NODES[@]}"; do
    clickhouse_cluster_node $((n + 1))
    stop_server "clickhouse-cluster $CN_NAME" "$C_PID" "$C_CONF/config.xml"
  done
}

clickhouse_cluster_status() {
  local n pid
  for n in "${!CLICKHOUSE_NODES[@]}"; do
    clickhouse_cluster_node $((n + 1))
    if pid=$(live_pid "$C_PID" "$C_CONF/config.xml"); then
      status_line "clickhouse-$CN_NAME" running "$pid" "port=$(clickhouse_conf_port) tcp=$CN_TCP"
    else
      status_line "clickhouse-$CN_NAME" stopped - "port=$CN_HTTP tcp=$CN_TCP"
    fi
  done
}

clickhouse_cluster_env() {
  local urls=() n
  for n in "${!CLICKHOUSE_NODES[@]}"; do
    urls+=("http://127.0.0.1:$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_HTTP_PORTS "${#CLICKHOUSE_NODES[@]}" $((n + 1)))")
  done
  echo "export CLICKHOUSE_CLUSTER_URLS=$(
    IFS=,
    echo "${urls[*]}"
  )"
}
