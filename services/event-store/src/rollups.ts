import type { ClickHouseClient } from '@clickhouse/client';
import { pendingMutations, readSystemTables } from './client';
import { BOUNCE_TYPE_ENUM, EVENT_TYPE_ENUM } from './events';
import { layoutOf, type EventDatabase, type StoreLayout, type TableSpec } from './layout';
import { dateTime, int, join, list, raw, sql, str, uuid, type SqlFragment } from './sql';

/**
 * Tables derived from events by materialized views, so reads need not
 * deduplicate every stored row. They are exact because ingestion stores each
 * provider event once; the exception is a fault, after which ingestion
 * records the (workspace, day) in unsettled_days (a view's insert is not
 * atomic with its base table's: ClickHouse dying in between commits the event
 * without its rollup, and the retry then skips it as stored). Readers take
 * unsettled days, and partial days at the ends of a range, from events itself.
 * - event_rollup_daily: events per workspace, day, campaign, variant, type,
 *   bounce type and machine-open flag, and on the rows of human opens and of
 *   clicks their distinct addresses (64-bit hashes, exact sets), so that
 *   unique opens and clicks and every per-variant figure come from it. The
 *   other rows keep an empty set: no figure reads them, and long-range reads,
 *   which deserialize every set of the rows they scan, would pay for them;
 * - link_rollup_daily: clicks and distinct addresses per link and day (and
 *   variant, for the variant filter);
 * - events_by_address: the events sorted by address, for the address filter.
 * Aggregate states are merged at read time (parts may not have merged yet).
 * Small index granules let a campaign filter skip most of a workspace's days,
 * and an address's few events be read without the rows around them.
 */
/** The columns events_by_address is filled with: all of events but raw. */
const EVENTS_BY_ADDRESS_COLUMNS = sql`id, workspace_id, campaign_id, variant_id, event_type, bounce_type, bounce_class, machine_open,
  email, occurred_at, received_at, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, ingested_at, run_id`;

/**
 * The events whose distinct addresses the unique figures count (human opens
 * and clicks): the only ones event_rollup_daily keeps address sets for.
 * machine_open is in the rollup's key, so a view made when machine clicks
 * still counted keeps their sets in rows of their own, which this condition
 * leaves out at read time too.
 */
export const ENGAGED_EVENTS = sql`(event_type IN ('open', 'click') AND machine_open = 0)`;

/** The key of event_rollup_daily below the day, in its order. */
const EVENT_ROLLUP_KEY = sql`campaign_id, variant_id, event_type, bounce_type, machine_open`;

const unsettledDaysTable: TableSpec = {
  name: 'unsettled_days',
  structure: sql`(
    workspace_id UUID,
    day Date,
    marked_at DateTime('UTC')
  )`,
  family: 'ReplacingMergeTree',
  engineArguments: raw.trusted('marked_at'),
  keys: sql`ORDER BY (workspace_id, day)`,
};

interface DerivedTable {
  name: string;
  /** Columns of its current layout: a table that lacks one (made by an earlier release) is dropped and made again. */
  layout: string[];
  /** Created without IF NOT EXISTS: the one process whose statement succeeds fills it from the stored events. */
  table(layout: StoreLayout): TableSpec;
  /** The view's SELECT over the events as they are inserted (the local events table). */
  feed(layout: StoreLayout): SqlFragment;
  /** INSERT ... SELECT of the stored events that `where` selects, each provider event counted once. */
  backfill(db: SqlFragment, where: SqlFragment): SqlFragment;
}

