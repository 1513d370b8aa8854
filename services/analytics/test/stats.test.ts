import { randomUUID } from 'node:crypto';
import { NO_EVENTS } from '../src/domain/stats';
import { EventType, Interval, event, failure, signal, startAnalytics, status, type Analytics, type EventRow } from './harness';

const W = randomUUID();
const C1 = '00000000-0000-4000-8000-000000000001';
const C2 = '00000000-0000-4000-8000-000000000002';
const LINK_A = 'https://example.com/a';
const LINK_B = 'https://example.com/b';
const at = (iso: string) => new Date(iso);

let analytics: Analytics;
/** An event of workspace W in `campaignId`. */
const inW = (campaignId: string, fields: Partial<EventRow>): EventRow => event({ workspace_id: W, campaign_id: campaignId, ...fields });

/** A rate as the proto carries it: absent (undefined) on a zero denominator. */
const ratio = (part: number, whole: number) => (whole === 0 ? undefined : part / whole);

/** Every count (zero unless given) and the rates they make. */
function counts(values: Partial<Record<string, number>> = {}) {
  const all = { ...NO_EVENTS, uniqueOpens: 0, uniqueClicks: 0, ...values };
  return {
    ...all,
    deliveryRate: ratio(all.delivered, all.processed),
    openRate: ratio(all.uniqueOpens, all.delivered),
    clickRate: ratio(all.uniqueClicks, all.delivered),
    clickToOpenRate: ratio(all.uniqueClicks, all.uniqueOpens),
    bounceRate: ratio(all.hardBounces + all.softBounces, all.processed),
    unsubscribeRate: ratio(all.unsubscribes, all.delivered),
    spamReportRate: ratio(all.spamReports, all.delivered),
  };
}

const C1_COUNTS = counts({
  opens: 3,
  uniqueOpens: 2,
  clicks: 3,
  uniqueClicks: 2,

  hardBounces: 1,
  softBounces: 1,
  unsubscribes: 1,
});
const C2_COUNTS = counts({ opens: 2, uniqueOpens: 1, clicks: 1, uniqueClicks: 1 });

beforeAll(async () => {
  analytics = await startAnalytics('analytics_stats');
  const lateOpen = inW(C2, { email: 'e@example.com', occurred_at: '2026-03-10T23:59:59Z' });
  await analytics.insertEvents([
    inW(C1, { email: 'a@example.com', occurred_at: '2026-03-10T08:00:00Z' }),
    inW(C1, { email: 'a@example.com', occurred_at: '2026-03-10T09:00:00Z' }),
    inW(C1, { email: 'b@example.com', occurred_at: '2026-03-11T10:00:00Z' }),
    inW(C1, { event_type: 'click', url: LINK_A, email: 'a@example.com', occurred_at: '2026-03-10T08:30:00Z' }),
    inW(C1, { event_type: 'click', url: LINK_A, email: 'a@example.com', occurred_at: '2026-03-10T08:45:00Z' }),
    inW(C1, { event_type: 'click', url: LINK_B, email: 'b@example.com', occurred_at: '2026-03-11T10:05:00Z' }),
    inW(C1, { event_type: 'bounce', bounce_type: 'hard', email: 'c@example.com', occurred_at: '2026-03-12T01:00:00Z' }),
    inW(C1, { event_type: 'bounce', bounce_type: 'soft', email: 'd@example.com', occurred_at: '2026-03-12T02:00:00Z' }),
    inW(C1, { event_type: 'unsubscribe', email: 'b@example.com', occurred_at: '2026-03-12T03:00:00Z' }),
    lateOpen,
    inW(C2, { email: 'e@example.com', occurred_at: '2026-03-11T00:00:00Z' }),
    inW(C2, { event_type: 'click', url: LINK_A, email: 'e@example.com', occurred_at: '2026-03-11T00:30:00Z' }),
    event({ workspace_id: randomUUID(), campaign_id: C1, email: 'a@example.com', occurred_at: '2026-03-10T08:00:00Z' }),
  ]);
  // The same provider event again, as a fault can store it (its day is then unsettled).
  await analytics.insertFaultCopies([{ ...lateOpen, id: randomUUID() }]);
  await analytics.insertSignals([
    signal({ workspace_id: W, email: 'c@example.com', reason: 'hard_bounce', occurred_at: '2026-03-12T01:00:00Z' }),
    signal({ workspace_id: W, email: 'd@example.com', reason: 'soft_bounce', occurred_at: '2026-03-12T02:00:00Z' }),
    signal({ workspace_id: W, email: 'b@example.com', reason: 'unsubscribe', occurred_at: '2026-03-12T03:00:00Z' }),
    signal({ workspace_id: W, email: 'f@example.com', reason: 'spam_report', occurred_at: '2026-03-05T00:00:00Z' }),
  ]);
});

