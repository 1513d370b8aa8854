import { ConfigError, type EnvReader } from '@mail/common';
import { readEventStoreConfig, type EventStoreConfig } from '@mail/event-store';
import type { ReadLimits } from './domain/fair-reads';

export interface AnalyticsConfig {
  clickhouse: EventStoreConfig;
  reads: ReadLimits;
}

export function readConfig(env: EnvReader): AnalyticsConfig {
  const reads: ReadLimits = {
    slots: env.int('ANALYTICS_CLICKHOUSE_READS', 8),
    waitMs: env.int('ANALYTICS_READ_WAIT_MS', 3_000),
    turnMs: env.int('ANALYTICS_READ_TURN_MS', 250),
  };
  if (reads.slots < 1 || reads.waitMs < 1 || reads.turnMs < 1)
    throw new ConfigError('ANALYTICS_CLICKHOUSE_READS, ANALYTICS_READ_WAIT_MS and ANALYTICS_READ_TURN_MS must be at least 1');
  return {
    clickhouse: readEventStoreConfig(env),
    reads,
  };
}
