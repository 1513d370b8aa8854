import { createClickHouse, ensureEventSchema } from '@mail/event-store';
import { createTestClickHouse, type TestClickHouse } from '@mail/local';

// Columns added after a table's release are added at start-up to a store created before them, by every replica at
// once, without touching the rows stored already.

jest.setTimeout(60_000);

/** unmatched_events as it was created before it kept each event's encoding. */
const UNMATCHED_BEFORE_ENCODED_EVENT = `CREATE TABLE unmatched_events (
    provider_event_id String,
    provider String,
    event_type String,
    email String,
    categories Array(String),
    occurred_at DateTime('UTC'),
    received_at DateTime('UTC'),
    raw String,
    ingested_at DateTime('UTC')
  ) ENGINE = ReplacingMergeTree(ingested_at)
  PARTITION BY toYYYYMM(received_at)
  ORDER BY (provider_event_id)`;

const OLD_ROW = {
  provider_event_id: 'old-1',
  provider: 'sendgrid',
  event_type: 'open',
  email: 'reader@example.com',
  categories: ['cat-old'],
  occurred_at: '2026-11-01 10:00:00',
  received_at: '2026-11-01 10:00:05',
  raw: '{"sg_event_id":"old-1"}',
  ingested_at: '2026-11-01 10:00:06',
};

let database: TestClickHouse | undefined;

afterAll(async () => {
  await database?.drop();
});

it('adds encoded_event to an unmatched_events created before it, from replicas starting at once, keeping its rows', async () => {
  database = await createTestClickHouse('schema');
  const client = createClickHouse(database.url, database.database);
  try {
    await client.command({ query: UNMATCHED_BEFORE_ENCODED_EVENT });
    await client.insert({ table: 'unmatched_events', values: [OLD_ROW], format: 'JSONEachRow' });

    await Promise.all([1, 2, 3].map(() => ensureEventSchema(database!.url, database!.database)));
    await ensureEventSchema(database.url, database.database);

    const columns = await client.query({
      query: `SELECT name, type FROM system.columns WHERE database = '${database.database}' AND table = 'unmatched_events'`,
      format: 'JSONEachRow',
    });
    const created = await createTestClickHouse('schema_new');
    try {
      await ensureEventSchema(created.url, created.database);
      const fresh = await client.query({
        query: `SELECT name, type FROM system.columns WHERE database = '${created.database}' AND table = 'unmatched_events'`,
        format: 'JSONEachRow',
      });
      // The same columns, in the same order (18.16 lists them in the table's order), as a store created with the column.
      const upgraded = await columns.json<{ name: string; type: string }>();
      expect(upgraded).toEqual(await fresh.json());
      expect(upgraded[upgraded.length - 1]).toEqual({ name: 'encoded_event', type: 'String' });
    } finally {
      await created.drop();
    }
    const stored = await client.query({
      query: `SELECT provider_event_id, provider, event_type, email, categories, toString(occurred_at) AS occurred_at,
          toString(received_at) AS received_at, raw, toString(ingested_at) AS ingested_at, encoded_event
        FROM unmatched_events`,
      format: 'JSONEachRow',
    });
    expect(await stored.json()).toEqual([{ ...OLD_ROW, encoded_event: '' }]);
  } finally {
    await client.close();
  }
});
