import crypto from 'node:crypto';
import { createClickHouse, ensureEventSchema } from '@mail/event-store';
import { createTestClickHouse, type TestClickHouse } from '@mail/local';

// Columns added after a table's release, and enum members ('sent'), are added at start-up to a store created before
// them, by every replica at once, without touching the rows stored already.

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

const WORKSPACE = '0b6b5b8e-8a55-4c0e-9d3c-00000000000a';
const CAMPAIGN = '0b6b5b8e-8a55-4c0e-9d3c-00000000000b';

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

/** The tables holding event_type, and the views that fill two of them, as a release before `sent` made them. */
async function recreateWithoutSent(client: ReturnType<typeof createClickHouse>, database: string): Promise<void> {
  const names = async (condition: string) =>
    (
      await (
        await client.query({
          query: `SELECT name FROM system.tables WHERE database = '${database}' AND ${condition} ORDER BY name`,
          format: 'JSONEachRow',
        })
      ).json<{ name: string }>()
    ).map((row) => row.name);
  const tables = ['events', 'event_rollup_daily', 'events_by_address'];
  const views = await names(`engine = 'MaterializedView'`);
  const statements = new Map<string, string>();
  for (const name of [...tables, ...views]) {
    const shown = await client.query({ query: `SHOW CREATE TABLE ${database}.${name}`, format: 'JSONEachRow' });
    const [{ statement }] = await shown.json<{ statement: string }>();
    if (tables.includes(name)) expect(statement).toContain(", 'sent' = 10)");
    statements.set(name, statement.replace(", 'sent' = 10)", ')'));
  }
  for (const name of views) await client.command({ query: `DROP TABLE ${database}.${name}` });
  for (const name of tables) await client.command({ query: `DROP TABLE ${database}.${name}` });
  for (const name of [...tables, ...views]) await client.command({ query: statements.get(name)! });
}

const eventTypeColumns = async (client: ReturnType<typeof createClickHouse>, database: string) =>
  (
    await client.query({
      query: `SELECT table, type FROM system.columns WHERE database = '${database}' AND name = 'event_type' AND table NOT LIKE '%_feed' ORDER BY table`,
      format: 'JSONEachRow',
    })
  ).json<{ table: string; type: string }>();

it("widens event_type of a store made before 'sent', from replicas starting at once, keeping its rows and its rollups", async () => {
  const store = await createTestClickHouse('schema_sent');
  const client = createClickHouse(store.url, store.database);
  const row = (id: string, eventType: string) => ({
    id: crypto.randomUUID(),
    workspace_id: WORKSPACE,
    campaign_id: CAMPAIGN,
    variant_id: '00000000-0000-0000-0000-000000000000',
    event_type: eventType,
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email: 'reader@example.com',
    occurred_at: '2026-11-01 10:00:00',
    received_at: '2026-11-01 10:00:05',
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
    provider: 'smtp',
    provider_event_id: id,
    provider_message_id: null,
    raw: '',
    ingested_at: '2026-11-01 10:00:06',
  });
  try {
    await ensureEventSchema(store.url, store.database);
    await recreateWithoutSent(client, store.database);
    await client.insert({ table: 'events', values: [row('before-1', 'open')], format: 'JSONEachRow' });
    await expect(client.insert({ table: 'events', values: [row('refused', 'sent')], format: 'JSONEachRow' })).rejects.toThrow();

    await Promise.all([1, 2, 3].map(() => ensureEventSchema(store.url, store.database)));
    await ensureEventSchema(store.url, store.database);

    const fresh = await createTestClickHouse('schema_sent_new');
    try {
      await ensureEventSchema(fresh.url, fresh.database);
      expect(await eventTypeColumns(client, store.database)).toEqual(await eventTypeColumns(client, fresh.database));
    } finally {
      await fresh.drop();
    }
    await client.insert({ table: 'events', values: [row('sent-1', 'sent')], format: 'JSONEachRow' });
    const rollup = await client.query({
      query: `SELECT toString(event_type) AS event_type, countMerge(events) AS n FROM event_rollup_daily GROUP BY event_type ORDER BY event_type`,
      format: 'JSONEachRow',
    });
    expect((await rollup.json<{ event_type: string; n: string | number }>()).map((r) => [r.event_type, Number(r.n)])).toEqual([
      ['open', 1],
      ['sent', 1],
    ]);
    const byAddress = await client.query({
      query: 'SELECT provider_event_id, toString(event_type) AS t FROM events_by_address ORDER BY provider_event_id',
      format: 'JSONEachRow',
    });
    expect(await byAddress.json()).toEqual([
      { provider_event_id: 'before-1', t: 'open' },
      { provider_event_id: 'sent-1', t: 'sent' },
    ]);
  } finally {
    await client.close();
    await store.drop();
  }
});
