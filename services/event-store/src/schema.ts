import type { ClickHouseClient } from '@clickhouse/client';
import { createClickHouse, readSystemTables } from './client';
import { StoreLayout, type TableSpec } from './layout';
import { enum8, identifier, list, raw, sql, str, type SqlFragment } from './sql';
import { BOUNCE_CLASS_ENUM, BOUNCE_TYPE_ENUM, EVENT_TYPE_ENUM, SIGNAL_REASONS } from './events';
import { migrateFromV1, V1_TABLE } from './migration';
import { DERIVED_TABLE_NAMES, derivedTablesCurrent, ensureEventRollups } from './rollups';
import { ensureSuppressionState, suppressionLiftAuditTable, suppressionManualTable } from './suppression';
import { closedWorkspacesTable } from './workspace-erasure';

/**
 * The event store, shared by ingestion (writes) and analytics (reads), as in
 * PostHog's pipeline. Written for the current release line (what is
 * deployed) and ClickHouse 18.16 (the one engine here that replicates, for
 * the cluster tests; docs/cluster.md, "Engines") alike: no DateTime64, no
 * LowCardinality, no TTL or codecs.
 *
 * Exactly-once per provider event: ingestion skips events whose
 * provider_event_id is already stored (checked inside the event's
 * workspace and time range, which the sort key makes cheap), and the
 * ReplacingMergeTree key collapses any duplicate that still slips in.
 */

/** Every stored event, engagement and delivery alike. */
const eventsTable: TableSpec = {
  name: 'events',
  structure: sql`(
    id UUID,
    workspace_id UUID,
    campaign_id UUID,
    variant_id UUID,
    event_type ${EVENT_TYPE_ENUM},
    bounce_type ${BOUNCE_TYPE_ENUM},
    bounce_class ${BOUNCE_CLASS_ENUM},
    machine_open UInt8,
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
    ingested_at DateTime('UTC'),
    run_id UUID
  )`,
  family: 'ReplacingMergeTree',
  engineArguments: raw.trusted('ingested_at'),
  keys: sql`PARTITION BY toYYYYMM(occurred_at)
  ORDER BY (workspace_id, occurred_at, provider_event_id)`,
};

const TABLES: TableSpec[] = [
  eventsTable,

  // Events whose category names no campaign: kept, never lost, and re-matched from encoded_event once a campaign takes
  // their category (see ADDED_COLUMNS).
  {
    name: 'unmatched_events',
    structure: sql`(
    provider_event_id String,
    provider String,
    event_type String,
    email String,
    categories Array(String),
    occurred_at DateTime('UTC'),
    received_at DateTime('UTC'),
    raw String,
    ingested_at DateTime('UTC'),
    encoded_event String
  )`,
    family: 'ReplacingMergeTree',
    engineArguments: raw.trusted('ingested_at'),
    keys: sql`PARTITION BY toYYYYMM(received_at)
  ORDER BY (provider_event_id)`,
  },

  // What suppresses an address: hard bounces, soft bounces (three in 30 days), unsubscribes, spam reports.
  {
    name: 'suppression_signals',
    structure: sql`(
    workspace_id UUID,
    email String,
    reason ${enum8(SIGNAL_REASONS, 1)},
    occurred_at DateTime('UTC'),
    provider_event_id String,
    ingested_at DateTime('UTC')
  )`,
    family: 'ReplacingMergeTree',
    engineArguments: raw.trusted('ingested_at'),
    keys: sql`ORDER BY (workspace_id, email, occurred_at, provider_event_id)`,
  },

  // A lift makes every signal up to lifted_at irrelevant for that address.
  {
    name: 'suppression_lifts',
    structure: sql`(
    workspace_id UUID,
    email String,
    lifted_at DateTime('UTC')
  )`,
    family: 'ReplacingMergeTree',
    keys: sql`ORDER BY (workspace_id, email, lifted_at)`,
  },
  suppressionLiftAuditTable,
  suppressionManualTable,

  // Unmatched events sent back through the events topic once a campaign took their category: each is
  // re-matched once, and an event erased with its workspace does not come back for the category's next campaign.
  {
    name: 'rematched_events',
    structure: sql`(
    provider_event_id String,
    rematched_at DateTime('UTC')
  )`,
    family: 'ReplacingMergeTree',
    keys: sql`ORDER BY (provider_event_id)`,
  },

  closedWorkspacesTable,
];

/**
 * Columns added to tables after the tables were first released: each is also
 * in its table's CREATE TABLE, last, so that a table created before it has
 * the same columns in the same order once it is added.
 */
const ADDED_COLUMNS: { table: string; column: string; type: SqlFragment }[] = [
  // The event as ingestion received it: base64 of its encoded events.v1.EngagementEvent without raw_json (the raw
  // column holds it), whatever its provider. '' in rows stored before the column existed.
  { table: 'unmatched_events', column: 'encoded_event', type: raw.trusted('String') },
  // The run whose message the event answers (NO_RUN: none, as in every row stored before the column existed).
  { table: 'events', column: 'run_id', type: raw.trusted('UUID') },
];

async function columnExists(client: ClickHouseClient, layout: StoreLayout, table: string, column: string): Promise<boolean> {
  const [row] = await readSystemTables<{ n: string }>(
    client,
    sql`SELECT count() AS n FROM system.columns
      WHERE database = ${str(layout.database)} AND table = ${str(layout.localName(table))} AND name = ${str(column)}`,
  );
  return Number(row.n) > 0;
}

/**
 * Adds the ADDED_COLUMNS a table lacks. ClickHouse 18.16 has no ADD COLUMN IF
 * NOT EXISTS: the column is looked up first, and an ADD that fails because
 * another replica added it meanwhile is fine. In a cluster the local table
 * gains it, then the Distributed table over it.
 */
