import { randomUUID } from 'node:crypto';
import type { eventsV1 } from '@mail/proto';
import { ENGAGEMENT_EVENT_TYPES, NO_VARIANT } from '@mail/event-store';
import { EventType, Interval, event, startAnalytics, type Analytics, type EventRow } from './harness';

/**
 * Reads answered from the daily rollups (whole settled days) and from rows
 * (partial days, unsettled days, one address) must equal the exact answer
 * computed here from the distinct events: every count and rate, per
 * campaign, per variant and per bucket.
 */
const W = randomUUID();
const C1 = '00000000-0000-4000-8000-0000000000c1';
const C2 = '00000000-0000-4000-8000-0000000000c2';
const VARIANTS = [NO_VARIANT, '00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000a2'];
const DAYS = ['2026-04-01', '2026-04-02', '2026-04-03', '2026-04-04', '2026-04-05'];
/** Holds copies of some events, as a fault can leave them; marked unsettled. */
const DUPLICATED_DAY = '2026-04-03';
/** Its rollups hold events that are not stored, as a fault can leave them; marked unsettled. */
const SKEWED_DAY = '2026-04-04';

let analytics: Analytics;
const stored: EventRow[] = [];

function generated(): EventRow[] {
  const types = [
    'open',
    'open',
    'open',
    'click',
    'click',
    'bounce',
    'bounce',
    'unsubscribe',
    'processed',
    'processed',
    'delivered',
    'delivered',
    'deferred',
    'dropped',
    'spamreport',
    'sent',
  ] as const;
  return Array.from({ length: 600 }, (_, i) => {
    const type = types[(i * 7) % types.length];
    const seconds = (i * 7919) % 86_400;
    const time = new Date(Date.parse(`${DAYS[i % DAYS.length]}T00:00:00Z`) + seconds * 1000).toISOString();
    return event({
      workspace_id: W,
      campaign_id: (i * 13) % 3 === 0 ? C2 : C1,
      variant_id: VARIANTS[(i * 5) % VARIANTS.length],
      event_type: type,
      bounce_type: type === 'bounce' ? (i % 2 === 0 ? 'hard' : 'soft') : 'none',
      bounce_class: type === 'bounce' ? 'invalid_address' : 'none',
      machine_open: type === 'open' && i % 4 === 0 ? 1 : 0,
      email: `r${(i * 31) % 17}@example.com`,
      occurred_at: time,
      received_at: time,
      url: type === 'click' ? `https://example.com/${i % 3}` : null,
    });
  });
}

beforeAll(async () => {
  analytics = await startAnalytics('analytics_rollups');
  const rows = generated();
  stored.push(...rows);
  for (let start = 0; start < rows.length; start += 100) await analytics.insertEvents(rows.slice(start, start + 100));
  await analytics.insertEvents([event({ workspace_id: randomUUID(), campaign_id: C1, occurred_at: '2026-04-02T10:00:00Z' })]);
  await analytics.insertFaultCopies(
    rows
      .filter((row) => row.occurred_at.startsWith(DUPLICATED_DAY))
      .slice(0, 12)
      .map((row) => ({ ...row, id: randomUUID() })),
  );
  await analytics.clickhouse.command({
    query: `INSERT INTO event_rollup_daily
      SELECT toUUID('${W}'), toDate('${SKEWED_DAY}'), toUUID('${C1}'), toUUID('${NO_VARIANT}'), 'open', 'none', 0,
        countState(), uniqExactState(number) FROM numbers(5)`,
  });
  await analytics.clickhouse.command({
    query: `INSERT INTO link_rollup_daily
      SELECT toUUID('${W}'), toDate('${SKEWED_DAY}'), toUUID('${C1}'), toUUID('${NO_VARIANT}'), 'https://example.com/0',
        countState(), uniqExactState(number) FROM numbers(50)`,
  });
  await analytics.markUnsettled(W, [SKEWED_DAY]);
});

afterAll(() => analytics.close());

interface Filter {
  eventType?: eventsV1.EventType;
  campaignId?: string;
  variantId?: string;
  email?: string;
  occurredFrom?: Date;
  occurredBefore?: Date;
}

const TYPES: Record<string, EventRow['event_type']> = {
  [EventType.EVENT_TYPE_OPEN]: 'open',
  [EventType.EVENT_TYPE_CLICK]: 'click',
  [EventType.EVENT_TYPE_BOUNCE]: 'bounce',
  [EventType.EVENT_TYPE_UNSUBSCRIBE]: 'unsubscribe',
  [EventType.EVENT_TYPE_DELIVERED]: 'delivered',
};

