#!/usr/bin/env bash
# `npm test`: the whole suite against real servers, from a fresh clone too.
# Arguments go to jest: `npm test -- services/campaign` runs one package (and
# skips the cluster tests, which run last otherwise).
# The servers (infra.sh up) stay up afterwards for the next run; tests isolate
# themselves with private databases and topics. Their ports and state folder
# are infra.sh's settings, so a second run can go beside a stack on the
# default ones:
#   STATE_DIR=/tmp/other PG_PORT=26432 KAFKA_PORT=28092 KAFKA_CONTROLLER_PORT=28093 \
#     CLICKHOUSE_HTTP_PORT=27123 CLICKHOUSE_TCP_PORT=27000 npm test
# Every test, test helper and process it starts takes the servers' addresses
# from what this script exports (DATABASE_URL, KAFKA_BROKERS, CLICKHOUSE_URL),
# never from a default port, and refuses to run without them. Addresses the
# caller already exported win over infra.sh's (load_infra_env), so unset
# stale ones when changing the ports.
set -euo pipefail

# SECONDS counts from the start of this script. An `npm test` that ends early still waits for the builds it started
# in the background (below), so none is left holding infra.sh's lock.
trap 'wait; rm -f -- ${MAILPIT_BUILD_LOG:+"$MAILPIT_BUILD_LOG"} ${GO_TOOLS_LOG:+"$GO_TOOLS_LOG" "$GO_TOOLS_STATUS"}
  rm -rf -- ${PORT_BAND_CLAIM:+"$PORT_BAND_CLAIM"}
  printf "[test] total wall time: %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT

# The tests' ports come from a band of their own (deploy/local/src/ports.ts): a second run beside this one takes the
# other band. A band is claimed by a folder holding the claimer's PID, moved into place whole; a claim whose process
# is gone is taken over.
for band in 0 1; do
  claim=${TMPDIR:-/tmp}/mail-test-port-band-$band
  if [[ -d $claim ]] && ! kill -0 "$(cat -- "$claim/pid" 2>/dev/null)" 2>/dev/null; then rm -rf -- "$claim"; fi
  staged=$(mktemp -d)
  echo $$ >"$staged/pid"
  if mv -T -- "$staged" "$claim" 2>/dev/null; then
    PORT_BAND_CLAIM=$claim
    export TEST_PORT_BAND=$band
    break
  fi
  rm -rf -- "$staged"
done

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"

# Mailpit: the delivery tests start private ones from its binary (MAILPIT_BIN). A state folder's first run builds
# it, its web page with npm and then the binary with Go (bench/README.md, "Local servers"): that goes on in the
# background while the checks below run, and the servers start once it is done (infra.sh does one thing at a time).
MAILPIT_BUILD_LOG=$(mktemp -t mailpit-build.XXXXXX.log)
bash "$REPO_ROOT/deploy/local/infra.sh" up mailpit >/dev/null 2>"$MAILPIT_BUILD_LOG" &
mailpit_build=$!

# The contracts are checked before any code is tested against them.
npx buf lint proto
# ts-jest only transpiles (fast); the tests' types are checked here, once.
npx tsc -p tsconfig.test.json
# ESLint (type-aware) and Prettier: a warning fails the run.
npm run --silent lint
mailpit_status=0
wait "$mailpit_build" || mailpit_status=$?
cat -- "$MAILPIT_BUILD_LOG" >&2
((mailpit_status == 0)) || exit "$mailpit_status"
load_infra_env postgres kafka clickhouse mailpit
# The trace backend (gateway/test/tracing.test.ts) and the alert rules' checker (deploy/test/observability.test.ts)
# are built from their Go modules on a machine's first run, which takes minutes (bench/README.md, "Tracing"): that
# goes on in the background while the other tests run, and those two wait for it (awaitGoTools in @mail/local,
# by the status file GO_TOOLS_STATUS). An `npm test` that ends first waits for it too.
GO_TOOLS_LOG=$(mktemp -t go-tools.XXXXXX.log)
GO_TOOLS_STATUS=$GO_TOOLS_LOG.status
export GO_TOOLS_LOG GO_TOOLS_STATUS
(
  status=0
  bash "$REPO_ROOT/deploy/local/infra.sh" up jaeger promtool >/dev/null 2>"$GO_TOOLS_LOG" || status=$?
  echo "$status" >"$GO_TOOLS_STATUS"
) &
go_tools=$!
export_infra_env jaeger promtool
# Topics of earlier runs (each test and benchmark makes its own) slow the broker's start: delete them.
node deploy/local/dist/prune-topics.js
# Headless Chromium for the dashboard's browser test (gateway/test/dashboard.test.ts).
bash "$REPO_ROOT/deploy/local/install-chromium.sh"
npx jest --ci "$@"
# Then the cluster tests (deploy/cluster-test, also `npm run test:cluster`), one at a time: they SIGKILL and
# restart nodes of the local Kafka and ClickHouse clusters. Skipped when arguments pick tests.
if (($# == 0)); then
  wait "$go_tools"
  bash "$REPO_ROOT/deploy/local/test-cluster.sh"
fi
