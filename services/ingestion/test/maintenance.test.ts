import crypto from 'node:crypto';
import { createLogger } from '@mail/common';
import { MONTHLY_TABLES, closedMonthsToCompact, compactClosedMonths, type MonthPartition } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import { startMaintenance } from '../src/background/maintenance';
import { ingestionMetrics } from '../src/metrics';
import type { EngagementEventRow } from '../src/domain/columns';
import { EventWriter } from '../src/store/events';
import { eventRow, sleep } from './harness';

// Closed months of the monthly event tables are merged into one part each; nothing read changes. The same pass settles
// unsettled days that agree (settle.test.ts), and deletes rows stored for deleted workspaces (analytics'
// close-workspace.test.ts).
jest.setTimeout(60_000);

describe('closedMonthsToCompact', () => {
  const partition = (month: number, parts = 3, table = 'events'): MonthPartition => ({ table, month, parts });
  const DAY_MS = 86_400_000;

  it('takes a month once it ended three days ago, not a moment before', () => {
    const threeDaysAfterMarch = new Date(Date.UTC(2026, 3, 1) + 3 * DAY_MS);
    expect(closedMonthsToCompact([partition(202603)], threeDaysAfterMarch)).toEqual([partition(202603)]);
    expect(closedMonthsToCompact([partition(202603)], new Date(threeDaysAfterMarch.getTime() - 1))).toEqual([]);
  });

  it('ends December at the new year', () => {
    expect(closedMonthsToCompact([partition(202512)], new Date('2026-01-03T23:59:59Z'))).toEqual([]);
    expect(closedMonthsToCompact([partition(202512)], new Date('2026-01-04T00:00:00Z'))).toEqual([partition(202512)]);
  });

  it('leaves a month that is one part already, and the current month', () => {
    expect(closedMonthsToCompact([partition(202601, 1), partition(202611, 9)], new Date('2026-11-21T00:00:00Z'))).toEqual([]);
  });

  it('takes the oldest month first, tables in name order', () => {
    const due = closedMonthsToCompact(
      [partition(202605, 2, 'events_by_address'), partition(202604, 2, 'link_rollup_daily'), partition(202605, 2, 'events')],
      new Date('2026-11-21T00:00:00Z'),
    );
    expect(due.map((p) => `${p.month} ${p.table}`)).toEqual(['202604 link_rollup_daily', '202605 events', '202605 events_by_address']);
  });
});

