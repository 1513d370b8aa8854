import { randomUUID } from 'node:crypto';
import { ensureEventSchema } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import { event } from './harness';

// Rollups created over stored events are filled from them once, each provider event counted once.
const W = randomUUID();
const C1 = '00000000-0000-4000-8000-0000000000c1';
const DERIVED = ['event_rollup_daily', 'link_rollup_daily', 'events_by_address'];

let database: TestEventDatabase;

beforeAll(async () => {
  database = await createTestEventDatabase('analytics_backfill');
});

afterAll(() => database.close());

const rows = <T>(query: string): Promise<T[]> => database.rows<T>(query);

it('fills new rollups from the stored events, copies once, and marks the days of events stored meanwhile unsettled', async () => {
  const old = '2026-03-01T00:00:00Z';
  const click = event({
    workspace_id: W,
    campaign_id: C1,
    event_type: 'click',
    url: 'https://example.com/a',
    occurred_at: '2026-03-10T08:00:00Z',
    ingested_at: old,
  });
  const stored = [
    event({ workspace_id: W, campaign_id: C1, email: 'a@example.com', occurred_at: '2026-03-10T09:00:00Z', ingested_at: old }),
    event({ workspace_id: W, campaign_id: C1, email: 'b@example.com', occurred_at: '2026-04-02T09:00:00Z', ingested_at: old }),
    click,
    { ...click, id: randomUUID() },
    event({ workspace_id: W, campaign_id: C1, occurred_at: '2026-05-05T09:00:00Z' }),
  ];
  await database.clickhouse.insert({ table: 'events', values: stored, format: 'JSONEachRow' });
  for (const table of DERIVED) {
    await database.clickhouse.command({ query: `DROP TABLE ${table}_feed` });
    await database.clickhouse.command({ query: `DROP TABLE ${table}` });
  }

  await ensureEventSchema(database.url, database.database);
  await ensureEventSchema(database.url, database.database);

  expect(
    await rows(`SELECT toString(day) AS day, event_type, countMerge(events) AS events, uniqExactMerge(engaged_addresses) AS addresses
      FROM event_rollup_daily GROUP BY day, event_type ORDER BY day, event_type`),
  ).toEqual([
    { day: '2026-03-10', event_type: 'open', events: '1', addresses: '1' },
    { day: '2026-03-10', event_type: 'click', events: '1', addresses: '1' },
    { day: '2026-04-02', event_type: 'open', events: '1', addresses: '1' },
    { day: '2026-05-05', event_type: 'open', events: '1', addresses: '1' },
  ]);
  expect(await rows('SELECT url, countMerge(clicks) AS clicks FROM link_rollup_daily GROUP BY url')).toEqual([
    { url: 'https://example.com/a', clicks: '1' },
  ]);
  // Each event copied once (no id twice); the click's copy may collapse into it on insert, as current releases
  // apply a ReplacingMergeTree's merge to an inserted block (optimize_on_insert), and 18.16 does not.
  const [copied] = await rows<{ rows: string; ids: string; events: string }>(
    'SELECT count() AS rows, uniqExact(id) AS ids, uniqExact(provider_event_id) AS events FROM events_by_address',
  );
  expect(copied.rows).toBe(copied.ids);
  expect(copied.events).toBe(String(new Set(stored.map((row) => row.provider_event_id)).size));
  // Only the event stamped just now could also have reached the rollups through their views.
  expect(await rows('SELECT toString(day) AS day FROM unsettled_days')).toEqual([{ day: '2026-05-05' }]);
});

it('rebuilds a rollup made in an earlier layout, without the variant and machine-open keys', async () => {
  const workspaceId = randomUUID();
  await database.clickhouse.insert({
    table: 'events',
    values: [
      event({ workspace_id: workspaceId, campaign_id: C1, email: 'a@example.com', machine_open: 1, occurred_at: '2026-06-10T09:00:00Z' }),
      event({ workspace_id: workspaceId, campaign_id: C1, email: 'b@example.com', occurred_at: '2026-06-10T10:00:00Z' }),
    ],
    format: 'JSONEachRow',
  });
  await database.clickhouse.command({ query: 'DROP TABLE event_rollup_daily_feed' });
  await database.clickhouse.command({ query: 'DROP TABLE event_rollup_daily' });
  await database.clickhouse.command({
    query: `CREATE TABLE event_rollup_daily (workspace_id UUID, day Date, campaign_id UUID, event_type Enum8('open' = 1),
      bounce_type Enum8('none' = 0), events AggregateFunction(count), addresses AggregateFunction(uniqExact, UInt64))
      ENGINE = AggregatingMergeTree() ORDER BY (workspace_id, day, campaign_id, event_type, bounce_type)`,
  });

  await ensureEventSchema(database.url, database.database);

  expect(
    await rows(`SELECT machine_open, countMerge(events) AS events FROM event_rollup_daily
      WHERE workspace_id = '${workspaceId}' GROUP BY machine_open ORDER BY machine_open`),
  ).toEqual([
    { machine_open: 0, events: '1' },
    { machine_open: 1, events: '1' },
  ]);
});

it('rebuilds a rollup whose address sets cover every event, keeping sets for human opens and clicks only', async () => {
  const workspaceId = randomUUID();
  const day = '2026-07-10';
  await database.clickhouse.insert({
    table: 'events',
    values: [
      event({ workspace_id: workspaceId, campaign_id: C1, email: 'a@example.com', occurred_at: `${day}T09:00:00Z` }),
      event({ workspace_id: workspaceId, campaign_id: C1, email: 'b@example.com', machine_open: 1, occurred_at: `${day}T09:01:00Z` }),
      event({ workspace_id: workspaceId, campaign_id: C1, email: 'c@example.com', event_type: 'click', occurred_at: `${day}T09:02:00Z` }),
      event({
        workspace_id: workspaceId,
        campaign_id: C1,
        email: 'd@example.com',
        event_type: 'delivered',
        occurred_at: `${day}T09:03:00Z`,
      }),
    ],
    format: 'JSONEachRow',
  });
  await database.clickhouse.command({ query: 'DROP TABLE event_rollup_daily_feed' });
  await database.clickhouse.command({ query: 'DROP TABLE event_rollup_daily' });
  await database.clickhouse.command({
    query: `CREATE TABLE event_rollup_daily (workspace_id UUID, day Date, campaign_id UUID, variant_id UUID,
      event_type Enum8('open' = 1, 'click' = 2, 'delivered' = 6), bounce_type Enum8('none' = 0), machine_open UInt8,
      events AggregateFunction(count), addresses AggregateFunction(uniqExact, UInt64))
      ENGINE = AggregatingMergeTree() ORDER BY (workspace_id, day, campaign_id, variant_id, event_type, bounce_type, machine_open)`,
  });

  await ensureEventSchema(database.url, database.database);

  expect(
    await rows(`SELECT toString(event_type) AS type, machine_open, countMerge(events) AS events, uniqExactMerge(engaged_addresses) AS addresses
      FROM event_rollup_daily WHERE workspace_id = '${workspaceId}' GROUP BY type, machine_open ORDER BY type, machine_open`),
  ).toEqual([
    { type: 'click', machine_open: 0, events: '1', addresses: '1' },
    { type: 'delivered', machine_open: 0, events: '1', addresses: '0' },
    { type: 'open', machine_open: 0, events: '1', addresses: '1' },
    { type: 'open', machine_open: 1, events: '1', addresses: '0' },
  ]);
});
