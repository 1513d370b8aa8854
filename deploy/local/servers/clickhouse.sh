# shellcheck shell=bash
# deploy/local/servers/clickhouse.sh: the component clickhouse, a current
# ClickHouse (the release line the containers and manifests deploy) from
# PyPI's chdb-core, in a virtualenv of the state folder's tools, served by
# deploy/local/clickhouse-server.py; and the clickhouse_* functions that run
# the nodes of servers/clickhouse-cluster.sh too, which are Debian's
# clickhouse-server 18.16, the one engine here that replicates
# (docs/cluster.md). Sourced by deploy/local/infra.sh (functions:
# servers/lib.sh).

CLICKHOUSE_HTTP_PORT=${CLICKHOUSE_HTTP_PORT:-28123}
CLICKHOUSE_TCP_PORT=${CLICKHOUSE_TCP_PORT:-29000}
# The single ClickHouse: chdb-core's version is the ClickHouse release it holds,
# the release line of the image docker-compose.yml and deploy/k8s run
# (deploy/test/clickhouse-operator.test.ts keeps them together).
CHDB_CORE_VERSION=26.9.0

clickhouse_packages() {
  # Debian's python3 has no venv module until python3-venv is installed.
  python3 -c 'import ensurepip, venv' 2>/dev/null || echo python3-venv
  command -v curl >/dev/null || echo curl
}

# Data of one release in a folder of its own: an upgrade starts empty rather
# than on files an older engine wrote (18.16's are in data/).
clickhouse_paths() {
  clickhouse_home_paths "$STATE_DIR/clickhouse"
  C_DATA=$C_HOME/data-$CHDB_CORE_VERSION
}

# The layout of one server's folder (the single server's, or a cluster node's).
clickhouse_home_paths() {
  C_HOME=$1
  C_CONF=$C_HOME/config
  C_DATA=$C_HOME/data
  C_LOGS=$C_HOME/logs
  C_PID=$C_HOME/clickhouse.pid
}

chdb_paths() {
  tools_paths
  CHDB_VENV=$TOOLS_HOME/chdb-core-$CHDB_CORE_VERSION
}

# The virtualenv with chdb-core, installed once per state folder and version
# into a temporary folder renamed at the end (pip's own cache keeps the wheel
# for other state folders). Only its python runs, which a move does not break.
chdb_install() {
  local t0 tmp
  chdb_paths
  [[ -x $CHDB_VENV/bin/python ]] && return 0
  mkdir -p -- "$TOOLS_HOME"
  t0=$(now_us)
  log "clickhouse: installing chdb-core $CHDB_CORE_VERSION from PyPI into $CHDB_VENV (once)"
  tmp=$(mktemp -d "$TOOLS_HOME/.chdb.XXXXXX")
  # shellcheck disable=SC2015 # the clean-up is for either command failing
  python3 -m venv "$tmp" >&2 &&
    "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "chdb-core==$CHDB_CORE_VERSION" >&2 || {
    rm -rf -- "$tmp"
    die "clickhouse: could not install chdb-core==$CHDB_CORE_VERSION into a virtualenv (python3 -m venv, pip)"
  }
  rm -rf -- "$CHDB_VENV"
  mv -- "$tmp" "$CHDB_VENV"
  log "clickhouse: chdb-core installed in $(since "$t0")"
}

