import { randomUUID } from 'node:crypto';
import { WORKSPACE_TABLES } from '@mail/event-store';
import { eraseClosedWorkspaceLeftovers } from '@mail/event-store';
import { Interval, event, failure, signal, startAnalytics, status, type Analytics } from './harness';

/**
 * CloseWorkspace, the event store's part of deleting a workspace: every
 * table's rows of it go (ClickHouse mutations, awaited here), no other
 * workspace's, and rows that arrive later go at ingestion's next
 * maintenance pass (eraseClosedWorkspaceLeftovers).
 */
jest.setTimeout(60_000);

let analytics: Analytics;

beforeAll(async () => {
  analytics = await startAnalytics('analytics_close_workspace');
});

afterAll(() => analytics.close());

async function rowsOf(workspaceId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of WORKSPACE_TABLES) {
    const result = await analytics.clickhouse.query({
      query: `SELECT count() AS n FROM ${table} WHERE workspace_id = toUUID('${workspaceId}')`,
      format: 'JSONEachRow',
    });
    counts[table] = Number((await result.json<{ n: string }>())[0].n);
  }
  return counts;
}

async function waitUntilEmpty(workspaceId: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let counts = await rowsOf(workspaceId);
  while (Object.values(counts).some((n) => n > 0)) {
    if (Date.now() > deadline) throw new Error(`rows left: ${JSON.stringify(counts)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    counts = await rowsOf(workspaceId);
  }
}

/** Some of everything the event store keeps of a workspace: events, link clicks, a suppression, a lift, a manual suppression, a mark. */
async function fill(workspaceId: string, email: string): Promise<void> {
  const campaign_id = randomUUID();
  await analytics.insertEvents([
    event({ workspace_id: workspaceId, campaign_id, email }),
    event({ workspace_id: workspaceId, campaign_id, email, event_type: 'click', url: 'https://example.com/a' }),
  ]);
  await analytics.insertSignals([
    signal({ workspace_id: workspaceId, email, reason: 'hard_bounce', occurred_at: '2026-03-10T12:00:00Z' }),
    signal({ workspace_id: workspaceId, email: `lifted-${email}`, reason: 'unsubscribe', occurred_at: '2026-03-10T12:00:00Z' }),
  ]);
  await analytics.rpc('liftSuppression', { workspaceId, email: `lifted-${email}` });
  await analytics.rpc('addSuppression', { workspaceId, email: `manual-${email}` });
  await analytics.markUnsettled(workspaceId, ['2026-03-10']);
}

it('deletes every row of the workspace in every table, and no other workspace’s', async () => {
  const doomed = randomUUID();
  const kept = randomUUID();
  await fill(doomed, 'doomed@example.com');
  await fill(kept, 'kept@example.com');
  for (const [table, n] of Object.entries(await rowsOf(doomed))) expect([table, n > 0]).toEqual([table, true]);
  const keptBefore = await rowsOf(kept);

  expect(await analytics.rpc('closeWorkspace', { workspaceId: doomed })).toEqual({});
  await waitUntilEmpty(doomed);
  expect(await rowsOf(kept)).toEqual(keptBefore);

  const filter = { workspaceId: doomed };
  expect((await analytics.rpc('listEvents', { filter, page: { page: 1, pageSize: 10 } })).page?.total).toBe(0);
  expect((await analytics.rpc('getStats', { filter, interval: Interval.INTERVAL_DAY })).totals).toMatchObject({ opens: 0, clicks: 0 });
  expect((await analytics.rpc('listSuppressions', { workspaceId: doomed, page: { page: 1, pageSize: 10 } })).page?.total).toBe(0);
  // Repeating it is harmless (a DELETE that failed half-way is repeated).
  expect(await analytics.rpc('closeWorkspace', { workspaceId: doomed })).toEqual({});
});

it('deletes what a closed workspace receives later at the next maintenance pass', async () => {
  const doomed = randomUUID();
  const kept = randomUUID();
  await fill(kept, 'kept@example.com');
  await analytics.rpc('closeWorkspace', { workspaceId: doomed });
  await waitUntilEmpty(doomed);
  // What ingestion had resolved to the workspace's campaigns just before they were deleted.
  await fill(doomed, 'late@example.com');
  const keptBefore = await rowsOf(kept);

  expect(await eraseClosedWorkspaceLeftovers(analytics.clickhouse, analytics.database)).toEqual([doomed]);
  await waitUntilEmpty(doomed);
  expect(await rowsOf(kept)).toEqual(keptBefore);
  expect(await eraseClosedWorkspaceLeftovers(analytics.clickhouse, analytics.database)).toEqual([]);
});

it('refuses a workspace id that is not a UUID', async () => {
  expect(await failure(analytics.rpc('closeWorkspace', { workspaceId: 'nope' }))).toMatchObject({ code: status.INVALID_ARGUMENT });
});

it('knows every table that holds workspace rows', async () => {
  const result = await analytics.clickhouse.query({
    query: `SELECT DISTINCT table FROM system.columns
      WHERE database = '${analytics.database}' AND name = 'workspace_id' AND table != 'closed_workspaces'
        AND table IN (SELECT name FROM system.tables WHERE database = '${analytics.database}' AND engine != 'MaterializedView')
      ORDER BY table`,
    format: 'JSONEachRow',
  });
  const tables = (await result.json<{ table: string }>()).map((row) => row.table);
  expect(tables).toEqual([...WORKSPACE_TABLES].sort());
});