const DERIVED_TABLES: DerivedTable[] = [
  {
    name: 'event_rollup_daily',
    layout: ['variant_id', 'machine_open', 'engaged_addresses'],
    table: () => ({
      name: 'event_rollup_daily',
      structure: sql`(
      workspace_id UUID,
      day Date,
      campaign_id UUID,
      variant_id UUID,
      event_type ${EVENT_TYPE_ENUM},
      bounce_type ${BOUNCE_TYPE_ENUM},
      machine_open UInt8,
      events AggregateFunction(count),
      engaged_addresses AggregateFunction(uniqExact, UInt64)
    )`,
      family: 'AggregatingMergeTree',
      keys: sql`PARTITION BY toYYYYMM(day)
    ORDER BY (workspace_id, day, ${EVENT_ROLLUP_KEY})
    SETTINGS index_granularity = 256`,
    }),
    feed: (layout) => sql`
      SELECT workspace_id, toDate(occurred_at) AS day, ${EVENT_ROLLUP_KEY},
        countState() AS events, uniqExactStateIf(cityHash64(email), ${ENGAGED_EVENTS}) AS engaged_addresses
      FROM ${layout.local('events')}
      GROUP BY workspace_id, day, ${EVENT_ROLLUP_KEY}`,
    backfill: (db, where) => sql`INSERT INTO ${db}.event_rollup_daily
      SELECT workspace_id, day, ${EVENT_ROLLUP_KEY}, countState() AS events,
        uniqExactStateIf(address, ${ENGAGED_EVENTS}) AS engaged_addresses
      FROM (
        SELECT DISTINCT workspace_id, toDate(occurred_at) AS day, ${EVENT_ROLLUP_KEY}, provider_event_id,
          cityHash64(email) AS address
        FROM ${db}.events WHERE ${where}
      )
      GROUP BY workspace_id, day, ${EVENT_ROLLUP_KEY}`,
  },
  {
    name: 'link_rollup_daily',
    layout: ['variant_id'],
    table: () => ({
      name: 'link_rollup_daily',
      structure: sql`(
      workspace_id UUID,
      day Date,
      campaign_id UUID,
      variant_id UUID,
      url String,
      clicks AggregateFunction(count),
      addresses AggregateFunction(uniqExact, UInt64)
    )`,
      family: 'AggregatingMergeTree',
      keys: sql`PARTITION BY toYYYYMM(day)
    ORDER BY (workspace_id, day, campaign_id, variant_id, url)
    SETTINGS index_granularity = 256`,
    }),
    feed: (layout) => sql`
      SELECT workspace_id, toDate(occurred_at) AS day, campaign_id, variant_id, assumeNotNull(url) AS url,
        countState() AS clicks, uniqExactState(cityHash64(email)) AS addresses
      FROM ${layout.local('events')}
      WHERE event_type = 'click' AND isNotNull(url)
      GROUP BY workspace_id, day, campaign_id, variant_id, url`,
    backfill: (db, where) => sql`INSERT INTO ${db}.link_rollup_daily
      SELECT workspace_id, day, campaign_id, variant_id, url, countState() AS clicks, uniqExactState(address) AS addresses
      FROM (
        SELECT DISTINCT workspace_id, toDate(occurred_at) AS day, campaign_id, variant_id, assumeNotNull(url) AS url,
          provider_event_id, cityHash64(email) AS address
        FROM ${db}.events
        WHERE ${where} AND event_type = 'click' AND isNotNull(url)
      )
      GROUP BY workspace_id, day, campaign_id, variant_id, url`,
  },
  {
    name: 'events_by_address',
    layout: ['variant_id', 'bounce_class', 'machine_open', 'run_id'],
    // The columns of events, so the two cannot drift apart; its raw column stays empty here.
    table: (layout) => ({
      name: 'events_by_address',
      structure: sql`AS ${layout.local('events')}`,
      family: 'ReplacingMergeTree',
      engineArguments: raw.trusted('ingested_at'),
      keys: sql`PARTITION BY toYYYYMM(occurred_at)
    ORDER BY (workspace_id, email, occurred_at, provider_event_id)
    SETTINGS index_granularity = 256`,
    }),
    feed: (layout) => sql`SELECT ${EVENTS_BY_ADDRESS_COLUMNS}, '' AS raw FROM ${layout.local('events')}`,
    // Readers deduplicate an address's few rows exactly, so copies may stay.
    backfill: (db, where) => sql`INSERT INTO ${db}.events_by_address (${EVENTS_BY_ADDRESS_COLUMNS})
      SELECT ${EVENTS_BY_ADDRESS_COLUMNS} FROM ${db}.events WHERE ${where}`,
  },
];

