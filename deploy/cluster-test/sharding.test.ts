import crypto from 'node:crypto';
import {
  compactClosedMonths,
  createClickHouse,
  MONTHLY_TABLES,
  refreshSuppressionState,
  repairSuppressionStates,
  settleUnsettledDays,
  StoreLayout,
  type SuppressedAddress,
  type EventRow,
  WORKSPACE_TABLES,
} from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import {
  createClusterDatabase,
  madeUpEvents,
  nodeUrls,
  NODES,
  signalsOf,
  startAnalytics,
  type Analytics,
  type ClusterDatabase,
  waitFor,
} from './support/clickhouse-cluster';

/**
 * Two shards of two replicas (events_2x2): the events of 20 workspaces
 * spread over both shards, one workspace on one shard, and analytics reading
 * through the cluster answers every list and stats exactly as it does over a
 * single server's database holding the same events. Settling and compaction
 * work on the cluster too.
 */
jest.setTimeout(300_000);

const CLUSTER = 'events_2x2';
const WORKSPACES = Array.from({ length: 20 }, () => crypto.randomUUID());
const CAMPAIGNS = new Map<string, string[]>(WORKSPACES.map((workspaceId) => [workspaceId, [crypto.randomUUID(), crypto.randomUUID()]]));

let cluster: ClusterDatabase;
let single: TestEventDatabase;
let clusterAnalytics: Analytics;
let singleAnalytics: Analytics;
/** The sharded tables. */
const TABLES = [...new Set([...WORKSPACE_TABLES, ...MONTHLY_TABLES])];
const events: EventRow<string>[] = WORKSPACES.flatMap((workspaceId, index) =>
  madeUpEvents(workspaceId, CAMPAIGNS.get(workspaceId)!, 40 + index * 3),
);

/** Loads the events, their signals and their addresses' suppression state through one client. */
async function load(client: ReturnType<typeof createClickHouse>): Promise<void> {
  await client.insert({ table: 'events', values: events, format: 'JSONEachRow' });
  const { rows, addresses } = signalsOf(events);
  await client.insert({ table: 'suppression_signals', values: rows, format: 'JSONEachRow' });
  await refreshSuppressionState(client, addresses satisfies SuppressedAddress[]);
}

beforeAll(async () => {
  const urls = nodeUrls();
  const started = Date.now();
  [cluster, single] = await Promise.all([
    createClusterDatabase('sharding', CLUSTER, ['ch1', 'ch2', 'ch3', 'ch4']),
    createTestEventDatabase('sharding_single'),
  ]);
  const writer = createClickHouse([urls.ch1, urls.ch3], cluster.database, { cluster: CLUSTER });
  await Promise.all([load(writer), load(single.clickhouse)]);
  await writer.close();
  await cluster.syncReplicas(TABLES);
  [clusterAnalytics, singleAnalytics] = await Promise.all([
    startAnalytics('sharding-cluster', {
      CLICKHOUSE_URL: [urls.ch3, urls.ch1].join(','),
      CLICKHOUSE_DATABASE: cluster.database,
      CLICKHOUSE_CLUSTER: CLUSTER,
    }),
    startAnalytics('sharding-single', { CLICKHOUSE_URL: single.url, CLICKHOUSE_DATABASE: single.database }),
  ]);
  console.log(`sharding: set up in ${Date.now() - started} ms`);
});

afterAll(async () => {
  await Promise.all([clusterAnalytics?.close(), singleAnalytics?.close()]);
  await Promise.all([cluster?.drop(), single?.close()]);
});

/** The workspaces each shard's local events table holds, read on one replica of each. */
async function workspacesPerShard(): Promise<[Set<string>, Set<string>]> {
  const of = async (node: 'ch1' | 'ch3') =>
    new Set((await cluster.rows<{ w: string }>(node, 'SELECT DISTINCT toString(workspace_id) AS w FROM events_local')).map((row) => row.w));
  return Promise.all([of('ch1'), of('ch3')]);
}

it('spreads the workspaces over both shards, each workspace on one shard only', async () => {
  const [first, second] = await workspacesPerShard();
  expect(first.size).toBeGreaterThan(0);
  expect(second.size).toBeGreaterThan(0);
  expect([...first].filter((workspaceId) => second.has(workspaceId))).toEqual([]);
  expect(new Set([...first, ...second])).toEqual(new Set(WORKSPACES));
  // Each shard's replicas hold the same rows.
  for (const [a, b] of [
    ['ch1', 'ch2'],
    ['ch3', 'ch4'],
  ] as const) {
    const count = async (node: typeof a | typeof b) =>
      (await cluster.rows<{ n: string }>(node, 'SELECT count() AS n FROM events_local'))[0].n;
    expect(await count(a)).toBe(await count(b));
  }
});

