import type { ClickHouseClient } from '@clickhouse/client';
import { layoutOf, type EventDatabase } from './layout';
import { int, list, raw, sql, str } from './sql';

/** The event tables partitioned by month (toYYYYMM of an event's time). */
export const MONTHLY_TABLES = ['events', 'events_by_address', 'event_rollup_daily', 'link_rollup_daily', 'unmatched_events'];

/**
 * A month counts as closed this long after it ended: its events can still
 * arrive until then (the provider retries a failed delivery for days).
 */
export const MONTH_CLOSED_AFTER_MS = 3 * 86_400_000;

export interface MonthPartition {
  table: string;
  /** YYYYMM. */
  month: number;
  /** Active parts. */
  parts: number;
}

/** The first instant after the month, in ms. */
function monthEnd(month: number): number {
  return Date.UTC(Math.floor(month / 100), month % 100, 1);
}

/** The partitions of closed months that are still more than one part, oldest month first. */
export function closedMonthsToCompact(partitions: MonthPartition[], now: Date, closedAfterMs = MONTH_CLOSED_AFTER_MS): MonthPartition[] {
  return partitions
    .filter((partition) => partition.parts > 1 && monthEnd(partition.month) + closedAfterMs <= now.getTime())
    .sort((a, b) => a.month - b.month || a.table.localeCompare(b.table));
}

/**
 * Merges each closed month of the monthly tables into one part, one
 * partition at a time, and returns the partitions merged. ClickHouse's own
 * merges leave a month as a few large parts beside the small ones of its last
 * inserts, for good; every read opens each part's index and files, and a read
 * of a few rows (one address, one page) decompresses a block per part and
 * column (bench/README.md, "ClickHouse: compacting closed months"). Events
 * that arrive for a month after this make a new part, merged in by the next
 * call. `signal` aborts the merge request in progress. In a cluster, a
 * partition with several parts on a shard is merged on every shard (ON
 * CLUSTER; replicas merge alike).
 */
export async function compactClosedMonths(
  client: ClickHouseClient,
  database: EventDatabase,
  now = new Date(),
  signal?: AbortSignal,
): Promise<MonthPartition[]> {
  const layout = layoutOf(database);
  const byLocalName = new Map(MONTHLY_TABLES.map((table) => [layout.localName(table), table]));
  // Parts per server, told apart by host name and data path (the servers of one machine share a host name); in a
  // cluster, of the replica of each shard that reads go to. A part's path is <data path>/data/<db>/<table>/<part>/
  // in an Ordinary database (18.16's) and <data path>/store/<xyz>/<table uuid>/<part>/ in an Atomic one.
  const server = raw.trusted(
    "concat(hostName(), ':', replaceRegexpOne(path, '/(data/[^/]+/[^/]+|store/[0-9a-f]{3}/[0-9a-f-]{36})/[^/]+/?$', ''))",
  );
  const result = await client.query({
    query: sql`SELECT table, partition_id, max(parts) AS parts FROM (
        SELECT ${server} AS server, table, partition_id, count() AS parts FROM ${layout.everyShard('parts')}
        WHERE active AND database = ${str(layout.database)} AND table IN (${list([...byLocalName.keys()].map(str))})
        GROUP BY server, table, partition_id)
      GROUP BY table, partition_id`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
    clickhouse_settings: { skip_unavailable_shards: 1 },
  });
  const partitions = (await result.json<{ table: string; partition_id: string; parts: string }>())
    .filter((row) => /^\d{6}$/.test(row.partition_id))
    .map((row) => ({ table: byLocalName.get(row.table)!, month: Number(row.partition_id), parts: Number(row.parts) }));
  const due = closedMonthsToCompact(partitions, now);
  for (const partition of due) {
    await client.command({
      query: sql`OPTIMIZE TABLE ${layout.local(partition.table)}${layout.onCluster} PARTITION ${int(partition.month)} FINAL`.text,
      abort_signal: signal,
    });
  }
  return due;
}
