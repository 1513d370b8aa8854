#!/usr/bin/env bash
# deploy/local/bootstrap.sh: the shared first step of `npm run up` and
# `npm test`, so both work on a fresh clone: checks Node, installs the
# dependencies when needed, builds. up.sh and test.sh source it (they also use
# load_infra_env, defined below); it can run on its own too.
set -euo pipefail

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO_ROOT"

bootstrap_die() {
  printf '[bootstrap] ERROR: %s\n' "$*" >&2
  exit 1
}

# The code targets Node 20 (package.json engines); older versions fail late and obscurely.
command -v node >/dev/null || bootstrap_die "Node.js 20.19 or newer is required (e.g. apt-get install nodejs, or nodesource)"
node -e 'const [major, minor] = process.versions.node.split(".").map(Number); process.exit(major > 20 || (major === 20 && minor >= 19) ? 0 : 1)' ||
  bootstrap_die "Node.js 20.19 or newer is required, found $(node --version)"

# npm ci wipes node_modules, so run it only when nothing is installed or the
# lockfile changed since the last install (npm records that install in
# node_modules/.package-lock.json).
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  printf '[bootstrap] installing dependencies (npm ci)\n' >&2
  npm ci --no-audit --no-fund >&2
fi

# Always: tsc -b is incremental, so an up-to-date build costs seconds and a
# stale dist/ never runs. Output to stderr keeps stdout for the callers' results.
printf '[bootstrap] building (npm run build)\n' >&2
npm run --silent build >&2

# Starts the servers (deploy/local/infra.sh up [COMPONENT...]) and exports
# their addresses, except variables the caller already set: the caller's
# environment wins.
load_infra_env() { export_infra_lines "$(bash "$REPO_ROOT/deploy/local/infra.sh" up "$@")"; }

# The same addresses without starting anything (infra.sh env): for servers
# that something else brings up.
export_infra_env() { export_infra_lines "$(bash "$REPO_ROOT/deploy/local/infra.sh" env "$@")"; }

export_infra_lines() {
  local exports=$1 line name
  while IFS= read -r line; do
    [[ $line =~ ^export\ ([A-Za-z_][A-Za-z0-9_]*)= ]] || continue
    name=${BASH_REMATCH[1]}
    if [[ -z ${!name:-} ]]; then eval "$line"; fi
  done <<<"$exports"
}
