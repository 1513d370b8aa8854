import { chsql } from '@mail/event-store';
import { DAY_MS, splitDays, type TimeRange } from '../domain/day-split';
import type { EventFilter } from '../domain/filter';
import { RecentValues } from '../domain/recent';
import type { EventStore } from './connection';
import { eventConditions, eventTypeCondition, wholeSecondAtOrAfter } from './conditions';

const { dateTime, join, list, raw, sql, uuid } = chsql;

/** A table rows are read from, and which of its rows. */
export interface RowSource {
  table: chsql.SqlFragment;
  where: chsql.SqlFragment;
}

/**
 * Where a read finds its events. `rows`: every event of the filter, from
 * events, or for one address from its copy sorted by address
 * (events on unsettled days). A read that groups by whole days
 * takes the settled ones from the daily `rollups`, and reads row by row only
 * the rest (`uncovered`). Reads query each source on its own and add up, so
 * each table is read with its own index and only for the columns needed.
 */
export interface ReadPlan {
  rows: RowSource[];
  /** The rows the rollups do not cover; empty when they cover all. */
  uncovered: RowSource[];
  /** Conditions on the rollups, absent when they cover none of the range. */
  rollups?: {
    /** On event_rollup_daily. */
    events: chsql.SqlFragment;
    /** On link_rollup_daily, which holds clicks only: absent when the filter wants another type. */
    links?: chsql.SqlFragment;
  };
}

const toDate = (day: Date) => sql`toDate(${dateTime(day)})`;

function inRanges(ranges: TimeRange[]): chsql.SqlFragment {
  return sql`(${join(
    ranges.map((range) => sql`(occurred_at >= ${dateTime(range.from)} AND occurred_at < ${dateTime(range.before)})`),
    ' OR ',
  )})`;
}

/** The days of this workspace whose rollups may disagree with its events, as day starts. */
async function unsettledDays(store: EventStore, workspaceId: string): Promise<Date[]> {
  const rows = await store.rows<{ day: number }>(
    sql`SELECT DISTINCT toUInt32(day) AS day FROM unsettled_days WHERE workspace_id = ${uuid(workspaceId)} ORDER BY day`,
  );
  return rows.map((row) => new Date(Number(row.day) * DAY_MS));
}

/** One address's events: from their sorted copy, except on unsettled days, which only the events table has right. */
function addressRows(where: chsql.SqlFragment, unsettled: Date[]): RowSource[] {
  if (unsettled.length === 0) return [{ table: raw.trusted('events_by_address'), where }];
  const days = inRanges(unsettled.map((day) => ({ from: day, before: new Date(day.getTime() + DAY_MS) })));
  return [
    { table: raw.trusted('events_by_address'), where: sql`${where} AND NOT ${days}` },
    { table: raw.trusted('events'), where: sql`${where} AND ${days}` },
  ];
}

/**
 * `useRollups`: the read groups by whole days, so rollups can answer for them.
 * The address filter is not in the rollups: its events are few, read row by row.
 * Nor is the run: a run's events are a recent, bounded part of its workspace's, read row by row too.
 */
function planFor(filter: EventFilter, useRollups: boolean, unsettled: Date[]): ReadPlan {
  const where = eventConditions(filter);
  if (filter.email !== undefined) {
    const rows = addressRows(where, unsettled);
    return { rows, uncovered: rows };
  }
  const table = raw.trusted('events');
  const rows = [{ table, where }];
  if (!useRollups || filter.runId !== undefined) return { rows, uncovered: rows };

  const from = filter.from && wholeSecondAtOrAfter(filter.from);
  const before = filter.before && wholeSecondAtOrAfter(filter.before);
  const split = splitDays(from, before, unsettled);
  const uncovered = split.eventRanges.length > 0 ? [{ table, where: sql`${where} AND ${inRanges(split.eventRanges)}` }] : [];
  if (!split.wholeDays) return { rows, uncovered };
  const days = [
    sql`workspace_id = ${uuid(filter.workspaceId)}`,
    ...(split.wholeDays.from ? [sql`day >= ${toDate(split.wholeDays.from)}`] : []),
    ...(split.wholeDays.before ? [sql`day < ${toDate(split.wholeDays.before)}`] : []),
    ...(split.unsettled.length > 0 ? [sql`day NOT IN (${list(split.unsettled.map(toDate))})`] : []),
    ...(filter.campaignId ? [sql`campaign_id = ${uuid(filter.campaignId)}`] : []),
    ...(filter.variantId ? [sql`variant_id = ${uuid(filter.variantId)}`] : []),
  ];
  return {
    rows,
    uncovered,
    rollups: {
      events: join([...days, ...(filter.eventTypes ? [eventTypeCondition(filter.eventTypes)] : [])], ' AND '),
      links: filter.eventTypes === undefined || filter.eventTypes.includes('click') ? join(days, ' AND ') : undefined,
    },
  };
}

/**
 * The plan for reads grouped finer than days (hourly buckets), made from the
 * plan for whole days: every event from rows. An address's plan reads rows
 * already.
 */
export function rowsOnly(filter: EventFilter, plan: ReadPlan): ReadPlan {
  return filter.email === undefined ? planFor(filter, false, []) : plan;
}

/** The unsettled days each workspace had at its last read: a guess to start the next read with. */
const lastUnsettled = new RecentValues<Date[]>(10_000);

/**
 * Runs `read` on the plan for the workspace's unsettled days. They seldom
 * change (a failed insert marks them), so the read starts at once on the
 * plan for the days of the workspace's last read, beside the lookup of the
 * days as they are now, and runs again only if the two plans differ: one
 * round trip less per read, and answers as exact as reading after the lookup.
 */
export async function readPlanned<T>(
  store: EventStore,
  filter: EventFilter,
  useRollups: boolean,
  read: (plan: ReadPlan) => Promise<T>,
): Promise<T> {
  if (filter.email === undefined && (!useRollups || filter.runId !== undefined)) return read(planFor(filter, false, []));
  const guessed = planFor(filter, useRollups, lastUnsettled.get(filter.workspaceId) ?? []);
  const [unsettled, answer] = await Promise.all([unsettledDays(store, filter.workspaceId), read(guessed)]);
  lastUnsettled.set(filter.workspaceId, unsettled);
  const actual = planFor(filter, useRollups, unsettled);
  return JSON.stringify(actual) === JSON.stringify(guessed) ? answer : read(actual);
}

/** The parts that have something to read, as one UNION ALL; undefined when none has. */
export function unionAll(parts: (chsql.SqlFragment | undefined)[]): chsql.SqlFragment | undefined {
  const present = parts.filter((part): part is chsql.SqlFragment => part !== undefined);
  return present.length > 0 ? join(present, ' UNION ALL ') : undefined;
}
