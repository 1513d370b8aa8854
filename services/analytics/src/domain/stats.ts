import { significantLeader } from '@mail/common';
import type { EventFilter, Interval } from './filter';
import { seriesBuckets } from './series';
import { SUPPRESSION_REASONS, type SuppressionReason } from './suppression';

/** Distinct provider events. */
export interface EventCounts {
  /** Handed over by our own sender. */
  sent: number;
  processed: number;
  delivered: number;
  deferred: number;
  dropped: number;
  hardBounces: number;
  softBounces: number;
  spamReports: number;
  unsubscribes: number;
  /** Every open, machine opens included. */
  opens: number;
  machineOpens: number;
  /** Every click, machine clicks included. */
  clicks: number;
  machineClicks: number;
}

/** Exact distinct addresses. */
export interface UniqueCounts {
  /** Addresses with an open not flagged as machine-generated. */
  uniqueOpens: number;
  /** Addresses with a click not flagged as machine-generated. */
  uniqueClicks: number;
}

/** Undefined when the denominator is 0. */
export interface Rates {
  deliveryRate?: number;
  openRate?: number;
  clickRate?: number;
  clickToOpenRate?: number;
  bounceRate?: number;
  unsubscribeRate?: number;
  spamReportRate?: number;
}

export type Counts = EventCounts & UniqueCounts & Rates;

export const NO_EVENTS: EventCounts = {
  sent: 0,
  processed: 0,
  delivered: 0,
  deferred: 0,
  dropped: 0,
  hardBounces: 0,
  softBounces: 0,
  spamReports: 0,
  unsubscribes: 0,
  opens: 0,
  machineOpens: 0,
  clicks: 0,
  machineClicks: 0,
};
const NO_UNIQUES: UniqueCounts = { uniqueOpens: 0, uniqueClicks: 0 };

const ratio = (part: number, whole: number): number | undefined => (whole === 0 ? undefined : part / whole);

export function rates(events: EventCounts, uniques: UniqueCounts): Rates {
  return {
    deliveryRate: ratio(events.delivered, events.processed),
    openRate: ratio(uniques.uniqueOpens, events.delivered),
    clickRate: ratio(uniques.uniqueClicks, events.delivered),
    clickToOpenRate: ratio(uniques.uniqueClicks, uniques.uniqueOpens),
    bounceRate: ratio(events.hardBounces + events.softBounces, events.processed),
    unsubscribeRate: ratio(events.unsubscribes, events.delivered),
    spamReportRate: ratio(events.spamReports, events.delivered),
  };
}

export function counts(events: EventCounts = NO_EVENTS, uniques: UniqueCounts = NO_UNIQUES): Counts {
  return { ...events, ...uniques, ...rates(events, uniques) };
}

export function addEvents(a: EventCounts, b: EventCounts): EventCounts {
  const sum = { ...a };
  for (const key of Object.keys(NO_EVENTS) as (keyof EventCounts)[]) sum[key] += b[key];
  return sum;
}

/** A campaign and one of its variants. */
export interface VariantKey {
  campaignId: string;
  variantId: string;
}

export interface StatsInput {
  filter: EventFilter;
  interval: Interval;
  campaignEvents: Map<string, EventCounts>;
  campaignUniques: Map<string, UniqueCounts>;
  /** Keyed by `${campaignId} ${variantId}`; the events attributed to a variant only. */
  variantEvents: Map<string, EventCounts>;
  variantUniques: Map<string, UniqueCounts>;
  /** Keyed by bucket start in epoch milliseconds. */
  bucketEvents: Map<number, EventCounts>;
  bucketUniques: Map<number, UniqueCounts>;
  totalUniques: UniqueCounts;
  suppressions: Map<string, number>;
}

export interface CampaignStats {
  campaignId: string;
  counts: Counts;
  /** Undefined without variants, or without a significant leader. */
  leaderByOpenRate?: string;
  leaderByClickRate?: string;
}

export interface Stats {
  totals: Counts;
  campaigns: CampaignStats[];
  variants: (VariantKey & { counts: Counts })[];
  series: { bucketStart: Date; counts: Counts }[];
  suppressions: Record<'total' | SuppressionReason, number>;
}

export const variantKey = (key: VariantKey): string => `${key.campaignId} ${key.variantId}`;

function parseVariantKey(key: string): VariantKey {
  const [campaignId, variantId] = key.split(' ');
  return { campaignId, variantId };
}

/**
 * Assembles the dashboard: totals are the sum of the campaigns (every event
 * has one) with their own distinct-address counts; campaigns, and variants
 * within them, in id order, each campaign with its variant leaders; the
 * series as seriesBuckets lays it out.
 */
export function assembleStats(input: StatsInput): Stats {
  const buckets = seriesBuckets(
    input.filter,
    input.interval,
    [...input.bucketEvents.keys()].map((ms) => new Date(ms)),
  );
  const suppressions = Object.fromEntries(SUPPRESSION_REASONS.map((reason) => [reason, input.suppressions.get(reason) ?? 0]));
  const variants = [...input.variantEvents.keys()].sort().map((key) => ({
    ...parseVariantKey(key),
    counts: counts(input.variantEvents.get(key), input.variantUniques.get(key)),
  }));
  const leader = (campaignId: string, successes: (counts: Counts) => number) => {
    const own = variants.filter((variant) => variant.campaignId === campaignId);
    return significantLeader(
      own.map((variant) => ({ variantId: variant.variantId, successes: successes(variant.counts), trials: variant.counts.delivered })),
    );
  };
  return {
    totals: counts([...input.campaignEvents.values()].reduce(addEvents, NO_EVENTS), input.totalUniques),
    campaigns: [...input.campaignEvents.keys()].sort().map((campaignId) => ({
      campaignId,
      counts: counts(input.campaignEvents.get(campaignId), input.campaignUniques.get(campaignId)),
      leaderByOpenRate: leader(campaignId, (variant) => variant.uniqueOpens),
      leaderByClickRate: leader(campaignId, (variant) => variant.uniqueClicks),
    })),
    variants,
    series: buckets.map((bucketStart) => ({
      bucketStart,
      counts: counts(input.bucketEvents.get(bucketStart.getTime()), input.bucketUniques.get(bucketStart.getTime())),
    })),
    suppressions: {
      total: Object.values(suppressions).reduce((sum, n) => sum + n, 0),
      ...(suppressions as Record<SuppressionReason, number>),
    },
  };
}
