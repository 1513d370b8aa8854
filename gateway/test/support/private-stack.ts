import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createTestClickHouse,
  createTestPostgres,
  startStack,
  uniqueSuffix,
  type ProcessName,
  type Stack,
  type TestClickHouse,
  type TestPostgres,
} from '@mail/local';

/**
 * The real processes (startStack; all of them unless `processes` names some)
 * isolated for one test file: a private Postgres and ClickHouse database, a
 * state folder of their own, and private Kafka topics and consumer group
 * (<label>-events-<run>, <label>-dlq-<run>, <label>-<run>), since what goes
 * in through the webhook reaches Kafka. The gateway trusts the dev user
 * (DEV_AUTH_ENABLED=1); `env` adds to that environment or overrides it.
 */
export interface PrivateStack {
  stack: Stack;
  postgres: TestPostgres;
  clickhouse: TestClickHouse;
  /** The state folder; what the test puts in it goes away with close(). */
  stateDir: string;
  /** The environment the processes were started with. */
  env: Record<string, string>;
  /** Processes, then the databases and the state folder. */
  close(): Promise<void>;
}

export async function startPrivateStack(
  label: string,
  { processes, env = {} }: { processes?: ProcessName[]; env?: Record<string, string> } = {},
): Promise<PrivateStack> {
  const run = uniqueSuffix();
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  let postgres: TestPostgres | undefined;
  let clickhouse: TestClickHouse | undefined;
  let stack: Stack | undefined;
  const close = async (): Promise<void> => {
    await stack?.stopAll();
    await Promise.all([postgres?.drop(), clickhouse?.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    [postgres, clickhouse] = await Promise.all([createTestPostgres(label), createTestClickHouse(label)]);
    const stackEnv = {
      DEV_AUTH_ENABLED: '1',
      DATABASE_URL: postgres.url,
      CLICKHOUSE_URL: clickhouse.url,
      CLICKHOUSE_DATABASE: clickhouse.database,
      KAFKA_EVENTS_TOPIC: `${label}-events-${run}`,
      KAFKA_DLQ_TOPIC: `${label}-dlq-${run}`,
      KAFKA_CONSUMER_GROUP: `${label}-${run}`,
      ...env,
    };
    stack = await startStack({ stateDir, logDir: path.join(stateDir, 'logs'), processes, env: stackEnv });
    return { stack, postgres, clickhouse, stateDir, env: stackEnv, close };
  } catch (error) {
    await close();
    throw error;
  }
}
