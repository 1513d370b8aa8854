import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createTestClickHouse,
  createTestPostgres,
  startStack,
  uniqueSuffix,
  type Stack,
  type TestClickHouse,
  type TestPostgres,
} from '@mail/local';

/**
 * The whole real stack (five services and the gateway) for the hostile-input
 * tests, isolated: a private Postgres and ClickHouse database and private
 * Kafka topics and consumer group (the webhook is open, so junk reaches
 * Kafka). DEV_AUTH_ENABLED=1, and no webhook authentication unless the
 * caller's environment sets it, so every operation can be reached.
 */
export interface HostileStack {
  stack: Stack;
  gateway: string;
  /** A workspace that exists, for the `workspace_id` header. */
  workspaceId: string;
  close(): Promise<void>;
}

export async function startHostileStack(label: string): Promise<HostileStack> {
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
    stack = await startStack({
      stateDir,
      logDir: path.join(stateDir, 'logs'),
      env: {
        DEV_AUTH_ENABLED: '1',
        LOG_LEVEL: 'warn',
        DATABASE_URL: postgres.url,
        CLICKHOUSE_DATABASE: clickhouse.database,
        KAFKA_EVENTS_TOPIC: `${label}-events-${run}`,
        KAFKA_DLQ_TOPIC: `${label}-dlq-${run}`,
        KAFKA_CONSUMER_GROUP: `${label}-${run}`,
      },
    });
    const gateway = stack.urls.gateway;
    // Creating a workspace is platform_admin's (the dev user); the header only has to be a UUID here.
    const response = await fetch(`${gateway}/workspaces/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', workspace_id: crypto.randomUUID() },
      body: JSON.stringify({ name: `${label} ${run}` }),
    });
    const body = (await response.json()) as { id?: string };
    if (response.status !== 201 || !body.id) throw new Error(`creating a workspace: ${response.status} ${JSON.stringify(body)}`);
    return { stack, gateway, workspaceId: body.id, close };
  } catch (error) {
    await close();
    throw error;
  }
}
