import { Client } from 'pg';
import { call } from '@mail/common';
import { eventually, uniqueSuffix } from '@mail/local';
import type { deliveryV1 } from '@mail/proto';
import { putRecipientDatabase } from '../src/store/recipient-databases';
import { openDatabase } from '../src/store/database';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * A recipient query is code a workspace's editor writes (docs/api.md,
 * "Recipient databases and queries"): whatever it says, it runs as one
 * statement, read-only, on a connection of its run alone, as a login that may
 * only read `accounts`, within the time, row and size limits; what the source
 * answers fails the run at once. Each case is an attack that worked on the
 * pooled, spliced cursor this replaced.
 */

const ENCRYPTION_KEY = Buffer.alloc(32, 7);
let world: DeliveryWorld;

beforeAll(async () => {
  world = await startDeliveryWorld('recipient_queries', {
    RECIPIENTS_QUERY_TIMEOUT_MS: '5000',
    RUN_MAX_RECIPIENTS: '1000',
    RECIPIENTS_ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
    SEND_WORKER_LEASE_MS: '2000',
  });
}, 180_000);

afterAll(async () => {
  await world?.close();
});

/** The world as another workspace sees it. */
const workspace = (): DeliveryWorld => ({ ...world, workspaceId: crypto.randomUUID() });

async function startRun(as: DeliveryWorld, query: string): Promise<string> {
  const campaign = await createSendableCampaign(as, query);
  const { run } = await call(as.delivery.createRun.bind(as.delivery), { workspaceId: as.workspaceId, campaignId: campaign.id });
  return run!.id;
}

const finished = (run: deliveryV1.Run): boolean => ['completed', 'failed', 'cancelled'].includes(run.status);

async function runToEnd(as: DeliveryWorld, query: string): Promise<deliveryV1.Run> {
  return waitForRun(as, await startRun(as, query), finished, 120_000);
}

/** Accounts at a domain of their own, and the query that reads them. */
async function accountsAt(count: number, start: number): Promise<{ domain: string; query: string }> {
  const domain = `rq-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, count, domain, start);
  return { domain, query: `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id` };
}

async function adminQuery<Row extends object>(url: string, text: string): Promise<Row[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<Row & Record<string, unknown>>(text)).rows;
  } finally {
    await client.end();
  }
}

async function deliveredTo(domain: string): Promise<string[]> {
  return (await world.mailpit.messages()).flatMap((message) =>
    message.To.map(({ Address }) => Address.toLowerCase()).filter((address) => address.endsWith(`@${domain}`)),
  );
}

/** Passes the campaign's T-SQL check (the hidden part is a string there) but is several statements to PostgreSQL. */
const smuggling = (statements: string): string =>
  String.raw`SELECT E'\' , ' AS email ; COMMIT ; ${statements} ; BEGIN ; SELECT 1 AS email --'`;

test('a query smuggling statements runs as one statement: it writes nothing and its run fails', async () => {
  const table = `pwned_${uniqueSuffix()}`;
  const run = await runToEnd(workspace(), smuggling(`CREATE TABLE ${table} (x int)`));
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/refused the query/);
  const found = await adminQuery<{ name: string | null }>(world.recipients.url, `SELECT to_regclass('${table}')::text AS name`);
  expect(found[0].name).toBeNull();
});

test("a temporary table one workspace's query makes never redirects another workspace's messages", async () => {
  const { domain, query } = await accountsAt(5, 10);
  const attack = await runToEnd(
    workspace(),
    smuggling(
      `CREATE TEMP TABLE accounts AS SELECT account_id, $$redirected@evil.example.com$$ AS email, first_name, last_name FROM public.accounts`,
    ),
  );
  expect(attack.status).toBe('failed');
  const victim = await runToEnd(workspace(), query);
  expect(victim.status).toBe('completed');
  expect(victim.counts?.sent).toBe(5);
  expect((await deliveredTo(domain)).sort()).toEqual([10, 11, 12, 13, 14].map((n) => `user${n}@${domain}`));
  expect(await deliveredTo('evil.example.com')).toEqual([]);
});

test('settings a query makes do not reach the next run', async () => {
  const setter = await runToEnd(workspace(), `SELECT set_config('search_path', 'pg_catalog', false) AS email`);
  expect(setter.status).toBe('completed');
  const { query } = await accountsAt(3, 20);
  const next = await runToEnd(workspace(), query);
  expect(next.status).toBe('completed');
  expect(next.counts?.sent).toBe(3);
});

