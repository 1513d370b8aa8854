#!/usr/bin/env bash
# `npm test`: the whole suite against real servers, from a fresh clone too.
# Arguments go to jest: `npm test -- services/campaign` runs one package.
# The servers keep their default ports and .state/ (tests isolate themselves
# with private databases and topics) and stay up afterwards for the next run.
set -euo pipefail

# SECONDS counts from the start of this script.
trap 'printf "[test] total wall time: %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"

# The contracts are checked before any code is tested against them.
npx buf lint proto
# ts-jest only transpiles (fast); the tests' types are checked here, once.
npx tsc -p tsconfig.test.json
load_infra_env
# Topics of earlier runs (each test and benchmark makes its own) slow the broker's start: delete them.
node deploy/local/dist/prune-topics.js
# Headless Chromium for the dashboard's browser test (gateway/test/dashboard.test.ts).
bash "$REPO_ROOT/deploy/local/install-chromium.sh"
npx jest --ci "$@"
