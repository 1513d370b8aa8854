import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import {
  NO_RUN,
  NO_VARIANT,
  createClickHouse,
  ensureEventSchema,
  settleUnsettledDays,
  type EngagementEventType,
  type EventRow,
} from '@mail/event-store';
import { createTestClickHouse, type TestClickHouse } from '@mail/local';

// A v1 store (engagement_events and its derived tables) is taken over into `events` at start-up: every event once,
// the derived tables rebuilt from `events`, however often the migration runs and wherever it stopped before.

/** The v1 event table and derived tables, as v1's ensureEventSchema created them. */
const V1_SCHEMA = [
  `CREATE TABLE engagement_events (
    id UUID,
    workspace_id UUID,
    campaign_id UUID,
    event_type Enum8('open' = 1, 'click' = 2, 'bounce' = 3, 'unsubscribe' = 4),
    bounce_type Enum8('none' = 0, 'hard' = 1, 'soft' = 2),
    email String,
    occurred_at DateTime('UTC'),
    received_at DateTime('UTC'),
    url Nullable(String),
    reason Nullable(String),
    user_agent Nullable(String),
    ip Nullable(String),
    provider String,
    provider_event_id String,
    provider_message_id Nullable(String),
    raw String,
    ingested_at DateTime('UTC')
  ) ENGINE = ReplacingMergeTree(ingested_at)
  PARTITION BY toYYYYMM(occurred_at)
  ORDER BY (workspace_id, occurred_at, provider_event_id)`,
  `CREATE TABLE event_rollup_daily (
    workspace_id UUID,
    day Date,
    campaign_id UUID,
    event_type Enum8('open' = 1, 'click' = 2, 'bounce' = 3, 'unsubscribe' = 4),
    bounce_type Enum8('none' = 0, 'hard' = 1, 'soft' = 2),
    events AggregateFunction(count),
    addresses AggregateFunction(uniqExact, UInt64)
  ) ENGINE = AggregatingMergeTree()
  PARTITION BY toYYYYMM(day)
  ORDER BY (workspace_id, day, campaign_id, event_type, bounce_type)`,
  `CREATE MATERIALIZED VIEW event_rollup_daily_feed TO event_rollup_daily AS
    SELECT workspace_id, toDate(occurred_at) AS day, campaign_id, event_type, bounce_type,
      countState() AS events, uniqExactState(cityHash64(email)) AS addresses
    FROM engagement_events
    GROUP BY workspace_id, day, campaign_id, event_type, bounce_type`,
  `CREATE TABLE link_rollup_daily (
    workspace_id UUID,
    day Date,
    campaign_id UUID,
    url String,
    clicks AggregateFunction(count),
    addresses AggregateFunction(uniqExact, UInt64)
  ) ENGINE = AggregatingMergeTree()
  PARTITION BY toYYYYMM(day)
  ORDER BY (workspace_id, day, campaign_id, url)`,
  `CREATE MATERIALIZED VIEW link_rollup_daily_feed TO link_rollup_daily AS
    SELECT workspace_id, toDate(occurred_at) AS day, campaign_id, assumeNotNull(url) AS url,
      countState() AS clicks, uniqExactState(cityHash64(email)) AS addresses
    FROM engagement_events
    WHERE event_type = 'click' AND isNotNull(url)
    GROUP BY workspace_id, day, campaign_id, url`,
  `CREATE TABLE events_by_address AS engagement_events
    ENGINE = ReplacingMergeTree(ingested_at)
    PARTITION BY toYYYYMM(occurred_at)
    ORDER BY (workspace_id, email, occurred_at, provider_event_id)`,
  `CREATE MATERIALIZED VIEW events_by_address_feed TO events_by_address AS
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_at, received_at, url, reason, user_agent, ip,
      provider, provider_event_id, provider_message_id, '' AS raw, ingested_at
    FROM engagement_events`,
];

