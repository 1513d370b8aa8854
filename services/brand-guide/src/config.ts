import type { EnvReader } from '@mail/common';

export interface BrandGuideConfig {
  databaseUrl: string;
}

export function readConfig(env: EnvReader): BrandGuideConfig {
  return { databaseUrl: env.string('DATABASE_URL', 'postgres://mail:mail@127.0.0.1:25432/mail') };
}
