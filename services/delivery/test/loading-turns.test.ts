import { Client } from 'pg';
import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * Workspaces share the delivery service in turns (docs/api.md, "Campaign
 * runs"): one workspace's slow source does not hold back another workspace's
 * first message, and one workspace's send_priority orders only its own runs.
 */

let world: DeliveryWorld;

beforeAll(async () => {
  // The rate limit keeps a large run sending long enough for another workspace's run to overtake it.
  world = await startDeliveryWorld('loading_turns', { RECIPIENTS_QUERY_TIMEOUT_MS: '300000', SEND_RATE_PER_SECOND: '40' });
}, 180_000);

afterAll(async () => {
  await world?.close();
});

const workspace = (): DeliveryWorld => ({ ...world, workspaceId: crypto.randomUUID() });

async function startRun(as: DeliveryWorld, query: string, sendPriority = 0): Promise<string> {
  const campaign = await createSendableCampaign(as, query, { sendPriority });
  const { run } = await call(as.delivery.createRun.bind(as.delivery), { workspaceId: as.workspaceId, campaignId: campaign.id });
  return run!.id;
}

async function accountsAt(count: number, start: number): Promise<string> {
  const domain = `lt-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, count, domain, start);
  return `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`;
}

test("a workspace's slow recipient query does not hold back another workspace's run", async () => {
  // The slow source: a table the test holds locked, so the query waits for as long as the test wants.
  const admin = new Client({ connectionString: world.recipients.url });
  await admin.connect();
  const table = `slow_${uniqueSuffix()}`;
  await admin.query(`CREATE TABLE ${table} AS SELECT 'slow' || n || '@slow.example.com' AS email FROM generate_series(1, 3) AS n`);
  await admin.query(`GRANT SELECT ON ${table} TO mail_recipients`);
  await admin.query('BEGIN');
  await admin.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  try {
    const slowWorkspace = workspace();
    const slow = await startRun(slowWorkspace, `SELECT email FROM ${table}`);
    await waitForRun(slowWorkspace, slow, (run) => run.status === 'sending');

    const other = workspace();
    const finished = await waitForRun(other, await startRun(other, await accountsAt(3, 100)), (run) => run.status === 'completed', 60_000);
    expect(finished.counts?.sent).toBe(3);
    const stillLoading = await call(world.delivery.getRun.bind(world.delivery), { workspaceId: slowWorkspace.workspaceId, id: slow });
    expect(stillLoading.run).toMatchObject({ status: 'sending', counts: expect.objectContaining({ recipients: 0 }) });

    await admin.query('COMMIT');
    const done = await waitForRun(slowWorkspace, slow, (run) => run.status === 'completed', 60_000);
    expect(done.counts?.sent).toBe(3);
  } finally {
    await admin.query('ROLLBACK').catch(() => undefined);
    await admin.end();
  }
});

test("one workspace's send_priority does not hold back another workspace's runs", async () => {
  const loud = workspace();
  const urgent = await startRun(loud, await accountsAt(400, 1_000), 1000);
  await waitForRun(loud, urgent, (run) => (run.counts?.sent ?? 0) > 0);

  const quiet = workspace();
  const ordinary = await startRun(quiet, await accountsAt(5, 2_000));
  const finished = await waitForRun(quiet, ordinary, (run) => run.status === 'completed', 60_000);
  expect(finished.counts?.sent).toBe(5);
  const { run } = await call(world.delivery.getRun.bind(world.delivery), { workspaceId: loud.workspaceId, id: urgent });
  expect(run?.status).toBe('sending');
  expect(run?.counts?.pending).toBeGreaterThan(0);
  await call(world.delivery.cancelRun.bind(world.delivery), { workspaceId: loud.workspaceId, id: urgent });
});