# The single server's config.xml (its ports, 127.0.0.1 only, logs in the state
# folder, the uncompressed cache the packaged server config.xml of the
# containers has and clickhouse-local lacks: analytics reads through it) and its
# users: users.xml with the default user, and users.d/ with the server settings
# shared with docker-compose.yml (deploy/clickhouse/), as a ClickHouse server
# loads them. Rewritten at each start.
clickhouse_write_local_config() {
  mkdir -p -- "$C_CONF/users.d" "$C_DATA" "$C_LOGS"
  cp -- "$REPO_ROOT/deploy/clickhouse/storage-profile.xml" "$C_CONF/users.d/storage-profile.xml"
  cat >"$C_CONF/users.xml" <<'EOF'
<?xml version="1.0"?>
<!-- written by deploy/local/infra.sh at each start; edits are lost -->
<clickhouse>
    <profiles><default/></profiles>
    <users>
        <default>
            <password/>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default/></quotas>
</clickhouse>
EOF
  cat >"$C_CONF/config.xml" <<EOF
<?xml version="1.0"?>
<!-- written by deploy/local/infra.sh at each start; edits are lost -->
<clickhouse>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$CLICKHOUSE_HTTP_PORT</http_port>
    <tcp_port>$CLICKHOUSE_TCP_PORT</tcp_port>
    <users_config>$C_CONF/users.xml</users_config>
    <uncompressed_cache_size>8589934592</uncompressed_cache_size>
    <logger>
        <level>information</level>
        <log>$C_LOGS/clickhouse-server.log</log>
        <errorlog>$C_LOGS/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
        <console>0</console>
    </logger>
</clickhouse>
EOF
}

clickhouse_conf_port() { sed -n 's/.*<http_port>\([0-9]*\)<\/http_port>.*/\1/p' "$C_CONF/config.xml"; }

clickhouse_ping() {
  [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$CLICKHOUSE_HTTP_PORT/ping" 2>/dev/null) == Ok.* ]]
}

clickhouse_start() {
  clickhouse_paths
  if live_pid "$C_PID" "$C_CONF/config.xml" >/dev/null; then
    [[ $(clickhouse_conf_port) == "$CLICKHOUSE_HTTP_PORT" ]] ||
      die "clickhouse of $STATE_DIR already runs on port $(clickhouse_conf_port), not CLICKHOUSE_HTTP_PORT=$CLICKHOUSE_HTTP_PORT; run 'down clickhouse' first"
    return 0
  fi
  chdb_install
  require_free_port clickhouse CLICKHOUSE_HTTP_PORT "$CLICKHOUSE_HTTP_PORT"
  require_free_port clickhouse CLICKHOUSE_TCP_PORT "$CLICKHOUSE_TCP_PORT"
  clickhouse_write_local_config
  log "clickhouse: starting ClickHouse $CHDB_CORE_VERSION (chdb-core) on 127.0.0.1:$CLICKHOUSE_HTTP_PORT (native $CLICKHOUSE_TCP_PORT)"
  spawn "$C_PID" "$C_LOGS/stdout.log" "$CHDB_VENV/bin/python" "$SCRIPT_DIR/clickhouse-server.py" "$C_CONF/config.xml" "$C_DATA"
}

clickhouse_wait() {
  clickhouse_paths
  local deadline=$((SECONDS + READY_TIMEOUT))
  until clickhouse_ping; do
    live_pid "$C_PID" "$C_CONF/config.xml" >/dev/null ||
      die_with_logs "clickhouse exited during startup" "$C_LOGS/clickhouse-server.err.log" "$C_LOGS/stdout.log"
    ((SECONDS < deadline)) ||
      die_with_logs "clickhouse not ready after ${READY_TIMEOUT}s" "$C_LOGS/clickhouse-server.err.log" "$C_LOGS/stdout.log"
    sleep 0.1
  done
}

clickhouse_stop() {
  clickhouse_paths
  stop_server clickhouse "$C_PID" "$C_CONF/config.xml"
}

clickhouse_status() {
  clickhouse_paths
  local pid
  if pid=$(live_pid "$C_PID" "$C_CONF/config.xml"); then
    status_line clickhouse running "$pid" "port=$(clickhouse_conf_port) tcp=$CLICKHOUSE_TCP_PORT version=$CHDB_CORE_VERSION"
  else
    status_line clickhouse stopped - "port=$CLICKHOUSE_HTTP_PORT tcp=$CLICKHOUSE_TCP_PORT version=$CHDB_CORE_VERSION"
  fi
}

clickhouse_env() { echo "export CLICKHOUSE_URL=http://127.0.0.1:$CLICKHOUSE_HTTP_PORT"; }
