# shellcheck shell=bash
# deploy/local/servers/promtool.sh: the component promtool, Prometheus's rule
# checker, built from its Go module into the state folder's tools: installed,
# not run. Sourced by deploy/local/infra.sh (functions: servers/lib.sh).

# Prometheus 3.x's Go module tags are v0.3xx: v0.316.0 is Prometheus 3.16.
PROMETHEUS_MODULE_VERSION=v0.316.0

promtool_packages() { :; }

promtool_paths() {
  tools_paths
  PROMTOOL_BIN=$TOOLS_HOME/promtool-$PROMETHEUS_MODULE_VERSION/promtool
}

promtool_start() {
  promtool_paths
  go_build_tool promtool "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION" ./cmd/promtool "$PROMTOOL_BIN"
}

promtool_wait() { :; }
promtool_stop() { :; }

promtool_status() {
  promtool_paths
  if [[ -x $PROMTOOL_BIN ]]; then
    status_line promtool running - "installed: $PROMTOOL_BIN"
  else
    status_line promtool stopped - "not installed"
  fi
}

promtool_env() { promtool_paths && echo "export PROMTOOL=$PROMTOOL_BIN"; }