afterAll(() => analytics.close());

const stats = (filter: Record<string, unknown> = {}, interval = Interval.INTERVAL_DAY) =>
  analytics.rpc('getStats', { filter: { workspaceId: W, ...filter }, interval });

describe('GetStats', () => {
  it('counts totals and campaigns exactly, each provider event once', async () => {
    const result = await stats();
    expect(result.totals).toEqual(
      counts({ opens: 5, uniqueOpens: 3, clicks: 4, uniqueClicks: 3, hardBounces: 1, softBounces: 1, unsubscribes: 1 }),
    );
    expect(result.campaigns).toEqual([
      { campaignId: C1, counts: C1_COUNTS },
      { campaignId: C2, counts: C2_COUNTS },
    ]);
  });

  it('draws a daily series over the span of the data when no range is given', async () => {
    expect((await stats()).series).toEqual([
      {
        bucketStart: at('2026-03-10T00:00:00Z'),
        counts: counts({ opens: 3, uniqueOpens: 2, clicks: 2, uniqueClicks: 1 }),
      },
      {
        bucketStart: at('2026-03-11T00:00:00Z'),
        counts: counts({ opens: 2, uniqueOpens: 2, clicks: 2, uniqueClicks: 2 }),
      },
      { bucketStart: at('2026-03-12T00:00:00Z'), counts: counts({ hardBounces: 1, softBounces: 1, unsubscribes: 1 }) },
    ]);
  });

  it('fills every bucket of a requested range with zeros where nothing happened', async () => {
    const series = (await stats({ occurredFrom: at('2026-03-08T00:00:00Z'), occurredBefore: at('2026-03-14T00:00:00Z') })).series;
    expect(series.map((b) => b.bucketStart?.toISOString().slice(0, 10))).toEqual([
      '2026-03-08',
      '2026-03-09',
      '2026-03-10',
      '2026-03-11',
      '2026-03-12',
      '2026-03-13',
    ]);
    expect(series[0].counts).toEqual(counts());
    expect(series[5].counts).toEqual(counts());
  });

  it('puts events in UTC hour buckets, boundaries included', async () => {
    const result = await stats(
      { occurredFrom: at('2026-03-10T23:00:00Z'), occurredBefore: at('2026-03-11T01:00:00Z') },
      Interval.INTERVAL_HOUR,
    );
    expect(result.series).toEqual([
      { bucketStart: at('2026-03-10T23:00:00Z'), counts: counts({ opens: 1, uniqueOpens: 1 }) },
      {
        bucketStart: at('2026-03-11T00:00:00Z'),
        counts: counts({ opens: 1, uniqueOpens: 1, clicks: 1, uniqueClicks: 1 }),
      },
    ]);
    expect(result.campaigns).toEqual([{ campaignId: C2, counts: C2_COUNTS }]);
  });

  it('ranks the top links per campaign and URL', async () => {
    expect((await stats()).topLinks).toEqual([
      { campaignId: C1, url: LINK_A, clicks: 2, uniqueClicks: 1 },
      { campaignId: C2, url: LINK_A, clicks: 1, uniqueClicks: 1 },
      { campaignId: C1, url: LINK_B, clicks: 1, uniqueClicks: 1 },
    ]);
  });

  it('counts the suppressed addresses by reason, within the range', async () => {
    expect((await stats()).suppressions).toEqual({ total: 3, hardBounce: 1, softBounces: 0, unsubscribe: 1, spamReport: 1 });
    expect((await stats({ occurredFrom: at('2026-03-09T00:00:00Z') })).suppressions).toEqual({
      total: 2,
      hardBounce: 1,
      softBounces: 0,
      unsubscribe: 1,
      spamReport: 0,
    });
    expect((await stats({ email: 'B@example.com' })).suppressions).toMatchObject({ total: 1, unsubscribe: 1 });
  });

  it('applies the list filters', async () => {
    const c2 = await stats({ campaignId: C2 });
    expect(c2.totals).toEqual(C2_COUNTS);
    expect(c2.campaigns).toEqual([{ campaignId: C2, counts: C2_COUNTS }]);
    expect(c2.topLinks).toEqual([{ campaignId: C2, url: LINK_A, clicks: 1, uniqueClicks: 1 }]);

    expect((await stats({ eventType: EventType.EVENT_TYPE_CLICK })).totals).toEqual(counts({ clicks: 4, uniqueClicks: 3 }));
    expect((await stats({ email: 'a@example.com' })).totals).toEqual(counts({ opens: 2, uniqueOpens: 1, clicks: 2, uniqueClicks: 1 }));
  });

  it('answers zeros for an empty range, not an error', async () => {
    const result = await stats({ occurredFrom: at('2027-01-01T00:00:00Z'), occurredBefore: at('2027-01-03T00:00:00Z') });
    expect(result).toEqual({
      totals: counts(),
      campaigns: [],
      series: [
        { bucketStart: at('2027-01-01T00:00:00Z'), counts: counts() },
        { bucketStart: at('2027-01-02T00:00:00Z'), counts: counts() },
      ],
      topLinks: [],
      suppressions: { total: 0, hardBounce: 0, softBounces: 0, unsubscribe: 0, spamReport: 0 },
      variants: [],
    });
    const nothing = await analytics.rpc('getStats', { filter: { workspaceId: randomUUID() }, interval: Interval.INTERVAL_UNSPECIFIED });
    expect(nothing).toMatchObject({ totals: counts(), campaigns: [], series: [], topLinks: [] });
  });

  it('fills every bucket of a range of up to 2000, and lists only the buckets with events beyond', async () => {
    // Exactly 2000 days: every one of them, zeros included.
    const filled = await stats({ occurredFrom: at('2021-04-10T00:00:00Z'), occurredBefore: at('2026-10-01T00:00:00Z') });
    expect(filled.series).toHaveLength(2000);

    const workspaceId = randomUUID();
    await analytics.insertEvents([
      event({ workspace_id: workspaceId, campaign_id: C1, occurred_at: '2017-06-01T10:20:00Z' }),
      event({ workspace_id: workspaceId, campaign_id: C1, occurred_at: '2026-03-01T05:00:00Z' }),
      event({ workspace_id: workspaceId, campaign_id: C1, occurred_at: '2026-03-01T05:59:59Z' }),
    ]);
    const bucketsOf = async (filter: Record<string, unknown>, interval: (typeof Interval)[keyof typeof Interval]) => {
      const answer = await analytics.rpc('getStats', { filter: { workspaceId, ...filter }, interval });
      return answer.series?.map((bucket) => [bucket.bucketStart?.toISOString(), bucket.counts?.opens]);
    };
    const sparse = [
      ['2017-06-01T10:00:00.000Z', 1],
      ['2026-03-01T05:00:00.000Z', 2],
    ];
    // Without a range the span of the data decides: nearly nine years of hours.
    expect(await bucketsOf({}, Interval.INTERVAL_HOUR)).toEqual(sparse);
    // A range given in full, of 1417 days: still filled.
    const days = await bucketsOf(
      { occurredFrom: at('2022-05-14T00:00:00Z'), occurredBefore: at('2026-03-31T00:00:00Z') },
      Interval.INTERVAL_DAY,
    );
    expect(days).toHaveLength(1417);
    expect(days?.filter(([, opens]) => opens !== 0)).toEqual([['2026-03-01T00:00:00.000Z', 2]]);
    // Over 2000 days given in full: the buckets with events.
    expect(
      await bucketsOf({ occurredFrom: at('2017-01-01T00:00:00Z'), occurredBefore: at('2027-01-01T00:00:00Z') }, Interval.INTERVAL_DAY),
    ).toEqual([
      ['2017-06-01T00:00:00.000Z', 1],
      ['2026-03-01T00:00:00.000Z', 2],
    ]);
  });

  it('treats injection attempts as data', async () => {
    for (const email of ["' OR 1=1 --", "\\'; DROP TABLE events; --", 'a@example.com\\']) {
      expect((await stats({ email })).totals).toEqual(counts());
    }
    const result = await failure(stats({ campaignId: "00000000-0000-4000-8000-000000000001' OR '1'='1" }));
    expect(result.code).toBe(status.INVALID_ARGUMENT);
    expect((await stats()).totals?.opens).toBe(5);
  });
});

