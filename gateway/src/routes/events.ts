import type { Request } from 'express';
import { PROTO_BOUNCE_TYPES, PROTO_EVENT_TYPES, storedEventDetails, storedNames, type StoredEventType } from '@mail/event-store';
import { analyticsV1, type eventsV1, type campaignV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import { parseDateOrDateTime } from '../pydantic/scalars';
import type { RouteModule } from './context';
import type { ServiceClients } from '../clients';
import { callService, page } from './grpc';
import { pageRequest, type Json } from './http';

const { Interval } = analyticsV1;

const EVENT_TYPE_NAMES = storedNames(PROTO_EVENT_TYPES);
const BOUNCE_TYPE_NAMES = storedNames(PROTO_BOUNCE_TYPES);

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
    eventType: query.event_type === undefined ? undefined : PROTO_EVENT_TYPES[query.event_type as StoredEventType],
    campaignId: query.campaign_id as string | undefined,
    email: query.email as string | undefined,
    variantId: query.variant_id as string | undefined,
    runId: query.run_id as string | undefined,
    ...dateRange(query),
  };
}

// ---------------------------------------------------------------------------
// proto -> JSON
// ---------------------------------------------------------------------------

/** The API's bounce type of an event: null on every event but a bounce. */
function bounceTypeName(bounceType: eventsV1.BounceType): string | null {
  const name = BOUNCE_TYPE_NAMES.get(bounceType);
  return name === undefined || name === 'none' ? null : name;
}

function eventJson(event: analyticsV1.EventRecord): Json {
  return {
    id: event.id,
    workspace_id: event.workspaceId,
    campaign_id: event.campaignId,
    event_type: EVENT_TYPE_NAMES.get(event.eventType),
    bounce_type: bounceTypeName(event.bounceType),
    email: event.email,
    occurred_at: event.occurredAt?.toISOString(),
    received_at: event.receivedAt?.toISOString(),
    ...storedEventDetails(event),
    machine_open: event.machineOpen,
    machine_click: event.machineClick,
    variant_id: event.variantId ?? null,
    bounce_class: event.bounceClass ?? null,
    run_id: event.runId ?? null,
  };
}

function countsJson(counts: analyticsV1.EngagementCounts | undefined): Json {
  const rate = (value: number | undefined) => value ?? null;
  return {
    sent: counts?.sent ?? 0,
    processed: counts?.processed ?? 0,
    delivered: counts?.delivered ?? 0,
    deferred: counts?.deferred ?? 0,
    dropped: counts?.dropped ?? 0,
    hard_bounces: counts?.hardBounces ?? 0,
    soft_bounces: counts?.softBounces ?? 0,
    spam_reports: counts?.spamReports ?? 0,
    unsubscribes: counts?.unsubscribes ?? 0,
    opens: counts?.opens ?? 0,
    machine_opens: counts?.machineOpens ?? 0,
    unique_opens: counts?.uniqueOpens ?? 0,
    clicks: counts?.clicks ?? 0,
    machine_clicks: counts?.machineClicks ?? 0,
    unique_clicks: counts?.uniqueClicks ?? 0,
    delivery_rate: rate(counts?.deliveryRate),
    open_rate: rate(counts?.openRate),
    click_rate: rate(counts?.clickRate),
    click_to_open_rate: rate(counts?.clickToOpenRate),
    bounce_rate: rate(counts?.bounceRate),
    unsubscribe_rate: rate(counts?.unsubscribeRate),
    spam_report_rate: rate(counts?.spamReportRate),
  };
}

/**
 * Every variant of each campaign in the stats that has variants: the campaign
 * service's variants in its order (zeros where they have no events), then any
 * variant the events name that the campaign no longer has (deleted: no label
 * or weight, inactive). A variant filter keeps its variant only.
 */
function variantsJson(stats: analyticsV1.GetStatsResponse, variantsOf: Map<string, campaignV1.Variant[]>, variantId?: string): Json[] {
  const measured = new Map(stats.variants.map((variant) => [`${variant.campaignId} ${variant.variantId}`, variant.counts]));
  return stats.campaigns.flatMap(({ campaignId }) => {
    const known = (variantsOf.get(campaignId) ?? []).filter((variant) => variantId === undefined || variant.id === variantId);
    const knownIds = new Set(known.map((variant) => variant.id));
    const gone = stats.variants.filter((variant) => variant.campaignId === campaignId && !knownIds.has(variant.variantId));
    return [
      ...known.map((variant) => ({
        campaign_id: campaignId,
        variant_id: variant.id,
        label: variant.label ?? null,
        weight: variant.weight,
        is_active: variant.isActive,
        ...countsJson(measured.get(`${campaignId} ${variant.id}`)),
      })),
      ...gone.map((variant) => ({
        campaign_id: campaignId,
        variant_id: variant.variantId,
        label: null,
        weight: null,
        is_active: false,
        ...countsJson(variant.counts),
      })),
    ];
  });
}

function statsJson(stats: analyticsV1.GetStatsResponse, variantsOf: Map<string, campaignV1.Variant[]>, variantId?: string): Json {
  return {
    totals: countsJson(stats.totals),
    campaigns: stats.campaigns.map((campaign) => ({
      campaign_id: campaign.campaignId,
      ...countsJson(campaign.counts),
      leader_by_open_rate: campaign.leaderByOpenRate ?? null,
      leader_by_click_rate: campaign.leaderByClickRate ?? null,
    })),
    variants: variantsJson(stats, variantsOf, variantId),
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

const CAMPAIGN_PAGE_SIZE = 500;

/**
 * The variants of the campaigns the stats name, by campaign id: labels,
 * weights and activity belong to the campaign service. A campaign that no
 * longer exists has none.
 */
async function campaignVariants(clients: ServiceClients, workspaceId: string, ids: string[]): Promise<Map<string, campaignV1.Variant[]>> {
  if (ids.length === 0) return new Map();
  const service = clients.campaign;
  const listPage = (pageNumber: number) =>
    callService(
      service.listCampaigns.bind(service),
      { workspaceId, ids, page: { page: pageNumber, pageSize: CAMPAIGN_PAGE_SIZE } },
      'query',
    );
  const pages = await Promise.all(Array.from({ length: Math.ceil(ids.length / CAMPAIGN_PAGE_SIZE) }, (_, index) => listPage(index + 1)));
  return new Map(pages.flatMap((answer) => answer.campaigns).map((campaign) => [campaign.id, campaign.variants?.variants ?? []]));
}

/**
 * /campaign-events/ and /campaign-events/stats: HTTP JSON <-> analytics.v1, one call per request; the stats
 * then read the variants of the campaigns they name from campaign.v1.
 */
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
    const filter = eventFilter(req, workspaceIdOf(res));
    const answer = await callService(
      service.getStats.bind(service),
      { filter, interval: req.query.interval === 'hour' ? Interval.INTERVAL_HOUR : Interval.INTERVAL_DAY },
      'query',
    );
    const variantsOf = await campaignVariants(
      clients,
      filter.workspaceId,
      answer.campaigns.map((campaign) => campaign.campaignId),
    );
    res.json(statsJson(answer, variantsOf, filter.variantId));
  });
};
