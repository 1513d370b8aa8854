import { chsql, type StoredBounceType, type StoredEventType } from '@mail/common';
import type { EventFilter, PageWindow } from '../domain/filter';
import { pageSlice } from '../domain/page-slice';
import type { EventStore } from './connection';
import { DISTINCT_EVENTS, timeConditions } from './conditions';
import { readPlanned, unionAll, type ReadPlan, type RowSource } from './read-plan';

const { int, raw, sql } = chsql;

export interface StoredEvent {
  id: string;
  workspace_id: string;
  campaign_id: string;
  event_type: StoredEventType;
  bounce_type: StoredBounceType;
  email: string;
  /** Unix seconds. */
  occurred_ts: number;
  received_ts: number;
  url: string | null;
  reason: string | null;
  user_agent: string | null;
  ip: string | null;
  provider: string;
  provider_event_id: string;
  provider_message_id: string | null;
}

/**
 * One page of events, newest first, and the total, each event counted once.
 * First the events per day (exact total, and where the page lies), from the
 * rollups where they answer and from the rows elsewhere, then the page from
 * those days' rows only: two small reads instead of one sort over every
 * matching row.
 */
export function listEvents(store: EventStore, filter: EventFilter, window: PageWindow): Promise<{ events: StoredEvent[]; total: number }> {
  return readPlanned(store, filter, true, (plan) => readPage(store, filter, window, plan));
}

async function readPage(
  store: EventStore,
  filter: EventFilter,
  window: PageWindow,
  plan: ReadPlan,
): Promise<{ events: StoredEvent[]; total: number }> {
  const perDay = unionAll([
    plan.rollups &&
      sql`SELECT toUInt32(toUInt32(day) * 86400) AS day_start, countMerge(events) AS events
        FROM event_rollup_daily WHERE ${plan.rollups.events}
        GROUP BY day_start`,
    ...plan.uncovered.map(
      (rows) => sql`SELECT toUInt32(toStartOfDay(occurred_at)) AS day_start, ${DISTINCT_EVENTS} AS events
        FROM ${rows.table} WHERE ${rows.where} GROUP BY day_start`,
    ),
  ]);
  if (!perDay) return { events: [], total: 0 };
  const days = await store.rows<{ day: number; events: string }>(sql`
    SELECT day_start AS day, sum(events) AS events FROM (${perDay})
    GROUP BY day ORDER BY day DESC`);
  const newestFirst = days.map((row) => ({ day: new Date(row.day * 1000), events: Number(row.events) }));
  const total = newestFirst.reduce((sum, day) => sum + day.events, 0);
  const slice = pageSlice(newestFirst, window);
  if (!slice) return { events: [], total };

  // Of the copies of one event, keep the one a merge would keep (the latest ingested).
  const inSlice = plan.rows.map((rows) => ({
    table: rows.table,
    where: chsql.join([rows.where, ...timeConditions(raw.trusted('occurred_at'), slice.from, slice.before)], ' AND '),
  }));
  const newestFirstOrder = raw.trusted('ORDER BY occurred_at DESC, provider_event_id DESC, ingested_at DESC LIMIT 1 BY provider_event_id');
  const pageWindow = sql`LIMIT ${int(slice.skip)}, ${int(window.pageSize)}`;
  const union = (select: (rows: RowSource) => chsql.SqlFragment) => chsql.join(inSlice.map(select), ' UNION ALL ');
  const wholeRows = (rows: RowSource, condition: chsql.SqlFragment) => sql`
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_at, toUInt32(occurred_at) AS occurred_ts,
      toUInt32(received_at) AS received_ts, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, ingested_at
    FROM ${rows.table} WHERE ${rows.where} ${condition}`;
  // A day of the workspace holds many events: the page is chosen on narrow columns first, and only its
  // rows are read whole; occurred_at, a column of the table's key, lets that read skip to them. An address
  // has few events: they are read whole at once.
  const page =
    filter.email === undefined
      ? sql`
        SELECT occurred_at, provider_event_id, ingested_at
        FROM (${union((rows) => sql`SELECT occurred_at, provider_event_id, ingested_at FROM ${rows.table} WHERE ${rows.where}`)})
        ${newestFirstOrder} ${pageWindow}`
      : undefined;
  const events = await store.rows<StoredEvent>(sql`
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_ts, received_ts,
      url, reason, user_agent, ip, provider, provider_event_id, provider_message_id
    FROM (${union((rows) => wholeRows(rows, page ? sql`AND (occurred_at, provider_event_id, ingested_at) IN (${page})` : raw.trusted('')))})
    ${newestFirstOrder} ${page ? raw.trusted('') : pageWindow}`);
  return { events, total };
}
