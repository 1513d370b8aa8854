import { prometheus, registry } from '@mail/common';

const counter = (name: string, help: string): prometheus.Counter =>
  new prometheus.Counter({ name: `ingestion_${name}_total`, help, registers: [registry] });

export const ingestionMetrics = {
  consumed: counter('events_consumed', 'Events read from the events topic (a record carries a batch of them), poison ones included'),
  inserted: counter('events_inserted', 'Events written to the events table'),
  duplicates: counter('events_duplicate', 'Events skipped as already stored or repeated within a batch'),
  unmatched: counter('events_unmatched', 'Events whose categories name no campaign, written to unmatched_events'),
  rematched: counter('events_rematched', 'Unmatched events republished to the events topic because a campaign took their category'),
  signals: counter('suppression_signals', 'Suppression signals written (bounces, unsubscribes, spam reports)'),
  deadLettered: new prometheus.Counter({
    name: 'ingestion_events_dead_lettered_total',
    help:
      'Events (or whole records) sent to the dead-letter topic, by reason: undecodable (not an event), invalid_row (a row its table ' +
      'would not take), refused_by_clickhouse (an insert ClickHouse refused for that row alone)',
    labelNames: ['reason'],
    registers: [registry],
  }),
  partitionsCompacted: counter('partitions_compacted', 'Partitions of closed months merged into one part (compactClosedMonths)'),
  daysSettled: counter('days_settled', 'Unsettled days cleared because their rollups agree with their events (settleUnsettledDays)'),
  daysRebuilt: counter('days_rebuilt', 'Unsettled days whose rollups were rebuilt from their events (settleUnsettledDays)'),
  workspacesErased: counter(
    'workspaces_erased',
    'Deleted workspaces whose events stored after the deletion were deleted (eraseClosedWorkspaceLeftovers)',
  ),
  suppressionStatesRepaired: counter(
    'suppression_states_repaired',
    'Addresses whose suppression state was behind their signals and was recomputed (repairSuppressionStates)',
  ),
  retries: counter('batch_retries', 'Failed batch attempts that were retried (ClickHouse or campaign service down)'),
  batchDuration: new prometheus.Histogram({
    name: 'ingestion_batch_duration_seconds',
    help: 'Time to write one batch, retries included',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  }),
  stalledSeconds: new prometheus.Gauge({
    name: 'ingestion_partition_stalled_seconds',
    help: 'How long records have waited on a partition held with its committed offset unchanged (0: caught up or moving)',
    labelNames: ['partition'],
    registers: [registry],
  }),
  lag: new prometheus.Gauge({
    name: 'ingestion_consumer_lag',
    help: 'Records behind the high watermark, per partition, after the last batch',
    labelNames: ['partition'],
    registers: [registry],
  }),
};
