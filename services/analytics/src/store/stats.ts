import { chsql, ENGAGED_EVENTS, NO_VARIANT } from '@mail/event-store';
import type { EventFilter, Interval } from '../domain/filter';
import { addEvents, NO_EVENTS, type EventCounts, type StatsInput, type UniqueCounts } from '../domain/stats';
import type { EventStore } from './connection';
import { DISTINCT_EVENTS } from './conditions';
import { readPlanned, rowsOnly, unionAll, type ReadPlan } from './read-plan';
import { suppressedAddresses } from './suppressions';

const { raw, sql, uuid } = chsql;

const TOP_LINKS = 10;

const BUCKET_FUNCTION: Record<Interval, chsql.SqlFragment> = {
  hour: raw.trusted('toStartOfHour'),
  day: raw.trusted('toStartOfDay'),
};

/** ClickHouse sends 64-bit numbers as strings. */
interface CountRow {
  /** `${campaign id} ${variant id}`, or a bucket start in unix seconds. */
  key: string | number;
  sent: string;
  processed: string;
  delivered: string;
  deferred: string;
  dropped: string;
  hard_bounces: string;
  soft_bounces: string;
  spam_reports: string;
  unsubscribes: string;
  opens: string;
  machine_opens: string;
  clicks: string;
  machine_clicks: string;
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
  sent: Number(row.sent),
  processed: Number(row.processed),
  delivered: Number(row.delivered),
  deferred: Number(row.deferred),
  dropped: Number(row.dropped),
  hardBounces: Number(row.hard_bounces),
  softBounces: Number(row.soft_bounces),
  spamReports: Number(row.spam_reports),
  unsubscribes: Number(row.unsubscribes),
  opens: Number(row.opens),
  machineOpens: Number(row.machine_opens),
  clicks: Number(row.clicks),
  machineClicks: Number(row.machine_clicks),
});

/** The sums of the variant rows (`${campaign id} ${variant id}`) per campaign. */
function perCampaign(variantRows: CountRow[]): Map<string, EventCounts> {
  const campaigns = new Map<string, EventCounts>();
  for (const row of variantRows) {
    const campaignId = String(row.key).split(' ')[0];
    campaigns.set(campaignId, addEvents(campaigns.get(campaignId) ?? NO_EVENTS, eventCounts(row)));
  }
  return campaigns;
}

const isVariant = (row: { key: string | number }) => !String(row.key).endsWith(` ${NO_VARIANT}`);

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
 * campaign, per variant, per bucket, or per link (ClickHouse 18.16 has no
 * GROUPING SETS). Event counts are read per variant and summed per campaign;
 * distinct addresses do not add up, so each level merges the sets itself.
 */
export function readStats(store: EventStore, filter: EventFilter, interval: Interval): Promise<StatsData> {
  return readPlanned(store, filter, true, (plan) => readStatsOf(store, filter, interval, plan));
}

async function readStatsOf(store: EventStore, filter: EventFilter, interval: Interval, plan: ReadPlan): Promise<StatsData> {
  // Per campaign, per variant and per link, whole days come from the rollups whatever the interval; hourly buckets need rows.
  const campaign: GroupKey = { rollup: raw.trusted('toString(campaign_id)'), row: raw.trusted('toString(campaign_id)'), plan };
  const variantKey = raw.trusted("concat(toString(campaign_id), ' ', toString(variant_id))");
  const variant: GroupKey = { rollup: variantKey, row: variantKey, plan };
  const bucket: GroupKey = {
    rollup: raw.trusted('toUInt32(toUInt32(day) * 86400)'),
    row: sql`toUInt32(${BUCKET_FUNCTION[interval]}(occurred_at))`,
    plan: interval === 'day' ? plan : rowsOnly(filter, plan),
  };

  const countsBy = (key: GroupKey) =>
    unionAll([
      key.plan.rollups &&
        sql`SELECT ${key.rollup} AS key, event_type, bounce_type, machine_open, countMerge(events) AS events
          FROM event_rollup_daily WHERE ${key.plan.rollups.events}
          GROUP BY key, event_type, bounce_type, machine_open`,
      ...key.plan.uncovered.map(
        (rows) => sql`SELECT ${key.row} AS key, event_type, bounce_type, machine_open, ${DISTINCT_EVENTS} AS events
          FROM ${rows.table} WHERE ${rows.where}
          GROUP BY key, event_type, bounce_type, machine_open`,
      ),
    ]);
  const readCounts = (key: GroupKey) =>
    readFrom(
      countsBy(key),
      (from) =>
        store.rows<CountRow>(sql`
          SELECT key,
            sumIf(events, event_type = 'sent') AS sent,
            sumIf(events, event_type = 'processed') AS processed,
            sumIf(events, event_type = 'delivered') AS delivered,
            sumIf(events, event_type = 'deferred') AS deferred,
            sumIf(events, event_type = 'dropped') AS dropped,
            sumIf(events, event_type = 'bounce' AND bounce_type = 'hard') AS hard_bounces,
            sumIf(events, event_type = 'bounce' AND bounce_type = 'soft') AS soft_bounces,
            sumIf(events, event_type = 'spamreport') AS spam_reports,
            sumIf(events, event_type = 'unsubscribe') AS unsubscribes,
            sumIf(events, event_type = 'open') AS opens,
            sumIf(events, event_type = 'open' AND machine_open = 1) AS machine_opens,
            sumIf(events, event_type = 'click') AS clicks,
            sumIf(events, event_type = 'click' AND machine_open = 1) AS machine_clicks
          FROM (${from})
          GROUP BY key`),
      [],
    );
  const addressSetsBy = (key: GroupKey, only: chsql.SqlFragment = raw.trusted('1')) =>
    unionAll([
      key.plan.rollups &&
        sql`SELECT ${key.rollup} AS key, event_type, engaged_addresses AS addresses
          FROM event_rollup_daily WHERE ${key.plan.rollups.events} AND ${ENGAGED_EVENTS} AND ${only}`,
      ...key.plan.uncovered.map(
        (rows) => sql`SELECT ${key.row} AS key, event_type, uniqExactState(cityHash64(email)) AS addresses
          FROM ${rows.table} WHERE ${rows.where} AND ${ENGAGED_EVENTS} AND ${only}
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

  const attributed = sql`variant_id != ${uuid(NO_VARIANT)}`;
  const [variantCounts, bucketCounts, campaignUniques, variantUniques, bucketUniques, topLinks, suppressions] = await Promise.all([
    // Event counts add up: the campaigns' are the sums of their variants' (and of their events of no variant).
    readCounts(variant),
    readCounts(bucket),
    // The totals row counts the distinct addresses of all campaigns together, in the same read.
    readFrom(addressSetsBy(campaign), (from) => store.rowsWithTotals<UniqueRow>(uniques(from, raw.trusted('WITH TOTALS'))), { rows: [] }),
    readFrom(addressSetsBy(variant, attributed), (from) => store.rows<UniqueRow>(uniques(from, raw.trusted(''))), []),
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
    campaignEvents: perCampaign(variantCounts),
    variantEvents: new Map(variantCounts.filter(isVariant).map((row) => [String(row.key), eventCounts(row)])),
    variantUniques: new Map(variantUniques.map((row) => [String(row.key), uniqueCounts(row)])),
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
