import type { EnvReader } from '@mail/common';
import { readEventStoreConfig, type EventStoreConfig } from '@mail/event-store';

export interface AnalyticsConfig {
  clickhouse: EventStoreConfig;
}

export function readConfig(env: EnvReader): AnalyticsConfig {
  return {
    clickhouse: readEventStoreConfig(env),
  };
}
