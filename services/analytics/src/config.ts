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
  };
  if (reads.slots < 1 || reads.waitMs < 1)
    throw new ConfigError('ANALYTICS_CLICKHOUSE_READS and ANALYTICS_READ_WAIT_MS must be at least 1');
  return {
    clickhouse: readEventStoreConfig(env),
    reads,
  };
}
