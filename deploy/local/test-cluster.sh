#!/usr/bin/env bash
# `npm run test:cluster`: the cluster tests (deploy/cluster-test) against the
# local clusters of deploy/local/infra.sh, beside the single servers the
# processes keep using for PostgreSQL. They SIGKILL and restart nodes of those
# clusters, so they run one at a time (jest.cluster.config.js), after the rest
# of `npm test`. Arguments go to jest: `npm run test:cluster -- broker-loss`.
# The servers stay up afterwards; `infra.sh down` stops them, clusters included.
set -euo pipefail

# SECONDS counts from the start of this script.
trap 'printf "[test:cluster] total wall time: %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"

# clickhouse-cluster brings the zookeeper it needs up too.
load_infra_env postgres kafka clickhouse kafka-cluster clickhouse-cluster
npx jest --ci --runInBand --config jest.cluster.config.js "$@"
