#!/usr/bin/env bash
# deploy/local/infra.sh: run the project's real servers natively (no Docker):
# PostgreSQL 15, Apache Kafka (one KRaft node) and ClickHouse (a current
# release from PyPI's chdb-core, served by deploy/local/clickhouse-server.py
# from a virtualenv in <state folder>/tools), bound to 127.0.0.1, with everything they write (data, logs, PID files, config copies)
# under one state folder, so several state folders with different ports can
# run side by side and a clean clone needs nothing but this script. Two more
# components are built from their Go modules on first use (the Go module
# proxy; Go 1.26 or newer) into <state folder>/tools, and are only brought up
# when named: jaeger, the trace backend (Jaeger v2: OTLP/HTTP in, query API
# and UI out, traces in memory; deploy/local/jaeger.yaml), promtool,
# Prometheus's rule checker (installed, not run), and mailpit, the local SMTP
# server the delivery service sends to (SMTP in, web page and HTTP API out,
# messages in <state folder>/mailpit, its "chaos" switch on so tests can make
# it answer SMTP errors; its web page is built first with Mailpit's own npm
# build, from the npm registry), and bounce-mailpit, a second Mailpit of the
# same binary that is the local bounce mailbox (bounces and feedback reports
# arrive by SMTP; the delivery service reads them over POP3, user bounces,
# password bounces; messages in <state folder>/bounce-mailpit). Also only when named, the
# local clusters: kafka-cluster, three Kafka KRaft nodes k1..k3 (each broker
# and controller, one quorum) from the same jars, whose topics get replication
# factor 3 and min.insync.replicas=2 by default; zookeeper (Apache ZooKeeper
# from Maven Central via deploy/local/zookeeper/pom.xml, one standalone
# server) and clickhouse-cluster (four servers ch1..ch4 of Debian's
# clickhouse-server 18.16, the one engine here that replicates, coordinated by
# that ZooKeeper; `up clickhouse-cluster` brings
# zookeeper up too). Their remote_servers define two clusters: events_1x2 (one
# shard, replicas ch1 and ch2) and events_2x2 (shard 01 = ch1, ch2; shard 02 =
# ch3, ch4), with the macros {shard} (01 or 02, the same in both clusters) and
# {replica} (ch1..ch4), and ON CLUSTER DDL through /clickhouse/task_queue/ddl.
# The cluster tests (deploy/cluster-test) run on them.
#
#   infra.sh up     [COMPONENT...]  install what is missing, start what is not
#                                   running, wait until each server answers,
#                                   then print `export VAR=...` lines on stdout
#   infra.sh down   [COMPONENT...]  stop what this state folder started (by
#                                   default the servers, jaeger and the
#                                   clusters, zookeeper included)
#   infra.sh status [COMPONENT...]  one line each (one per node of a cluster);
#                                   exit 0 if all run, else 3
#   infra.sh env    [COMPONENT...]  print the `export` lines only
#   infra.sh kafka-cli CLASS [ARG...]  run a Kafka CLI class on the broker jars,
#       e.g. kafka-cli org.apache.kafka.tools.TopicCommand --list \
#              --bootstrap-server 127.0.0.1:29092
#
# COMPONENT is postgres, kafka, clickhouse, jaeger, promtool, mailpit,
# bounce-mailpit, kafka-cluster, zookeeper or clickhouse-cluster (default: the first three; a
# plain `down` stops all but promtool). Settings (environment): STATE_DIR (default <repo>/.state),
# PG_PORT=25432, KAFKA_PORT=29092, KAFKA_CONTROLLER_PORT=29093,
# CLICKHOUSE_HTTP_PORT=28123, CLICKHOUSE_TCP_PORT=29000, JAEGER_OTLP_PORT=24318
# (OTLP/HTTP), JAEGER_QUERY_PORT=26686 (query API and UI),
# JAEGER_QUERY_GRPC_PORT=26685, JAEGER_HEALTH_PORT=23133, KAFKA_HEAP=-Xmx512m,
# MAILPIT_SMTP_PORT=21025, MAILPIT_HTTP_PORT=28025 (web page and API),
# MAILPIT_MAX_MESSAGES=100000 (older ones are deleted past it),
# BOUNCE_MAILPIT_SMTP_PORT=21026, BOUNCE_MAILPIT_POP3_PORT=21110,
# BOUNCE_MAILPIT_HTTP_PORT=28026 (web page and API),
# READY_TIMEOUT=90 (s), STOP_TIMEOUT=30 (s). jaeger exports
# JAEGER_OTLP_ENDPOINT and JAEGER_QUERY_URL, promtool PROMTOOL (its path),
# mailpit MAILPIT_SMTP_URL (smtp://...?tls=off, as SMTP_URL takes it),
# MAILPIT_API_URL and MAILPIT_BIN (tests start private ones with it);
# bounce-mailpit BOUNCE_MAILPIT_SMTP_URL, BOUNCE_MAILPIT_API_URL and
# BOUNCE_MAILPIT_POP3_URL (pop3://bounces:bounces@..., as BOUNCE_MAILBOX_URL takes it).
# KAFKA_CLUSTER_PORTS=29111,29112,29113 (nodes k1..k3),
# KAFKA_CLUSTER_CONTROLLER_PORTS=29121,29122,29123, KAFKA_CLUSTER_HEAP=-Xmx384m
# (each node); kafka-cluster exports KAFKA_CLUSTER_BROKERS.
# ZOOKEEPER_PORT=22181, ZOOKEEPER_HEAP=-Xmx128m, and the cluster's ports as
# comma-separated lists for ch1..ch4: CLICKHOUSE_CLUSTER_HTTP_PORTS=28201,..,28204,
# CLICKHOUSE_CLUSTER_TCP_PORTS=29201,..,29204 and
# CLICKHOUSE_CLUSTER_INTERSERVER_PORTS=29301,..,29304 (replication). zookeeper
# exports ZOOKEEPER_ADDRESS, clickhouse-cluster CLICKHOUSE_CLUSTER_URLS (the
# four HTTP URLs, comma-separated).
#
# Progress and errors go to stderr and only the export lines to stdout, so
#   eval "$(deploy/local/infra.sh up)"
# works. Must run as root (apt-get, and runuser to start postgres).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)
KAFKA_POM=$SCRIPT_DIR/kafka/pom.xml
ZOOKEEPER_POM=$SCRIPT_DIR/zookeeper/pom.xml

