import { chsql } from '@mail/event-store';
import type { EventFilter, Interval } from '../domain/filter';
import type { EventCounts, StatsInput, UniqueCounts } from '../domain/stats';
import type { EventStore } from './connection';
import { DISTINCT_EVENTS } from './conditions';
import { readPlanned, rowsOnly, unionAll, type ReadPlan } from './read-plan';
import { suppressedAddresses } from './suppressions';

const { raw, sql } = chsql;

const TOP_LINKS = 10;

const BUCKET_FUNCTION: Record<Interval, chsql.SqlFragment> = {
  hour: raw.trusted('toStartOfHour'),
  day: raw.trusted('toStartOfDay'),
};

/** ClickHouse sends 64-bit numbers as strings. */
interface CountRow {
  /** A campaign id, or a bucket start in unix seconds. */
  key: string | number;
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

/** A key of the stats groups, as read from the daily rollups and from rows, and the plan its reads follow. */
interface GroupKey {
  rollup: chsql.SqlFragment;
  row: chsql.SqlFragment;
  plan: ReadPlan;
}

/** Runs the query over `from`, or answers `none` when there is nothing to read. */
function readFrom<T>(from: chsql.SqlFragment | undefined, query: (from: chsql.SqlFragment) => Promise<T>, none: T): Promise<T> {
  return from ? query(from) : Promise.resolve(none);
}

/**
 * The stats reads, run at once. Whole settled days come from the daily
 * rollups (event counts, and sets of address hashes merged at read time),
 * the rest from rows deduplicated per event; each read adds the two up per
 * campaign, per bucket, or per link (ClickHouse 18.16 has no GROUPING SETS).
 * Distinct addresses do not add up, so each level merges the sets itself.
 */
export function readStats(store: EventStore, filter: EventFilter, interval: Interval): Promise<StatsData> {
  return readPlanned(store, filter, true, (plan) => readStatsOf(store, filter, interval, plan));
}

async function readStatsOf(store: EventStore, filter: EventFilter, interval: Interval, plan: ReadPlan): Promise<StatsData> {
  // Per campaign and per link, whole days come from the rollups whatever the interval; hourly buckets need rows.
  const campaign: GroupKey = { rollup: raw.trusted('toString(campaign_id)'), row: raw.trusted('toString(campaign_id)'), plan };
  const bucket: GroupKey = {
    rollup: raw.trusted('toUInt32(toUInt32(day) * 86400)'),
    row: sql`toUInt32(${BUCKET_FUNCTION[interval]}(occurred_at))`,
    plan: interval === 'day' ? plan : rowsOnly(filter, plan),
  };

  const countsBy = (key: GroupKey) =>
    unionAll([
      key.plan.rollups &&
        sql`SELECT ${key.rollup} AS key, event_type, bounce_type, countMerge(events) AS events
          FROM event_rollup_daily WHERE ${key.plan.rollups.events}
          GROUP BY key, event_type, bounce_type`,
      ...key.plan.uncovered.map(
        (rows) => sql`SELECT ${key.row} AS key, event_type, bounce_type, ${DISTINCT_EVENTS} AS events
          FROM ${rows.table} WHERE ${rows.where}
          GROUP BY key, event_type, bounce_type`,
      ),
    ]);
  const readCounts = (key: GroupKey) =>
    readFrom(
      countsBy(key),
      (from) =>
        store.rows<CountRow>(sql`
          SELECT key,
            sumIf(events, event_type = 'open') AS opens,
            sumIf(events, event_type = 'click') AS clicks,
            sumIf(events, bounce_type = 'hard') AS hard_bounces,
            sumIf(events, bounce_type = 'soft') AS soft_bounces,
            sumIf(events, event_type = 'unsubscribe') AS unsubscribes
          FROM (${from})
          GROUP BY key`),
      [],
    );
  const addressSetsBy = (key: GroupKey) =>
    unionAll([
      key.plan.rollups &&
        sql`SELECT ${key.rollup} AS key, event_type, addresses
          FROM event_rollup_daily WHERE ${key.plan.rollups.events} AND event_type IN ('open', 'click')`,
      ...key.plan.uncovered.map(
        (rows) => sql`SELECT ${key.row} AS key, event_type, uniqExactState(cityHash64(email)) AS addresses
          FROM ${rows.table} WHERE ${rows.where} AND event_type IN ('open', 'click')
          GROUP BY key, event_type`,
      ),
    ]);
  const uniques = (from: chsql.SqlFragment, totals: chsql.SqlFragment) => sql`
    SELECT key,
      uniqExactMergeIf(addresses, event_type = 'open') AS unique_opens,
      uniqExactMergeIf(addresses, event_type = 'click') AS unique_clicks
    FROM (${from})
    GROUP BY key ${totals}`;
  const linkRollups = plan.rollups?.links;
  const links = unionAll([
    linkRollups &&
      sql`SELECT campaign_id, url AS link, countMerge(clicks) AS clicks, uniqExactMergeState(addresses) AS addresses
        FROM link_rollup_daily WHERE ${linkRollups}
        GROUP BY campaign_id, link`,
    ...plan.uncovered.map(
      (
        rows,
      ) => sql`SELECT campaign_id, assumeNotNull(url) AS link, ${DISTINCT_EVENTS} AS clicks, uniqExactState(cityHash64(email)) AS addresses
        FROM ${rows.table} WHERE ${rows.where} AND event_type = 'click' AND isNotNull(url)
        GROUP BY campaign_id, link`,
    ),
  ]);

  const [campaignCounts, bucketCounts, campaignUniques, bucketUniques, topLinks, suppressions] = await Promise.all([
    readCounts(campaign),
    readCounts(bucket),
    // The totals row counts the distinct addresses of all campaigns together, in the same read.
    readFrom(addressSetsBy(campaign), (from) => store.rowsWithTotals<UniqueRow>(uniques(from, raw.trusted('WITH TOTALS'))), { rows: [] }),
    readFrom(addressSetsBy(bucket), (from) => store.rows<UniqueRow>(uniques(from, raw.trusted(''))), []),
    readFrom(
      links,
      (from) =>
        store.rows<{ campaign_id: string; link: string; clicks: string; unique_clicks: string }>(sql`
          SELECT campaign_id, link, sum(clicks) AS clicks, uniqExactMerge(addresses) AS unique_clicks
          FROM (${from})
          GROUP BY campaign_id, link
          ORDER BY clicks DESC, unique_clicks DESC, link, campaign_id
          LIMIT ${chsql.int(TOP_LINKS)}`),
      [],
    ),
    store.rows<{ reason: string; addresses: string }>(sql`
      SELECT reason, count() AS addresses
      FROM (${suppressedAddresses(filter.workspaceId, { email: filter.email, from: filter.from, before: filter.before })})
      GROUP BY reason`),
  ]);
  const ms = (unixSeconds: string | number) => Number(unixSeconds) * 1000;
  return {
    campaignEvents: new Map(campaignCounts.map((row) => [String(row.key), eventCounts(row)])),
    bucketEvents: new Map(bucketCounts.map((row) => [ms(row.key), eventCounts(row)])),
    campaignUniques: new Map(campaignUniques.rows.map((row) => [String(row.key), uniqueCounts(row)])),
    bucketUniques: new Map(bucketUniques.map((row) => [ms(row.key), uniqueCounts(row)])),
    totalUniques: campaignUniques.totals ? uniqueCounts(campaignUniques.totals) : { uniqueOpens: 0, uniqueClicks: 0 },
    links: topLinks.map((row) => ({
      campaignId: row.campaign_id,
      url: row.link,
      clicks: Number(row.clicks),
      uniqueClicks: Number(row.unique_clicks),
    })),
    suppressions: new Map(suppressions.map((row) => [row.reason, Number(row.addresses)])),
  };
}
