import type { ClickHouseClient } from '@clickhouse/client';
import { ENGAGED_EVENTS, eventsOfDay, rebuildDerivedDay, rowsOfDay } from './rollups';
import { layoutOf, type EventDatabase } from './layout';
import { dateTime, int, join, sql, type SqlFragment } from './sql';

/**
 * Unsettled days (rollups.ts) are read row by row for good unless something
 * clears their mark, and every fault adds some. Most of them turn out to
 * agree: an insert that timed out after ClickHouse committed it, or offsets
 * that failed to commit after a good insert. settleUnsettledDays finds those
 * and clears their marks. A day whose derived tables really disagree with
 * its events (a view's insert lost, or a copy of an event counted twice) is
 * rebuilt when the caller says so (rebuildDerivedDay), and cleared if it
 * then agrees; otherwise it stays marked: its reads stay exact, only slower.
 *
 * A day is compared only once it is quiet: no event of it ingested for
 * QUIET_MS (longer than any insert takes, and than the clock skew between
 * hosts), checked again after the comparison. An insert under way could
 * otherwise show up in the rollups but not yet in the comparison's read of
 * the events, or the other way round.
 */
export const QUIET_MS = 10 * 60_000;

/** Days compared per pass, picked at random so that days that stay marked cannot starve the others. */
const DAYS_PER_PASS = 100;

export interface MarkedDay {
  workspaceId: string;
  /** YYYY-MM-DD. */
  day: string;
  /** The newest mark of the day, unix seconds. */
  markedAt: number;
}

export interface SettleOptions {
  now?: Date;
  /**
   * Rebuild the days that disagree. Two rebuilds of one day at once could
   * each add its rows after the other's delete: only one process may.
   */
  rebuild?: boolean;
  signal?: AbortSignal;
}

export interface SettlePass {
  /** Marks cleared: the derived tables agree with the events (rebuilt first, for those also in `rebuilt`). */
  settled: MarkedDay[];
  /** Rebuilt from their events. */
  rebuilt: MarkedDay[];
  /** Still marked: they disagree. */
  disagreeing: MarkedDay[];
  /** Not compared: events arrived within QUIET_MS. */
  busy: MarkedDay[];
}

type Figures = Map<string, string>;

/** The rows as key -> figures, for comparing two reads that group alike. */
async function figures(client: ClickHouseClient, query: SqlFragment, signal?: AbortSignal): Promise<Figures> {
  const result = await client.query({ query: query.text, format: 'JSONEachRow', abort_signal: signal });
  const rows = await result.json<{ key: string; figures: string }>();
  return new Map(rows.map((row) => [row.key, row.figures]));
}

const sameFigures = (a: Figures, b: Figures): boolean => a.size === b.size && [...a].every(([key, value]) => b.get(key) === value);

/**
 * Each derived table's figures for the day, read from it and computed from
 * the events (each provider event once, as the views would have counted
 * them): events and distinct engaged addresses per rollup key, clicks and distinct
 * addresses per link, and how many provider events the address-sorted copy
 * holds (readers collapse its copies, so only missing events matter).
 */
function comparisons(day: MarkedDay): [SqlFragment, SqlFragment][] {
  const inDay = eventsOfDay(day.workspaceId, day.day);
  const rollupRows = rowsOfDay(day.workspaceId, day.day);
  const rollupKey = sql`concat(toString(campaign_id), ' ', toString(variant_id), ' ', toString(event_type), ' ',
    toString(bounce_type), ' ', toString(machine_open))`;
  const linkKey = sql`concat(toString(campaign_id), ' ', toString(variant_id), ' ', url)`;
  const both = (events: SqlFragment, addresses: SqlFragment) => sql`concat(toString(${events}), ' ', toString(${addresses}))`;
  const eventCount = sql`uniqExact(cityHash64(provider_event_id))`;
  const addressCount = sql`uniqExact(cityHash64(email))`;
  return [
    [
      sql`SELECT ${rollupKey} AS key, ${both(sql`countMerge(events)`, sql`uniqExactMerge(engaged_addresses)`)} AS figures
        FROM event_rollup_daily WHERE ${rollupRows} GROUP BY key`,
      sql`SELECT ${rollupKey} AS key, ${both(eventCount, sql`uniqExactIf(cityHash64(email), ${ENGAGED_EVENTS})`)} AS figures
        FROM events WHERE ${inDay} GROUP BY key`,
    ],
    [
      sql`SELECT ${linkKey} AS key, ${both(sql`countMerge(clicks)`, sql`uniqExactMerge(addresses)`)} AS figures
        FROM link_rollup_daily WHERE ${rollupRows} GROUP BY key`,
      sql`SELECT ${linkKey} AS key, ${both(eventCount, addressCount)} AS figures
        FROM (SELECT campaign_id, variant_id, assumeNotNull(url) AS url, provider_event_id, email FROM events
          WHERE ${inDay} AND event_type = 'click' AND isNotNull(url))
        GROUP BY key`,
    ],
    [
      sql`SELECT 'events' AS key, toString(${eventCount}) AS figures FROM events_by_address WHERE ${inDay}`,
      sql`SELECT 'events' AS key, toString(${eventCount}) AS figures FROM events WHERE ${inDay}`,
    ],
  ];
}