/** The events the stats count: every type unless one is asked for. */
function matching(filter: Filter): EventRow[] {
  return stored.filter((row) => {
    const time = new Date(row.occurred_at);
    return (
      (filter.eventType === undefined || row.event_type === TYPES[filter.eventType]) &&
      (filter.campaignId === undefined || row.campaign_id === filter.campaignId) &&
      (filter.variantId === undefined || row.variant_id === filter.variantId) &&
      (filter.email === undefined || row.email === filter.email) &&
      (filter.occurredFrom === undefined || time >= filter.occurredFrom) &&
      (filter.occurredBefore === undefined || time < filter.occurredBefore)
    );
  });
}

/** The events the list shows: the engagement types unless a type is asked for. */
function listed(filter: Filter): EventRow[] {
  const engagement: readonly string[] = ENGAGEMENT_EVENT_TYPES;
  return matching(filter).filter((row) => filter.eventType !== undefined || engagement.includes(row.event_type));
}

/** A rate as the proto carries it: absent (undefined) on a zero denominator. */
const ratio = (part: number, whole: number) => (whole === 0 ? undefined : part / whole);

function expectedCounts(rows: EventRow[]) {
  const count = (test: (row: EventRow) => boolean) => rows.filter(test).length;
  const distinct = (test: (row: EventRow) => boolean) => new Set(rows.filter(test).map((row) => row.email)).size;
  const processed = count((row) => row.event_type === 'processed');
  const delivered = count((row) => row.event_type === 'delivered');
  const hardBounces = count((row) => row.bounce_type === 'hard');
  const softBounces = count((row) => row.bounce_type === 'soft');
  const unsubscribes = count((row) => row.event_type === 'unsubscribe');
  const spamReports = count((row) => row.event_type === 'spamreport');
  const uniqueOpens = distinct((row) => row.event_type === 'open' && row.machine_open === 0);
  // One stored machine flag: machine_open marks machine opens and machine clicks alike.
  const uniqueClicks = distinct((row) => row.event_type === 'click' && row.machine_open === 0);
  return {
    sent: count((row) => row.event_type === 'sent'),
    processed,
    delivered,
    deferred: count((row) => row.event_type === 'deferred'),
    dropped: count((row) => row.event_type === 'dropped'),
    hardBounces,
    softBounces,
    spamReports,
    unsubscribes,
    opens: count((row) => row.event_type === 'open'),
    machineOpens: count((row) => row.event_type === 'open' && row.machine_open === 1),
    uniqueOpens,
    clicks: count((row) => row.event_type === 'click'),
    machineClicks: count((row) => row.event_type === 'click' && row.machine_open === 1),
    uniqueClicks,
    deliveryRate: ratio(delivered, processed),
    openRate: ratio(uniqueOpens, delivered),
    clickRate: ratio(uniqueClicks, delivered),
    clickToOpenRate: ratio(uniqueClicks, uniqueOpens),
    bounceRate: ratio(hardBounces + softBounces, processed),
    unsubscribeRate: ratio(unsubscribes, delivered),
    spamReportRate: ratio(spamReports, delivered),
  };
}

/** Each campaign's variants (events of no variant left out), in campaign then variant order. */
function expectedVariants(rows: EventRow[]) {
  return [
    ...groupBy(
      rows.filter((row) => row.variant_id !== NO_VARIANT),
      (row) => `${row.campaign_id} ${row.variant_id}`,
    ),
  ]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, group]) => ({ campaignId: group[0].campaign_id, variantId: group[0].variant_id, counts: expectedCounts(group) }));
}

function groupBy(rows: EventRow[], key: (row: EventRow) => string): Map<string, EventRow[]> {
  const groups = new Map<string, EventRow[]>();
  for (const row of rows) groups.set(key(row), [...(groups.get(key(row)) ?? []), row]);
  return groups;
}

function expectedLinks(rows: EventRow[]) {
  const clicks = groupBy(
    rows.filter((row) => row.event_type === 'click' && row.url !== null),
    (row) => `${row.campaign_id} ${row.url}`,
  );
  return [...clicks.values()]
    .map((group) => ({
      campaignId: group[0].campaign_id,
      url: group[0].url!,
      clicks: group.length,
      uniqueClicks: new Set(group.map((row) => row.email)).size,
    }))
    .sort(
      (a, b) =>
        b.clicks - a.clicks || b.uniqueClicks - a.uniqueClicks || a.url.localeCompare(b.url) || a.campaignId.localeCompare(b.campaignId),
    )
    .slice(0, 10);
}

