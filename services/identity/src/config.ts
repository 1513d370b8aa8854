import type { EnvReader } from '@mail/common';
import { normalizeEmail } from './domain/validation';

export interface IdentityConfig {
  databaseUrl: string;
  /** Normalized e-mails whose users become platform admins on sign-in. */
  bootstrapPlatformAdmins: ReadonlySet<string>;
}

export function readConfig(env: EnvReader): IdentityConfig {
  return {
    databaseUrl: env.string('DATABASE_URL', 'postgres://mail:mail@127.0.0.1:25432/mail'),
    bootstrapPlatformAdmins: new Set(env.list('BOOTSTRAP_PLATFORM_ADMINS').map(normalizeEmail)),
  };
}
