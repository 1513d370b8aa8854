#!/usr/bin/env bash
# `npm run test:cluster`: the cluster tests (deploy/cluster-test) against the
# local clusters of deploy/local/infra.sh, beside the single servers the
# processes keep using for PostgreSQL. They SIGKILL and restart nodes of those
# clusters, so they run one at a time (jest.cluster.config.js); `npm test` runs
# them last. Arguments go to jest: `npm run test:cluster -- broker-loss`.
# The servers stay up afterwards; `infra.sh down` stops them, clusters included.
#
# One fault of the cluster's engine, ClickHouse 18.16, is not the code's: when
# both replicas of a shard take the same ALTER ... ON CLUSTER at once, each
# checks whether the other has run it before taking the shard's lock and not
# again after it (later releases check again), so both run it and the second
# fails to mark it done ("Node exists"). That server's DDL worker then logs
# "Unexpected ZooKeeper error ... Terminating." and runs no ON CLUSTER
# statement until it restarts, so every later one waits for it until
# distributed_ddl_task_timeout. When a run fails and a server logged that
# during it, the cluster's servers restart and the tests run again, at most
# RUNS times in all (on a busy host it can strike two runs in a row); any
# other failure fails at once.
set -euo pipefail

# SECONDS counts from the start of this script.
trap 'printf "[test:cluster] total wall time: %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT

# shellcheck source=deploy/local/bootstrap.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/bootstrap.sh"

CLUSTER_LOGS="${STATE_DIR:-$REPO_ROOT/.state}/clickhouse-cluster"
DDL_WORKER_STOPPED='DDLWorker: Unexpected ZooKeeper error: .*Node exists, path: .*/executed'

# The size of each server's error log now, "<log> <bytes>" a line.
error_log_sizes() {
  local log
  for log in "$CLUSTER_LOGS"/ch*/logs/clickhouse-server.err.log; do
    if [[ -f $log ]]; then printf '%s %s\n' "$log" "$(stat -c %s -- "$log")"; fi
  done
}

# Whether a server's DDL worker stopped on that fault since the sizes given.
ddl_worker_stopped_since() {
  local log size
  while read -r log size; do
    [[ -n $log ]] || continue
    if tail -c "+$((size + 1))" -- "$log" | grep -q -- "$DDL_WORKER_STOPPED"; then
      printf '[test:cluster] %s: ClickHouse 18.16 DDL worker stopped (Node exists on a shard'"'"'s executed mark)\n' "$log" >&2
      return 0
    fi
  done <<<"$1"
  return 1
}

# clickhouse-cluster brings the zookeeper it needs up too.
load_infra_env postgres kafka clickhouse kafka-cluster clickhouse-cluster
RUNS=3
for ((run = 1; ; run++)); do
  sizes=$(error_log_sizes)
  if npx jest --ci --runInBand --config jest.cluster.config.js "$@"; then exit 0; fi
  ddl_worker_stopped_since "$sizes" && ((run < RUNS)) || exit 1
  printf '[test:cluster] restarting the ClickHouse cluster and running the cluster tests again (run %d of at most %d)\n' $((run + 1)) "$RUNS" >&2
  bash "$REPO_ROOT/deploy/local/infra.sh" down clickhouse-cluster
  load_infra_env clickhouse-cluster
done