describe('GetStats of delivery events, machine opens and rates', () => {
  const workspaceId = randomUUID();
  const campaignId = randomUUID();
  const row = (type: EventRow['event_type'], email: string, occurredAt: string, extra: Partial<EventRow> = {}) =>
    event({ workspace_id: workspaceId, campaign_id: campaignId, event_type: type, email, occurred_at: occurredAt, ...extra });
  const redelivered = row('delivered', 'j@example.com', '2026-04-02T09:00:00Z');

  beforeAll(async () => {
    const addresses = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].map((name) => `${name}@example.com`);
    await analytics.insertEvents([
      // 11 sent by our own sender; 10 processed; 8 delivered (one of them redelivered below), 1 deferred, 1 dropped; 2 bounced.
      ...[...addresses, 'k@example.com'].map((email) => row('sent', email, '2026-04-01T07:59:00Z', { provider: 'smtp' })),
      ...addresses.map((email) => row('processed', email, '2026-04-01T08:00:00Z')),
      ...addresses.slice(0, 7).map((email) => row('delivered', email, '2026-04-01T08:01:00Z')),
      redelivered,
      row('deferred', 'h@example.com', '2026-04-01T08:02:00Z', { reason: '421 try later' }),
      row('dropped', 'i@example.com', '2026-04-01T08:02:00Z'),
      row('bounce', 'h@example.com', '2026-04-02T08:03:00Z', { bounce_type: 'hard', bounce_class: 'invalid_address' }),
      row('bounce', 'i@example.com', '2026-04-02T08:03:00Z', { bounce_type: 'soft', bounce_class: 'mailbox_unavailable' }),
      // Human opens: a on both days (one unique open), b, c; d's only open is a machine's; a has a machine open too.
      row('open', 'a@example.com', '2026-04-01T10:00:00Z'),
      row('open', 'a@example.com', '2026-04-02T10:00:00Z'),
      row('open', 'a@example.com', '2026-04-03T10:00:00Z', { machine_open: 1 }),
      row('open', 'b@example.com', '2026-04-02T11:00:00Z'),
      row('open', 'c@example.com', '2026-04-03T12:00:00Z'),
      row('open', 'd@example.com', '2026-04-01T09:00:00Z', { machine_open: 1 }),
      // Clicks: a on two days, b; c's only click is a machine's (a security scanner), in no unique click or rate.
      row('click', 'c@example.com', '2026-04-02T12:00:00Z', { url: 'https://example.com/x', machine_open: 1 }),
      row('click', 'a@example.com', '2026-04-01T10:05:00Z', { url: 'https://example.com/x' }),
      row('click', 'a@example.com', '2026-04-03T10:05:00Z', { url: 'https://example.com/x' }),
      row('click', 'b@example.com', '2026-04-02T11:05:00Z', { url: 'https://example.com/y' }),
      row('unsubscribe', 'c@example.com', '2026-04-03T12:05:00Z'),
      row('spamreport', 'e@example.com', '2026-04-03T13:00:00Z'),
    ]);
    await analytics.insertFaultCopies([{ ...redelivered, id: randomUUID() }]);
  });

  // Computed by hand from the events above.
  const EXPECTED = {
    sent: 11,
    processed: 10,
    delivered: 8,
    deferred: 1,
    dropped: 1,
    hardBounces: 1,
    softBounces: 1,
    spamReports: 1,
    unsubscribes: 1,
    opens: 6,
    machineOpens: 2,
    uniqueOpens: 3,
    clicks: 4,
    machineClicks: 1,
    uniqueClicks: 2,
    deliveryRate: 0.8,
    openRate: 3 / 8,
    clickRate: 2 / 8,
    clickToOpenRate: 2 / 3,
    bounceRate: 0.2,
    unsubscribeRate: 1 / 8,
    spamReportRate: 1 / 8,
  };

  it.each([
    ['whole days (rollups)', { occurredFrom: at('2026-04-01T00:00:00Z'), occurredBefore: at('2026-04-04T00:00:00Z') }],
    ['partial days (rows)', { occurredFrom: at('2026-04-01T07:00:00Z'), occurredBefore: at('2026-04-03T23:00:00Z') }],
    ['all time', {}],
  ])('counts every figure and rate exactly over %s', async (_name, range) => {
    const result = await analytics.rpc('getStats', { filter: { workspaceId, ...range }, interval: Interval.INTERVAL_DAY });
    expect(result.totals).toEqual(EXPECTED);
    expect(result.campaigns).toEqual([{ campaignId, counts: EXPECTED }]);
    // Unique opens per day are 1, 2 and 1 (a sum would say 4): the range's are exact.
    expect(result.series.map((bucket) => bucket.counts?.uniqueOpens)).toEqual([1, 2, 1]);
    expect(result.variants).toEqual([]);
  });

  it('counts a redelivered event once, hourly too', async () => {
    const result = await analytics.rpc('getStats', {
      filter: { workspaceId, occurredFrom: at('2026-04-02T09:00:00Z'), occurredBefore: at('2026-04-02T10:00:00Z') },
      interval: Interval.INTERVAL_HOUR,
    });
    expect(result.totals).toMatchObject({ delivered: 1, processed: 0 });
    expect(result.totals?.deliveryRate).toBeUndefined();
  });
});

