import { chsql, type StoredBounceType, type StoredEventType } from '@mail/common';
import type { EventFilter, PageWindow } from '../domain/filter';
import { pageSlice } from '../domain/page-slice';
import type { EventStore } from './connection';
import { DISTINCT_EVENTS, eventConditions, timeConditions } from './conditions';

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
 * First the events per day (exact total, and where the page lies), then the
 * page from those days only: two small reads instead of one sort over every
 * matching row.
 */
export async function listEvents(
  store: EventStore,
  filter: EventFilter,
  window: PageWindow,
): Promise<{ events: StoredEvent[]; total: number }> {
  const where = eventConditions(filter);
  const days = await store.rows<{ day: number; events: string }>(sql`
    SELECT toUInt32(toStartOfDay(occurred_at)) AS day, ${DISTINCT_EVENTS} AS events
    FROM engagement_events WHERE ${where}
    GROUP BY day ORDER BY day DESC`);
  const newestFirst = days.map((row) => ({ day: new Date(row.day * 1000), events: Number(row.events) }));
  const total = newestFirst.reduce((sum, day) => sum + day.events, 0);
  const slice = pageSlice(newestFirst, window);
  if (!slice) return { events: [], total };

  const sliceWhere = chsql.join([where, ...timeConditions(raw.trusted('occurred_at'), slice.from, slice.before)], ' AND ');
  // Of the copies of one event, keep the one a merge would keep (the latest ingested).
  const events = await store.rows<StoredEvent>(sql`
    SELECT id, workspace_id, campaign_id, event_type, bounce_type, email, toUInt32(occurred_at) AS occurred_ts, toUInt32(received_at) AS received_ts,
      url, reason, user_agent, ip, provider, provider_event_id, provider_message_id
    FROM engagement_events WHERE ${sliceWhere}
    ORDER BY occurred_at DESC, provider_event_id DESC, ingested_at DESC
    LIMIT 1 BY provider_event_id
    LIMIT ${int(slice.skip)}, ${int(window.pageSize)}`);
  return { events, total };
}
