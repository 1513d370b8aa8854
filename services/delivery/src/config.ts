import { ConfigError, type EnvReader } from '@mail/common';
import { PROVIDERS, type Provider } from './domain/headers';
import type { SourceLimits } from './store/recipient-source';
import { parseEncryptionKey } from './domain/sealed-secret';

export interface SmtpConfig {
  url: string;
  provider: Provider;
  /** Connections of the pool, per process. */
  maxConnections: number;
}

export interface DeliveryConfig {
  databaseUrl: string;
  recipientsDatabaseUrl: string;
  /** What a run's read of its recipient database may take and bring. */
  recipientSource: SourceLimits;
  /** Runs a process loads at once. */
  recipientLoads: number;
  campaignAddress: string;
  analyticsAddress: string;
  kafkaBrokers: string[];
  eventsTopic: string;
  smtp: SmtpConfig;
  /** Messages a second per transport, across every replica; 0: no limit. */
  sendRatePerSecond: number;
  /** Recipients a sender claims at once. */
  sendBatchSize: number;
  /** Batches a process sends at the same time. */
  sendConcurrency: number;
  /** Attempts of a message that meets temporary failures before it is `failed`. */
  sendMaxAttempts: number;
  /** The first retry's wait; each further one doubles it. */
  sendRetryBaseMs: number;
  /** A process whose heartbeat is older than this is dead: its messages in flight become `unknown`. */
  workerLeaseMs: number;
  schedulerIntervalMs: number;
  runMissedGraceMs: number;
  /** Addresses a workspace may test-send in any hour, across every replica. */
  testSendPerHour: number;
  publicBaseUrl: string;
  unsubscribeSigningKey: string;
  trackingSigningKey: string;
  /** AES-256 key of the workspaces' own recipient database URLs at rest (RECIPIENTS_ENCRYPTION_KEY). */
  recipientsEncryptionKey: Buffer;
  /** BOUNCE_MAILBOX_URL: the POP3 mailbox bounces and feedback reports arrive in; unset, none is read. */
  bounceMailbox: { url: URL; intervalMs: number } | undefined;
}

/** BOUNCE_MAILBOX_URL: `pop3://user:password@host:port`, or `pop3s://` (TLS). */
function bounceMailbox(env: EnvReader): DeliveryConfig['bounceMailbox'] {
  const intervalMs = env.positiveInt('BOUNCE_MAILBOX_INTERVAL_MS', 60_000);
  const text = env.string('BOUNCE_MAILBOX_URL', '');
  if (text === '') return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError('BOUNCE_MAILBOX_URL must be a pop3:// or pop3s:// URL');
  }
  if ((url.protocol !== 'pop3:' && url.protocol !== 'pop3s:') || !url.hostname || !url.username) {
    throw new ConfigError('BOUNCE_MAILBOX_URL must be pop3://user:password@host:port or pop3s://user:password@host:port');
  }
  return { url, intervalMs };
}

/** `?tls=off` in SMTP_URL: plain SMTP, for a local Mailpit; refused in production. */
function smtpConfig(env: EnvReader, production: boolean): SmtpConfig {
  const url = env.string('SMTP_URL', 'smtp://127.0.0.1:21025?tls=off');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError('SMTP_URL must be an smtp:// or smtps:// URL');
  }
  if (parsed.protocol !== 'smtp:' && parsed.protocol !== 'smtps:') throw new ConfigError('SMTP_URL must be an smtp:// or smtps:// URL');
  if (production && parsed.searchParams.get('tls') === 'off')
    throw new ConfigError('SMTP_URL may not say tls=off when NODE_ENV=production');
  const provider = env.string('SMTP_PROVIDER', 'none');
  if (!(PROVIDERS as readonly string[]).includes(provider)) throw new ConfigError(`SMTP_PROVIDER must be one of ${PROVIDERS.join(', ')}`);
  return { url, provider: provider as Provider, maxConnections: env.int('SMTP_MAX_CONNECTIONS', 5) };
}

/**
 * RECIPIENTS_ENCRYPTION_KEY: 32 random bytes in base64 (`openssl rand -base64 32`). Development falls back to a
 * fixed key (URLs stored with it open only with the same default); production refuses to start without one.
 */