/** A v1 row: today's columns but variant_id, bounce_class, machine_open and run_id, and the four engagement types only. */
type V1Row = Omit<EventRow<string>, 'variant_id' | 'bounce_class' | 'machine_open' | 'event_type' | 'run_id'> & {
  event_type: EngagementEventType;
};

const WORKSPACE = randomUUID();
const CAMPAIGN = randomUUID();

function v1Event(index: number, fields: Partial<V1Row>): V1Row {
  return {
    id: randomUUID(),
    workspace_id: WORKSPACE,
    campaign_id: CAMPAIGN,
    event_type: 'open',
    bounce_type: 'none',
    email: `reader${index % 3}@example.com`,
    occurred_at: '2026-03-10 09:00:00',
    received_at: '2026-03-10 09:00:05',
    url: null,
    reason: null,
    user_agent: 'Mozilla/5.0',
    ip: '192.0.2.1',
    provider: 'sendgrid',
    provider_event_id: `sg-${index}`,
    provider_message_id: `msg-${index}`,
    raw: JSON.stringify({ sg_event_id: `sg-${index}` }),
    ingested_at: '2026-03-10 09:00:06',
    ...fields,
  };
}

/** Events over three months: opens, clicks, bounces of both types, an unsubscribe. */
const EVENTS: V1Row[] = [
  v1Event(0, {}),
  v1Event(1, { event_type: 'click', url: 'https://example.com/a' }),
  v1Event(2, { event_type: 'bounce', bounce_type: 'hard', reason: '550 no such user', occurred_at: '2026-03-11 10:00:00' }),
  v1Event(3, { event_type: 'bounce', bounce_type: 'soft', reason: 'mailbox full', occurred_at: '2026-04-02 10:00:00' }),
  v1Event(4, { occurred_at: '2026-04-02 11:00:00' }),
  v1Event(5, { event_type: 'unsubscribe', occurred_at: '2026-05-20 08:00:00' }),
  v1Event(6, { event_type: 'click', url: 'https://example.com/b', occurred_at: '2026-05-20 09:00:00' }),
];
/** A fault's copy of event 1 (same id and provider event), as v1 could hold before its parts merged. */
const FAULT_COPY: V1Row = { ...EVENTS[1], ingested_at: '2026-03-10 09:01:00' };

const databases: TestClickHouse[] = [];

afterAll(async () => {
  for (const database of databases) await database.drop();
});

/** A database with the v1 schema holding EVENTS and FAULT_COPY (each insert its own part), and a client on it. */
async function v1Store(label: string, schema = V1_SCHEMA): Promise<{ database: TestClickHouse; client: ClickHouseClient }> {
  const database = await createTestClickHouse(label);
  databases.push(database);
  const client = createClickHouse(database.url, database.database);
  for (const statement of schema) await client.command({ query: statement });
  await client.insert({ table: 'engagement_events', values: EVENTS, format: 'JSONEachRow' });
  await client.insert({ table: 'engagement_events', values: [FAULT_COPY], format: 'JSONEachRow' });
  return { database, client };
}

async function rows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  return (await client.query({ query, format: 'JSONEachRow' })).json<T>();
}

async function tables(client: ClickHouseClient, database: string): Promise<string[]> {
  const found = await rows<{ name: string }>(client, `SELECT name FROM system.tables WHERE database = '${database}' ORDER BY name`);
  return found.map((row) => row.name);
}

