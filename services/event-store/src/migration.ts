import type { ClickHouseClient } from '@clickhouse/client';
import { readSystemTables } from './client';
import { BOUNCE_CLASS_ENUM, EVENT_TYPE_ENUM, NO_VARIANT } from './events';
import type { StoreLayout, TableSpec } from './layout';
import { markDaysUnsettled } from './rollups';
import { identifier, int, raw, sql, str, type SqlFragment } from './sql';

/**
 * Moving a v1 event store to v2. v1 kept the four engagement types in
 * `engagement_events`, with derived tables fed from it by views named
 * `<table>_feed`; v2 keeps every stored type in `events`.
 *
 * The v1 table is renamed before anything is copied, so a writer of the old
 * version fails and retries (its events then reach `events` through a new
 * writer) instead of writing where nobody reads. It stays as
 * `engagement_events_v1` for the operator to drop once satisfied.
 */
export const V1_TABLE = 'engagement_events';
const V1_KEPT_TABLE = 'engagement_events_v1';
const V1_DERIVED_TABLES = ['event_rollup_daily', 'link_rollup_daily', 'events_by_address'];
/** The row of event_store_migrations that says the copy is complete. */
const COPIED_MARKER = 'events_from_engagement_events_v1';

const migrationsTable: TableSpec = {
  name: 'event_store_migrations',
  structure: sql`(
    name String,
    done_at DateTime('UTC')
  )`,
  family: 'ReplacingMergeTree',
  engineArguments: raw.trusted('done_at'),
  keys: sql`ORDER BY name`,
};

/** The columns of `events` a copy fills, and v1's values for them: no variant, no bounce class, no machine open. */
const COPIED_COLUMNS = sql`id, workspace_id, campaign_id, variant_id, event_type, bounce_type, bounce_class, machine_open, email,
  occurred_at, received_at, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, raw, ingested_at`;
const COPIED_VALUES = sql`id, workspace_id, campaign_id, toUUID(${str(NO_VARIANT)}), CAST(toString(event_type) AS ${EVENT_TYPE_ENUM}),
  bounce_type, CAST('none' AS ${BOUNCE_CLASS_ENUM}), toUInt8(0), email, occurred_at, received_at, url, reason, user_agent, ip,
  provider, provider_event_id, provider_message_id, raw, ingested_at`;

async function tableNames(client: ClickHouseClient, layout: StoreLayout, where = sql`1`): Promise<Set<string>> {
  const tables = await readSystemTables<{ name: string }>(
    client,
    sql`SELECT name FROM system.tables WHERE database = ${str(layout.database)} AND ${where}`,
  );
  return new Set(tables.map((row) => row.name));
}

/**
 * Takes a v1 store over into `events` (which must exist); does nothing on a
 * v2 store or one already taken over. Every step may be repeated after a
 * crash: the v1 derived tables (and their views) are dropped, as they are
 * rebuilt from `events` by ensureEventRollups afterwards; the v1 table is
 * renamed; then each month of it is copied, without the events `events`
 * holds already, and a marker records that the copy is complete.
 *
 * Replicas that migrate at once may copy a month twice: the table's key
 * collapses the copies, rollups built afterwards count each provider event
 * once, and a copy written once another replica's views exist marks its days
 * unsettled, so they are compared and rebuilt.
 *
 * In a cluster the v1 table is the one the operator replicated to every
 * server (as v1's deployment guide said): it is renamed ON CLUSTER, and read
 * on the server this client uses, and its events reach the shards of their
 * workspaces through the Distributed events table.
 */
export async function migrateFromV1(client: ClickHouseClient, layout: StoreLayout): Promise<void> {
  const run = async (statement: SqlFragment) => {
    await client.command({ query: statement.text });
  };
  const db = layout.db;
  for (const statement of layout.createTable(migrationsTable)) await run(statement);
  const names = await tableNames(client, layout);
  if (names.has(V1_TABLE)) {
    for (const table of V1_DERIVED_TABLES) {
      for (const statement of [...layout.dropTable(`${table}_feed`), ...layout.dropTable(table)]) await run(statement);
    }
    try {
      await run(sql`RENAME TABLE ${db}.${identifier(V1_TABLE)} TO ${db}.${identifier(V1_KEPT_TABLE)}${layout.onCluster}`);
    } catch (error) {
      // Another replica renamed it first.
      if ((await tableNames(client, layout)).has(V1_TABLE)) throw error;
    }
  } else if (!names.has(V1_KEPT_TABLE)) {
    return;
  }
  if (await copied(client, db)) return;
  const v1 = sql`${db}.${identifier(V1_KEPT_TABLE)}`;
  const result = await client.query({
    query: sql`SELECT DISTINCT toYYYYMM(occurred_at) AS month FROM ${v1} ORDER BY month`.text,
    format: 'JSONEachRow',
  });
  for (const { month } of await result.json<{ month: number }>()) {
    const inMonth = sql`toYYYYMM(occurred_at) = ${int(Number(month))}`;
    await client.command({
      query: sql`INSERT INTO ${db}.events (${COPIED_COLUMNS})
        SELECT ${COPIED_VALUES} FROM ${v1}
        WHERE ${inMonth} AND id NOT IN (SELECT id FROM ${db}.events WHERE ${inMonth})
        LIMIT 1 BY id`.text,
    });
    if ((await tableNames(client, layout, sql`engine = 'MaterializedView'`)).size > 0) {
      await run(markDaysUnsettled(db, v1, inMonth));
    }
  }
  await client.command({ query: sql`INSERT INTO ${db}.event_store_migrations SELECT ${str(COPIED_MARKER)}, now()`.text });
}

async function copied(client: ClickHouseClient, db: SqlFragment): Promise<boolean> {
  const result = await client.query({
    query: sql`SELECT count() AS n FROM ${db}.event_store_migrations WHERE name = ${str(COPIED_MARKER)}`.text,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ n: string }>();
  return Number(row.n) > 0;
}
