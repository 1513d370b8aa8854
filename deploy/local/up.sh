#!/usr/bin/env bash
# `npm run up`: from a fresh clone to the whole system running: dependencies
# and build, the servers (PostgreSQL, Kafka, ClickHouse, Mailpit for what the
# delivery service sends and a second Mailpit as its bounce mailbox), then
# every service and the gateway, detached,
# so the command returns and `npm run down` stops it.
set -euo pipefail

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"
load_infra_env postgres kafka clickhouse mailpit bounce-mailpit
exec node deploy/local/dist/up.js