PG_PORT=${PG_PORT:-25432}
KAFKA_PORT=${KAFKA_PORT:-29092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-29093}
CLICKHOUSE_HTTP_PORT=${CLICKHOUSE_HTTP_PORT:-28123}
CLICKHOUSE_TCP_PORT=${CLICKHOUSE_TCP_PORT:-29000}
JAEGER_OTLP_PORT=${JAEGER_OTLP_PORT:-24318}
JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT:-26686}
JAEGER_QUERY_GRPC_PORT=${JAEGER_QUERY_GRPC_PORT:-26685}
JAEGER_HEALTH_PORT=${JAEGER_HEALTH_PORT:-23133}
# Jaeger v2's Go module keeps the v1 tag line: v1.76.0 is Jaeger v2.13's cmd/jaeger.
JAEGER_MODULE_VERSION=v1.76.0
# Prometheus 3.x's Go module tags are v0.3xx: v0.316.0 is Prometheus 3.16.
PROMETHEUS_MODULE_VERSION=v0.316.0
MAILPIT_MODULE_VERSION=v1.33.1
MAILPIT_SMTP_PORT=${MAILPIT_SMTP_PORT:-21025}
MAILPIT_HTTP_PORT=${MAILPIT_HTTP_PORT:-28025}
MAILPIT_MAX_MESSAGES=${MAILPIT_MAX_MESSAGES:-100000}
BOUNCE_MAILPIT_SMTP_PORT=${BOUNCE_MAILPIT_SMTP_PORT:-21026}
BOUNCE_MAILPIT_POP3_PORT=${BOUNCE_MAILPIT_POP3_PORT:-21110}
BOUNCE_MAILPIT_HTTP_PORT=${BOUNCE_MAILPIT_HTTP_PORT:-28026}
# The single ClickHouse: chdb-core's version is the ClickHouse release it holds,
# the release line of the image docker-compose.yml and deploy/k8s run
# (deploy/test/clickhouse-version.test.ts keeps them together).
CHDB_CORE_VERSION=26.9.0
KAFKA_HEAP=${KAFKA_HEAP:--Xmx512m}
KAFKA_CLUSTER_PORTS=${KAFKA_CLUSTER_PORTS:-29111,29112,29113}
KAFKA_CLUSTER_CONTROLLER_PORTS=${KAFKA_CLUSTER_CONTROLLER_PORTS:-29121,29122,29123}
KAFKA_CLUSTER_HEAP=${KAFKA_CLUSTER_HEAP:--Xmx384m}
ZOOKEEPER_PORT=${ZOOKEEPER_PORT:-22181}
ZOOKEEPER_HEAP=${ZOOKEEPER_HEAP:--Xmx128m}
CLICKHOUSE_CLUSTER_HTTP_PORTS=${CLICKHOUSE_CLUSTER_HTTP_PORTS:-28201,28202,28203,28204}
CLICKHOUSE_CLUSTER_TCP_PORTS=${CLICKHOUSE_CLUSTER_TCP_PORTS:-29201,29202,29203,29204}
CLICKHOUSE_CLUSTER_INTERSERVER_PORTS=${CLICKHOUSE_CLUSTER_INTERSERVER_PORTS:-29301,29302,29303,29304}
READY_TIMEOUT=${READY_TIMEOUT:-90}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

ALL_COMPONENTS=(postgres kafka clickhouse)
OPTIONAL_COMPONENTS=(jaeger promtool mailpit bounce-mailpit kafka-cluster zookeeper clickhouse-cluster)
CLICKHOUSE_NODES=(ch1 ch2 ch3 ch4)
COMPONENTS=()
POLICY_RC=/usr/sbin/policy-rc.d
POLICY_RC_SAVED=$POLICY_RC.infra-sh-saved
POLICY_RC_OURS=0

# fd 3 keeps the caller's stdout for the export lines alone; everything else,
# including what child processes print (apt, Maven, pg_ctl), goes to stderr.
exec 3>&1 1>&2

