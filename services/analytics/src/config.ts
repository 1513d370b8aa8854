import type { EnvReader } from '@mail/common';

export interface AnalyticsConfig {
  clickhouseUrl: string;
  clickhouseDatabase: string;
}

export function readConfig(env: EnvReader): AnalyticsConfig {
  return {
    clickhouseUrl: env.string('CLICKHOUSE_URL', 'http://127.0.0.1:58123'),
    clickhouseDatabase: env.string('CLICKHOUSE_DATABASE', 'mail'),
  };
}
