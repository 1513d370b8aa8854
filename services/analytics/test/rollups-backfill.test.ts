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
    await rows(`SELECT toString(day) AS day, event_type, countMerge(events) AS events, uniqExactMerge(addresses) AS addresses
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
  expect(await rows('SELECT count() AS n FROM events_by_address')).toEqual([{ n: String(stored.length) }]);
  // Only the event stamped just now could also have reached the rollups through their views.
  expect(await rows('SELECT toString(day) AS day FROM unsettled_days')).toEqual([{ day: '2026-05-05' }]);
});