function recipientsEncryptionKey(env: EnvReader, production: boolean): Buffer {
  const text = env.optionalString('RECIPIENTS_ENCRYPTION_KEY');
  if (text === undefined) {
    if (production) throw new ConfigError('RECIPIENTS_ENCRYPTION_KEY must be set when NODE_ENV=production');
    return Buffer.from('development-recipients-key-32byt', 'utf8');
  }
  const key = parseEncryptionKey(text);
  if (!key) throw new ConfigError('RECIPIENTS_ENCRYPTION_KEY must be 32 bytes in base64 (openssl rand -base64 32)');
  return key;
}

/** Alone for MIGRATE_ONLY=1, which needs nothing else (the migration Job sets nothing else). */
export function readDatabaseUrl(env: EnvReader): string {
  return env.string('DATABASE_URL', 'postgres://mail:mail@127.0.0.1:25432/mail');
}

export function readConfig(env: EnvReader): DeliveryConfig {
  const production = env.optionalString('NODE_ENV') === 'production';
  const unsubscribeSigningKey = env.optionalString('UNSUBSCRIBE_SIGNING_KEY');
  if (unsubscribeSigningKey === undefined && production) {
    throw new ConfigError('UNSUBSCRIBE_SIGNING_KEY must be set when NODE_ENV=production');
  }
  const trackingSigningKey = env.optionalString('TRACKING_SIGNING_KEY');
  if (trackingSigningKey === undefined && production) {
    throw new ConfigError('TRACKING_SIGNING_KEY must be set when NODE_ENV=production');
  }
  return {
    databaseUrl: readDatabaseUrl(env),
    recipientsDatabaseUrl: env.string('RECIPIENTS_DATABASE_URL', 'postgres://mail_recipients:mail_recipients@127.0.0.1:25432/recipients'),
    recipientSource: {
      timeoutMs: env.positiveInt('RECIPIENTS_QUERY_TIMEOUT_MS', 60_000),
      rowMaxBytes: env.positiveInt('RECIPIENT_ROW_MAX_BYTES', 65_536),
      maxRows: env.positiveInt('RUN_MAX_RECIPIENTS', 5_000_000),
    },
    recipientLoads: env.positiveInt('RECIPIENT_LOADS_PER_PROCESS', 4),
    campaignAddress: env.string('CAMPAIGN_GRPC_ADDR', '127.0.0.1:50052'),
    analyticsAddress: env.string('ANALYTICS_GRPC_ADDR', '127.0.0.1:50054'),
    kafkaBrokers: env.list('KAFKA_BROKERS', ['127.0.0.1:29092']),
    eventsTopic: env.string('KAFKA_EVENTS_TOPIC', 'engagement-events'),
    smtp: smtpConfig(env, production),
    sendRatePerSecond: env.int('SEND_RATE_PER_SECOND', 0),
    sendBatchSize: env.int('SEND_BATCH_SIZE', 500),
    sendConcurrency: env.int('SEND_CONCURRENCY', 4),
    sendMaxAttempts: env.int('SEND_MAX_ATTEMPTS', 5),
    sendRetryBaseMs: env.int('SEND_RETRY_BASE_MS', 30_000),
    workerLeaseMs: env.int('SEND_WORKER_LEASE_MS', 30_000),
    schedulerIntervalMs: env.int('SCHEDULER_INTERVAL_MS', 5_000),
    runMissedGraceMs: env.int('RUN_MISSED_GRACE_MS', 3_600_000),
    testSendPerHour: env.positiveInt('TEST_SEND_PER_HOUR', 100),
    publicBaseUrl: env.string('PUBLIC_BASE_URL', 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    // Development only (refused above in production): links signed with it verify only with the same default.
    unsubscribeSigningKey: unsubscribeSigningKey ?? 'development-unsubscribe-key',
    // Development only too: the gateway verifies with the same default only if it is given it.
    trackingSigningKey: trackingSigningKey ?? 'development-tracking-key',
    recipientsEncryptionKey: recipientsEncryptionKey(env, production),
    bounceMailbox: bounceMailbox(env),
  };
}
