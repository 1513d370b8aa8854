# shellcheck shell=bash
# deploy/local/servers/postgres.sh: the component postgres, PostgreSQL 15 from
# Debian's package, one cluster in the state folder that the postgres OS user
# runs. Sourced by deploy/local/infra.sh (functions: servers/lib.sh).

PG_PORT=${PG_PORT:-25432}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

postgres_packages() { [[ -x $PG_BIN/initdb && -x $PG_BIN/psql ]] || echo postgresql; }

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

postgres_env() { echo "export DATABASE_URL=postgres://mail:mail@127.0.0.1:$PG_PORT/mail"; }
