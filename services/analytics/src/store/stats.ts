import { chsql } from '@mail/common';
import type { EventFilter, Interval } from '../domain/filter';
import type { EventCounts, StatsInput, UniqueCounts } from '../domain/stats';
import type { EventStore } from './connection';
import { DISTINCT_ADDRESSES, DISTINCT_EVENTS, eventConditions } from './conditions';
import { suppressedAddresses } from './suppressions';

const { raw, sql } = chsql;

const TOP_LINKS = 10;

const BUCKET_FUNCTION: Record<Interval, chsql.SqlFragment> = {
  hour: raw.trusted('toStartOfHour'),
  day: raw.trusted('toStartOfDay'),
};

/** ClickHouse sends 64-bit numbers as strings. */
interface CountRow {
  /** 1: per campaign, 2: per bucket. */
  grouping: number;
  campaign: string;
  /** Unix seconds. */
  bucket: number;
  opens: string;
  clicks: string;
  hard_bounces: string;
  soft_bounces: string;
  unsubscribes: string;
}

interface UniqueRow {
  key: string | number;
  unique_opens: string;
  unique_clicks: string;
}

export interface Link {
  campaignId: string;
  url: string;
  clicks: number;
  uniqueClicks: number;
}

export type StatsData = Omit<StatsInput, 'filter' | 'interval'> & { links: Link[] };

const eventCounts = (row: CountRow): EventCounts => ({
  opens: Number(row.opens),
  clicks: Number(row.clicks),
  hardBounces: Number(row.hard_bounces),
  softBounces: Number(row.soft_bounces),
  unsubscribes: Number(row.unsubscribes),
});

const uniqueCounts = (row: UniqueRow): UniqueCounts => ({
  uniqueOpens: Number(row.unique_opens),
  uniqueClicks: Number(row.unique_clicks),
});

/**
 * The stats reads, run at once. Counts are deduplicated per (campaign,
 * bucket, type) and then summed twice, per campaign and per bucket, through
 * ARRAY JOIN (ClickHouse 18.16 has no GROUPING SETS); distinct addresses do
 * not add up, so each level counts them itself.
 */
export async function readStats(store: EventStore, filter: EventFilter, interval: Interval): Promise<StatsData> {
  const where = eventConditions(filter);
  const bucket = sql`toUInt32(${BUCKET_FUNCTION[interval]}(occurred_at))`;
  const engaged = sql`${where} AND event_type IN ('open', 'click')`;
  const uniques = (key: chsql.SqlFragment, totals: chsql.SqlFragment) => sql`
    SELECT ${key} AS key,
      uniqExactIf(cityHash64(email), event_type = 'open') AS unique_opens,
      uniqExactIf(cityHash64(email), event_type = 'click') AS unique_clicks
    FROM engagement_events WHERE ${engaged} GROUP BY key ${totals}`;

  const [counts, campaignUniques, bucketUniques, links, suppressions] = await Promise.all([
    store.rows<CountRow>(sql`
      SELECT grouping,
        toString(if(grouping = 1, campaign_id, toUUID('00000000-0000-0000-0000-000000000000'))) AS campaign,
        if(grouping = 2, bucket_start, 0) AS bucket,
        sumIf(events, event_type = 'open') AS opens,
        sumIf(events, event_type = 'click') AS clicks,
        sumIf(events, bounce_type = 'hard') AS hard_bounces,
        sumIf(events, bounce_type = 'soft') AS soft_bounces,
        sumIf(events, event_type = 'unsubscribe') AS unsubscribes
      FROM (
        SELECT campaign_id, ${bucket} AS bucket_start, event_type, bounce_type, ${DISTINCT_EVENTS} AS events
        FROM engagement_events WHERE ${where}
        GROUP BY campaign_id, bucket_start, event_type, bounce_type
      )
      ARRAY JOIN [1, 2] AS grouping
      GROUP BY grouping, campaign, bucket`),
    // The totals row counts the distinct addresses of all campaigns together, in the same scan.
    store.rowsWithTotals<UniqueRow>(uniques(raw.trusted('toString(campaign_id)'), raw.trusted('WITH TOTALS'))),
    store.rows<UniqueRow>(uniques(bucket, raw.trusted(''))),
    store.rows<{ campaign_id: string; link: string; clicks: string; unique_clicks: string }>(sql`
      SELECT campaign_id, assumeNotNull(url) AS link,
        ${DISTINCT_EVENTS} AS clicks, ${DISTINCT_ADDRESSES} AS unique_clicks
      FROM engagement_events WHERE ${where} AND event_type = 'click' AND isNotNull(url)
      GROUP BY campaign_id, link
      ORDER BY clicks DESC, unique_clicks DESC, link, campaign_id
      LIMIT ${chsql.int(TOP_LINKS)}`),
    store.rows<{ reason: string; addresses: string }>(sql`
      SELECT reason, count() AS addresses
      FROM (${suppressedAddresses(filter.workspaceId, { email: filter.email, from: filter.from, before: filter.before })})
      GROUP BY reason`),
  ]);
  const ms = (unixSeconds: string | number) => Number(unixSeconds) * 1000;
  return {
    campaignEvents: new Map(counts.filter((row) => row.grouping === 1).map((row) => [row.campaign, eventCounts(row)])),
    bucketEvents: new Map(counts.filter((row) => row.grouping === 2).map((row) => [ms(row.bucket), eventCounts(row)])),
    campaignUniques: new Map(campaignUniques.rows.map((row) => [String(row.key), uniqueCounts(row)])),
    bucketUniques: new Map(bucketUniques.map((row) => [ms(row.key), uniqueCounts(row)])),
    totalUniques: campaignUniques.totals ? uniqueCounts(campaignUniques.totals) : { uniqueOpens: 0, uniqueClicks: 0 },
    links: links.map((row) => ({
      campaignId: row.campaign_id,
      url: row.link,
      clicks: Number(row.clicks),
      uniqueClicks: Number(row.unique_clicks),
    })),
    suppressions: new Map(suppressions.map((row) => [row.reason, Number(row.addresses)])),
  };
}