log() { printf '[infra] %s\n' "$*" >&2; }
die() {
  printf '[infra] ERROR: %s\n' "$*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

# --- small helpers -----------------------------------------------------------

# Microseconds since the epoch; digits only, whatever LC_NUMERIC's separator.
now_us() { printf '%s\n' "${EPOCHREALTIME//[!0-9]/}"; }

# Seconds (one decimal) since a now_us value.
since() {
  local ms=$((($(now_us) - $1) / 1000))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The state letter of PID (R, S, D, Z, ...); fails when there is no such PID.
proc_state() {
  local state
  state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
  [[ -n $state ]] && printf '%s\n' "$state"
}

# True when PID exists and is not a zombie (an unreaped corpse is not running).
pid_running() {
  local state
  state=$(proc_state "$1") && [[ $state != Z ]]
}

# True when PID runs and its command line contains MARK (a path inside this
# state folder): a recycled PID, now some unrelated process, is never taken for
# ours, so `down` cannot kill anything else.
pid_is_ours() {
  local pid=$1 mark=$2 cmd
  [[ $pid =~ ^[0-9]+$ ]] && pid_running "$pid" || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$mark"* ]]
}

# Prints the PID in PIDFILE if pid_is_ours.
live_pid() {
  local pid
  [[ -s $1 ]] || return 1
  pid=$(<"$1")
  pid_is_ours "$pid" "$2" || return 1
  printf '%s\n' "$pid"
}

# Starts "$@" in the background, detached: its own session (setsid), so a
# signal to the caller's process group (Ctrl-C, a test runner ending its job)
# does not reach the server; stdio on files; without our fd 3 (the caller's
# stdout: `$(infra.sh up)` would wait for it to close, i.e. forever) and fd 9
# (the state lock). The wrapper shell writes its own PID and then execs the
# server, so the PID file names the server process itself.
spawn() {
  local pidfile=$1 outfile=$2 i
  shift 2
  rm -f -- "$pidfile"
  # shellcheck disable=SC2016 # $$ and $@ belong to the wrapper shell
  nohup setsid bash -c 'echo "$$" >"$0"; exec "$@"' "$pidfile" "$@" \
    </dev/null >>"$outfile" 2>&1 3>&- 9>&- &
  for ((i = 0; i < 100; i++)); do
    [[ -s $pidfile ]] && return 0
    sleep 0.05
  done
  die "could not launch $1 (see $outfile)"
}

# SIGTERM, wait up to STOP_TIMEOUT seconds, then SIGKILL.
stop_pid() {
  local name=$1 pid=$2 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
    pid_running "$pid" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) still running ${STOP_TIMEOUT}s after SIGTERM: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    pid_running "$pid" || return 0
    sleep 0.1
  done
  die "$name (pid $pid) survived SIGKILL"
}

# Stops NAME's server if the PID file names a live one started with MARKER on
# its command line; the PID file goes either way.
stop_server() {
  local name=$1 pidfile=$2 marker=$3 pid
  if pid=$(live_pid "$pidfile" "$marker"); then
    log "$name: stopping (pid $pid)"
    stop_pid "$name" "$pid"
  else
    log "$name: not running"
  fi
  rm -f -- "$pidfile"
}

# Escapes a string for the replacement side of a sed s|...|...| command.
sed_repl() { printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'; }

# True when a server can listen on 127.0.0.1:PORT. Node's listen sets
# SO_REUSEADDR, as every server here does, so the ends of a killed server's
# connections (TIME-WAIT) do not count.
port_bindable() {
  node -e 'require("net").createServer().once("error", () => process.exit(1))
    .listen(Number(process.argv[1]), "127.0.0.1", () => process.exit(0))' "$1"
}

# The states of the TCP sockets whose own end is PORT, counted ("1 ESTAB").
port_sockets() {
  ss -Htan "sport = :$1" 2>/dev/null | awk '{ n[$1]++ } END { for (s in n) printf "%s%d %s", sep, n[s], s; sep = ", " }'
}

# Fails unless PORT is free: a port held by something that is not ours would
# otherwise show up as a confusing startup failure deep in a server log. The
# client end of a connection holds its port too, until a minute after it
# closes (TIME-WAIT), and the kernel picks those ports from
# net.ipv4.ip_local_port_range; the defaults lie below that range, and a port
# held only that way is waited for.
require_free_port() {
  local name=$1 var=$2 port=$3 deadline=$((SECONDS + 70))
  if port_open "$port"; then
    die "$name: 127.0.0.1:$port is already in use by another process; choose another $var"
  fi
  port_bindable "$port" && return 0
  log "$name: port $port is held by connections ($(port_sockets "$port")); waiting for them to close"
  until port_bindable "$port"; do
    ((SECONDS < deadline)) ||
      die "$name: port $port is still held by connections ($(port_sockets "$port")); choose another $var, outside the range the kernel picks client ports from ($(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range))"
    sleep 1
  done
}

# Fails with the last lines of each LOG, so that the cause shows where the
# state folder is gone afterwards (a CI machine).
die_with_logs() {
  local message=$1 file
  shift
  for file in "$@"; do
    [[ -s $file ]] || continue
    log "last lines of $file:"
    tail -n 20 -- "$file" | sed 's/^/[infra]   /' >&2
  done
  die "$message; see $*"
}

# --- installation (Debian packages) -------------------------------------------

clickhouse_bin() {
  command -v clickhouse-server 2>/dev/null && return 0
  [[ -x /usr/sbin/clickhouse-server ]] && echo /usr/sbin/clickhouse-server
}

# True when LIBS holds the jars of POM (the hash of the pom they came from).
maven_libs_cached() {
  local pom=$1 libs=$2 want
  [[ -f $libs/.pom.sha256 ]] || return 1
  want=$(sha256sum <"$pom")
  [[ $(<"$libs/.pom.sha256") == "${want%% *}" ]]
}

kafka_libs_cached() { maven_libs_cached "$KAFKA_POM" "$STATE_DIR/kafka/libs"; }
zookeeper_libs_cached() { maven_libs_cached "$ZOOKEEPER_POM" "$STATE_DIR/zookeeper/libs"; }

# Fetches the jars of POM and their dependencies from Maven Central into LIBS,
# once per state folder and pom (cached by the pom's hash), into a temporary
# folder renamed at the end.
maven_fetch_libs() {
  local name=$1 pom=$2 libs=$3 t0 sum
  maven_libs_cached "$pom" "$libs" && return 0
  t0=$(now_us)
  log "$name: fetching jars with Maven into $libs (once)"
  rm -rf -- "$libs.tmp"
  # Maven 3.8 prints colour resets even with -q -B: strip escape sequences.
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$libs.tmp" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2 || die "$name: Maven could not fetch the jars"
  sum=$(sha256sum <"$pom")
  printf '%s\n' "${sum%% *}" >"$libs.tmp/.pom.sha256"
  rm -rf -- "$libs"
  mv -- "$libs.tmp" "$libs"
  log "$name: jars fetched in $(since "$t0")"
}

# Debian packages that the requested components need and this machine lacks.
missing_packages() {
  local c
  for c in "${COMPONENTS[@]}"; do
    case $c in
      postgres) [[ -x $PG_BIN/initdb && -x $PG_BIN/psql ]] || echo postgresql ;;
      clickhouse)
        # Debian's python3 has no venv module until python3-venv is installed.
        python3 -c 'import ensurepip, venv' 2>/dev/null || echo python3-venv
        command -v curl >/dev/null || echo curl
        ;;
      jaeger | mailpit | bounce-mailpit) command -v curl >/dev/null || echo curl ;;
      kafka | kafka-cluster)
        command -v java >/dev/null || echo openjdk-17-jre-headless
        kafka_libs_cached || command -v mvn >/dev/null || echo maven
        ;;
      zookeeper)
        command -v java >/dev/null || echo openjdk-17-jre-headless
        zookeeper_libs_cached || command -v mvn >/dev/null || echo maven
        ;;
      clickhouse-cluster)
        clickhouse_bin >/dev/null || echo clickhouse-server
        command -v curl >/dev/null || echo curl
        ;;
    esac
  done | sort -u
}

# Debian's postinst scripts start the system postgres (5432) and clickhouse
# (8123/9000) through invoke-rc.d unless /usr/sbin/policy-rc.d exits 101. We
# run private instances only, so forbid service starts during our install; any
# policy-rc.d that was there before is put back afterwards.
block_service_starts() {
  # A saved copy left by an interrupted run is the original: keep it.
  if [[ -e $POLICY_RC && ! -e $POLICY_RC_SAVED ]]; then
    mv -- "$POLICY_RC" "$POLICY_RC_SAVED"
  fi
  POLICY_RC_OURS=1
  printf '#!/bin/sh\n# temporary, from deploy/local/infra.sh\nexit 101\n' >"$POLICY_RC"
  chmod 755 "$POLICY_RC"
}

restore_service_starts() {
  [[ $POLICY_RC_OURS == 1 ]] || return 0
  rm -f -- "$POLICY_RC"
  if [[ -e $POLICY_RC_SAVED ]]; then mv -- "$POLICY_RC_SAVED" "$POLICY_RC"; fi
  POLICY_RC_OURS=0
}