test("a query cannot end the platform's own sessions", async () => {
  const before = await adminQuery<{ sessions: number }>(
    world.env.DATABASE_URL,
    `SELECT count(*)::int AS sessions FROM pg_stat_activity WHERE usename = 'mail'`,
  );
  expect(before[0].sessions).toBeGreaterThan(0);
  const run = await runToEnd(
    workspace(),
    `SELECT CAST(pg_terminate_backend(pid) AS text) AS email FROM pg_stat_activity WHERE usename = 'mail'`,
  );
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/must be a member of the role/);
  const { query } = await accountsAt(2, 30);
  expect((await runToEnd(workspace(), query)).status).toBe('completed');
});

/** delivery_runs_failed_total{cause="source"}: what the RunsFailingForTheirSource alert reads. */
async function runsFailedForTheirSource(): Promise<number> {
  const text = await (await fetch(`${world.stack.urls.ops.delivery}/metrics`)).text();
  return Number(/^delivery_runs_failed_total\{cause="source"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

test('an error the source answers fails the run at once, is not tried again, and counts as a run failed for its source', async () => {
  const failedBefore = await runsFailedForTheirSource();
  const run = await runToEnd(workspace(), `SELECT repeat('x', 1100000000) AS email`);
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/refused the query/);
  // Counted just after the run is marked failed.
  await eventually(async () => expect(await runsFailedForTheirSource()).toBe(failedBefore + 1), 10_000);
  const { query } = await accountsAt(2, 40);
  expect((await runToEnd(workspace(), query)).status).toBe('completed');
});

test('the time limit holds for the whole read, whatever the query sets for itself', async () => {
  const { query } = await accountsAt(900, 1_000);
  // Each row sleeps: every fetch stays well under the limit, all of them together do not.
  const slow = query.replace(
    'FROM accounts WHERE',
    `FROM accounts, LATERAL (SELECT set_config('statement_timeout', '0', true), pg_sleep(0.01)) lifted WHERE`,
  );
  const run = await runToEnd(workspace(), slow);
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/RECIPIENTS_QUERY_TIMEOUT_MS/);
});

test('a row over RECIPIENT_ROW_MAX_BYTES fails the run', async () => {
  const { query } = await accountsAt(3, 2_000);
  const run = await runToEnd(workspace(), query.replace('first_name FROM', `repeat('x', 200000) AS filler FROM`));
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/RECIPIENT_ROW_MAX_BYTES/);
});

test('a run stops loading at RUN_MAX_RECIPIENTS and fails naming the limit', async () => {
  const { query } = await accountsAt(1_200, 3_000);
  const run = await runToEnd(workspace(), query);
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/RUN_MAX_RECIPIENTS/);
  expect(run.counts?.recipients).toBe(1_000);
});

test('a run cancelled in the middle of its load leaves nothing behind for the next', async () => {
  const { query } = await accountsAt(300, 5_000);
  const as = workspace();
  const slow = await startRun(as, query.replace('FROM accounts WHERE', 'FROM accounts, LATERAL (SELECT pg_sleep(0.01)) s WHERE'));
  await waitForRun(as, slow, (run) => run.status === 'sending');
  await call(as.delivery.cancelRun.bind(as.delivery), { workspaceId: as.workspaceId, id: slow });
  const next = await accountsAt(3, 6_000);
  const after = await runToEnd(workspace(), next.query);
  expect(after.status).toBe('completed');
  expect(after.counts?.sent).toBe(3);
});

test('a source that cannot be reached is tried again, shows in the metrics, and fails the run after the time limit', async () => {
  const as = workspace();
  const db = await openDatabase(world.env.DATABASE_URL);
  try {
    const unreachable = 'postgres://reader:secret@127.0.0.1:1/recipients';
    await putRecipientDatabase(
      db,
      ENCRYPTION_KEY,
      as.workspaceId,
      unreachable,
      { kind: 'postgres', host: '127.0.0.1', port: 1, database: 'recipients', user: 'reader' },
      new Date(),
    );
  } finally {
    await db.destroy();
  }
  const { query } = await accountsAt(2, 7_000);
  const runId = await startRun(as, query);
  const waiting = async (): Promise<number> => {
    const text = await (await fetch(`${world.stack.urls.ops.delivery}/metrics`)).text();
    return Number(/^delivery_runs_waiting_for_source (\d+)/m.exec(text)?.[1] ?? 0);
  };
  let seenWaiting = false;
  const run = await waitForRun(
    as,
    runId,
    (current) => {
      void waiting().then((count) => (seenWaiting ||= count > 0));
      return finished(current);
    },
    120_000,
  );
  expect(run.status).toBe('failed');
  expect(run.failure).toMatch(/could not be reached/);
  expect(run.failure).not.toMatch(/secret/);
  expect(seenWaiting).toBe(true);
  expect(await allRecipients(as, runId)).toEqual([]);
});
