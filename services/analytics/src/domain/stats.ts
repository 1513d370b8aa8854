import type { EventFilter, Interval } from './filter';
import { seriesBuckets } from './series';
import { SUPPRESSION_REASONS, type SuppressionReason } from './suppression';

export interface Counts {
  opens: number;
  uniqueOpens: number;
  clicks: number;
  uniqueClicks: number;
  /** uniqueClicks / uniqueOpens; 0 when nothing was opened. */
  clickToOpenRate: number;
  hardBounces: number;
  softBounces: number;
  unsubscribes: number;
}

export type EventCounts = Pick<Counts, 'opens' | 'clicks' | 'hardBounces' | 'softBounces' | 'unsubscribes'>;
export type UniqueCounts = Pick<Counts, 'uniqueOpens' | 'uniqueClicks'>;

const NO_EVENTS: EventCounts = { opens: 0, clicks: 0, hardBounces: 0, softBounces: 0, unsubscribes: 0 };
const NO_UNIQUES: UniqueCounts = { uniqueOpens: 0, uniqueClicks: 0 };

export function counts(events: EventCounts = NO_EVENTS, uniques: UniqueCounts = NO_UNIQUES): Counts {
  return {
    ...events,
    ...uniques,
    clickToOpenRate: uniques.uniqueOpens === 0 ? 0 : uniques.uniqueClicks / uniques.uniqueOpens,
  };
}

function add(a: EventCounts, b: EventCounts): EventCounts {
  return {
    opens: a.opens + b.opens,
    clicks: a.clicks + b.clicks,
    hardBounces: a.hardBounces + b.hardBounces,
    softBounces: a.softBounces + b.softBounces,
    unsubscribes: a.unsubscribes + b.unsubscribes,
  };
}

export interface StatsInput {
  filter: EventFilter;
  interval: Interval;
  campaignEvents: Map<string, EventCounts>;
  campaignUniques: Map<string, UniqueCounts>;
  /** Keyed by bucket start in epoch milliseconds. */
  bucketEvents: Map<number, EventCounts>;
  bucketUniques: Map<number, UniqueCounts>;
  totalUniques: UniqueCounts;
  suppressions: Map<string, number>;
}

export interface Stats {
  totals: Counts;
  campaigns: { campaignId: string; counts: Counts }[];
  series: { bucketStart: Date; counts: Counts }[];
  suppressions: Record<'total' | SuppressionReason, number>;
}

/**
 * Assembles the dashboard: totals are the sum of the campaigns (every event
 * has one) with their own distinct-address counts; campaigns in id order; the
 * series as seriesBuckets lays it out.
 */
export function assembleStats(input: StatsInput): Stats {
  const buckets = seriesBuckets(
    input.filter,
    input.interval,
    [...input.bucketEvents.keys()].map((ms) => new Date(ms)),
  );
  const suppressions = Object.fromEntries(SUPPRESSION_REASONS.map((reason) => [reason, input.suppressions.get(reason) ?? 0]));
  return {
    totals: counts([...input.campaignEvents.values()].reduce(add, NO_EVENTS), input.totalUniques),
    campaigns: [...input.campaignEvents.keys()].sort().map((campaignId) => ({
      campaignId,
      counts: counts(input.campaignEvents.get(campaignId), input.campaignUniques.get(campaignId)),
    })),
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