# apt-get update (once) and install whatever is missing. A machine-wide lock,
# because policy-rc.d is machine-wide and another state folder's `up` may be
# installing at the same moment.
install_missing() {
  local -a pkgs
  mapfile -t pkgs < <(missing_packages)
  ((${#pkgs[@]})) || return 0
  [[ $EUID -eq 0 ]] || die "must run as root to install: ${pkgs[*]}"
  exec 8>"${TMPDIR:-/tmp}/infra-sh-apt.lock"
  flock -w 900 8 || die "timed out waiting for another infra.sh's apt-get"
  mapfile -t pkgs < <(missing_packages) # the other one may have done it
  if ((${#pkgs[@]})); then
    local t0
    t0=$(now_us)
    log "installing: ${pkgs[*]}"
    block_service_starts
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q -o DPkg::Lock::Timeout=600 update >&2
    apt-get -q -y -o DPkg::Lock::Timeout=600 install "${pkgs[@]}" >&2
    restore_service_starts
    log "installed in $(since "$t0")"
  fi
  exec 8>&-
}

# --- PostgreSQL ---------------------------------------------------------------

pg_paths() {
  PG_HOME=$STATE_DIR/postgres
  PG_DATA=$PG_HOME/data
  PG_RUN=$PG_HOME/run
  PG_LOG=$PG_HOME/log/postgres.log
}

# Runs a command as the postgres OS user (postgres refuses to run as root),
# from / so that an unreadable current directory does not matter.
as_pg() { (cd / && exec runuser -u postgres -- "$@"); }

pg_ctl_() { as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" "$@"; }

# Line 1 of postmaster.pid is the PID, line 4 the port.
pg_pid() { sed -n 1p "$PG_DATA/postmaster.pid" 2>/dev/null; }
pg_running_port() { sed -n 4p "$PG_DATA/postmaster.pid"; }

# Not `pg_ctl status`: it takes a zombie postmaster (SIGKILLed, not yet
# reaped by PID 1, which takes a moment: bench/README.md, "Local servers") for
# a running one, and then `up` would wait for a dead server. The command line
# check rules out a recycled PID.
pg_running() {
  local pid
  pid=$(pg_pid) && pid_is_ours "$pid" "$PG_DATA"
}

# After a SIGKILL the postmaster lingers as a zombie for a moment, and postgres
# refuses to start while the PID in postmaster.pid exists ("lock file already
# exists"). Wait for the zombie to be reaped; once the PID is gone, postgres
# handles the stale file itself (including its check that no orphaned backend
# still uses the old shared memory). If the PID stays taken (a zombie never
# reaped, or a recycled PID), the file is stale all the same: remove it.
pg_clear_stale_pid() {
  local pid state i
  pid=$(pg_pid) && [[ $pid =~ ^[0-9]+$ ]] || return 0
  for ((i = 0; i < 50; i++)); do
    state=$(proc_state "$pid") || return 0
    [[ $state == Z ]] || break
    sleep 0.1
  done
  log "postgres: pid $pid of the stale postmaster.pid is still taken; removing the file"
  rm -f -- "$PG_DATA/postmaster.pid"
}

# initdb once, into a temporary folder renamed at the end, so an interrupted
# initdb never leaves a half-made cluster that later runs would take as done.
pg_init() {
  [[ -f $PG_DATA/PG_VERSION ]] && return 0
  local t0
  t0=$(now_us)
  mkdir -p -- "$PG_HOME/run" "$PG_HOME/log"
  chown postgres:postgres "$PG_HOME" "$PG_HOME/run" "$PG_HOME/log"
  as_pg test -w "$PG_HOME" ||
    die "user postgres cannot write $PG_HOME: each folder above it must be searchable by others (chmod o+x)"
  rm -rf -- "$PG_DATA.tmp"
  log "postgres: initdb $PG_DATA"
  as_pg "$PG_BIN/initdb" -D "$PG_DATA.tmp" -U postgres -E UTF8 --locale=C.UTF-8 \
    --auth-local=peer --auth-host=scram-sha-256 >>"$PG_HOME/log/initdb.log"
  # fsync stays on: durability is tested. The include holds the settings
  # that come from the environment and is rewritten at each start.
  cat >>"$PG_DATA.tmp/postgresql.conf" <<'EOF'

# --- deploy/local/infra.sh: dev box tuning (fsync stays on) ---
max_connections = 300
shared_buffers = 256MB
include_if_exists = 'infra-runtime.conf'
EOF
  mv -- "$PG_DATA.tmp" "$PG_DATA"
  log "postgres: initdb done in $(since "$t0")"
}

# Port, address and socket folder come from the environment at each start.
pg_write_runtime_conf() {
  local conf=$PG_DATA/infra-runtime.conf
  cat >"$conf" <<EOF
# written by deploy/local/infra.sh at each start; edits are lost
port = $PG_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '${PG_RUN//\'/\'\'}'
EOF
  chown postgres:postgres "$conf"
}

# After a SIGKILL of the postmaster its orphaned backends may hold the shared
# memory for a moment ("pre-existing shared memory block is still in use"), so
# a failed start is retried a few times before giving up.
pg_start() {
  require_free_port postgres PG_PORT "$PG_PORT"
  pg_write_runtime_conf
  pg_clear_stale_pid
  local try
  for try in 1 2 3 4 5; do
    if pg_ctl_ -l "$PG_LOG" -w -t "$READY_TIMEOUT" start >/dev/null 3>&- 9>&-; then
      return 0
    fi
    log "postgres: start attempt $try failed; retrying"
    sleep 2
  done
  die "postgres did not start; see $PG_LOG"
}

# What pg_provision does, numbered: a state folder provisioned by an earlier
# number is provisioned again (every statement may run twice).
PG_PROVISION_VERSION=3

# Role and database for the services; CREATEDB so tests can make their own,
# and pg_signal_backend so that their DROP DATABASE ... WITH (FORCE) may end
# an autovacuum worker in that database, a process of no role. And the login
# recipient queries run as (mail_recipients): no rights of its own, granted
# SELECT on a recipient database's accounts (deploy/local/src/recipients.ts).
pg_provision() {
  [[ $(cat -- "$PG_HOME/.provisioned" 2>/dev/null) == "$PG_PROVISION_VERSION" ]] && return 0
  as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$PG_RUN" -p "$PG_PORT" -d postgres <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mail') THEN
    CREATE ROLE mail LOGIN CREATEDB PASSWORD 'mail';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mail_recipients') THEN
    CREATE ROLE mail_recipients LOGIN NOINHERIT PASSWORD 'mail_recipients';
  END IF;
END
$$;
GRANT pg_signal_backend TO mail;
SELECT 'CREATE DATABASE mail OWNER mail'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'mail') \gexec
SQL
  printf '%s\n' "$PG_PROVISION_VERSION" >"$PG_HOME/.provisioned"
}

# Ready means: the mail user can log in over TCP and run a query.
pg_wait_ready() {
  local deadline=$((SECONDS + READY_TIMEOUT))
  until [[ $(PGPASSWORD=mail PGCONNECT_TIMEOUT=3 "$PG_BIN/psql" -X -Atq \
    -h 127.0.0.1 -p "$PG_PORT" -U mail -d mail -c 'SELECT 1' 2>/dev/null) == 1 ]]; do
    ((SECONDS < deadline)) || die "postgres does not answer on 127.0.0.1:$PG_PORT; see $PG_LOG"
    sleep 0.2
  done
}

postgres_start() {
  pg_paths
  if pg_running; then
    local port
    port=$(pg_running_port)
    [[ $port == "$PG_PORT" ]] ||
      die "postgres of $STATE_DIR already runs on port $port, not PG_PORT=$PG_PORT; run 'down postgres' first"
    # A server started by an older checkout may lack what a newer provisioning adds.
    pg_provision
    return 0
  fi
  pg_init
  log "postgres: starting on 127.0.0.1:$PG_PORT"
  pg_start
  pg_provision
}

postgres_wait() { pg_paths && pg_wait_ready; }

postgres_stop() {
  pg_paths
  if ! pg_running; then
    log "postgres: not running"
    return 0
  fi
  log "postgres: stopping (pid $(pg_pid))"
  pg_ctl_ stop -m fast -w -t "$STOP_TIMEOUT" >/dev/null ||
    pg_ctl_ stop -m immediate -w >/dev/null
}

postgres_status() {
  pg_paths
  if pg_running; then
    status_line postgres running "$(pg_pid)" "port=$(pg_running_port)"
  else
    status_line postgres stopped - "port=$PG_PORT"
  fi
}

# --- Kafka (KRaft, broker + controller in one JVM) ----------------------------

# The node the kafka_* functions below act on: the single broker here, a
# cluster node in kafka_cluster_paths. Every node runs the same jars.
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

# --- Kafka cluster (three KRaft nodes, each broker + controller) ---------------

# The port of node N (1-based) of a COMPONENT of COUNT nodes, from the
# comma-separated list in the variable VAR.
nth_port() {
  local component=$1 var=$2 count=$3 n=$4 ports
  IFS=, read -r -a ports <<<"${!var}"
  ((${#ports[@]} == count)) || die "$component: $var='${!var}' must list $count ports"
  printf '%s\n' "${ports[n - 1]}"
}


KAFKA_CLUSTER_NODES=(1 2 3)

# The node N of the cluster (k1..k3) for the kafka_* functions: its folder,
# ports, and the jars of the single broker's cache.
kafka_cluster_paths() {
  local n=$1 nodes=${#KAFKA_CLUSTER_NODES[@]}
  KC_HOME=$STATE_DIR/kafka-cluster
  K_LIBS=$STATE_DIR/kafka/libs
  kafka_node_paths "$KC_HOME/k$n"
  K_PORT=$(nth_port kafka-cluster KAFKA_CLUSTER_PORTS "$nodes" "$n")
  K_CONTROLLER_PORT=$(nth_port kafka-cluster KAFKA_CLUSTER_CONTROLLER_PORTS "$nodes" "$n")
}

# Every node is a voter of the one controller quorum.
kafka_cluster_voters() {
  local n voters=()
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    voters+=("$n@127.0.0.1:$K_CONTROLLER_PORT")
  done
  (IFS=, && printf '%s\n' "${voters[*]}")
}

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
  voters=$(kafka_cluster_voters)
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

kafka_cluster_brokers() {
  local n brokers=()
  for n in "${KAFKA_CLUSTER_NODES[@]}"; do
    kafka_cluster_paths "$n"
    brokers+=("127.0.0.1:$K_PORT")
  done
  (IFS=, && printf '%s\n' "${brokers[*]}")
}

# --- ClickHouse ----------------------------------------------------------------------
# The single server is a current ClickHouse (the release line the containers
# and manifests deploy) from PyPI's chdb-core, in a virtualenv of the state
# folder's tools, served by deploy/local/clickhouse-server.py. The cluster
# nodes (below) are Debian's clickhouse-server 18.16, the one engine here that
# replicates (docs/cluster.md).

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
  [[ $(curl -fsS --max-time 2 "http://127.0.0.1:${1:-$CLICKHOUSE_HTTP_PORT}/ping" 2>/dev/null) == Ok.* ]]
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

# --- ZooKeeper (one standalone server, for the ClickHouse cluster) -------------

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
# clickhouse_cluster_write_node_config. Small preallocated log files and
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
    live_pid "$Z_PID" "$Z_CONF/zoo.cfg" >/dev/null ||
      die_with_logs "zookeeper exited during startup" "$Z_LOGS/zookeeper.log" "$Z_LOGS/zookeeper.out"
    ((SECONDS < deadline)) ||
      die_with_logs "zookeeper not ready after ${READY_TIMEOUT}s" "$Z_LOGS/zookeeper.log"
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

# --- ClickHouse cluster (ch1..ch4 over one ZooKeeper) --------------------------

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
      live_pid "$C_PID" "$C_CONF/config.xml" >/dev/null ||
        die_with_logs "clickhouse-cluster $CN_NAME exited during startup" "$C_LOGS/clickhouse-server.err.log" "$C_LOGS/stdout.log"
      ((SECONDS < deadline)) ||
        die_with_logs "clickhouse-cluster $CN_NAME not ready after ${READY_TIMEOUT}s" "$C_LOGS/clickhouse-server.err.log"
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

# --- Go tools: Jaeger, promtool and Mailpit ----------------------------------------

tools_paths() {
  TOOLS_HOME=$STATE_DIR/tools
  JAEGER_BIN=$TOOLS_HOME/jaeger-$JAEGER_MODULE_VERSION/jaeger
  PROMTOOL_BIN=$TOOLS_HOME/promtool-$PROMETHEUS_MODULE_VERSION/promtool
  # "-ui": the binary with its web page built in; a state folder's older mailpit-<version>/ has none.
  MAILPIT_BIN=$TOOLS_HOME/mailpit-$MAILPIT_MODULE_VERSION-ui/mailpit
}

# Builds PACKAGE of MODULE@VERSION into OUT once, into a temporary folder
# renamed at the end. Not `go install MODULE/PACKAGE@VERSION`: Jaeger's go.mod
# has a replace directive, which go install refuses; so the module is
# downloaded and built as the main module (its own go.sum pins everything;
# GOWORK=off: Prometheus's go.work names folders its module zip leaves out).
# PREPARE, if given, is a function run in the module's copy before go build.
go_build_tool() {
  local name=$1 module=$2 package=$3 out=$4 prepare=${5:-} t0 src tmp
  [[ -x $out ]] && return 0
  command -v go >/dev/null || die "$name: Go 1.26 or newer is needed to build it (https://go.dev/dl/)"
  mkdir -p -- "$TOOLS_HOME"
  t0=$(now_us)
  log "$name: building $module $package with go build (once; several minutes)"
  src=$(cd "$TOOLS_HOME" && go mod download -json "$module" |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).Dir));') ||
    die "$name: go mod download $module failed"
  tmp=$(mktemp -d "$TOOLS_HOME/.build.XXXXXX")
  cp -r -- "$src" "$tmp/src"
  chmod -R u+w -- "$tmp/src"
  if [[ -n $prepare ]] && ! (cd "$tmp/src" && "$prepare"); then
    rm -rf -- "$tmp"
    die "$name: $prepare failed"
  fi
  (cd "$tmp/src" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$tmp/out/$(basename "$out")" "$package") ||
    {
      rm -rf -- "$tmp"
      die "$name: go build failed"
    }
  rm -rf -- "$(dirname "$out")"
  mv -- "$tmp/out" "$(dirname "$out")"
  rm -rf -- "$tmp"
  log "$name: built in $(since "$t0")"
}

promtool_start() {
  tools_paths
  go_build_tool promtool "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION" ./cmd/promtool "$PROMTOOL_BIN"
}

promtool_wait() { :; }
promtool_stop() { :; }

promtool_status() {
  tools_paths
  if [[ -x $PROMTOOL_BIN ]]; then
    status_line promtool running - "installed: $PROMTOOL_BIN"
  else
    status_line promtool stopped - "not installed"
  fi
}

jaeger_paths() {
  tools_paths
  J_HOME=$STATE_DIR/jaeger
  J_PID=$J_HOME/jaeger.pid
  J_LOG=$J_HOME/jaeger.log
  J_CONF=$REPO_ROOT/deploy/local/jaeger.yaml
}

# The ports a running Jaeger was started with (its environment, as spawned).
jaeger_running_port() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^JAEGER_OTLP_PORT=//p'; }

jaeger_start() {
  jaeger_paths
  local pid
  if pid=$(live_pid "$J_PID" "$JAEGER_BIN"); then
    [[ $(jaeger_running_port "$pid") == "$JAEGER_OTLP_PORT" ]] ||
      die "jaeger of $STATE_DIR already runs with another JAEGER_OTLP_PORT; run 'down jaeger' first"
    return 0
  fi
  go_build_tool jaeger "github.com/jaegertracing/jaeger@$JAEGER_MODULE_VERSION" ./cmd/jaeger "$JAEGER_BIN"
  require_free_port jaeger JAEGER_OTLP_PORT "$JAEGER_OTLP_PORT"
  require_free_port jaeger JAEGER_QUERY_PORT "$JAEGER_QUERY_PORT"
  require_free_port jaeger JAEGER_QUERY_GRPC_PORT "$JAEGER_QUERY_GRPC_PORT"
  require_free_port jaeger JAEGER_HEALTH_PORT "$JAEGER_HEALTH_PORT"
  mkdir -p -- "$J_HOME"
  log "jaeger: starting (OTLP/HTTP 127.0.0.1:$JAEGER_OTLP_PORT, query 127.0.0.1:$JAEGER_QUERY_PORT)"
  spawn "$J_PID" "$J_LOG" env JAEGER_OTLP_PORT="$JAEGER_OTLP_PORT" JAEGER_QUERY_PORT="$JAEGER_QUERY_PORT" \
    JAEGER_QUERY_GRPC_PORT="$JAEGER_QUERY_GRPC_PORT" JAEGER_HEALTH_PORT="$JAEGER_HEALTH_PORT" \
    "$JAEGER_BIN" --config "$J_CONF"
}

jaeger_wait() {
  jaeger_paths
  local deadline=$((SECONDS + READY_TIMEOUT))
  until curl -fsS --max-time 2 "http://127.0.0.1:$JAEGER_HEALTH_PORT/status" >/dev/null 2>&1 &&
    curl -fsS --max-time 2 "http://127.0.0.1:$JAEGER_QUERY_PORT/api/services" >/dev/null 2>&1; do
    live_pid "$J_PID" "$JAEGER_BIN" >/dev/null || die_with_logs "jaeger exited during startup" "$J_LOG"
    ((SECONDS < deadline)) || die_with_logs "jaeger not ready after ${READY_TIMEOUT}s" "$J_LOG"
    sleep 0.1
  done
}

jaeger_stop() {
  jaeger_paths
  stop_server jaeger "$J_PID" "$JAEGER_BIN"
}

jaeger_status() {
  jaeger_paths
  local pid
  if pid=$(live_pid "$J_PID" "$JAEGER_BIN"); then
    status_line jaeger running "$pid" "otlp=$JAEGER_OTLP_PORT query=$JAEGER_QUERY_PORT"
  else
    status_line jaeger stopped - "otlp=$JAEGER_OTLP_PORT query=$JAEGER_QUERY_PORT"
  fi
}

mailpit_paths() {
  tools_paths
  M_HOME=$STATE_DIR/mailpit
  M_PID=$M_HOME/mailpit.pid
  M_LOG=$M_HOME/mailpit.log
  # What a running one's command line holds: any build of this version (one from before MAILPIT_BIN's "-ui" too).
  M_MARK=$TOOLS_HOME/mailpit-$MAILPIT_MODULE_VERSION
}

# The SMTP port a running Mailpit was started with (its command line).
mailpit_running_port() { tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | sed -n 's/^127\.0\.0\.1:\([0-9]*\)$/\1/p' | tail -n 1; }

# Mailpit's web page is a Vue app whose bundle (server/ui/dist, which go:embed
# puts in the binary) is not in the module zip: without it the page at / loads
# no script and stays blank. So before go build, Mailpit's own npm build makes
# it, from its package-lock.json with two departures, for versions the npm
# registry reachable here lacks: rapidoc 9.3.8 instead of 12.1.0 (it draws only
# the API reference at /api/v1/, whose markup is the same as in Mailpit v1.27,
# built on rapidoc 9), and no peer dependencies (--omit=peer), which leaves
# out sass-embedded: esbuild-sass-plugin compiles with `sass` unless told
# `embedded`. No install scripts: nothing in the build needs one.
mailpit_build_ui() {
  local t0
  t0=$(now_us)
  log "mailpit: building its web page (npm install, npm run package)"
  npm install --omit=peer --ignore-scripts --no-audit --no-fund --loglevel=error rapidoc@9.3.8 >/dev/null &&
    npm run --silent package &&
    [[ -s server/ui/dist/app.js && -s server/ui/dist/app.css ]] || return 1
  log "mailpit: web page built in $(since "$t0")"
}

mailpit_start() {
  mailpit_paths
  local pid
  if pid=$(live_pid "$M_PID" "$M_MARK"); then
    [[ $(mailpit_running_port "$pid") == "$MAILPIT_SMTP_PORT" ]] ||
      die "mailpit of $STATE_DIR already runs with another MAILPIT_SMTP_PORT; run 'down mailpit' first"
    live_pid "$M_PID" "$MAILPIT_BIN" >/dev/null ||
      log "mailpit: the running one is an older build without its web page; 'down mailpit' and 'up mailpit' replace it"
    return 0
  fi
  go_build_tool mailpit "github.com/axllent/mailpit@$MAILPIT_MODULE_VERSION" . "$MAILPIT_BIN" mailpit_build_ui
  require_free_port mailpit MAILPIT_SMTP_PORT "$MAILPIT_SMTP_PORT"
  require_free_port mailpit MAILPIT_HTTP_PORT "$MAILPIT_HTTP_PORT"
  mkdir -p -- "$M_HOME"
  log "mailpit: starting (SMTP 127.0.0.1:$MAILPIT_SMTP_PORT, web and API http://127.0.0.1:$MAILPIT_HTTP_PORT)"
  spawn "$M_PID" "$M_LOG" "$MAILPIT_BIN" --database "$M_HOME/mailpit.db" --max "$MAILPIT_MAX_MESSAGES" \
    --listen "127.0.0.1:$MAILPIT_HTTP_PORT" --smtp-auth-accept-any --smtp-auth-allow-insecure --enable-chaos \
    --disable-version-check --smtp "127.0.0.1:$MAILPIT_SMTP_PORT"
}

mailpit_wait() {
  mailpit_paths
  local deadline=$((SECONDS + READY_TIMEOUT))
  until curl -fsS --max-time 2 "http://127.0.0.1:$MAILPIT_HTTP_PORT/readyz" >/dev/null 2>&1; do
    live_pid "$M_PID" "$M_MARK" >/dev/null || die_with_logs "mailpit exited during startup" "$M_LOG"
    ((SECONDS < deadline)) || die_with_logs "mailpit not ready after ${READY_TIMEOUT}s" "$M_LOG"
    sleep 0.1
  done
}

mailpit_stop() {
  mailpit_paths
  stop_server mailpit "$M_PID" "$M_MARK"
}

mailpit_status() {
  mailpit_paths
  local pid
  if pid=$(live_pid "$M_PID" "$M_MARK"); then
    status_line mailpit running "$pid" "smtp=$MAILPIT_SMTP_PORT http=$MAILPIT_HTTP_PORT"
  else
    status_line mailpit stopped - "smtp=$MAILPIT_SMTP_PORT http=$MAILPIT_HTTP_PORT"
  fi
}

# The local bounce mailbox: Mailpit's POP3 mailbox is every message of its
# instance, so the bounce mailbox is an instance of its own (ports, database).
# Its auth file is what turns POP3 on.
bounce_mailpit_paths() {
  tools_paths
  BM_HOME=$STATE_DIR/bounce-mailpit
  BM_PID=$BM_HOME/mailpit.pid
  BM_LOG=$BM_HOME/mailpit.log
  BM_AUTH=$BM_HOME/pop3-auth
  BM_MARK=$TOOLS_HOME/mailpit-$MAILPIT_MODULE_VERSION
}

bounce_mailpit_start() {
  bounce_mailpit_paths
  local pid
  if pid=$(live_pid "$BM_PID" "$BM_MARK"); then
    [[ $(mailpit_running_port "$pid") == "$BOUNCE_MAILPIT_SMTP_PORT" ]] ||
      die "bounce-mailpit of $STATE_DIR already runs with another BOUNCE_MAILPIT_SMTP_PORT; run 'down bounce-mailpit' first"
    return 0
  fi
  go_build_tool mailpit "github.com/axllent/mailpit@$MAILPIT_MODULE_VERSION" . "$MAILPIT_BIN" mailpit_build_ui
  require_free_port bounce-mailpit BOUNCE_MAILPIT_SMTP_PORT "$BOUNCE_MAILPIT_SMTP_PORT"
  require_free_port bounce-mailpit BOUNCE_MAILPIT_POP3_PORT "$BOUNCE_MAILPIT_POP3_PORT"
  require_free_port bounce-mailpit BOUNCE_MAILPIT_HTTP_PORT "$BOUNCE_MAILPIT_HTTP_PORT"
  mkdir -p -- "$BM_HOME"
  (umask 077 && printf 'bounces:bounces\n' >"$BM_AUTH")
  log "bounce-mailpit: starting (SMTP 127.0.0.1:$BOUNCE_MAILPIT_SMTP_PORT, POP3 127.0.0.1:$BOUNCE_MAILPIT_POP3_PORT, web and API http://127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT)"
  # --smtp last: mailpit_running_port reads the last address of the command line.
  spawn "$BM_PID" "$BM_LOG" "$MAILPIT_BIN" --database "$BM_HOME/mailpit.db" --max "$MAILPIT_MAX_MESSAGES" \
    --listen "127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT" --pop3-auth-file "$BM_AUTH" --pop3 "127.0.0.1:$BOUNCE_MAILPIT_POP3_PORT" \
    --smtp-auth-accept-any --smtp-auth-allow-insecure --disable-version-check --smtp "127.0.0.1:$BOUNCE_MAILPIT_SMTP_PORT"
}

bounce_mailpit_wait() {
  bounce_mailpit_paths
  local deadline=$((SECONDS + READY_TIMEOUT))
  until curl -fsS --max-time 2 "http://127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT/readyz" >/dev/null 2>&1; do
    live_pid "$BM_PID" "$BM_MARK" >/dev/null || die_with_logs "bounce-mailpit exited during startup" "$BM_LOG"
    ((SECONDS < deadline)) || die_with_logs "bounce-mailpit not ready after ${READY_TIMEOUT}s" "$BM_LOG"
    sleep 0.1
  done
}

bounce_mailpit_stop() {
  bounce_mailpit_paths
  stop_server bounce-mailpit "$BM_PID" "$BM_MARK"
}

bounce_mailpit_status() {
  bounce_mailpit_paths
  local pid ports="smtp=$BOUNCE_MAILPIT_SMTP_PORT pop3=$BOUNCE_MAILPIT_POP3_PORT http=$BOUNCE_MAILPIT_HTTP_PORT"
  if pid=$(live_pid "$BM_PID" "$BM_MARK"); then
    status_line bounce-mailpit running "$pid" "$ports"
  else
    status_line bounce-mailpit stopped - "$ports"
  fi
}

# --- commands -------------------------------------------------------------------

status_line() { printf '%-10s %-7s pid=%-7s %s\n' "$@" >&3; }

print_env() {
  local c
  for c in "${COMPONENTS[@]}"; do
    case $c in
      postgres) echo "export DATABASE_URL=postgres://mail:mail@127.0.0.1:$PG_PORT/mail" ;;
      kafka) echo "export KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT" ;;
      clickhouse) echo "export CLICKHOUSE_URL=http://127.0.0.1:$CLICKHOUSE_HTTP_PORT" ;;
      jaeger)
        echo "export JAEGER_OTLP_ENDPOINT=http://127.0.0.1:$JAEGER_OTLP_PORT"
        echo "export JAEGER_QUERY_URL=http://127.0.0.1:$JAEGER_QUERY_PORT"
        ;;
      promtool) tools_paths && echo "export PROMTOOL=$PROMTOOL_BIN" ;;
      mailpit)
        tools_paths
        echo "export MAILPIT_SMTP_URL=smtp://127.0.0.1:$MAILPIT_SMTP_PORT?tls=off"
        echo "export MAILPIT_API_URL=http://127.0.0.1:$MAILPIT_HTTP_PORT"
        echo "export MAILPIT_BIN=$MAILPIT_BIN"
        ;;
      bounce-mailpit)
        echo "export BOUNCE_MAILPIT_SMTP_URL=smtp://127.0.0.1:$BOUNCE_MAILPIT_SMTP_PORT?tls=off"
        echo "export BOUNCE_MAILPIT_API_URL=http://127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT"
        echo "export BOUNCE_MAILPIT_POP3_URL=pop3://bounces:bounces@127.0.0.1:$BOUNCE_MAILPIT_POP3_PORT"
        ;;
      kafka-cluster) echo "export KAFKA_CLUSTER_BROKERS=$(kafka_cluster_brokers)" ;;
      zookeeper) echo "export ZOOKEEPER_ADDRESS=127.0.0.1:$ZOOKEEPER_PORT" ;;
      clickhouse-cluster)
        local urls=() n
        for n in "${!CLICKHOUSE_NODES[@]}"; do
          urls+=("http://127.0.0.1:$(nth_port clickhouse-cluster CLICKHOUSE_CLUSTER_HTTP_PORTS "${#CLICKHOUSE_NODES[@]}" $((n + 1)))")
        done
        echo "export CLICKHOUSE_CLUSTER_URLS=$(
          IFS=,
          echo "${urls[*]}"
        )"
        ;;
    esac
  done >&3
}

