/**
 * The system under test: every service and the gateway (startStack,
 * DEV_AUTH_ENABLED=1, signed webhook) on a private Postgres database, a
 * private ClickHouse database and private Kafka topics, so the suite runs
 * beside `npm run up` and the tests.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, createClient } from '@mail/common';
import { createClickHouse } from '@mail/event-store';
import { createTestClickHouse, createTestPostgres, startStack, uniqueSuffix, type Stack, type TestClickHouse } from '@mail/local';
import { campaignV1 } from '@mail/proto';

export interface BenchStack {
  readonly stack: Stack;
  readonly postgresUrl: string;
  readonly clickhouse: TestClickHouse;
  /** Makes names (topics, categories, event ids) unique to this run. */
  readonly suffix: string;
  /** Signs webhook calls; the gateway verifies them with the public half. */
  readonly webhookKey: crypto.KeyObject;
  /** Mailgun's signing key and Postmark's Basic credentials, as the gateway is configured. */
  readonly mailgunSigningKey: string;
  readonly postmarkBasicAuth: string;
  /** Signs first-party tracking tokens, as the gateway is configured. */
  readonly trackingSigningKey: string;
  /** Stops the processes, drops the databases, removes the state folder. */
  close(): Promise<void>;
}

/** `env` is added to the processes' environment (tracing-bench.ts turns tracing on with it). */
export async function startBenchStack(env: Readonly<Record<string, string>> = {}): Promise<BenchStack> {
  const suffix = uniqueSuffix();
  const [postgres, clickhouse] = await Promise.all([createTestPostgres('bench'), createTestClickHouse('bench')]);
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const mailgunSigningKey = crypto.randomBytes(16).toString('hex');
  const postmarkBasicAuth = `postmark:${crypto.randomBytes(16).toString('hex')}`;
  const trackingSigningKey = crypto.randomBytes(32).toString('base64');
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-'));
  const dropAll = async (): Promise<void> => {
    await Promise.all([postgres.drop(), clickhouse.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  let stack: Stack;
  try {
    stack = await startStack({
      stateDir,
      logDir: path.join(stateDir, 'logs'),
      env: {
        DEV_AUTH_ENABLED: '1',
        NODE_ENV: 'development',
        LOG_LEVEL: 'warn',
        DATABASE_URL: postgres.url,
        CLICKHOUSE_URL: clickhouse.url,
        CLICKHOUSE_DATABASE: clickhouse.database,
        KAFKA_EVENTS_TOPIC: `engagement-events-bench-${suffix}`,
        KAFKA_DLQ_TOPIC: `engagement-events-dlq-bench-${suffix}`,
        KAFKA_CONSUMER_GROUP: `ingestion-bench-${suffix}`,
        SENDGRID_WEBHOOK_PUBLIC_KEY: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
        MAILGUN_WEBHOOK_SIGNING_KEY: mailgunSigningKey,
        POSTMARK_WEBHOOK_BASIC_AUTH: postmarkBasicAuth,
        TRACKING_SIGNING_KEY: trackingSigningKey,
        // The bench client stands for many recipients: the address each call names counts.
        TRUSTED_PROXIES: '127.0.0.1',
        // The whole load comes from one (dev) user and workspace: measured is the platform, not the fair-use limits.
        USER_RATE_LIMIT_PER_SECOND: '1000000',
        USER_RATE_LIMIT_BURST: '1000000',
        WORKSPACE_ANALYTICS_CONCURRENCY: '1000000',
        ...env,
      },
    });
  } catch (error) {
    await dropAll();
    throw error;
  }
  return {
    stack,
    postgresUrl: postgres.url,
    clickhouse,
    suffix,
    webhookKey: privateKey,
    mailgunSigningKey,
    postmarkBasicAuth,
    trackingSigningKey,
    close: async () => {
      await stack.stopAll();
      await dropAll();
    },
  };
}

/** A count of the events the bench stack has stored, for a driver to wait on. */
export function storedEvents(bench: BenchStack): { count(): Promise<number>; close(): Promise<void> } {
  const clickhouse = createClickHouse(bench.clickhouse.url, bench.clickhouse.database);
  return {
    count: async () => {
      const result = await clickhouse.query({ query: 'SELECT count() AS n FROM events', format: 'JSONEachRow' });
      return Number((await result.json<{ n: string }>())[0].n);
    },
    close: () => clickhouse.close(),
  };
}

/** `count` campaigns, each in a workspace of its own, whose categories (`<prefix>-<suffix>-<i>`) it resolves to. */
export async function createBenchCampaigns(bench: BenchStack, prefix: string, count = 10): Promise<string[]> {
  const campaigns = createClient(campaignV1.CampaignServiceClient, bench.stack.urls.grpc.campaign);
  try {
    const categories: string[] = [];
    for (let i = 0; i < count; i++) {
      const category = `${prefix}-${bench.suffix}-${i}`;
      const workspaceId = crypto.randomUUID();
      await call(campaigns.createCampaign.bind(campaigns), {
        workspaceId,
        campaign: campaignV1.CampaignInput.fromPartial({ workspaceId, name: `${prefix} bench ${i}`, providerCategoryId: category }),
      });
      categories.push(category);
    }
    return categories;
  } finally {
    campaigns.close();
  }
}
