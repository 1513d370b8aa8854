import { chsql, type EventRow } from '@mail/event-store';
import type { EventFilter, PageWindow } from '../domain/filter';
import { pageSlice, type DayCount, type PageSlice } from '../domain/page-slice';
import { DAY_MS } from '../domain/day-split';
import { RecentValues } from '../domain/recent';
import type { EventStore } from './connection';
import { DISTINCT_EVENTS, timeConditions } from './conditions';
import { readPlanned, unionAll, type ReadPlan, type RowSource } from './read-plan';

const { int, raw, sql } = chsql;

/** An events row as read: no raw payload or ingestion time, and the event's times as unix seconds. */
export type StoredEvent = Omit<EventRow, 'occurred_at' | 'received_at' | 'raw' | 'ingested_at'> & {
  occurred_ts: number;
  received_ts: number;
};

/**
 * One page of events, newest first, and the total, each event counted once.
 * The events per day (exact total, and where the page lies), from the
 * rollups where they answer and from the rows elsewhere, and the page from
 * those days' rows only: two small reads instead of one sort over every
 * matching row.
 */
export function listEvents(store: EventStore, filter: EventFilter, window: PageWindow): Promise<{ events: StoredEvent[]; total: number }> {
  return readPlanned(store, filter, true, (plan) => readPage(store, filter, window, plan));
}

/**
 * Where the page of each recent read lay, per workspace, filter and window,
 * and the newest day each workspace's reads have seen. A read fetches the
 * rows of the page's likely days beside the day counts rather than after
 * them, and keeps them only if the counts put the page there. Likely: where
 * the same read found it last time (a refresh, a poll, the next page), or
 * for a first page the workspace's newest day, where a busy filter's newest
 * events are.
 */
const lastSlices = new RecentValues<PageSlice>(10_000);
const newestDays = new RecentValues<Date>(10_000);

const sameSlice = (a: PageSlice, b: PageSlice) =>
  a.from.getTime() === b.from.getTime() && a.before.getTime() === b.before.getTime() && a.skip === b.skip;

function likelySlice(key: string, filter: EventFilter, window: PageWindow): PageSlice | undefined {
  const last = lastSlices.get(key);
  if (last || window.offset > 0) return last;
  const newest = newestDays.get(filter.workspaceId);
  return newest && { from: newest, before: new Date(newest.getTime() + DAY_MS), skip: 0 };
}

function rememberNewestDay(workspaceId: string, newestFirst: DayCount[]): void {
  const known = newestDays.get(workspaceId);
  if (newestFirst.length > 0 && (!known || newestFirst[0].day > known)) newestDays.set(workspaceId, newestFirst[0].day);
}

async function readPage(
  store: EventStore,
  filter: EventFilter,
  window: PageWindow,
  plan: ReadPlan,
): Promise<{ events: StoredEvent[]; total: number }> {
  const sumOf = (days: DayCount[]) => days.reduce((sum, day) => sum + day.events, 0);
  // An address has few events: its page is read from all of them. A page they do not fill, but reach,
  // ends with the last of them, which gives the total; only a full or empty page needs the counts.
  if (filter.email !== undefined) {
    const events = await readSlice(store, filter, window, plan);
    const endsHere = events.length < window.pageSize && (events.length > 0 || window.offset === 0);
    return { events, total: endsHere ? window.offset + events.length : sumOf(await eventsPerDay(store, plan)) };
  }

  const key = JSON.stringify([filter, window]);
  const guess = likelySlice(key, filter, window);
  const guessedEvents = guess && readSlice(store, filter, window, plan, guess);
  // Awaited only if the guess holds; a failure of a discarded read must not go unhandled.
  guessedEvents?.catch(() => undefined);

  const newestFirst = await eventsPerDay(store, plan);
  rememberNewestDay(filter.workspaceId, newestFirst);
  const slice = pageSlice(newestFirst, window);
  if (!slice) return { events: [], total: sumOf(newestFirst) };
  lastSlices.set(key, slice);
  const events = guess && sameSlice(guess, slice) ? await guessedEvents! : await readSlice(store, filter, window, plan, slice);
  return { events, total: sumOf(newestFirst) };
}

/** The filter's events per day, newest day first. */
async function eventsPerDay(store: EventStore, plan: ReadPlan): Promise<DayCount[]> {
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
  if (!perDay) return [];
  const days = await store.rows<{ day: number; events: string }>(sql`
    SELECT day_start AS day, sum(events) AS events FROM (${perDay})
    GROUP BY day ORDER BY day DESC`);
  return days.map((row) => ({ day: new Date(row.day * 1000), events: Number(row.events) }));
}

/** The events of one page, read from the days of its slice only; without a slice, from all days. */
function readSlice(store: EventStore, filter: EventFilter, window: PageWindow, plan: ReadPlan, slice?: PageSlice): Promise<StoredEvent[]> {
  // Of the copies of one event, keep the one a merge would keep (the latest ingested).
  const inSlice = plan.rows.map((rows) => ({
    table: rows.table,
    where: slice ? chsql.join([rows.where, ...timeConditions(raw.trusted('occurred_at'), slice.from, slice.before)], ' AND ') : rows.where,
  }));
  const newestFirstOrder = raw.trusted('ORDER BY occurred_at DESC, provider_event_id DESC, ingested_at DESC LIMIT 1 BY provider_event_id');
  const pageWindow = sql`LIMIT ${int(slice ? slice.skip : window.offset)}, ${int(window.pageSize)}`;
  const union = (select: (rows: RowSource) => chsql.SqlFragment) => chsql.join(inSlice.map(select), ' UNION ALL ');
  const wholeRows = (rows: RowSource, condition: chsql.SqlFragment) => sql`
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_at, toUInt32(occurred_at) AS occurred_ts,
      toUInt32(received_at) AS received_ts, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id,
      variant_id, bounce_class, machine_open, run_id, ingested_at
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
  return store.rows<StoredEvent>(sql`
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_ts, received_ts,
      url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, variant_id, bounce_class, machine_open, run_id
    FROM (${union((rows) => wholeRows(rows, page ? sql`AND (occurred_at, provider_event_id, ingested_at) IN (${page})` : raw.trusted('')))})
    ${newestFirstOrder} ${page ? raw.trusted('') : pageWindow}`);
}