/** The events of one workspace's UTC day (YYYY-MM-DD), as a condition on events and its copies. */
export function eventsOfDay(workspaceId: string, day: string): SqlFragment {
  const from = new Date(`${day}T00:00:00Z`);
  return sql`workspace_id = ${uuid(workspaceId)} AND occurred_at >= ${dateTime(from)} AND occurred_at < ${dateTime(new Date(from.getTime() + 86_400_000))}`;
}

/** The rows of one workspace's UTC day (YYYY-MM-DD) in the tables with a `day` column (the rollups, unsettled_days). */
export function rowsOfDay(workspaceId: string, day: string): SqlFragment {
  return sql`workspace_id = ${uuid(workspaceId)} AND day = toDate(${str(day)})`;
}

/** Marks the (workspace, day) of each event of `source` that `where` selects unsettled, now. */
export function markDaysUnsettled(db: SqlFragment, source: SqlFragment, where: SqlFragment): SqlFragment {
  return sql`INSERT INTO ${db}.unsettled_days
    SELECT DISTINCT workspace_id, toDate(occurred_at) AS day, now() AS marked_at FROM ${source} WHERE ${where}`;
}

/** The aggregate tables of the derived ones: a count kept twice stays twice, so a rebuild deletes first. */
const AGGREGATE_TABLES = ['event_rollup_daily', 'link_rollup_daily'];

/** A mutation that has not finished by then is stuck (18.16 retries a failing one for good): the rebuild gives up. */
const MUTATION_WAIT_MS = 10 * 60_000;

/**
 * Computes the derived tables' rows of one workspace's day again from its
 * events: the aggregates' rows of the day are deleted (a mutation, awaited;
 * an error if the tables' mutations are still pending after MUTATION_WAIT_MS),
 * then every derived table is filled from the events as a backfill would
 * (events_by_address gains copies, which its readers collapse). Events of the
 * day that arrive meanwhile may be counted twice: callers rebuild quiet days
 * only, and check them again afterwards.
 */