describe('ListEvents and GetStats of one run', () => {
  const workspaceId = randomUUID();
  const campaignId = randomUUID();
  const [runA, runB] = [randomUUID(), randomUUID()];
  const row = (type: EventRow['event_type'], email: string, runId: string | undefined, extra: Partial<EventRow> = {}) =>
    event({
      workspace_id: workspaceId,
      campaign_id: campaignId,
      event_type: type,
      email,
      occurred_at: '2026-05-04T10:00:00Z',
      ...(runId ? { run_id: runId } : {}),
      ...extra,
    });

  beforeAll(() =>
    analytics.insertEvents([
      row('sent', 'a@example.com', runA, { provider: 'smtp' }),
      row('sent', 'b@example.com', runA, { provider: 'smtp' }),
      row('open', 'a@example.com', runA, { provider: 'tracking' }),
      row('open', 'b@example.com', runA, { provider: 'tracking', machine_open: 1 }),
      row('click', 'b@example.com', runA, { provider: 'tracking', url: 'https://example.com/a', machine_open: 1 }),
      row('sent', 'a@example.com', runB, { provider: 'smtp' }),
      row('open', 'a@example.com', runB, { provider: 'tracking' }),
      row('click', 'a@example.com', runB, { provider: 'tracking', url: 'https://example.com/b' }),
      // A provider's event without a run_id custom argument.
      row('open', 'c@example.com', undefined),
    ]),
  );

  it('lists the events of a run, each with its run_id', async () => {
    const response = await analytics.rpc('listEvents', {
      filter: { workspaceId, runId: runA.toUpperCase() },
      page: { page: 1, pageSize: 50 },
    });
    expect(response.page?.total).toBe(3);
    expect(response.events.map((e) => [e.eventType, e.email, e.runId, e.machineOpen, e.machineClick]).sort()).toEqual(
      [
        [EventType.EVENT_TYPE_OPEN, 'a@example.com', runA, false, false],
        [EventType.EVENT_TYPE_OPEN, 'b@example.com', runA, true, false],
        [EventType.EVENT_TYPE_CLICK, 'b@example.com', runA, false, true],
      ].sort(),
    );
    const none = await analytics.rpc('listEvents', {
      filter: { workspaceId, runId: '00000000-0000-0000-0000-000000000000' },
      page: { page: 1, pageSize: 50 },
    });
    expect(none.events.map((e) => [e.email, e.runId])).toEqual([['c@example.com', undefined]]);
  });

  it.each([
    ['whole days', { occurredFrom: at('2026-05-04T00:00:00Z'), occurredBefore: at('2026-05-05T00:00:00Z') }],
    ['all time', {}],
  ])("counts a run's events only, machine opens and clicks apart, over %s", async (_name, range) => {
    const a = await analytics.rpc('getStats', { filter: { workspaceId, runId: runA, ...range }, interval: Interval.INTERVAL_DAY });
    expect(a.totals).toMatchObject({ sent: 2, opens: 2, machineOpens: 1, uniqueOpens: 1, clicks: 1, machineClicks: 1, uniqueClicks: 0 });
    expect(a.topLinks).toEqual([{ campaignId, url: 'https://example.com/a', clicks: 1, uniqueClicks: 1 }]);
    const b = await analytics.rpc('getStats', { filter: { workspaceId, runId: runB, ...range }, interval: Interval.INTERVAL_DAY });
    expect(b.totals).toMatchObject({ sent: 1, opens: 1, uniqueOpens: 1, clicks: 1, uniqueClicks: 1 });
  });

  it('rejects a run_id that is not a UUID', async () => {
    const error = await failure(analytics.rpc('getStats', { filter: { workspaceId, runId: 'run-1' }, interval: Interval.INTERVAL_DAY }));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
  });
});