/** Every v1 event is in `events` exactly once, as v1 held it, with no variant, bounce class or machine open. */
async function expectEventsOnce(client: ClickHouseClient): Promise<void> {
  const stored = await rows<Record<string, unknown>>(
    client,
    `SELECT toString(id) AS id, toString(workspace_id) AS workspace_id, toString(campaign_id) AS campaign_id,
      toString(variant_id) AS variant_id, event_type, bounce_type, bounce_class, machine_open, email,
      toString(occurred_at) AS occurred_at, toString(received_at) AS received_at, url, reason, user_agent, ip, provider,
      provider_event_id, provider_message_id, raw, toString(ingested_at) AS ingested_at
    FROM events ORDER BY provider_event_id`,
  );
  expect(stored).toHaveLength(EVENTS.length);
  stored.forEach((row, index) => {
    const v1 = EVENTS[index];
    expect(row).toEqual({
      ...v1,
      // The fault's copy is the same event; whichever copy was taken, it is taken once.
      ingested_at: row.provider_event_id === FAULT_COPY.provider_event_id ? row.ingested_at : v1.ingested_at,
      variant_id: NO_VARIANT,
      bounce_class: 'none',
      machine_open: 0,
    });
  });
}

/** The derived tables count each event once; the address-sorted copy holds each once too unless `copies` (its readers collapse them). */
async function expectDerivedOnce(client: ClickHouseClient, copies = false): Promise<void> {
  expect(
    await rows(
      client,
      `SELECT toString(day) AS day, event_type, bounce_type, countMerge(events) AS events, uniqExactMerge(engaged_addresses) AS addresses
      FROM event_rollup_daily GROUP BY day, event_type, bounce_type ORDER BY day, event_type, bounce_type`,
    ),
  ).toEqual([
    { day: '2026-03-10', event_type: 'open', bounce_type: 'none', events: '1', addresses: '1' },
    { day: '2026-03-10', event_type: 'click', bounce_type: 'none', events: '1', addresses: '1' },
    { day: '2026-03-11', event_type: 'bounce', bounce_type: 'hard', events: '1', addresses: '0' },
    { day: '2026-04-02', event_type: 'open', bounce_type: 'none', events: '1', addresses: '1' },
    { day: '2026-04-02', event_type: 'bounce', bounce_type: 'soft', events: '1', addresses: '0' },
    { day: '2026-05-20', event_type: 'click', bounce_type: 'none', events: '1', addresses: '1' },
    { day: '2026-05-20', event_type: 'unsubscribe', bounce_type: 'none', events: '1', addresses: '0' },
  ]);
  expect(await rows(client, 'SELECT url, countMerge(clicks) AS clicks FROM link_rollup_daily GROUP BY url ORDER BY url')).toEqual([
    { url: 'https://example.com/a', clicks: '1' },
    { url: 'https://example.com/b', clicks: '1' },
  ]);
  const [byAddress] = await rows<{ events: string; copies: string }>(
    client,
    'SELECT uniqExact(provider_event_id) AS events, count() AS copies FROM events_by_address',
  );
  expect(byAddress.events).toBe(String(EVENTS.length));
  if (!copies) expect(byAddress.copies).toBe(String(EVENTS.length));
}

it('moves a v1 store to events once, keeps the v1 table renamed, rebuilds the derived tables, and does nothing more when run again', async () => {
  const { database, client } = await v1Store('event_store_migration');
  try {
    await ensureEventSchema(database.url, database.database);

    const after = await tables(client, database.database);
    expect(after).not.toContain('engagement_events');
    expect(after).toEqual(expect.arrayContaining(['events', 'engagement_events_v1', 'event_rollup_daily_feed', 'events_by_address_feed']));
    expect(await rows(client, 'SELECT count() AS n FROM engagement_events_v1')).toEqual([{ n: String(EVENTS.length + 1) }]);
    await expectEventsOnce(client);
    await expectDerivedOnce(client);

    await ensureEventSchema(database.url, database.database);
    await expectEventsOnce(client);
    await expectDerivedOnce(client);

    // The new schema's views feed the derived tables from events.
    await client.insert({
      table: 'events',
      values: [{ ...v1Event(7, { occurred_at: '2026-05-21 08:00:00' }), variant_id: NO_VARIANT, bounce_class: 'none', machine_open: 0 }],
      format: 'JSONEachRow',
    });
    expect(await rows(client, `SELECT countMerge(events) AS n FROM event_rollup_daily WHERE day = '2026-05-21'`)).toEqual([{ n: '1' }]);
  } finally {
    await client.close();
  }
});