/** When the day's newest event was ingested (unix seconds), 0 when it has none. */
async function lastIngested(client: ClickHouseClient, day: MarkedDay, signal?: AbortSignal): Promise<number> {
  const result = await client.query({
    query: sql`SELECT toUInt32(max(ingested_at)) AS last FROM events WHERE ${eventsOfDay(day.workspaceId, day.day)}`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
  });
  const [row] = await result.json<{ last: number | string }>();
  return Number(row?.last ?? 0);
}

async function agrees(client: ClickHouseClient, day: MarkedDay, signal?: AbortSignal): Promise<boolean> {
  for (const [derived, events] of comparisons(day)) {
    const [fromDerived, fromEvents] = await Promise.all([figures(client, derived, signal), figures(client, events, signal)]);
    if (!sameFigures(fromDerived, fromEvents)) return false;
  }
  return true;
}

/**
 * Compares up to DAYS_PER_PASS marked days and clears the marks of those
 * that agree, rebuilding those that do not first if `rebuild`. The clearing
 * is a mutation that removes only the marks this pass saw: a day marked
 * again meanwhile (a newer marked_at) stays marked. Without `rebuild`, any
 * number of replicas may run it at once: it only reads, and deletes what a
 * concurrent pass would delete too. `client` is bound to `database`.
 */
export async function settleUnsettledDays(
  client: ClickHouseClient,
  database: EventDatabase,
  options: SettleOptions = {},
): Promise<SettlePass> {
  const layout = layoutOf(database);
  const { now = new Date(), rebuild = false, signal } = options;
  const result = await client.query({
    query: sql`SELECT toString(workspace_id) AS workspace_id, toString(day) AS day, toUInt32(max(marked_at)) AS marked_at
      FROM unsettled_days GROUP BY workspace_id, day ORDER BY rand() LIMIT ${int(DAYS_PER_PASS)}`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
  });
  const marked = (await result.json<{ workspace_id: string; day: string; marked_at: number | string }>()).map((row) => ({
    workspaceId: row.workspace_id,
    day: row.day,
    markedAt: Number(row.marked_at),
  }));
  const pass: SettlePass = { settled: [], rebuilt: [], disagreeing: [], busy: [] };
  const quietSince = Math.floor((now.getTime() - QUIET_MS) / 1000);
  for (const day of marked) {
    const before = await lastIngested(client, day, signal);
    if (before >= quietSince) {
      pass.busy.push(day);
      continue;
    }
    let agreeing = await agrees(client, day, signal);
    if (!agreeing && rebuild) {
      await rebuildDerivedDay(client, layout, day.workspaceId, day.day, signal);
      pass.rebuilt.push(day);
      agreeing = await agrees(client, day, signal);
    }
    // Events that arrived meanwhile may have been read on one side only, or counted twice by a rebuild: next pass.
    if ((await lastIngested(client, day, signal)) !== before) pass.busy.push(day);
    else (agreeing ? pass.settled : pass.disagreeing).push(day);
  }
  if (pass.settled.length > 0) {
    const seen = pass.settled.map(
      (day) => sql`(${rowsOfDay(day.workspaceId, day.day)} AND marked_at <= ${dateTime(new Date(day.markedAt * 1000))})`,
    );
    await client.command({
      query: sql`ALTER TABLE ${layout.local('unsettled_days')}${layout.onCluster} DELETE WHERE ${join(seen, ' OR ')}`.text,
      abort_signal: signal,
    });
  }
  return pass;
}
