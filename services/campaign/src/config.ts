import type { EnvReader } from '@mail/common';

export interface CampaignConfig {
  databaseUrl: string;
}

export function readConfig(env: EnvReader): CampaignConfig {
  return { databaseUrl: env.string('DATABASE_URL', 'postgres://mail:mail@127.0.0.1:25432/mail') };
}
