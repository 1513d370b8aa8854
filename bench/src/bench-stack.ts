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
import { createTestClickHouse, createTestPostgres, startStack, uniqueSuffix, type Stack, type TestClickHouse } from '@mail/local';

export interface BenchStack {
  readonly stack: Stack;
  readonly postgresUrl: string;
  readonly clickhouse: TestClickHouse;
  /** Makes names (topics, categories, event ids) unique to this run. */
  readonly suffix: string;
  /** Signs webhook calls; the gateway verifies them with the public half. */
  readonly webhookKey: crypto.KeyObject;
  /** Stops the processes, drops the databases, removes the state folder. */
  close(): Promise<void>;
}

export async function startBenchStack(): Promise<BenchStack> {
  const suffix = uniqueSuffix();
  const [postgres, clickhouse] = await Promise.all([createTestPostgres('bench'), createTestClickHouse('bench')]);
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
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
        // The whole load comes from one (dev) user and workspace: measured is the platform, not the fair-use limits.
        USER_RATE_LIMIT_PER_SECOND: '1000000',
        USER_RATE_LIMIT_BURST: '1000000',
        WORKSPACE_ANALYTICS_CONCURRENCY: '1000000',
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
    close: async () => {
      await stack.stopAll();
      await dropAll();
    },
  };
}
