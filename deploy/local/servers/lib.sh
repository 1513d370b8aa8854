# shellcheck shell=bash
# deploy/local/servers/lib.sh: what the servers' files beside it share, sourced
# by deploy/local/infra.sh: logging, processes and their PID files, ports, and
# the installations (Debian packages, jars from Maven Central, Go tools).
# Each servers/<component>.sh defines the functions infra.sh calls for it,
# <prefix>_packages (the Debian packages it needs and this machine lacks),
# _start, _wait, _stop, _status and _env (its `export` lines), where the prefix
# is the component's name with '_' for '-' (component_function).

READY_TIMEOUT=${READY_TIMEOUT:-90}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
POLICY_RC=/usr/sbin/policy-rc.d
POLICY_RC_SAVED=$POLICY_RC.infra-sh-saved
POLICY_RC_OURS=0

log() { printf '[infra] %s\n' "$*" >&2; }
die() {
  printf '[infra] ERROR: %s\n' "$*" >&2
  exit 1
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

# True when NAME's server (PIDFILE, MARK as for live_pid) already runs; dies
# when it was started with another port than the variable VAR holds, which
# PORT_OF, a function, reads from its PID.
already_running() {
  local name=$1 pidfile=$2 mark=$3 var=$4 port_of=$5 pid
  pid=$(live_pid "$pidfile" "$mark") || return 1
  [[ $("$port_of" "$pid") == "${!var}" ]] ||
    die "$name of $STATE_DIR already runs with another $var; run 'down $name' first"
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

# One round of a wait for NAME's server to answer: dies when its process
# (PIDFILE, MARK as for live_pid) is gone or DEADLINE (a SECONDS value) has
# passed, with the tail of LOG, and of OUT too when it exited: a process that
# could not start (a JVM refusing its options) may say why only there.
starting_or_die() {
  local name=$1 pidfile=$2 mark=$3 deadline=$4 log=$5
  local -a outs=("${@:6}")
  live_pid "$pidfile" "$mark" >/dev/null || die_with_logs "$name exited during startup" "$log" "${outs[@]}"
  ((SECONDS < deadline)) || die_with_logs "$name not ready after ${READY_TIMEOUT}s" "$log"
}

# True when every URL answers without an HTTP error.
http_ok() {
  local url
  for url; do
    curl -fsS --max-time 2 "$url" >/dev/null 2>&1 || return 1
  done
}

# Waits up to READY_TIMEOUT until every URL answers (http_ok), as NAME's
# server (PIDFILE, MARK, LOG as for starting_or_die) starts.
wait_http_ready() {
  local name=$1 pidfile=$2 mark=$3 log=$4 deadline=$((SECONDS + READY_TIMEOUT))
  shift 4
  until http_ok "$@"; do
    starting_or_die "$name" "$pidfile" "$mark" "$deadline" "$log"
    sleep 0.1
  done
}

# The port of node N (1-based) of a COMPONENT of COUNT nodes, from the
# comma-separated list in the variable VAR.
nth_port() {
  local component=$1 var=$2 count=$3 n=$4 ports
  IFS=, read -r -a ports <<<"${!var}"
  ((${#ports[@]} == count)) || die "$component: $var='${!var}' must list $count ports"
  printf '%s\n' "${ports[n - 1]}"
}

# One line of `status`, on the caller's stdout.
status_line() { printf '%-10s %-7s pid=%-7s %s\n' "$@" >&3; }

# NAME's status line, running with the PID in PIDFILE (live_pid, MARK) or
# stopped, for a server whose DETAIL is the same either way. One that reports
# the port it runs on, from its config, has its own.
server_status() {
  local name=$1 pidfile=$2 mark=$3 detail=$4 pid
  if pid=$(live_pid "$pidfile" "$mark"); then
    status_line "$name" running "$pid" "$detail"
  else
    status_line "$name" stopped - "$detail"
  fi
}

# The prefix of a component's functions: kafka-cluster -> kafka_cluster_start, ...
component_function() { printf '%s\n' "${1//-/_}"; }

# --- installation: Debian packages, Maven's jars, Go tools -----------------------

# True when LIBS holds the jars of POM (the hash of the pom they came from).
maven_libs_cached() {
  local pom=$1 libs=$2 want
  [[ -f $libs/.pom.sha256 ]] || return 1
  want=$(sha256sum <"$pom")
  [[ $(<"$libs/.pom.sha256") == "${want%% *}" ]]
}

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

# The Debian packages a JVM server on the jars of POM (fetched into LIBS by
# maven_fetch_libs) needs and this machine lacks: Java, and Maven until the
# jars are there.
java_maven_packages() {
  local pom=$1 libs=$2
  command -v java >/dev/null || echo openjdk-17-jre-headless
  maven_libs_cached "$pom" "$libs" || command -v mvn >/dev/null || echo maven
}

# Debian packages that COMPONENTs need and this machine lacks.
missing_packages() {
  local c
  for c in "$@"; do
    "$(component_function "$c")_packages"
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

# apt-get update (once) and install what COMPONENTs need and this machine
# lacks. A machine-wide lock, because policy-rc.d is machine-wide and another
# state folder's `up` may be installing at the same moment.
install_missing() {
  local -a pkgs
  mapfile -t pkgs < <(missing_packages "$@")
  ((${#pkgs[@]})) || return 0
  [[ $EUID -eq 0 ]] || die "must run as root to install: ${pkgs[*]}"
  exec 8>"${TMPDIR:-/tmp}/infra-sh-apt.lock"
  flock -w 900 8 || die "timed out waiting for another infra.sh's apt-get"
  mapfile -t pkgs < <(missing_packages "$@") # the other one may have done it
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

# Where the tools are installed, once per state folder: ClickHouse's
# virtualenv and the binaries built from Go modules.
tools_paths() { TOOLS_HOME=$STATE_DIR/tools; }

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