async function addMissingColumns(client: ClickHouseClient, layout: StoreLayout): Promise<void> {
  for (const { table, column, type } of ADDED_COLUMNS) {
    if (await columnExists(client, layout, table, column)) continue;
    const alter = (target: SqlFragment) => sql`ALTER TABLE ${target}${layout.onCluster} ADD COLUMN ${identifier(column)} ${type}`;
    try {
      await client.command({ query: alter(layout.local(table)).text });
      if (layout.sharded(table)) await client.command({ query: alter(layout.table(table)).text });
    } catch (error) {
      if (!(await columnExists(client, layout, table, column))) throw error;
    }
  }
}

/**
 * Enum columns that gained members after their tables were first released (event_type: 'sent'), with the
 * tables that hold them. Adding members keeps every stored value, so ClickHouse changes the metadata only,
 * also where the column is part of the sorting key (event_rollup_daily).
 */
const WIDENED_ENUMS: { column: string; type: SqlFragment; tables: string[] }[] = [
  { column: 'event_type', type: EVENT_TYPE_ENUM, tables: ['events', 'event_rollup_daily', 'events_by_address'] },
];

/** The tables (local and Distributed) whose enum column of WIDENED_ENUMS has another type than today's. */
async function narrowEnums(
  client: ClickHouseClient,
  layout: StoreLayout,
): Promise<{ table: SqlFragment; column: string; type: SqlFragment }[]> {
  const found: { table: SqlFragment; column: string; type: SqlFragment }[] = [];
  for (const { column, type, tables } of WIDENED_ENUMS) {
    const targets = tables.flatMap((name) =>
      layout.sharded(name)
        ? [
            { name: layout.localName(name), table: layout.local(name) },
            { name, table: layout.table(name) },
          ]
        : [{ name, table: layout.local(name) }],
    );
    const rows = await readSystemTables<{ table: string; type: string }>(
      client,
      sql`SELECT table, type FROM system.columns
        WHERE database = ${str(layout.database)} AND name = ${str(column)} AND table IN (${list(targets.map((target) => str(target.name)))})`,
    );
    const compact = (text: string) => text.replace(/\s+/g, '');
    const typeOf = new Map(rows.map((row) => [row.table, compact(row.type)]));
    for (const target of targets) {
      const current = typeOf.get(target.name);
      if (current !== undefined && current !== compact(type.text)) found.push({ table: target.table, column, type });
    }
  }
  return found;
}

/** Gives the enum columns of WIDENED_ENUMS today's members; local tables first, then the Distributed ones over them. */
async function widenEnums(client: ClickHouseClient, layout: StoreLayout): Promise<void> {
  for (const { table, column, type } of await narrowEnums(client, layout)) {
    await client.command({ query: sql`ALTER TABLE ${table}${layout.onCluster} MODIFY COLUMN ${identifier(column)} ${type}`.text });
  }
}

/** Every table and view a complete store has on each server. */
function storeObjects(layout: StoreLayout): string[] {
  const tables = [
    ...TABLES.map((spec) => spec.name),
    ...DERIVED_TABLE_NAMES,
    'unsettled_days',
    'suppression_state',
    'event_store_migrations',
  ];
  return [
    ...tables.flatMap((name) => (layout.sharded(name) ? [name, layout.localName(name)] : [name])),
    ...DERIVED_TABLE_NAMES.map((name) => `${name}_feed`),
  ];
}

/** Whether this server holds the whole store already, in its current layout (and no v1 table to take over). */
async function storeComplete(client: ClickHouseClient, layout: StoreLayout): Promise<boolean> {
  const tables = await readSystemTables<{ name: string }>(
    client,
    sql`SELECT name FROM system.tables WHERE database = ${str(layout.database)}`,
  );
  const present = new Set(tables.map((row) => row.name));
  if (present.has(V1_TABLE) || !storeObjects(layout).every((name) => present.has(name))) return false;
  for (const { table, column } of ADDED_COLUMNS) if (!(await columnExists(client, layout, table, column))) return false;
  if ((await narrowEnums(client, layout)).length > 0) return false;
  return derivedTablesCurrent(client, layout);
}

/**
 * Creates the database and tables if missing, adds the columns newer than
 * their tables (addMissingColumns), takes a v1 store over
 * (migrateFromV1), then creates the derived tables (filled from the stored
 * events), widens the enums of tables made earlier (widenEnums) and suppression_state (filled from the signals already stored);
 * safe to run from every replica at start-up.
 * It connects to `default`, because a client bound to a database that does
 * not exist yet cannot run CREATE DATABASE.
 *
 * In a cluster (`cluster`, layout.ts) every statement runs ON CLUSTER, which
 * waits for every server: a server that holds the whole store already skips
 * them, so that a process starts while a server of the cluster is down.
 */
export async function ensureEventSchema(urls: string | readonly string[], database: string, cluster?: string): Promise<void> {
  const layout = new StoreLayout(database, cluster);
  const client = createClickHouse(urls, 'default', { cluster });
  try {
    if (cluster !== undefined && (await storeComplete(client, layout))) return;
    await client.command({ query: sql`CREATE DATABASE IF NOT EXISTS ${layout.db}${layout.onCluster}`.text });
    for (const spec of TABLES) for (const statement of layout.createTable(spec)) await client.command({ query: statement.text });
    await addMissingColumns(client, layout);
    await migrateFromV1(client, layout);
    await ensureEventRollups(client, layout);
    await widenEnums(client, layout);
  } finally {
    await client.close();
  }
  const events = createClickHouse(urls, database, { cluster });
  try {
    await ensureSuppressionState(events, layout);
  } finally {
    await events.close();
  }
}