# The prefix of a component's functions: kafka-cluster -> kafka_cluster_start, ...
component_function() { printf '%s\n' "${1//-/_}"; }

has() {
  local c
  for c in "${COMPONENTS[@]}"; do [[ $c == "$1" ]] && return 0; done
  return 1
}

# Launch everything first and wait afterwards, so that the slow Kafka JVM
# boots while postgres and clickhouse start. The ClickHouse cluster starts
# once ZooKeeper answers: its replicated tables need it from the start.
cmd_up() {
  local t0 c
  t0=$(now_us)
  install_missing
  if has kafka; then kafka_start; fi
  if has kafka-cluster; then kafka_cluster_start; fi
  if has zookeeper; then zookeeper_start; fi
  if has clickhouse; then clickhouse_start; fi
  if has postgres; then postgres_start; fi
  if has promtool; then promtool_start; fi
  if has jaeger; then jaeger_start; fi
  if has mailpit; then mailpit_start; fi
  if has bounce-mailpit; then bounce_mailpit_start; fi
  if has clickhouse-cluster; then
    zookeeper_wait
    clickhouse_cluster_start
  fi
  for c in postgres clickhouse zookeeper clickhouse-cluster kafka kafka-cluster jaeger promtool mailpit bounce-mailpit; do
    if has "$c"; then
      "$(component_function "$c")_wait"
      log "$c: ready ($(since "$t0") since 'up' began)"
    fi
  done
  print_env
}

