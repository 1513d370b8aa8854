import type { Request } from 'express';
import { analyticsV1, eventsV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import { parseDateOrDateTime } from '../pydantic/scalars';
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

/**
 * date_from is inclusive; date_to too: through the end of a bare date's day, or through that millisecond.
 * Both were validated as the `date-or-datetime` format.
 */
function dateRange(query: Json): { occurredFrom?: Date; occurredBefore?: Date } {
  const read = (name: 'date_from' | 'date_to') => {
    const value = query[name];
    if (value === undefined) return undefined;
    const instant = typeof value === 'string' ? parseDateOrDateTime(value) : undefined;
    if (instant === undefined || 'error' in instant) throw new Error(`${name} reached the route unvalidated`);
    return instant;
  };
  const [start, end] = [read('date_from'), read('date_to')];
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