describe('GetStats of variants', () => {
  const workspaceId = randomUUID();
  const campaignId = randomUUID();
  const [A, B] = [randomUUID(), randomUUID()].sort();
  const delivered = 200;
  /** Unique opens and clicks per variant: opens differ significantly, clicks do not. */
  const outcomes = { [A]: { opens: 80, clicks: 12 }, [B]: { opens: 40, clicks: 9 } };

  /** The pooled two-proportion z statistic, computed here on its own. */
  function z(successesA: number, successesB: number, trials: number): number {
    const pA = successesA / trials;
    const pB = successesB / trials;
    const pooled = (successesA + successesB) / (2 * trials);
    return (pA - pB) / Math.sqrt(pooled * (1 - pooled) * (2 / trials));
  }

  beforeAll(async () => {
    const rows: EventRow[] = [];
    for (const variantId of [A, B]) {
      for (let i = 0; i < delivered; i++) {
        const email = `${variantId.slice(0, 8)}-${i}@example.com`;
        const base = { workspace_id: workspaceId, campaign_id: campaignId, variant_id: variantId, email };
        rows.push(event({ ...base, event_type: 'processed', occurred_at: '2026-05-01T08:00:00Z' }));
        rows.push(event({ ...base, event_type: 'delivered', occurred_at: '2026-05-01T08:01:00Z' }));
        if (i < outcomes[variantId].opens) rows.push(event({ ...base, event_type: 'open', occurred_at: '2026-05-01T09:00:00Z' }));
        if (i < outcomes[variantId].clicks) {
          rows.push(event({ ...base, event_type: 'click', url: 'https://example.com/', occurred_at: '2026-05-02T09:00:00Z' }));
        }
      }
    }
    // Events of the campaign sent without a variant count for the campaign, not for a variant.
    rows.push(event({ workspace_id: workspaceId, campaign_id: campaignId, event_type: 'delivered', occurred_at: '2026-05-01T08:01:00Z' }));
    await analytics.insertEvents(rows);
  });

  it('names the open-rate leader when it differs at 95 %, and no click-rate leader when it does not', async () => {
    expect(Math.abs(z(80, 40, delivered))).toBeGreaterThan(1.959964);
    expect(Math.abs(z(12, 9, delivered))).toBeLessThan(1.959964);
    const result = await analytics.rpc('getStats', { filter: { workspaceId }, interval: Interval.INTERVAL_DAY });
    expect(result.campaigns).toHaveLength(1);
    expect(result.campaigns[0].leaderByOpenRate).toBe(A);
    expect(result.campaigns[0].leaderByClickRate).toBeUndefined();
    expect(result.campaigns[0].counts).toMatchObject({ delivered: 2 * delivered + 1, uniqueOpens: 120 });
    expect(result.variants).toEqual(
      [A, B].map((variantId) => ({
        campaignId,
        variantId,
        counts: counts({
          processed: delivered,
          delivered,
          opens: outcomes[variantId].opens,
          uniqueOpens: outcomes[variantId].opens,
          clicks: outcomes[variantId].clicks,
          uniqueClicks: outcomes[variantId].clicks,
        }),
      })),
    );
  });

  it('narrows to one variant with the variant filter, where no leader can be named', async () => {
    const result = await analytics.rpc('getStats', { filter: { workspaceId, variantId: B }, interval: Interval.INTERVAL_DAY });
    expect(result.variants.map((variant) => variant.variantId)).toEqual([B]);
    expect(result.totals).toMatchObject({ delivered, uniqueOpens: 40, uniqueClicks: 9 });
    expect(result.campaigns[0].leaderByOpenRate).toBeUndefined();
  });
});
