#!/usr/bin/env bash
# `npm run down`: stops what `npm run up` started, the services and the gateway
# first (they would otherwise log errors while the servers go away), then the
# servers. Data stays in .state/ for the next `npm run up`.
set -euo pipefail

cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.."
rc=0
# No dist/down.js means nothing was ever built, so no stack can be running.
if [[ -f deploy/local/dist/down.js ]]; then
  node deploy/local/dist/down.js || rc=$?
fi
bash deploy/local/infra.sh down
exit "$rc"