it('finishes a migration that stopped halfway through the copy, copying only what is missing', async () => {
  // Where a migration that died during its copy left the store: the v1 derived tables dropped, engagement_events
  // renamed, events (and the rest of the v2 schema, made by a first ensureEventSchema) holding a part of the v1 events.
  const { database, client } = await v1Store('event_store_migration_crash', V1_SCHEMA.slice(0, 1));
  try {
    await client.command({ query: 'RENAME TABLE engagement_events TO engagement_events_v1' });
    const v2 = await createTestClickHouse('event_store_migration_v2');
    databases.push(v2);
    await ensureEventSchema(v2.url, v2.database);
    await client.command({ query: `CREATE TABLE events AS ${v2.database}.events` });
    await client.command({
      query: `INSERT INTO events
        SELECT id, workspace_id, campaign_id, toUUID('${NO_VARIANT}'), CAST(toString(event_type) AS Enum8('open' = 1, 'click' = 2,
          'bounce' = 3, 'unsubscribe' = 4, 'processed' = 5, 'delivered' = 6, 'deferred' = 7, 'dropped' = 8, 'spamreport' = 9)),
          bounce_type, 'none', 0, email, occurred_at, received_at, url, reason, user_agent, ip, provider, provider_event_id,
          provider_message_id, raw, ingested_at, toUUID('${NO_RUN}')
        FROM engagement_events_v1 WHERE toYYYYMM(occurred_at) = 202603 OR provider_event_id = 'sg-3'
        LIMIT 1 BY id`,
    });
    expect(await rows(client, 'SELECT count() AS n FROM events')).toEqual([{ n: '4' }]);

    await ensureEventSchema(database.url, database.database);
    await expectEventsOnce(client);
    await expectDerivedOnce(client);
    await ensureEventSchema(database.url, database.database);
    await expectEventsOnce(client);
    await expectDerivedOnce(client);
  } finally {
    await client.close();
  }
});

it('finishes a migration that stopped after dropping the v1 derived tables, before the rename', async () => {
  const { database, client } = await v1Store('event_store_migration_early', V1_SCHEMA.slice(0, 1));
  try {
    await ensureEventSchema(database.url, database.database);
    expect(await tables(client, database.database)).not.toContain('engagement_events');
    await expectEventsOnce(client);
    await expectDerivedOnce(client);
  } finally {
    await client.close();
  }
});

it('leaves a v2 store as it is', async () => {
  const database = await createTestClickHouse('event_store_migration_none');
  databases.push(database);
  await ensureEventSchema(database.url, database.database);
  const client = createClickHouse(database.url, database.database);
  try {
    const before = await tables(client, database.database);
    expect(before).not.toContain('engagement_events_v1');
    await ensureEventSchema(database.url, database.database);
    expect(await tables(client, database.database)).toEqual(before);
    expect(await rows(client, 'SELECT count() AS n FROM event_store_migrations')).toEqual([{ n: '0' }]);
  } finally {
    await client.close();
  }
});

it('counts each event once when replicas migrate at once, after settling the days a late copy marked', async () => {
  const { database, client } = await v1Store('event_store_migration_concurrent');
  try {
    await Promise.all([1, 2, 3].map(() => ensureEventSchema(database.url, database.database)));
    // Copies made at once collapse by the table's key.
    expect(await rows(client, 'SELECT uniqExact(provider_event_id) AS events, count() AS n FROM events FINAL')).toEqual([
      { events: String(EVENTS.length), n: String(EVENTS.length) },
    ]);
    expect((await settleUnsettledDays(client, database.database, { rebuild: true })).disagreeing).toEqual([]);
    await expectDerivedOnce(client, true);
  } finally {
    await client.close();
  }
});