const at = (iso: string) => new Date(iso);
const RANGES: [string, Pick<Filter, 'occurredFrom' | 'occurredBefore'>][] = [
  ['all time', {}],
  [
    'partial days at both ends, unsettled days inside',
    { occurredFrom: at('2026-04-01T06:00:00Z'), occurredBefore: at('2026-04-04T18:00:00Z') },
  ],
  ['whole days only', { occurredFrom: at('2026-04-02T00:00:00Z'), occurredBefore: at('2026-04-05T00:00:00Z') }],
  ['whole settled days only', { occurredFrom: at('2026-04-01T00:00:00Z'), occurredBefore: at('2026-04-03T00:00:00Z') }],
  ['within one day', { occurredFrom: at('2026-04-03T05:00:00Z'), occurredBefore: at('2026-04-03T17:00:00.500Z') }],
  ['open start, partial end', { occurredBefore: at('2026-04-02T12:00:00Z') }],
  ['partial start, open end', { occurredFrom: at('2026-04-04T12:00:00Z') }],
];
const FILTERS: [string, Filter][] = [
  ['no filter', {}],
  ['clicks', { eventType: EventType.EVENT_TYPE_CLICK }],
  ['bounces', { eventType: EventType.EVENT_TYPE_BOUNCE }],
  ['one campaign', { campaignId: C2 }],
  ['one address', { email: 'r3@example.com' }],
  ['campaign and clicks', { campaignId: C1, eventType: EventType.EVENT_TYPE_CLICK }],
  ['delivered', { eventType: EventType.EVENT_TYPE_DELIVERED }],
  ['one variant', { variantId: VARIANTS[1] }],
  ['no variant, one campaign', { variantId: NO_VARIANT, campaignId: C1 }],
];
const CASES = RANGES.flatMap(([range, bounds]) =>
  FILTERS.map(([name, filter]) => [`${name}, ${range}`, { ...filter, ...bounds }] as const),
);

describe.each(CASES)('%s', (_name, filter) => {
  it('lists every event once, newest first, with the exact total', async () => {
    const newestFirst = listed(filter)
      .sort((a, b) => b.occurred_at.localeCompare(a.occurred_at) || (b.provider_event_id < a.provider_event_id ? -1 : 1))
      .map((row) => row.provider_event_id);
    const response = await analytics.rpc('listEvents', { filter: { workspaceId: W, ...filter }, page: { page: 1, pageSize: 500 } });
    expect(response.page?.total).toBe(newestFirst.length);
    expect(response.events.map((e) => e.providerEventId)).toEqual(newestFirst);
    const second = await analytics.rpc('listEvents', { filter: { workspaceId: W, ...filter }, page: { page: 2, pageSize: 7 } });
    expect(second.events.map((e) => e.providerEventId)).toEqual(newestFirst.slice(7, 14));
  });

  it('counts daily stats exactly', async () => {
    const rows = matching(filter);
    const stats = await analytics.rpc('getStats', { filter: { workspaceId: W, ...filter }, interval: Interval.INTERVAL_DAY });
    expect(stats.totals).toEqual(expectedCounts(rows));
    expect(stats.campaigns.map(({ campaignId, counts }) => ({ campaignId, counts }))).toEqual(
      [...groupBy(rows, (row) => row.campaign_id)]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([campaignId, group]) => ({ campaignId, counts: expectedCounts(group) })),
    );
    expect(stats.variants).toEqual(expectedVariants(rows));
    const byDay = groupBy(rows, (row) => row.occurred_at.slice(0, 10));
    expect(stats.series.filter((bucket) => byDay.has(bucket.bucketStart!.toISOString().slice(0, 10)))).toEqual(
      [...byDay]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([day, group]) => ({ bucketStart: at(`${day}T00:00:00Z`), counts: expectedCounts(group) })),
    );
    expect(stats.series.length).toBeGreaterThanOrEqual(byDay.size);
    expect(stats.topLinks).toEqual(expectedLinks(rows));
  });
});

// Hourly buckets come from rows; per campaign and per link, settled whole days still come from the rollups.
it.each([
  ['unsettled days inside', { occurredFrom: at('2026-04-02T06:00:00Z'), occurredBefore: at('2026-04-04T06:00:00Z') }, 48],
  ['settled and unsettled days inside', { occurredFrom: at('2026-04-01T12:00:00Z'), occurredBefore: at('2026-04-05T12:00:00Z') }, 96],
  [
    'one campaign, whole days',
    { occurredFrom: at('2026-04-01T00:00:00Z'), occurredBefore: at('2026-04-06T00:00:00Z'), campaignId: C1 },
    120,
  ],
])('counts hourly stats exactly, %s', async (_name, filter, hours) => {
  const rows = matching(filter);
  const stats = await analytics.rpc('getStats', { filter: { workspaceId: W, ...filter }, interval: Interval.INTERVAL_HOUR });
  expect(stats.totals).toEqual(expectedCounts(rows));
  expect(stats.campaigns.map(({ campaignId, counts }) => ({ campaignId, counts }))).toEqual(
    [...groupBy(rows, (row) => row.campaign_id)]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([campaignId, group]) => ({ campaignId, counts: expectedCounts(group) })),
  );
  expect(stats.variants).toEqual(expectedVariants(rows));
  expect(stats.series).toHaveLength(hours);
  const byHour = groupBy(rows, (row) => row.occurred_at.slice(0, 13));
  for (const bucket of stats.series) {
    expect(bucket.counts).toEqual(expectedCounts(byHour.get(bucket.bucketStart!.toISOString().slice(0, 13)) ?? []));
  }
  expect(stats.topLinks).toEqual(expectedLinks(rows));
});

