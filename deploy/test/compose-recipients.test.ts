/**
 * docker-compose.yml's recipients-setup, run against the local PostgreSQL:
 * the login it makes for recipient queries, which compose's delivery reads
 * with by default, reads `accounts` and can do nothing else.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { Client } from 'pg';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { composeEnvironment, loadCompose } from './support/compose';

const compose = loadCompose(path.resolve(__dirname, '..', '..', 'docker-compose.yml'));
const server = new URL(infraEnv().databaseUrl);
const database = `compose_recipients_${uniqueSuffix()}`;

/** The compose name of the database, `recipients`, stands for this test's own; `postgres` for the local server. */
function onLocalServer(text: string): string {
  return text
    .replace(/(?<![\w-])recipients(?![\w-])/g, database)
    .replace(/-h postgres\b/g, `-h ${server.hostname} -p ${server.port}`)
    .replace(/@postgres:5432\//, `@${server.hostname}:${server.port}/`);
}

/** The URL compose's delivery reads recipients with, on the local server. */
function readerUrl(): string {
  return onLocalServer(String(composeEnvironment(compose.services.delivery).RECIPIENTS_DATABASE_URL));
}

async function asReader<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: readerUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

beforeAll(() => {
  const [script] = compose.services['recipients-setup'].command as string[];
  // Twice: the job runs on every `docker compose up`.
  for (let run = 0; run < 2; run += 1) {
    execFileSync('sh', ['-ec', onLocalServer(script)], {
      env: { ...process.env, PGPASSWORD: decodeURIComponent(server.password) },
      stdio: 'pipe',
    });
  }
});

afterAll(async () => {
  const admin = new Client({ connectionString: server.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

test("compose's delivery reads recipients as a login of its own, not the platform's", () => {
  const reader = new URL(readerUrl());
  expect(reader.username).not.toBe(new URL(String(composeEnvironment(compose.services.delivery).DATABASE_URL)).username);
  expect(reader.pathname).toBe(`/${database}`);
});

test('the reader reads accounts', async () => {
  await expect(asReader((client) => client.query('SELECT account_id, email, first_name, last_name FROM accounts'))).resolves.toMatchObject({
    rowCount: 0,
  });
});

test.each([
  ['writes accounts', "INSERT INTO accounts (account_id, email) VALUES ('a', 'a@example.com')", /permission denied/],
  ['creates a table', 'CREATE TABLE redirect (email text)', /permission denied/],
  ['creates a temporary table', 'CREATE TEMP TABLE accounts AS SELECT 1', /permission denied/],
])('the reader cannot do anything else: %s', async (_what, sql, refusal) => {
  await expect(asReader((client) => client.query(sql))).rejects.toThrow(refusal);
});

test("the reader cannot end the platform's sessions", async () => {
  const platform = new Client({ connectionString: server.toString() });
  await platform.connect();
  try {
    const { rows } = await platform.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await expect(asReader((client) => client.query('SELECT pg_terminate_backend($1)', [rows[0].pid]))).rejects.toThrow(
      /must be a member of the role/,
    );
    await expect(platform.query('SELECT 1')).resolves.toMatchObject({ rowCount: 1 });
  } finally {
    await platform.end();
  }
});
