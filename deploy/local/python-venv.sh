#!/usr/bin/env bash
# deploy/local/python-venv.sh [REQUIREMENTS]: the Python virtualenv of the
# test tools (Schemathesis for gateway/test/fuzz.test.ts), at .state/venv.
# Idempotent and cached: the venv is (re)installed only when it is missing or
# the requirements file changed since the last install (a stamp file holds its
# hash). Installs Debian's python3-venv when `python3 -m venv` is unavailable.
# Prints the venv's bin/ folder on stdout; everything else goes to stderr.
set -euo pipefail

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
REQUIREMENTS=${1:-$REPO_ROOT/gateway/test/fuzz/requirements.txt}
VENV=${PYTHON_VENV_DIR:-$REPO_ROOT/.state/venv}
STAMP=$VENV/.requirements.sha256
LOCK=$REPO_ROOT/.state/venv.lock

log() { printf '[python-venv] %s\n' "$*" >&2; }

[[ -f $REQUIREMENTS ]] || { log "ERROR: $REQUIREMENTS does not exist"; exit 1; }
command -v python3 >/dev/null || { log "ERROR: python3 is required"; exit 1; }
mkdir -p "$(dirname -- "$VENV")"

# Two test runs (jest workers, developers) may ask at once: one installs, the other waits.
exec 9>"$LOCK"
flock 9

wanted=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [[ -x $VENV/bin/python && -f $STAMP && $(cat "$STAMP") == "$wanted" ]]; then
  printf '%s\n' "$VENV/bin"
  exit 0
fi

# Debian's python3 lacks ensurepip (so venv) until python3-venv is installed.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  log "installing Debian python3-venv (apt-get)"
  as_root=()
  ((EUID == 0)) || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq python3-venv >&2
fi

if [[ ! -x $VENV/bin/python ]]; then
  log "creating $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
fi
log "installing $REQUIREMENTS"
rm -f "$STAMP"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQUIREMENTS" >&2
printf '%s\n' "$wanted" >"$STAMP"
printf '%s\n' "$VENV/bin"