it('reads a day marked unsettled since the workspace was last read as unsettled', async () => {
  // Reads start on the unsettled days of the workspace's last read; one marked since must still count.
  const workspaceId = randomUUID();
  const rows = ['2026-06-01T10:00:00Z', '2026-06-02T10:00:00Z', '2026-06-02T11:00:00Z'].map((time, i) =>
    event({
      workspace_id: workspaceId,
      campaign_id: C1,
      event_type: 'open',
      email: `late${i}@example.com`,
      occurred_at: time,
      received_at: time,
    }),
  );
  await analytics.insertEvents(rows);
  const filter = { workspaceId, occurredFrom: at('2026-06-01T00:00:00Z'), occurredBefore: at('2026-06-03T00:00:00Z') };
  const read = async () => ({
    total: (await analytics.rpc('listEvents', { filter, page: { page: 1, pageSize: 10 } })).page?.total,
    opens: (await analytics.rpc('getStats', { filter, interval: Interval.INTERVAL_DAY })).totals?.opens,
  });
  expect(await read()).toEqual({ total: 3, opens: 3 });

  await analytics.clickhouse.command({
    query: `INSERT INTO event_rollup_daily
      SELECT toUUID('${workspaceId}'), toDate('2026-06-02'), toUUID('${C1}'), toUUID('${NO_VARIANT}'), 'open', 'none', 0,
        countState(), uniqExactState(number) FROM numbers(40)`,
  });
  await analytics.markUnsettled(workspaceId, ['2026-06-02']);
  expect(await read()).toEqual({ total: 3, opens: 3 });
});

describe('top links', () => {
  const click = (workspaceId: string, campaign: number, link: string, email: string, occurredAt: string): EventRow =>
    event({
      workspace_id: workspaceId,
      campaign_id: `00000000-0000-4000-8000-${String(campaign).padStart(12, '0')}`,
      event_type: 'click',
      email,
      occurred_at: occurredAt,
      received_at: occurredAt,
      url: `https://example.com/${link}`,
    });
  // May 1 is a whole settled day (read from the rollups), May 2 until noon is read from rows.
  const range = { occurredFrom: at('2026-05-01T00:00:00Z'), occurredBefore: at('2026-05-02T12:00:00Z') };
  const topLinks = async (workspaceId: string) =>
    (await analytics.rpc('getStats', { filter: { workspaceId, ...range }, interval: Interval.INTERVAL_DAY })).topLinks;

  it('ranks links tied on clicks at the last place by their unique clicks, counted across rollups and rows', async () => {
    const workspaceId = randomUUID();
    const rows: EventRow[] = [];
    const clicks = (campaign: number, link: string, emails: string[]) =>
      emails.forEach((email, i) =>
        rows.push(click(workspaceId, campaign, link, email, i % 2 === 0 ? '2026-05-01T09:00:00Z' : '2026-05-02T09:00:00Z')),
      );
    clicks(1, 'a', ['a', 'b', 'c', 'd', 'e']);
    clicks(2, 'a', ['a', 'a', 'a', 'a', 'a']);
    clicks(1, 'b', ['a', 'b', 'c', 'd']);
    clicks(2, 'b', ['a', 'b', 'a', 'b']);
    clicks(3, 'b', ['a', 'b', 'c', 'c']);
    clicks(1, 'c', ['a', 'b', 'c']);
    clicks(2, 'c', ['a', 'a', 'a']);
    clicks(3, 'c', ['c', 'a', 'b']);
    // Four links tied at 2 clicks for the last two places: the two with 2 addresses win, in link order.
    clicks(1, 'd', ['a', 'a']);
    clicks(2, 'd', ['a', 'b']);
    clicks(3, 'd', ['b', 'c']);
    clicks(4, 'd', ['z', 'z']);
    clicks(1, 'e', ['a']);
    rows.push(click(workspaceId, 1, 'outside', 'a', '2026-05-02T13:00:00Z'));
    await analytics.insertEvents(rows);

    const expected = expectedLinks(rows.filter((row) => row.occurred_at < '2026-05-02T12'));
    expect(expected.slice(8).map((link) => [link.url, link.clicks, link.uniqueClicks])).toEqual([
      ['https://example.com/d', 2, 2],
      ['https://example.com/d', 2, 2],
    ]);
    expect(await topLinks(workspaceId)).toEqual(expected);
  });
});