it('answers every workspace list and stats through the cluster as a single server does', async () => {
  const answers = async (analytics: Analytics, workspaceId: string) => {
    const [campaign] = CAMPAIGNS.get(workspaceId)!;
    return {
      list: await analytics.list(workspaceId),
      clicks: await analytics.list(workspaceId, { eventType: eventsV1.EventType.EVENT_TYPE_CLICK }),
      address: await analytics.list(workspaceId, { email: 'reader3@example.com' }),
      stats: await analytics.stats(workspaceId),
      campaignStats: await analytics.stats(workspaceId, { campaignId: campaign }),
    };
  };
  for (const workspaceId of WORKSPACES) {
    const [fromCluster, fromSingle] = await Promise.all([answers(clusterAnalytics, workspaceId), answers(singleAnalytics, workspaceId)]);
    expect(fromCluster.list.page?.total).toBeGreaterThan(0);
    expect(fromCluster).toEqual(fromSingle);
  }
});

it('settles unsettled days on the cluster, rebuilding one whose rollups disagree', async () => {
  const layout = new StoreLayout(cluster.database, CLUSTER);
  const client = cluster.on('ch1');
  const [workspaceId] = WORKSPACES;
  const day = events.find((event) => event.workspace_id === workspaceId)!.occurred_at.slice(0, 10);
  // A view's rows counted twice, as after an insert that failed once the rollups had them, and the day marked.
  await client.command({
    query: `INSERT INTO event_rollup_daily SELECT * FROM event_rollup_daily WHERE workspace_id = toUUID('${workspaceId}') AND day = toDate('${day}')`,
  });
  await client.insert({
    table: 'unsettled_days',
    values: [{ workspace_id: workspaceId, day, marked_at: '2026-10-10 00:00:00' }],
    format: 'JSONEachRow',
  });
  const pass = await settleUnsettledDays(client, layout, { rebuild: true });
  expect(pass.rebuilt.map((marked) => marked.workspaceId)).toEqual([workspaceId]);
  expect(pass.settled.map((marked) => marked.workspaceId)).toEqual([workspaceId]);
  await cluster.syncReplicas(TABLES);
  expect(await clusterAnalytics.stats(workspaceId)).toEqual(await singleAnalytics.stats(workspaceId));
});

it('merges each closed month into one part on every replica of both shards', async () => {
  const layout = new StoreLayout(cluster.database, CLUSTER);
  // A second part on one shard: a copy of an event, which the merge collapses.
  await cluster.on('ch1').insert({ table: 'events', values: [events[0]], format: 'JSONEachRow' });
  // ch2 counts the parts of its own replica of its shard: it must have fetched the new one.
  await cluster.syncReplicas(['events']);
  const due = await compactClosedMonths(cluster.on('ch2'), layout);
  expect(due.map((partition) => partition.table)).toContain('events');
  // Each shard's other replica merges the same parts once the merge reaches it through ZooKeeper.
  for (const node of NODES) {
    await waitFor(`one part of events_local on ${node}`, 30_000, async () => {
      const [{ n }] = await cluster.rows<{ n: string }>(
        node,
        `SELECT count() AS n FROM system.parts WHERE active AND database = '${cluster.database}' AND table = 'events_local'`,
      );
      return Number(n) === 1 ? true : undefined;
    });
  }
  // One part on each shard once every replica has done its merges: nothing left to merge.
  await cluster.syncReplicas(MONTHLY_TABLES);
  expect(await compactClosedMonths(cluster.on('ch4'), layout)).toEqual([]);
});

it('repairs, through the cluster, the suppression states behind their signals', async () => {
  const client = cluster.on('ch1');
  // Unsubscribes stored without their states computed, as a late replica's batch after a failover: a workspace of each shard.
  const late = (await workspacesPerShard()).map((shard) => {
    const [workspaceId] = shard;
    return {
      workspace_id: workspaceId,
      email: 'late@example.com',
      reason: 'unsubscribe',
      occurred_at: '2026-10-20 10:00:00',
      provider_event_id: `late-${workspaceId}`,
      ingested_at: '2026-10-20 10:00:05',
    };
  });
  await client.insert({ table: 'suppression_signals', values: late, format: 'JSONEachRow' });

  const repaired = await repairSuppressionStates(client);
  expect(repaired.map((address) => `${address.workspaceId} ${address.email}`).sort()).toEqual(
    late.map((row) => `${row.workspace_id} late@example.com`).sort(),
  );
  const states = await client.query({
    query: `SELECT toString(workspace_id) AS workspace_id, reason FROM suppression_state FINAL WHERE email = 'late@example.com' ORDER BY workspace_id`,
    format: 'JSONEachRow',
  });
  expect(await states.json()).toEqual(
    late
      .map((row) => ({ workspace_id: row.workspace_id, reason: 'unsubscribe' }))
      .sort((a, b) => a.workspace_id.localeCompare(b.workspace_id)),
  );
  // Seen from another server once the replicas have the repaired states, nothing is behind.
  await cluster.syncReplicas(TABLES);
  expect(await repairSuppressionStates(cluster.on('ch3'))).toEqual([]);
});