export async function rebuildDerivedDay(
  client: ClickHouseClient,
  database: EventDatabase,
  workspaceId: string,
  day: string,
  signal?: AbortSignal,
): Promise<void> {
  const layout = layoutOf(database);
  const ofDay = rowsOfDay(workspaceId, day);
  for (const table of AGGREGATE_TABLES) {
    await client.command({
      query: sql`ALTER TABLE ${layout.local(table)}${layout.onCluster} DELETE WHERE ${ofDay}`.text,
      abort_signal: signal,
    });
  }
  // In a cluster a mutation reaches the replicas' system.mutations through ZooKeeper a moment after the ALTER
  // returns: the deletion is also awaited as readers see it.
  const deleted = async (): Promise<boolean> => {
    if (layout.cluster === undefined) return true;
    const left = await client.query({
      query: join(
        AGGREGATE_TABLES.map((table) => sql`SELECT count() AS n FROM ${layout.table(table)} WHERE ${ofDay}`),
        ' UNION ALL ',
      ).text,
      format: 'JSONEachRow',
      abort_signal: signal,
    });
    return (await left.json<{ n: string }>()).every((row) => Number(row.n) === 0);
  };
  const deadline = Date.now() + MUTATION_WAIT_MS;
  for (;;) {
    if ((await pendingMutations(client, layout, AGGREGATE_TABLES, signal)) === 0 && (await deleted())) break;
    if (Date.now() > deadline) throw new Error(`mutations of ${AGGREGATE_TABLES.join(', ')} still pending after ${MUTATION_WAIT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  for (const table of DERIVED_TABLES) {
    await client.command({ query: table.backfill(layout.db, eventsOfDay(workspaceId, day)).text, abort_signal: signal });
  }
}

/**
 * Rows a batch stamped this long before the views existed may be written
 * after them, so their days may be counted by both the view and the backfill:
 * those days are marked unsettled (ingested_at is the ingesting host's clock).
 */
const BACKFILL_OVERLAP_MS = 10 * 60_000;

/** The derived tables that exist in an earlier layout: they are derived, so they are rebuilt rather than altered. */
async function outdatedTables(client: ClickHouseClient, layout: StoreLayout): Promise<DerivedTable[]> {
  const rows = await readSystemTables<{ table: string; name: string }>(
    client,
    sql`SELECT table, name FROM system.columns
      WHERE database = ${str(layout.database)} AND table IN (${list(DERIVED_TABLES.map((table) => str(layout.localName(table.name))))})`,
  );
  const columns = new Map<string, Set<string>>();
  for (const row of rows) {
    columns.set(row.table, (columns.get(row.table) ?? new Set()).add(row.name));
  }
  return DERIVED_TABLES.filter((table) => {
    const present = columns.get(layout.localName(table.name));
    return present !== undefined && table.layout.some((column) => !present.has(column));
  });
}

/** The tables the views feed. */
export const DERIVED_TABLE_NAMES = DERIVED_TABLES.map((table) => table.name);

/** Whether no derived table is in an earlier layout (ensureEventRollups would make it again). */
export async function derivedTablesCurrent(client: ClickHouseClient, layout: StoreLayout): Promise<boolean> {
  return (await outdatedTables(client, layout)).length === 0;
}

/**
 * Creates unsettled_days and the derived tables with their views. A derived
 * table this call creates is then filled from the events already stored,
 * month by month, and the days of events stored around that time are marked
 * unsettled. A derived table in an earlier layout is dropped with its view
 * first, and so made again. Should the process die during a backfill, the
 * table stays incomplete: drop it (and its view) to have it rebuilt.
 */
export async function ensureEventRollups(client: ClickHouseClient, layout: StoreLayout): Promise<void> {
  const run = async (statement: SqlFragment) => {
    await client.command({ query: statement.text });
  };
  const db = layout.db;
  for (const statement of layout.createTable(unsettledDaysTable)) await run(statement);
  const viewsFrom = new Date(Date.now() - BACKFILL_OVERLAP_MS);
  const created: DerivedTable[] = [];
  const existing = await readSystemTables<{ name: string }>(
    client,
    sql`SELECT name FROM system.tables WHERE database = ${str(layout.database)}`,
  );
  const names = new Set(existing.map((row) => row.name));
  for (const table of await outdatedTables(client, layout)) {
    for (const statement of [...layout.dropTable(`${table.name}_feed`), ...layout.dropTable(table.name)]) await run(statement);
    names.delete(layout.localName(table.name));
  }
  for (const table of DERIVED_TABLES) {
    const [create, ...distributed] = layout.createTable(table.table(layout), { ifNotExists: false });
    if (!names.has(layout.localName(table.name))) {
      try {
        await run(create);
        created.push(table);
      } catch (error) {
        // Another process created it in the meantime, and fills it.
        if (!/already exists/i.test(String(error))) throw error;
      }
    }
    for (const statement of distributed) await run(statement);
    await run(layout.createView(`${table.name}_feed`, table.name, table.feed(layout)));
  }
  if (created.length === 0) return;
  const result = await client.query({
    query: sql`SELECT DISTINCT toYYYYMM(occurred_at) AS month FROM ${db}.events ORDER BY month`.text,
    format: 'JSONEachRow',
  });
  const months = (await result.json<{ month: number }>()).map((row) => int(Number(row.month)));
  if (months.length === 0) return;
  for (const table of created) {
    for (const month of months) await run(table.backfill(db, sql`toYYYYMM(occurred_at) = ${month}`));
  }
  await run(markDaysUnsettled(db, sql`${db}.events`, sql`ingested_at >= ${dateTime(viewsFrom)}`));
}
