import { EVENT_TYPES, chsql, type StoredEventType } from '@mail/event-store';
import type { EventFilter } from '../domain/filter';

const { dateTime, join, list, oneOf, raw, sql, str, uuid } = chsql;

/**
 * Events counted once per provider event id, where rows are read one by one
 * (partial and unsettled days, an address's events, hourly buckets): a
 * stored duplicate (after a fault) counts once. Used inside
 * GROUP BYs whose groups keep every copy of an event together (copies share
 * occurred_at, campaign, type and URL), which keeps each hash set small; the
 * 64-bit hash reads far faster than the string.
 */
export const DISTINCT_EVENTS = raw.trusted('uniqExact(cityHash64(provider_event_id))');

/** Stored times have whole seconds: a bound with milliseconds is the next whole second, for >= and < alike. */
export function wholeSecondAtOrAfter(time: Date): Date {
  return new Date(Math.ceil(time.getTime() / 1000) * 1000);
}

export function timeConditions(column: chsql.SqlFragment, from?: Date, before?: Date): chsql.SqlFragment[] {
  return [
    ...(from ? [sql`${column} >= ${dateTime(wholeSecondAtOrAfter(from))}`] : []),
    ...(before ? [sql`${column} < ${dateTime(wholeSecondAtOrAfter(before))}`] : []),
  ];
}

export function eventTypeCondition(types: readonly StoredEventType[]): chsql.SqlFragment {
  return sql`event_type IN (${list(types.map((type) => oneOf(type, EVENT_TYPES)))})`;
}

/** WHERE conditions of an event filter; the workspace comes first, as in the sort key. */
export function eventConditions(filter: EventFilter): chsql.SqlFragment {
  const conditions = [
    sql`workspace_id = ${uuid(filter.workspaceId)}`,
    ...timeConditions(raw.trusted('occurred_at'), filter.from, filter.before),
  ];
  if (filter.eventTypes) conditions.push(eventTypeCondition(filter.eventTypes));
  if (filter.campaignId) conditions.push(sql`campaign_id = ${uuid(filter.campaignId)}`);
  if (filter.variantId) conditions.push(sql`variant_id = ${uuid(filter.variantId)}`);
  if (filter.runId) conditions.push(sql`run_id = ${uuid(filter.runId)}`);
  if (filter.email !== undefined) conditions.push(sql`email = ${str(filter.email)}`);
  return join(conditions, ' AND ');
}
