#!/usr/bin/env bash
# `npm run bench`: the benchmark suite (bench/, @mail/bench) against real
# servers, from a fresh clone too: dependencies and build (bootstrap.sh), the
# servers (infra.sh up), then bench/dist/main.js, which starts its own stack on
# private databases and topics, runs every benchmark and prints one table.
# Progress goes to stderr, the table to stdout; the figures are also written to
# bench/results/<time>.json. Settings are environment variables (BENCH_EVENTS,
# BENCH_ONLY, ...), listed in bench/src/main.ts.
#
# bench/ is not a root workspace nor part of the root `tsc -b` (the Dockerfile
# and its test list every workspace, and the image has no use for benchmarks):
# it is built here, on top of the packages bootstrap.sh has just built.
set -euo pipefail

trap 'printf "[bench] total wall time: %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"
# jaeger: the trace backend of the tracing benchmark; mailpit: the sending benchmark starts a private one from its
# binary (both built from their Go modules on first use).
load_infra_env postgres kafka clickhouse jaeger mailpit
# Topics of earlier runs (each test and benchmark makes its own) slow the broker's start: delete them.
node deploy/local/dist/prune-topics.js

printf '[bench] building bench/\n' >&2
npx tsc -b bench >&2
npx tsc -p bench/query-analytics.tsconfig.json >&2
exec node bench/dist/main.js
