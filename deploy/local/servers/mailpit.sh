# shellcheck shell=bash
# deploy/local/servers/mailpit.sh: the component mailpit, the local SMTP
# server the delivery service sends to (SMTP in, web page and HTTP API out,
# messages in <state folder>/mailpit, its "chaos" switch on so tests can make
# it answer SMTP errors), built from its Go module into the state folder's
# tools; servers/bounce-mailpit.sh runs the same binary. Sourced by
# deploy/local/infra.sh (functions: servers/lib.sh).

MAILPIT_MODULE_VERSION=v1.33.1
MAILPIT_SMTP_PORT=${MAILPIT_SMTP_PORT:-21025}
MAILPIT_HTTP_PORT=${MAILPIT_HTTP_PORT:-28025}
MAILPIT_MAX_MESSAGES=${MAILPIT_MAX_MESSAGES:-100000}

mailpit_packages() { command -v curl >/dev/null || echo curl; }

# The binary of both Mailpits.
mailpit_bin_paths() {
  tools_paths
  # "-ui": the binary with its web page built in; a state folder's older mailpit-<version>/ has none.
  MAILPIT_BIN=$TOOLS_HOME/mailpit-$MAILPIT_MODULE_VERSION-ui/mailpit
  # What a running one's command line holds: any build of this version (one from before MAILPIT_BIN's "-ui" too).
  MAILPIT_MARK=$TOOLS_HOME/mailpit-$MAILPIT_MODULE_VERSION
}

mailpit_paths() {
  mailpit_bin_paths
  M_HOME=$STATE_DIR/mailpit
  M_PID=$M_HOME/mailpit.pid
  M_LOG=$M_HOME/mailpit.log
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

# Builds the binary of both Mailpits, once.
mailpit_build() { go_build_tool mailpit "github.com/axllent/mailpit@$MAILPIT_MODULE_VERSION" . "$MAILPIT_BIN" mailpit_build_ui; }

mailpit_start() {
  mailpit_paths
  if already_running mailpit "$M_PID" "$MAILPIT_MARK" MAILPIT_SMTP_PORT mailpit_running_port; then
    live_pid "$M_PID" "$MAILPIT_BIN" >/dev/null ||
      log "mailpit: the running one is an older build without its web page; 'down mailpit' and 'up mailpit' replace it"
    return 0
  fi
  mailpit_build
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
  wait_http_ready mailpit "$M_PID" "$MAILPIT_MARK" "$M_LOG" "http://127.0.0.1:$MAILPIT_HTTP_PORT/readyz"
}

mailpit_stop() {
  mailpit_paths
  stop_server mailpit "$M_PID" "$MAILPIT_MARK"
}

mailpit_status() {
  mailpit_paths
  server_status mailpit "$M_PID" "$MAILPIT_MARK" "smtp=$MAILPIT_SMTP_PORT http=$MAILPIT_HTTP_PORT"
}

mailpit_env() {
  mailpit_bin_paths
  echo "export MAILPIT_SMTP_URL=smtp://127.0.0.1:$MAILPIT_SMTP_PORT?tls=off"
  echo "export MAILPIT_API_URL=http://127.0.0.1:$MAILPIT_HTTP_PORT"
  echo "export MAILPIT_BIN=$MAILPIT_BIN"
}
