#!/usr/bin/env bash
# deploy/local/infra.sh: run the project's real servers natively (no Docker):
# PostgreSQL 15, Apache Kafka (one KRaft node) and ClickHouse (a current
# release from PyPI's chdb-core, served by deploy/local/clickhouse-server.py
# from a virtualenv in <state folder>/tools), bound to 127.0.0.1, with everything they write (data, logs, PID files, config copies)
# under one state folder, so several state folders with different ports can
# run side by side and a clean clone needs nothing but these scripts. Two more
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
# Each COMPONENT is a file, deploy/local/servers/COMPONENT.sh: how that server
# is installed, started, waited for, stopped and reported, its settings and
# its export lines; servers/lib.sh holds what they share (logging, processes
# and PID files, ports, Debian packages, Maven's jars, Go builds). This script
# is their command line.
#
# Progress and errors go to stderr and only the export lines to stdout, so
#   eval "$(deploy/local/infra.sh up)"
# works. Must run as root (apt-get, and runuser to start postgres).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/../.." && pwd)

ALL_COMPONENTS=(postgres kafka clickhouse)
OPTIONAL_COMPONENTS=(jaeger promtool mailpit bounce-mailpit kafka-cluster zookeeper clickhouse-cluster)
COMPONENTS=()

# fd 3 keeps the caller's stdout for the export lines alone; everything else,
# including what child processes print (apt, Maven, pg_ctl), goes to stderr.
exec 3>&1 1>&2

# shellcheck source=deploy/local/servers/lib.sh
source "$SCRIPT_DIR/servers/lib.sh"
# shellcheck source=deploy/local/servers/postgres.sh
source "$SCRIPT_DIR/servers/postgres.sh"
# shellcheck source=deploy/local/servers/kafka.sh
source "$SCRIPT_DIR/servers/kafka.sh"
# shellcheck source=deploy/local/servers/kafka-cluster.sh
source "$SCRIPT_DIR/servers/kafka-cluster.sh"
# shellcheck source=deploy/local/servers/clickhouse.sh
source "$SCRIPT_DIR/servers/clickhouse.sh"
# shellcheck source=deploy/local/servers/zookeeper.sh
source "$SCRIPT_DIR/servers/zookeeper.sh"
# shellcheck source=deploy/local/servers/clickhouse-cluster.sh
source "$SCRIPT_DIR/servers/clickhouse-cluster.sh"
# shellcheck source=deploy/local/servers/promtool.sh
source "$SCRIPT_DIR/servers/promtool.sh"
# shellcheck source=deploy/local/servers/jaeger.sh
source "$SCRIPT_DIR/servers/jaeger.sh"
# shellcheck source=deploy/local/servers/mailpit.sh
source "$SCRIPT_DIR/servers/mailpit.sh"
# shellcheck source=deploy/local/servers/bounce-mailpit.sh
source "$SCRIPT_DIR/servers/bounce-mailpit.sh"

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

# --- commands -------------------------------------------------------------------

print_env() {
  local c
  for c in "${COMPONENTS[@]}"; do
    "$(component_function "$c")_env"
  done >&3
}

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
  install_missing "${COMPONENTS[@]}"
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
  install_missing kafka
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