describe('compactClosedMonths on ClickHouse', () => {
  let database: TestEventDatabase;
  let store: EventWriter;
  const workspaceId = crypto.randomUUID();
  const campaignId = crypto.randomUUID();
  const NOW = new Date('2026-11-21T12:00:00Z');

  const event = (occurredAt: string, index: number, eventType: 'open' | 'click'): EngagementEventRow => {
    const seconds = Date.parse(occurredAt) / 1000;
    return eventRow({
      workspace_id: workspaceId,
      campaign_id: campaignId,
      event_type: eventType,
      email: `reader${index % 4}@example.com`,
      occurred_at: seconds,
      received_at: seconds + 5,
      url: eventType === 'click' ? `https://example.com/${index % 3}` : null,
      user_agent: 'Mozilla/5.0',
      ip: '192.0.2.1',
      provider_event_id: `compaction-${occurredAt}-${index}`,
      ingested_at: seconds + 10,
    });
  };

  const activeParts = async (month: number): Promise<Record<string, number>> => {
    const rows = await database.rows<{ table: string; parts: string }>(
      `SELECT table, count() AS parts FROM system.parts
       WHERE active AND database = '${database.database}' AND partition_id = '${month}' GROUP BY table`,
    );
    return Object.fromEntries(rows.map((row) => [row.table, Number(row.parts)]));
  };

  /** What the reads see: every stored row, and the rollups merged per key. */
  const contents = async () => ({
    events: await database.rows(
      `SELECT provider_event_id, event_type, email, toString(occurred_at) AS at FROM events ORDER BY provider_event_id`,
    ),
    byAddress: await database.rows(`SELECT provider_event_id, email FROM events_by_address ORDER BY email, provider_event_id`),
    rollup: await database.rows(
      `SELECT toString(day) AS day, event_type, countMerge(events) AS events, uniqExactMerge(engaged_addresses) AS addresses
       FROM event_rollup_daily GROUP BY day, event_type ORDER BY day, event_type`,
    ),
    links: await database.rows(
      `SELECT toString(day) AS day, url, countMerge(clicks) AS clicks, uniqExactMerge(addresses) AS addresses
       FROM link_rollup_daily GROUP BY day, url ORDER BY day, url`,
    ),
  });

  beforeAll(async () => {
    database = await createTestEventDatabase('ingestion_compaction');
    store = new EventWriter(database.clickhouse);
    // Merges stay off while the inserts land, so each insert stays a part of its own until compaction.
    for (const table of MONTHLY_TABLES) await database.clickhouse.command({ query: `SYSTEM STOP MERGES ${database.database}.${table}` });
    for (let insert = 0; insert < 4; insert += 1) {
      await store.insertEvents([
        event(`2026-03-0${insert + 1}T10:00:00Z`, insert, 'open'),
        event(`2026-03-1${insert}T11:00:00Z`, insert, 'click'),
        event(`2026-11-0${insert + 1}T12:00:00Z`, insert, 'click'),
      ]);
    }
  });

  afterAll(() => database?.close());

  it('merges each table of a closed month into one part, leaves the current month, and changes nothing read', async () => {
    const march = await activeParts(202603);
    expect(march).toEqual({ events: 4, events_by_address: 4, event_rollup_daily: 4, link_rollup_daily: 4 });
    const november = await activeParts(202611);
    const before = await contents();

    for (const table of MONTHLY_TABLES) await database.clickhouse.command({ query: `SYSTEM START MERGES ${database.database}.${table}` });
    const merged = await compactClosedMonths(database.clickhouse, database.database, NOW);

    expect(merged.map((partition) => `${partition.month} ${partition.table}`).sort()).toEqual([
      '202603 event_rollup_daily',
      '202603 events',
      '202603 events_by_address',
      '202603 link_rollup_daily',
    ]);
    expect(await activeParts(202603)).toEqual({ events: 1, events_by_address: 1, event_rollup_daily: 1, link_rollup_daily: 1 });
    expect(Object.keys(await activeParts(202611)).sort()).toEqual(Object.keys(november).sort());
    expect(await contents()).toEqual(before);
    expect(before.events).toHaveLength(12);

    // A second pass finds nothing left to merge.
    expect(await compactClosedMonths(database.clickhouse, database.database, NOW)).toEqual([]);
  });

  it('runs on a schedule, settling agreeing days after the merges, and stop() ends it', async () => {
    await store.insertEvents([event('2026-03-20T10:00:00Z', 9, 'open')]);
    await database.clickhouse.insert({
      table: 'unsettled_days',
      values: [{ workspace_id: workspaceId, day: '2026-03-20', marked_at: Date.parse('2026-03-20T10:05:00Z') / 1000 }],
      format: 'JSONEachRow',
    });
    // An event stored for a workspace after its deletion (ingestion had resolved it just before).
    const closedWorkspaceId = crypto.randomUUID();
    await database.clickhouse.command({ query: `INSERT INTO closed_workspaces SELECT toUUID('${closedWorkspaceId}'), now()` });
    await store.insertEvents([{ ...event('2026-11-20T10:00:00Z', 1, 'open'), workspace_id: closedWorkspaceId }]);
    const total = async (metric: typeof ingestionMetrics.partitionsCompacted) => (await metric.get()).values[0]?.value ?? 0;
    const [compactedBefore, settledBefore, erasedBefore] = [
      await total(ingestionMetrics.partitionsCompacted),
      await total(ingestionMetrics.daysSettled),
      await total(ingestionMetrics.workspacesErased),
    ];
    const rematchSweeps: Date[] = [];
    const startedAt = Date.now();
    const maintenance = startMaintenance({
      clickhouse: database.clickhouse,
      database: database.database,
      schedule: { firstAfterMs: 0, intervalMs: 60_000 },
      mayRebuild: () => false,
      rematchUnmatched: (since) => Promise.resolve(rematchSweeps.push(since)),
      logger: createLogger('test', 'silent'),
    });
    const deadline = Date.now() + 20_000;
    while ((await total(ingestionMetrics.daysSettled)) === settledBefore && Date.now() < deadline) await sleep(100);
    await maintenance.stop();
    expect((await total(ingestionMetrics.partitionsCompacted)) - compactedBefore).toBeGreaterThanOrEqual(1);
    expect((await total(ingestionMetrics.daysSettled)) - settledBefore).toBe(1);
    expect((await activeParts(202603)).events).toBe(1);
    expect((await total(ingestionMetrics.workspacesErased)) - erasedBefore).toBe(1);
    const rowsOfClosed = () =>
      database.rows(`SELECT provider_event_id FROM events_by_address WHERE workspace_id = toUUID('${closedWorkspaceId}')`);
    while ((await rowsOfClosed()).length > 0 && Date.now() < deadline) await sleep(100);
    expect(await rowsOfClosed()).toEqual([]);
    // One pass, re-matching the events stored unmatched in the last two intervals.
    expect(rematchSweeps).toHaveLength(1);
    expect(rematchSweeps[0].getTime()).toBeGreaterThanOrEqual(startedAt - 120_000);
    expect(rematchSweeps[0].getTime()).toBeLessThanOrEqual(Date.now() - 120_000);
  });
});

describe('the suppression repair', () => {
  it('runs on the first pass of the replica that rebuilds, and recomputes a state behind its signals', async () => {
    const database = await createTestEventDatabase('ingestion_maintenance_repair');
    try {
      const workspaceId = crypto.randomUUID();
      // A signal stored without its state computed, as after a replica's late batch.
      await new EventWriter(database.clickhouse).insertSignals([
        {
          workspace_id: workspaceId,
          email: 'late@example.com',
          reason: 'spam_report',
          occurred_at: Date.parse('2026-11-20T10:00:00Z') / 1000,
          provider_event_id: 'late-spam',
          ingested_at: Date.parse('2026-11-20T10:00:05Z') / 1000,
        },
      ]);
      const repairedTotal = async () => (await ingestionMetrics.suppressionStatesRepaired.get()).values[0]?.value ?? 0;
      const before = await repairedTotal();
      const maintenance = startMaintenance({
        clickhouse: database.clickhouse,
        database: database.database,
        schedule: { firstAfterMs: 0, intervalMs: 60_000 },
        mayRebuild: () => true,
        rematchUnmatched: () => Promise.resolve(),
        logger: createLogger('test', 'silent'),
      });
      const deadline = Date.now() + 20_000;
      while ((await repairedTotal()) === before && Date.now() < deadline) await sleep(100);
      await maintenance.stop();
      expect((await repairedTotal()) - before).toBe(1);
      expect(
        await database.rows(`SELECT email, reason FROM suppression_state FINAL WHERE workspace_id = toUUID('${workspaceId}')`),
      ).toEqual([{ email: 'late@example.com', reason: 'spam_report' }]);
    } finally {
      await database.close();
    }
  });
});
