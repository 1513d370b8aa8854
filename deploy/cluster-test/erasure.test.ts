import crypto from 'node:crypto';
import { call } from '@mail/common';
import {
  createClickHouse,
  eraseClosedWorkspaceLeftovers,
  refreshSuppressionState,
  StoreLayout,
  WORKSPACE_TABLES,
  type ClickHouseOptions,
} from '@mail/event-store';
import {
  createClusterDatabase,
  madeUpEvents,
  NODES,
  nodeUrls,
  signalsOf,
  startAnalytics,
  waitFor,
  type Analytics,
  type ClusterDatabase,
  type NodeName,
} from './support/clickhouse-cluster';

/**
 * Erasing a workspace on two shards of two replicas (events_2x2), through
 * analytics' CloseWorkspace as the gateway calls it: none of its rows stays in
 * any table on any server (each server's local tables read directly), the
 * other workspaces keep all of theirs, and rows of the closed workspace stored
 * afterwards go in ingestion's maintenance pass.
 */
jest.setTimeout(300_000);

const CLUSTER = 'events_2x2';
const WORKSPACES = Array.from({ length: 6 }, () => crypto.randomUUID());
const [DOOMED] = WORKSPACES;
/** Long enough for a mutation to reach every replica, short enough for a test. */
const ERASURE_WAIT_MS = 60_000;

let cluster: ClusterDatabase;
let analytics: Analytics;
let writer: ReturnType<typeof createClickHouse>;

/** Rows per workspace in every workspace table's local table, per server. */
async function rowsPerWorkspace(node: NodeName): Promise<Map<string, number>> {
  const layout = new StoreLayout(cluster.database, CLUSTER);
  const selects = WORKSPACE_TABLES.map(
    (table) =>
      `SELECT '${table}' AS table, toString(workspace_id) AS workspace, count() AS n FROM ${layout.localName(table)} GROUP BY workspace`,
  );
  const rows = await cluster.rows<{ table: string; workspace: string; n: string }>(node, selects.join(' UNION ALL '));
  return new Map(rows.map((row) => [`${row.table} ${row.workspace}`, Number(row.n)]));
}

const ofWorkspace = (counts: Map<string, number>, workspaceId: string) =>
  [...counts.keys()].filter((key) => key.endsWith(` ${workspaceId}`));
const without = (counts: Map<string, number>, workspaceId: string) =>
  new Map([...counts].filter(([key]) => !key.endsWith(` ${workspaceId}`)));

beforeAll(async () => {
  const urls = nodeUrls();
  const started = Date.now();
  cluster = await createClusterDatabase('erasure', CLUSTER, NODES);
  const options: ClickHouseOptions = { cluster: CLUSTER };
  writer = createClickHouse([urls.ch2, urls.ch4], cluster.database, options);
  const events = WORKSPACES.flatMap((workspaceId) => madeUpEvents(workspaceId, [crypto.randomUUID()], 60));
  await writer.insert({ table: 'events', values: events, format: 'JSONEachRow' });
  const { rows, addresses } = signalsOf(events);
  await writer.insert({ table: 'suppression_signals', values: rows, format: 'JSONEachRow' });
  await refreshSuppressionState(writer, addresses);
  const perWorkspace = (make: (workspaceId: string) => object) => WORKSPACES.map(make);
  await writer.insert({
    table: 'suppression_manual',
    values: perWorkspace((workspace_id) => ({
      workspace_id,
      email: 'manual@example.com',
      added_at: '2026-10-07 00:00:00',
      added_at_ms: 1_791_331_200_000,
      note: 'by hand',
      added_by_user_id: 'u1',
      added_by_email: 'admin@example.com',
    })),
    format: 'JSONEachRow',
  });
  await writer.insert({
    table: 'suppression_lifts',
    values: perWorkspace((workspace_id) => ({ workspace_id, email: 'reader1@example.com', lifted_at: '2026-10-08 00:00:00' })),
    format: 'JSONEachRow',
  });
  await writer.insert({
    table: 'suppression_lift_audit',
    values: perWorkspace((workspace_id) => ({
      workspace_id,
      email: 'reader1@example.com',
      lifted_at_ms: 1_791_417_600_000,
      lifted_by_user_id: 'u1',
      lifted_by_email: 'admin@example.com',
    })),
    format: 'JSONEachRow',
  });
  await writer.insert({
    table: 'unsettled_days',
    values: perWorkspace((workspace_id) => ({ workspace_id, day: '2026-10-06', marked_at: '2026-10-09 00:00:00' })),
    format: 'JSONEachRow',
  });
  analytics = await startAnalytics('erasure', {
    CLICKHOUSE_URL: [urls.ch3, urls.ch1].join(','),
    CLICKHOUSE_DATABASE: cluster.database,
    CLICKHOUSE_CLUSTER: CLUSTER,
  });
  console.log(`erasure: set up in ${Date.now() - started} ms`);
});

afterAll(async () => {
  await analytics?.close();
  await writer?.close();
  await cluster?.drop();
});

/** Every server's rows once the doomed workspace has none left anywhere; fails after ERASURE_WAIT_MS. */
const afterErasure = (what: string) =>
  waitFor(what, ERASURE_WAIT_MS, async () => {
    const counts = await Promise.all(NODES.map(rowsPerWorkspace));
    return counts.every((perNode) => ofWorkspace(perNode, DOOMED).length === 0) ? counts : undefined;
  });

it("leaves none of the closed workspace's rows on any replica, and every other workspace's rows where they were", async () => {
  const before = await Promise.all(NODES.map(rowsPerWorkspace));
  // Each workspace's rows are on both replicas of its shard, in every workspace table.
  const onSomeServer = new Set(before.flatMap((counts) => ofWorkspace(counts, DOOMED)));
  expect(onSomeServer.size).toBe(WORKSPACE_TABLES.length);
  expect(before.filter((counts) => ofWorkspace(counts, DOOMED).length > 0)).toHaveLength(2);

  const started = Date.now();
  await call(analytics.client.closeWorkspace.bind(analytics.client), { workspaceId: DOOMED });
  const after = await afterErasure('the closed workspace gone from every server');
  console.log(`erasure: gone from every replica ${Date.now() - started} ms after CloseWorkspace`);
  after.forEach((counts, index) => expect(counts).toEqual(without(before[index], DOOMED)));
  expect((await analytics.list(DOOMED)).page?.total).toBe(0);
  expect((await analytics.list(WORKSPACES[1])).page?.total).toBeGreaterThan(0);
});

it('deletes rows of the closed workspace stored after its erasure in the maintenance pass, on every replica', async () => {
  const [late] = madeUpEvents(DOOMED, [crypto.randomUUID()], 1);
  await writer.insert({ table: 'events', values: [late], format: 'JSONEachRow' });
  const layout = new StoreLayout(cluster.database, CLUSTER);
  const maintenance = createClickHouse(nodeUrls().ch1, cluster.database, { cluster: CLUSTER });
  try {
    // A pass finds nothing while the erasure's mutations are still pending on a replica, or before the late
    // event has reached the servers it reads (an insert through the Distributed table is forwarded later):
    // maintenance runs again, and so does this.
    const erased = await waitFor('a maintenance pass that finds the late event', ERASURE_WAIT_MS, async () => {
      const found = await eraseClosedWorkspaceLeftovers(maintenance, layout);
      return found.length > 0 ? found : undefined;
    });
    expect(erased).toEqual([DOOMED]);
    await afterErasure('the late event gone from every server');
    expect(await eraseClosedWorkspaceLeftovers(maintenance, layout)).toEqual([]);
  } finally {
    await maintenance.close();
  }
});
