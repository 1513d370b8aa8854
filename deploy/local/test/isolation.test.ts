import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startStack, type Stack } from '../src/stack';
import { createTestClickHouse, createTestPostgres, type TestClickHouse, type TestPostgres } from '../src/testing/databases';
import { INFRA_VARIABLES, infraEnv, uniqueSuffix, type InfraVariables } from '../src/testing/infra';

/**
 * A test run on other ports than the default ones touches only its own
 * servers (`PG_PORT=... npm test` beside a stack on the default ports): the
 * helpers and every process the launcher starts take the servers' addresses
 * from the variables the test command exports, and from nowhere else.
 */

const CUSTOM: InfraVariables = {
  DATABASE_URL: 'postgres://mail:mail@127.0.0.1:26432/mail',
  KAFKA_BROKERS: '127.0.0.1:28092,127.0.0.1:28094',
  CLICKHOUSE_URL: 'http://127.0.0.1:27123',
};

describe('infraEnv', () => {
  it('takes every address from the exported variables', () => {
    expect(infraEnv(CUSTOM)).toEqual({
      databaseUrl: 'postgres://mail:mail@127.0.0.1:26432/mail',
      kafkaBrokers: ['127.0.0.1:28092', '127.0.0.1:28094'],
      clickhouseUrl: 'http://127.0.0.1:27123',
    });
  });

  it.each(INFRA_VARIABLES)('refuses to guess %s when it is not exported', (name) => {
    expect(() => infraEnv({ ...CUSTOM, [name]: undefined })).toThrow(`${name} not set`);
    expect(() => infraEnv({ ...CUSTOM, [name]: ' ' })).toThrow(`${name} not set`);
  });
});

/** Sets variables in this process's environment, as the test command's exports do; returns the undo. */
function exportVariables(variables: Record<string, string | undefined>): () => void {
  const saved = Object.fromEntries(Object.keys(variables).map((name) => [name, process.env[name]]));
  const assign = (values: Record<string, string | undefined>): void => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  assign(variables);
  return () => assign(saved);
}

test('the launcher refuses to start a stack without the servers’ addresses', async () => {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolation-refused-'));
  const restore = exportVariables({ KAFKA_BROKERS: undefined });
  try {
    await expect(startStack({ stateDir, logDir: stateDir, processes: ['campaign'] })).rejects.toThrow('KAFKA_BROKERS not set');
  } finally {
    restore();
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

/** A TCP relay on a free port in front of one server: a process reaches the server through it only if it was given its address. */
interface Relay {
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  /** Stops listening and cuts every connection through it. */
  close(): Promise<void>;
}

async function startRelay(target: string): Promise<Relay> {
  const { hostname, port } = new URL(target.includes('://') ? target : `tcp://${target}`);
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections += 1;
    const upstream = net.connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

async function readiness(opsUrl: string): Promise<{ status: number; dependencies: Record<string, string> }> {
  const response = await fetch(`${opsUrl}/readyz`);
  const body = (await response.json()) as { dependencies: Record<string, string> };
  return { status: response.status, dependencies: body.dependencies };
}

describe('a stack under exported addresses on other ports', () => {
  const run = uniqueSuffix();
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolation-'));
  let postgres: TestPostgres;
  let clickhouse: TestClickHouse;
  const relays: Partial<Record<'postgres' | 'clickhouse' | 'kafka', Relay>> = {};
  let stack: Stack | undefined;

  beforeAll(async () => {
    [postgres, clickhouse] = await Promise.all([createTestPostgres('isolation'), createTestClickHouse('isolation')]);
    relays.postgres = await startRelay(postgres.url);
    relays.clickhouse = await startRelay(clickhouse.url);
    relays.kafka = await startRelay(infraEnv().kafkaBrokers[0]);
    const databaseUrl = new URL(postgres.url);
    databaseUrl.port = String(relays.postgres.port);
    // Exported, not handed to startStack: what reaches the processes is what the test command exports.
    const restore = exportVariables({
      DATABASE_URL: databaseUrl.toString(),
      CLICKHOUSE_URL: `http://127.0.0.1:${relays.clickhouse.port}`,
      KAFKA_BROKERS: `127.0.0.1:${relays.kafka.port}`,
    });
    try {
      // campaign alone uses Postgres, ingestion alone ClickHouse and Kafka: each relay's traffic is one process's.
      stack = await startStack({
        stateDir,
        logDir: path.join(stateDir, 'logs'),
        processes: ['campaign', 'ingestion'],
        stopTimeoutMs: 5_000,
        env: {
          LOG_LEVEL: 'warn',
          CLICKHOUSE_DATABASE: clickhouse.database,
          KAFKA_EVENTS_TOPIC: `isolation-events-${run}`,
          KAFKA_DLQ_TOPIC: `isolation-dlq-${run}`,
          KAFKA_CONSUMER_GROUP: `isolation-${run}`,
          KAFKA_TOPIC_PARTITIONS: '1',
        },
      });
    } finally {
      restore();
    }
  });

  afterAll(async () => {
    await Promise.all(Object.values(relays).map((relay) => relay.close()));
    await stack?.stopAll();
    await Promise.all([postgres?.drop(), clickhouse?.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it('connects each process to the servers through the exported addresses', async () => {
    expect(relays.postgres!.connections()).toBeGreaterThan(0);
    expect(relays.clickhouse!.connections()).toBeGreaterThan(0);
    expect(relays.kafka!.connections()).toBeGreaterThan(0);
    expect(await readiness(stack!.urls.ops.campaign)).toEqual({ status: 200, dependencies: { postgres: 'up' } });
    expect(await readiness(stack!.urls.ops.ingestion)).toEqual({
      status: 200,
      dependencies: { kafka: 'up', clickhouse: 'up', progress: 'up' },
    });
  });

  it('loses the servers when those addresses go away: no default address stands in', async () => {
    await Promise.all([relays.postgres!.close(), relays.clickhouse!.close()]);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const [campaign, ingestion] = await Promise.all([readiness(stack!.urls.ops.campaign), readiness(stack!.urls.ops.ingestion)]);
      if (campaign.dependencies.postgres === 'down' && ingestion.dependencies.clickhouse === 'down') break;
      if (Date.now() > deadline) throw new Error(`still up: ${JSON.stringify({ campaign, ingestion })}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });
});
