import type { ClickHouseClient } from '@clickhouse/client';
import { ENGAGED_EVENTS } from './rollups';
import { dateTime, join, sql, stringSet, uuid, type SqlFragment } from './sql';

/** run_id of an event that names no run (the API shows null). */
export const NO_RUN = '00000000-0000-0000-0000-000000000000';

/** The engagement a run is judged and followed up by: human opens and clicks (machine ones are left out). */
export type RunEngagementType = 'open' | 'click';

export interface RunEvents {
  workspaceId: string;
  runId: string;
  /** The run's start: no event of the run is older, and the read skips the months before it. */
  from?: Date;
  /** Events stored (ingested) after it are left out: a decision reads the events as they were at one time. */
  until?: Date;
}

/**
 * Every event of a run is read from the events table: the rollups have no run, and a run's events are a small,
 * recent part of its workspace's (from bounds them in time).
 */
function runEvents({ workspaceId, runId, from, until }: RunEvents): SqlFragment {
  const wholeSecond = (time: Date) => dateTime(new Date(Math.floor(time.getTime() / 1000) * 1000));
  return join(
    [
      sql`workspace_id = ${uuid(workspaceId)}`,
      ...(from ? [sql`occurred_at >= ${wholeSecond(from)}`] : []),
      sql`run_id = ${uuid(runId)}`,
      ...(until ? [sql`ingested_at <= ${wholeSecond(until)}`] : []),
    ],
    ' AND ',
  );
}

/** Distinct addresses with a human open and with a click, of one variant of a run (NO_VARIANT: none). */
export interface RunVariantEngagement {
  variantId: string;
  opens: number;
  clicks: number;
}

/** A run's human engagement per variant, as exact distinct addresses. Variants without any are absent. */
export async function runEngagementByVariant(client: ClickHouseClient, run: RunEvents): Promise<RunVariantEngagement[]> {
  const result = await client.query({
    query: sql`SELECT toString(variant_id) AS variant_id,
        uniqExactIf(email, event_type = 'open') AS opens, uniqExactIf(email, event_type = 'click') AS clicks
      FROM events WHERE ${runEvents(run)} AND ${ENGAGED_EVENTS}
      GROUP BY variant_id ORDER BY variant_id`.text,
    format: 'JSONEachRow',
  });
  const rows = await result.json<{ variant_id: string; opens: string; clicks: string }>();
  return rows.map((row) => ({ variantId: row.variant_id, opens: Number(row.opens), clicks: Number(row.clicks) }));
}

/** SELECT of the distinct addresses (column `email`) with a human event of `type` in a run, for a caller to stream. */
export function engagedAddressesOfRun(run: RunEvents, type: RunEngagementType): SqlFragment {
  const ofType = type === 'open' ? sql`event_type = 'open'` : sql`event_type = 'click'`;
  return sql`SELECT DISTINCT email FROM events WHERE ${runEvents(run)} AND ${ofType} AND ${ENGAGED_EVENTS}`;
}

/** Of `emails` (lower-case, as stored), the ones with a human event of `type` in a run. */
export async function engagedAmong(
  client: ClickHouseClient,
  run: RunEvents,
  type: RunEngagementType,
  emails: readonly string[],
): Promise<Set<string>> {
  if (emails.length === 0) return new Set();
  const result = await client.query({
    query: sql`${engagedAddressesOfRun(run, type)} AND email IN ${stringSet([...emails])}`.text,
    format: 'JSONEachRow',
  });
  return new Set((await result.json<{ email: string }>()).map((row) => row.email));
}

/** The addresses of engagedAddressesOfRun, read at once. */
export async function readEngagedAddressesOfRun(client: ClickHouseClient, run: RunEvents, type: RunEngagementType): Promise<Set<string>> {
  const result = await client.query({ query: engagedAddressesOfRun(run, type).text, format: 'JSONEachRow' });
  const rows = await result.json<{ email: string }>();
  return new Set(rows.map((row) => row.email));
}
