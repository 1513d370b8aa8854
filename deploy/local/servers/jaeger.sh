# shellcheck shell=bash
# deploy/local/servers/jaeger.sh: the component jaeger, the trace backend
# (Jaeger v2: OTLP/HTTP in, query API and UI out, traces in memory;
# deploy/local/jaeger.yaml), built from its Go module into the state folder's
# tools. Sourced by deploy/local/infra.sh (functions: servers/lib.sh).

JAEGER_OTLP_PORT=${JAEGER_OTLP_PORT:-24318}
JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT:-26686}
JAEGER_QUERY_GRPC_PORT=${JAEGER_QUERY_GRPC_PORT:-26685}
JAEGER_HEALTH_PORT=${JAEGER_HEALTH_PORT:-23133}
# Jaeger v2's Go module keeps the v1 tag line: v1.76.0 is Jaeger v2.13's cmd/jaeger.
JAEGER_MODULE_VERSION=v1.76.0

jaeger_packages() { command -v curl >/dev/null || echo curl; }

jaeger_paths() {
  tools_paths
  JAEGER_BIN=$TOOLS_HOME/jaeger-$JAEGER_MODULE_VERSION/jaeger
  J_HOME=$STATE_DIR/jaeger
  J_PID=$J_HOME/jaeger.pid
  J_LOG=$J_HOME/jaeger.log
  J_CONF=$REPO_ROOT/deploy/local/jaeger.yaml
}

# The ports a running Jaeger was started with (its environment, as spawned).
jaeger_running_port() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^JAEGER_OTLP_PORT=//p'; }

jaeger_start() {
  jaeger_paths
  already_running jaeger "$J_PID" "$JAEGER_BIN" JAEGER_OTLP_PORT jaeger_running_port && return 0
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
  wait_http_ready jaeger "$J_PID" "$JAEGER_BIN" "$J_LOG" \
    "http://127.0.0.1:$JAEGER_HEALTH_PORT/status" "http://127.0.0.1:$JAEGER_QUERY_PORT/api/services"
}

jaeger_stop() {
  jaeger_paths
  stop_server jaeger "$J_PID" "$JAEGER_BIN"
}

jaeger_status() {
  jaeger_paths
  server_status jaeger "$J_PID" "$JAEGER_BIN" "otlp=$JAEGER_OTLP_PORT query=$JAEGER_QUERY_PORT"
}

jaeger_env() {
  echo "export JAEGER_OTLP_ENDPOINT=http://127.0.0.1:$JAEGER_OTLP_PORT"
  echo "export JAEGER_QUERY_URL=http://127.0.0.1:$JAEGER_QUERY_PORT"
}
