import type { EnvReader } from '@mail/common';
import type { EventStoreConfig } from '@mail/event-store';

export interface AnalyticsConfig {
  clickhouse: EventStoreConfig;
}

export function readConfig(env: EnvReader): AnalyticsConfig {
  return {
    clickhouse: {
      urls: env.list('CLICKHOUSE_URL', ['http://127.0.0.1:58123']),
      database: env.string('CLICKHOUSE_DATABASE', 'mail'),
      cluster: env.optionalString('CLICKHOUSE_CLUSTER'),
    },
  };
}
