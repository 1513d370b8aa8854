import type { Request } from 'express';
import type { Violation } from '@mail/common';
import { analyticsV1, eventsV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import { unprocessable } from '../errors/http-error';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { pageRequest, type Json } from './http';

const { EventType, BounceType } = eventsV1;
const { Interval } = analyticsV1;

const EVENT_TYPES: Record<string, eventsV1.EventType> = {
  open: EventType.EVENT_TYPE_OPEN,
  click: EventType.EVENT_TYPE_CLICK,
  bounce: EventType.EVENT_TYPE_BOUNCE,
  unsubscribe: EventType.EVENT_TYPE_UNSUBSCRIBE,
};
const EVENT_TYPE_NAMES = Object.fromEntries(Object.entries(EVENT_TYPES).map(([name, value]) => [value, name]));
const BOUNCE_TYPE_NAMES: Partial<Record<eventsV1.BounceType, string>> = {
  [BounceType.BOUNCE_TYPE_HARD]: 'hard',
  [BounceType.BOUNCE_TYPE_SOFT]: 'soft',
};

// ---------------------------------------------------------------------------
// date_from / date_to: an ISO date or date-time, read like Pydantic's `datetime`
// (speedate), with its error texts for what it cannot read.
// ---------------------------------------------------------------------------

type Instant = { time: number; bareDate: boolean } | { error: string };

const DATE_TIME_TAIL = /^(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

function twoDigits(text: string, at: number): number | undefined {
  const part = text.slice(at, at + 2);
  return /^\d\d$/.test(part) ? Number(part) : undefined;
}

/** The time of day and zone after the date, or speedate's complaint about them. */
function timeOfDay(text: string): { ms: number; offsetMs: number } | { error: string } {
  const match = DATE_TIME_TAIL.exec(text);
  if (match) {
    const [, hour, minute, second = '0', fraction = '', zulu, sign, zoneHour = '0', zoneMinute = '0'] = match;
    if (Number(hour) > 23) return { error: 'hour value is outside expected range of 0-23' };
    if (Number(minute) > 59) return { error: 'minute value is outside expected range of 0-59' };
    if (Number(second) > 59) return { error: 'second value is outside expected range of 0-59' };
    if (fraction.length > 6) return { error: 'second fraction value is more than 6 digits long' };
    const offsetMinutes = zulu || !sign ? 0 : (sign === '-' ? -1 : 1) * (Number(zoneHour) * 60 + Number(zoneMinute));
    if (Math.abs(offsetMinutes) >= 24 * 60) return { error: 'timezone offset must be less than 24 hours' };
    const ms = ((Number(hour) * 60 + Number(minute)) * 60 + Number(second)) * 1000 + Math.floor(Number(`0.${fraction || 0}`) * 1000);
    return { ms, offsetMs: offsetMinutes * 60_000 };
  }
  if (text.length < 5) return { error: 'input is too short' };
  if (twoDigits(text, 0) === undefined) return { error: 'invalid character in hour' };
  if (text[2] !== ':') return { error: 'invalid time separator, expected `:`' };
  if (twoDigits(text, 3) === undefined) return { error: 'invalid character in minute' };
  if (text[5] === ':' && twoDigits(text, 6) === undefined) return { error: 'invalid character in second' };
  return { error: 'unexpected extra characters at the end of the input' };
}

function parseInstant(text: string): Instant {
  if (text.length < 10) return { error: 'input is too short' };
  if (!/^\d{4}$/.test(text.slice(0, 4))) return { error: 'invalid character in year' };
  if (text[4] !== '-' || text[7] !== '-') return { error: 'invalid date separator, expected `-`' };
  const [year, month, day] = [Number(text.slice(0, 4)), twoDigits(text, 5), twoDigits(text, 8)];
  if (month === undefined) return { error: 'invalid character in month' };
  if (day === undefined) return { error: 'invalid character in day' };
  if (month < 1 || month > 12) return { error: 'month value is outside expected range of 1-12' };
  if (day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return { error: 'day value is outside expected range' };
  const date = Date.UTC(year, month - 1, day);
  if (text.length === 10) return { time: date, bareDate: true };
  if (!'Tt_ '.includes(text[10])) return { error: 'invalid datetime separator, expected `T`, `t`, `_` or space' };
  const time = timeOfDay(text.slice(11));
  return 'error' in time ? time : { time: date + time.ms - time.offsetMs, bareDate: false };
}

/** date_from is inclusive; date_to too: through the end of a bare date's day, or through that millisecond. */
function dateRange(query: Json): { occurredFrom?: Date; occurredBefore?: Date } {
  const violations: Violation[] = [];
  const read = (name: 'date_from' | 'date_to'): Instant | undefined => {
    const value = query[name];
    if (value === undefined) return undefined;
    const instant = parseInstant(String(value));
    if ('error' in instant) {
      violations.push({
        type: 'datetime_from_date_parsing',
        loc: ['query', name],
        msg: `Input should be a valid datetime or date, ${instant.error}`,
        input: value,
        ctx: { error: instant.error },
      });
    }
    return instant;
  };
  const [from, to] = [read('date_from'), read('date_to')];
  if (violations.length > 0) throw unprocessable(violations);
  const bound = (instant: Instant | undefined) => (instant && 'time' in instant ? instant : undefined);
  const start = bound(from);
  const end = bound(to);
  return {
    occurredFrom: start && new Date(start.time),
    occurredBefore: end && new Date(end.time + (end.bareDate ? 86_400_000 : 1)),
  };
}

function eventFilter(req: Request, workspaceId: string): analyticsV1.EventFilter {
  const query = req.query as Json;
  return {
    workspaceId,
    eventType: query.event_type === undefined ? undefined : EVENT_TYPES[query.event_type as string],
    campaignId: query.campaign_id as string | undefined,
    email: query.email as string | undefined,
    ...dateRange(query),
  };
}

// ---------------------------------------------------------------------------
// proto -> JSON
// ---------------------------------------------------------------------------

function eventJson(event: analyticsV1.EventRecord): Json {
  return {
    id: event.id,
    workspace_id: event.workspaceId,
    campaign_id: event.campaignId,
    event_type: EVENT_TYPE_NAMES[event.eventType],
    bounce_type: BOUNCE_TYPE_NAMES[event.bounceType] ?? null,
    email: event.email,
    occurred_at: event.occurredAt?.toISOString(),
    received_at: event.receivedAt?.toISOString(),
    url: event.url ?? null,
    reason: event.reason ?? null,
    user_agent: event.userAgent ?? null,
    ip: event.ip ?? null,
    provider: event.provider,
    provider_event_id: event.providerEventId,
    provider_message_id: event.providerMessageId ?? null,
  };
}

function countsJson(counts: analyticsV1.EngagementCounts | undefined): Json {
  return {
    opens: counts?.opens ?? 0,
    unique_opens: counts?.uniqueOpens ?? 0,
    clicks: counts?.clicks ?? 0,
    unique_clicks: counts?.uniqueClicks ?? 0,
    click_to_open_rate: counts?.clickToOpenRate ?? 0,
    hard_bounces: counts?.hardBounces ?? 0,
    soft_bounces: counts?.softBounces ?? 0,
    unsubscribes: counts?.unsubscribes ?? 0,
  };
}

function statsJson(stats: analyticsV1.GetStatsResponse): Json {
  return {
    totals: countsJson(stats.totals),
    campaigns: stats.campaigns.map((campaign) => ({ campaign_id: campaign.campaignId, ...countsJson(campaign.counts) })),
    series: stats.series.map((bucket) => ({ bucket_start: bucket.bucketStart?.toISOString(), ...countsJson(bucket.counts) })),
    top_links: stats.topLinks.map((link) => ({
      campaign_id: link.campaignId,
      url: link.url,
      clicks: link.clicks,
      unique_clicks: link.uniqueClicks,
    })),
    suppressions: {
      total: stats.suppressions?.total ?? 0,
      hard_bounce: stats.suppressions?.hardBounce ?? 0,
      soft_bounces: stats.suppressions?.softBounces ?? 0,
      unsubscribe: stats.suppressions?.unsubscribe ?? 0,
      spam_report: stats.suppressions?.spamReport ?? 0,
    },
  };
}

/** /campaign-events/ and /campaign-events/stats: HTTP JSON <-> analytics.v1, one call per request. */
export const eventRoutes: RouteModule = (router, { clients }) => {
  const service = clients.analytics;

  router.get('/campaign-events/', async (req, res) => {
    const answer = await callService(
      service.listEvents.bind(service),
      { filter: eventFilter(req, workspaceIdOf(res)), page: pageRequest(req) },
      'query',
    );
    res.json(page(answer.events.map(eventJson), answer.page));
  });

  router.get('/campaign-events/stats', async (req, res) => {
    const answer = await callService(
      service.getStats.bind(service),
      {
        filter: eventFilter(req, workspaceIdOf(res)),
        interval: req.query.interval === 'hour' ? Interval.INTERVAL_HOUR : Interval.INTERVAL_DAY,
      },
      'query',
    );
    res.json(statsJson(answer));
  });
};