cmd_down() {
  local c t0
  for c in "${COMPONENTS[@]}"; do
    t0=$(now_us)
    "$(component_function "$c")_stop"
    log "$c: down ($(since "$t0"))"
  done
}

# A component of several servers prints a line for each; all must run.
cmd_status() {
  local c rc=0 line
  for c in "${COMPONENTS[@]}"; do
    while IFS= read -r line; do
      printf '%s\n' "$line" >&3
      [[ $line == *" running "* ]] || rc=3
    done < <("$(component_function "$c")_status" 3>&1)
  done
  return "$rc"
}

cmd_kafka_cli() {
  (($#)) || die "usage: infra.sh kafka-cli CLASS [ARG...]"
  COMPONENTS=(kafka)
  install_missing
  kafka_paths
  kafka_fetch_libs
  mkdir -p -- "$K_CONF"
  kafka_write_log_config
  kafka_java_cli "$@" >&3
}

parse_components() {
  local c
  COMPONENTS=()
  for c in "$@"; do
    case $c in
      postgres | kafka | clickhouse | jaeger | promtool | mailpit | bounce-mailpit | kafka-cluster | zookeeper) has "$c" || COMPONENTS+=("$c") ;;
      # Needs zookeeper; listed after it, so that `down` stops the nodes first.
      clickhouse-cluster)
        has "$c" || COMPONENTS+=("$c")
        has zookeeper || COMPONENTS+=(zookeeper)
        ;;
      *) die "unknown component '$c' (expected: ${ALL_COMPONENTS[*]} ${OPTIONAL_COMPONENTS[*]})" ;;
    esac
  done
  ((${#COMPONENTS[@]})) || COMPONENTS=("${ALL_COMPONENTS[@]}")
}

# Absolute, existing state folder; the lock makes concurrent up/down calls on
# one state folder take turns (two at once would initdb/format twice).
open_state_dir() {
  local dir=${STATE_DIR:-$REPO_ROOT/.state}
  mkdir -p -- "$dir"
  STATE_DIR=$(cd -- "$dir" && pwd)
  chmod 755 "$STATE_DIR"
}

lock_state_dir() {
  exec 9>"$STATE_DIR/.lock"
  flock -w 600 9 || die "another infra.sh has held $STATE_DIR/.lock for 10 minutes"
}

main() {
  local cmd=${1:-help}
  (($#)) && shift
  trap restore_service_starts EXIT
  trap 'exit 130' INT TERM HUP
  case $cmd in
    up | status | env) parse_components "$@" ;;
    # A plain `down` also stops the Jaeger that `npm test` or `npm run bench`
    # started, the two Mailpits of `npm run up`, and the clusters of `npm run
    # test:cluster` (the ClickHouse cluster before its ZooKeeper).
    down)
      if (($#)); then
        parse_components "$@"
      else
        parse_components "${ALL_COMPONENTS[@]}" jaeger mailpit bounce-mailpit kafka-cluster clickhouse-cluster
      fi
      ;;
    kafka-cli) ;;
    help | -h | --help)
      usage
      return 0
      ;;
    *)
      usage
      return 2
      ;;
  esac
  open_state_dir
  case $cmd in
    up) lock_state_dir && cmd_up ;;
    down) lock_state_dir && cmd_down ;;
    status) cmd_status ;;
    env) print_env ;;
    kafka-cli) cmd_kafka_cli "$@" ;;
  esac
}

main "$@"
