# shellcheck shell=bash
# deploy/local/servers/bounce-mailpit.sh: the component bounce-mailpit, a
# second Mailpit of the binary servers/mailpit.sh builds, the local bounce
# mailbox (bounces and feedback reports arrive by SMTP; the delivery service
# reads them over POP3; messages in <state folder>/bounce-mailpit). Sourced by
# deploy/local/infra.sh (functions: servers/lib.sh).

BOUNCE_MAILPIT_SMTP_PORT=${BOUNCE_MAILPIT_SMTP_PORT:-21026}
BOUNCE_MAILPIT_POP3_PORT=${BOUNCE_MAILPIT_POP3_PORT:-21110}
BOUNCE_MAILPIT_HTTP_PORT=${BOUNCE_MAILPIT_HTTP_PORT:-28026}

bounce_mailpit_packages() { command -v curl >/dev/null || echo curl; }

# The local bounce mailbox: Mailpit's POP3 mailbox is every message of its
# instance, so the bounce mailbox is an instance of its own (ports, database).
# Its auth file is what turns POP3 on.
bounce_mailpit_paths() {
  mailpit_bin_paths
  BM_HOME=$STATE_DIR/bounce-mailpit
  BM_PID=$BM_HOME/mailpit.pid
  BM_LOG=$BM_HOME/mailpit.log
  BM_AUTH=$BM_HOME/pop3-auth
}

bounce_mailpit_start() {
  bounce_mailpit_paths
  already_running bounce-mailpit "$BM_PID" "$MAILPIT_MARK" BOUNCE_MAILPIT_SMTP_PORT mailpit_running_port && return 0
  mailpit_build
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
  wait_http_ready bounce-mailpit "$BM_PID" "$MAILPIT_MARK" "$BM_LOG" "http://127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT/readyz"
}

bounce_mailpit_stop() {
  bounce_mailpit_paths
  stop_server bounce-mailpit "$BM_PID" "$MAILPIT_MARK"
}

bounce_mailpit_status() {
  bounce_mailpit_paths
  server_status bounce-mailpit "$BM_PID" "$MAILPIT_MARK" \
    "smtp=$BOUNCE_MAILPIT_SMTP_PORT pop3=$BOUNCE_MAILPIT_POP3_PORT http=$BOUNCE_MAILPIT_HTTP_PORT"
}

bounce_mailpit_env() {
  echo "export BOUNCE_MAILPIT_SMTP_URL=smtp://127.0.0.1:$BOUNCE_MAILPIT_SMTP_PORT?tls=off"
  echo "export BOUNCE_MAILPIT_API_URL=http://127.0.0.1:$BOUNCE_MAILPIT_HTTP_PORT"
  echo "export BOUNCE_MAILPIT_POP3_URL=pop3://bounces:bounces@127.0.0.1:$BOUNCE_MAILPIT_POP3_PORT"
}
