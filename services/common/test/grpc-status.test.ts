import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { createTestPostgres, type TestPostgres } from '@mail/local';
import { toServiceError } from '../src/grpc-status';

/** PostgreSQL's own errors, raised by a real server, and the status a call that hit them ends with. */
let postgres: TestPostgres;
const clients: pg.Client[] = [];

beforeAll(async () => {
  postgres = await createTestPostgres('common_grpc_status');
  for (let i = 0; i < 2; i += 1) {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    clients.push(client);
  }
  await clients[0].query('CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL)');
});

beforeEach(async () => {
  await clients[0].query('TRUNCATE counters');
  await clients[0].query('INSERT INTO counters VALUES (1, 0), (2, 0)');
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.end()));
  await postgres.drop();
});

/** Runs both transactions' steps, the i-th steps side by side; resolves with the error that one of them hit. */
async function raceTransactions(stepsA: string[], stepsB: string[]): Promise<unknown> {
  const [a, b] = clients;
  let failure: unknown;
  const settle = (client: pg.Client) => async (error: unknown) => {
    failure ??= error;
    await client.query('ROLLBACK');
  };
  const run = async (client: pg.Client, steps: string[]) => {
    for (const step of steps) await client.query(step);
    await client.query('COMMIT');
  };
  await Promise.all([run(a, stepsA).catch(settle(a)), run(b, stepsB).catch(settle(b))]);
  return failure;
}

it('answers a deadlock UNAVAILABLE: the same call may succeed when retried', async () => {
  const [a, b] = clients;
  await a.query('BEGIN');
  await b.query('BEGIN');
  await a.query('UPDATE counters SET n = n + 1 WHERE id = 1');
  await b.query('UPDATE counters SET n = n + 1 WHERE id = 2');
  const error = await raceTransactions(['UPDATE counters SET n = n + 1 WHERE id = 2'], ['UPDATE counters SET n = n + 1 WHERE id = 1']);
  expect(error).toMatchObject({ code: '40P01' });
  expect(toServiceError(error).code).toBe(grpc.status.UNAVAILABLE);
});

it('answers a serialization failure UNAVAILABLE', async () => {
  const [a, b] = clients;
  await a.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await a.query('SELECT n FROM counters WHERE id = 1');
  await b.query('UPDATE counters SET n = n + 1 WHERE id = 1');
  const error = await a.query('UPDATE counters SET n = n + 1 WHERE id = 1').catch((failure: unknown) => failure);
  await a.query('ROLLBACK');
  expect(error).toMatchObject({ code: '40001' });
  expect(toServiceError(error).code).toBe(grpc.status.UNAVAILABLE);
});

it('answers a connection refused for too many connections UNAVAILABLE', async () => {
  const database = new URL(postgres.url).pathname.slice(1);
  // The two clients are connected: a third is one too many.
  await clients[0].query(`ALTER DATABASE "${database}" CONNECTION LIMIT 2`);
  try {
    const client = new pg.Client({ connectionString: postgres.url });
    const error = await client.connect().catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: '53300' });
    expect(toServiceError(error).code).toBe(grpc.status.UNAVAILABLE);
  } finally {
    await clients[0].query(`ALTER DATABASE "${database}" CONNECTION LIMIT -1`);
  }
});

it('answers an error of the request itself INTERNAL, as before', async () => {
  const error = await clients[0].query('INSERT INTO counters VALUES (1, 0)').catch((failure: unknown) => failure);
  expect(error).toMatchObject({ code: '23505' });
  expect(toServiceError(error).code).toBe(grpc.status.INTERNAL);
});
