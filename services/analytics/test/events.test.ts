import { randomUUID } from 'node:crypto';
import { NO_VARIANT } from '@mail/event-store';
import type { eventsV1 } from '@mail/proto';
import { EventType, BounceType, event, failure, startAnalytics, status, type Analytics, type EventRow } from './harness';

const W = randomUUID();
const OTHER_WORKSPACE = randomUUID();
const C1 = randomUUID();
const C2 = randomUUID();
const at = (iso: string) => new Date(iso);

let analytics: Analytics;
// Newest first, as the list answers.
let rows: Record<'unsubscribe' | 'hardBounce' | 'midnightOpen' | 'click' | 'open' | 'softBounce', EventRow>;

beforeAll(async () => {
  analytics = await startAnalytics('analytics_events');
  rows = {
    unsubscribe: event({
      workspace_id: W,
      campaign_id: C1,
      event_type: 'unsubscribe',
      email: 'b@example.com',
      occurred_at: '2026-03-12T10:00:00Z',
    }),
    hardBounce: event({
      workspace_id: W,
      campaign_id: C2,
      event_type: 'bounce',
      bounce_type: 'hard',
      email: 'c@example.com',
      occurred_at: '2026-03-11T23:59:59Z',
      reason: '550 5.1.1 unknown user',
      user_agent: null,
      ip: null,
      provider_message_id: null,
    }),
    midnightOpen: event({ workspace_id: W, campaign_id: C2, email: 'b@example.com', occurred_at: '2026-03-11T00:00:00Z' }),
    click: event({
      workspace_id: W,
      campaign_id: C1,
      event_type: 'click',
      email: 'a@example.com',
      occurred_at: '2026-03-10T09:30:00Z',
      url: 'https://example.com/offer',
    }),
    open: event({ workspace_id: W, campaign_id: C1, email: 'a@example.com', occurred_at: '2026-03-10T08:00:00Z' }),
    softBounce: event({
      workspace_id: W,
      campaign_id: C1,
      event_type: 'bounce',
      bounce_type: 'soft',
      email: 'a@example.com',
      occurred_at: '2026-03-09T23:59:59Z',
    }),
  };
  await analytics.insertEvents(Object.values(rows));
  await analytics.insertEvents([event({ workspace_id: OTHER_WORKSPACE, campaign_id: C1, email: 'a@example.com' })]);
});

afterAll(() => analytics.close());

async function list(filter: Record<string, unknown> = {}, page = { page: 1, pageSize: 50 }) {
  const response = await analytics.rpc('listEvents', { filter: { workspaceId: W, ...filter }, page });
  return { ids: response.events.map((e) => e.providerEventId), total: response.page?.total, events: response.events };
}

const ids = (...names: (keyof typeof rows)[]) => names.map((name) => rows[name].provider_event_id);

describe('ListEvents', () => {
  it('lists the workspace newest first, every field mapped', async () => {
    const { ids: found, total, events } = await list();
    expect(found).toEqual(ids('unsubscribe', 'hardBounce', 'midnightOpen', 'click', 'open', 'softBounce'));
    expect(total).toBe(6);
    const bounce = rows.hardBounce;
    expect(events[1]).toEqual({
      id: bounce.id,
      workspaceId: W,
      campaignId: C2,
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      email: 'c@example.com',
      occurredAt: at('2026-03-11T23:59:59Z'),
      receivedAt: at('2026-03-11T23:59:59Z'),
      reason: '550 5.1.1 unknown user',
      provider: 'sendgrid',
      providerEventId: bounce.provider_event_id,
      machineOpen: false,
      machineClick: false,
    });
    expect(events[3]).toMatchObject({
      url: 'https://example.com/offer',
      userAgent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      providerMessageId: 'msg-1',
    });
  });

  it.each([
    ['open', EventType.EVENT_TYPE_OPEN, ['midnightOpen', 'open']],
    ['click', EventType.EVENT_TYPE_CLICK, ['click']],
    ['bounce', EventType.EVENT_TYPE_BOUNCE, ['hardBounce', 'softBounce']],
    ['unsubscribe', EventType.EVENT_TYPE_UNSUBSCRIBE, ['unsubscribe']],
  ] as const)('filters by event type %s', async (_name, eventType, expected) => {
    const { ids: found, total } = await list({ eventType });
    expect(found).toEqual(ids(...expected));
    expect(total).toBe(expected.length);
  });

  it('filters by campaign', async () => {
    expect((await list({ campaignId: C2 })).ids).toEqual(ids('hardBounce', 'midnightOpen'));
    expect((await list({ campaignId: C2.toUpperCase() })).ids).toEqual(ids('hardBounce', 'midnightOpen'));
    expect(await list({ campaignId: randomUUID() })).toMatchObject({ ids: [], total: 0 });
  });

  it('filters by exact address, case-insensitively', async () => {
    expect((await list({ email: 'A@Example.COM' })).ids).toEqual(ids('click', 'open', 'softBounce'));
    expect((await list({ email: 'a@example' })).ids).toEqual([]);
  });

  it('takes occurred_from as inclusive and occurred_before as exclusive, to the second', async () => {
    const midnight = at('2026-03-11T00:00:00Z');
    expect((await list({ occurredFrom: midnight })).ids).toEqual(ids('unsubscribe', 'hardBounce', 'midnightOpen'));
    expect((await list({ occurredBefore: midnight })).ids).toEqual(ids('click', 'open', 'softBounce'));
    // What the gateway sends for date_to=2026-03-11: the next midnight, so the whole day is in.
    expect((await list({ occurredFrom: midnight, occurredBefore: at('2026-03-12T00:00:00Z') })).ids).toEqual(
      ids('hardBounce', 'midnightOpen'),
    );
    // ... and for date_to=2026-03-11T23:59:59Z: one millisecond later, so that second is in.
    expect((await list({ occurredBefore: at('2026-03-11T23:59:59.001Z'), occurredFrom: at('2026-03-11T23:59:59Z') })).ids).toEqual(
      ids('hardBounce'),
    );
    // Stored times are whole seconds: 23:59:59 is before 23:59:59.5.
    expect((await list({ occurredFrom: at('2026-03-11T23:59:59.500Z') })).ids).toEqual(ids('unsubscribe'));
    expect(await list({ occurredFrom: at('2026-03-13T00:00:00Z'), occurredBefore: at('2026-03-01T00:00:00Z') })).toMatchObject({
      ids: [],
      total: 0,
    });
  });

  it('pages an address, with the total on every page and an empty page past the end', async () => {
    const page = async (number: number) => list({ email: 'a@example.com' }, { page: number, pageSize: 2 });
    expect(await page(1)).toMatchObject({ ids: ids('click', 'open'), total: 3 });
    expect(await page(2)).toMatchObject({ ids: ids('softBounce'), total: 3 });
    expect(await page(3)).toMatchObject({ ids: [], total: 3 });
    expect(await list({ email: 'nobody@example.com' })).toMatchObject({ ids: [], total: 0 });
  });

  it('combines filters', async () => {
    const filter = {
      eventType: EventType.EVENT_TYPE_OPEN,
      campaignId: C1,
      email: 'a@example.com',
      occurredFrom: at('2026-03-10T00:00:00Z'),
    };
    expect(await list(filter)).toMatchObject({ ids: ids('open'), total: 1 });
    expect(await list({ ...filter, campaignId: C2 })).toMatchObject({ ids: [], total: 0 });
  });

  it('pages, with the total on every page and an empty page past the end', async () => {
    const pages = await Promise.all([1, 2, 3, 4].map((page) => list({}, { page, pageSize: 2 })));
    expect(pages.map((p) => p.ids)).toEqual([
      ids('unsubscribe', 'hardBounce'),
      ids('midnightOpen', 'click'),
      ids('open', 'softBounce'),
      [],
    ]);
    expect(pages.map((p) => p.total)).toEqual([6, 6, 6, 6]);
    const defaults = await analytics.rpc('listEvents', { filter: { workspaceId: W } });
    expect(defaults.page).toEqual({ total: 6, page: 1, pageSize: 50 });
  });

  it('never answers for another workspace', async () => {
    const response = await analytics.rpc('listEvents', { filter: { workspaceId: randomUUID() } });
    expect(response).toEqual({ events: [], page: { total: 0, page: 1, pageSize: 50 } });
  });

  it('refuses invalid arguments with every violation', async () => {
    const result = await failure(
      analytics.rpc('listEvents', {
        filter: { workspaceId: 'nope', campaignId: "' OR 1=1 --", variantId: 'x', eventType: 99 as eventsV1.EventType },
        page: { page: 1, pageSize: 501 },
      }),
    );
    expect(result.code).toBe(status.INVALID_ARGUMENT);
    expect(result.violations.map((v) => [v.loc, v.type])).toEqual([
      [['workspace_id'], 'uuid_parsing'],
      [['campaign_id'], 'uuid_parsing'],
      [['variant_id'], 'uuid_parsing'],
      [['event_type'], 'enum'],
      [['page_size'], 'less_than_equal'],
    ]);
  });

  it('treats injection attempts in the address as data', async () => {
    for (const email of ["' OR 1=1 --", "a@example.com' OR '1'='1", "\\' OR 1=1 --", 'a@example.com\\', "'; DROP TABLE events; --", '\0']) {
      expect(await list({ email })).toMatchObject({ ids: [], total: 0 });
    }
    expect((await list()).total).toBe(6);
  });
});

describe('ListEvents of every stored type', () => {
  const workspaceId = randomUUID();
  const variantId = randomUUID();
  const on = (minute: number) => `2026-03-20T10:${String(minute).padStart(2, '0')}:00Z`;
  const typed = {
    processed: event({ workspace_id: workspaceId, campaign_id: C1, variant_id: variantId, event_type: 'processed', occurred_at: on(0) }),
    delivered: event({ workspace_id: workspaceId, campaign_id: C1, variant_id: variantId, event_type: 'delivered', occurred_at: on(1) }),
    deferred: event({ workspace_id: workspaceId, campaign_id: C1, event_type: 'deferred', reason: '421 try later', occurred_at: on(2) }),
    machineOpen: event({ workspace_id: workspaceId, campaign_id: C1, variant_id: variantId, machine_open: 1, occurred_at: on(3) }),
    bounce: event({
      workspace_id: workspaceId,
      campaign_id: C1,
      event_type: 'bounce',
      bounce_type: 'hard',
      bounce_class: 'invalid_address',
      occurred_at: on(4),
    }),
    dropped: event({ workspace_id: workspaceId, campaign_id: C1, event_type: 'dropped', occurred_at: on(5) }),
    spamreport: event({ workspace_id: workspaceId, campaign_id: C1, event_type: 'spamreport', occurred_at: on(6) }),
    sent: event({
      workspace_id: workspaceId,
      campaign_id: C1,
      variant_id: variantId,
      event_type: 'sent',
      provider: 'smtp',
      occurred_at: on(7),
    }),
  };
  const listOf = async (filter: Record<string, unknown> = {}) => {
    const response = await analytics.rpc('listEvents', { filter: { workspaceId, ...filter }, page: { page: 1, pageSize: 50 } });
    return { ids: response.events.map((e) => e.providerEventId), total: response.page?.total, events: response.events };
  };
  const idsOf = (...names: (keyof typeof typed)[]) => names.map((name) => typed[name].provider_event_id);

  beforeAll(() => analytics.insertEvents(Object.values(typed)));

  it('lists the engagement types only when no type is asked for', async () => {
    expect(await listOf()).toMatchObject({ ids: idsOf('bounce', 'machineOpen'), total: 2 });
  });

  it.each([
    [EventType.EVENT_TYPE_PROCESSED, 'processed'],
    [EventType.EVENT_TYPE_DELIVERED, 'delivered'],
    [EventType.EVENT_TYPE_DEFERRED, 'deferred'],
    [EventType.EVENT_TYPE_DROPPED, 'dropped'],
    [EventType.EVENT_TYPE_SPAM_REPORT, 'spamreport'],
    [EventType.EVENT_TYPE_SENT, 'sent'],
  ] as const)('lists the events of type %s on request', async (eventType, name) => {
    const { ids: found, total, events } = await listOf({ eventType });
    expect({ found, total }).toEqual({ found: idsOf(name), total: 1 });
    expect(events[0].eventType).toBe(eventType);
  });

  it('maps the machine flag, the variant and the bounce class', async () => {
    const { events } = await listOf();
    expect(events[0]).toMatchObject({ bounceClass: 'invalid_address', machineOpen: false });
    expect(events[0].variantId).toBeUndefined();
    expect(events[1]).toMatchObject({ machineOpen: true, variantId });
    expect(events[1].bounceClass).toBeUndefined();
  });

  it('filters by variant, the nil UUID selecting the events of no variant', async () => {
    expect((await listOf({ variantId })).ids).toEqual(idsOf('machineOpen'));
    expect((await listOf({ variantId: variantId.toUpperCase(), eventType: EventType.EVENT_TYPE_DELIVERED })).ids).toEqual(
      idsOf('delivered'),
    );
    expect((await listOf({ variantId: NO_VARIANT })).ids).toEqual(idsOf('bounce'));
  });
});

describe('ListEvents over many days', () => {
  const workspaceId = randomUUID();
  let newestFirst: string[];

  beforeAll(async () => {
    // 3 events a day on 1, 2, 5, 9, 10 March plus 7 in one second on 10 March: pages cross days and ties.
    const times = ['01', '02', '05', '09', '10'].flatMap((day) =>
      ['08:00:00', '12:00:00', '18:00:00'].map((time) => `2026-03-${day}T${time}Z`),
    );
    const generated = [...times, ...Array.from({ length: 7 }, () => '2026-03-10T23:00:00Z')].map((occurred_at, index) =>
      event({ workspace_id: workspaceId, campaign_id: C1, occurred_at, provider_event_id: `p${String(index).padStart(3, '0')}` }),
    );
    await analytics.insertEvents(generated);
    newestFirst = [...generated]
      .sort((a, b) => b.occurred_at.localeCompare(a.occurred_at) || b.provider_event_id.localeCompare(a.provider_event_id))
      .map((row) => row.provider_event_id);
  });

  it.each([1, 2, 3, 4, 7, 22, 23])('walks every page of size %i in order', async (pageSize) => {
    const found: string[] = [];
    for (let page = 1; page <= Math.ceil(newestFirst.length / pageSize); page += 1) {
      const response = await analytics.rpc('listEvents', { filter: { workspaceId }, page: { page, pageSize } });
      expect(response.page?.total).toBe(newestFirst.length);
      found.push(...response.events.map((e) => e.providerEventId));
    }
    expect(found).toEqual(newestFirst);
  });
});

describe('ListEvents with duplicates', () => {
  const workspaceId = randomUUID();

  it('shows a provider event stored twice once, as the copy a merge keeps, and counts it once', async () => {
    const original = event({ workspace_id: workspaceId, campaign_id: C1, ingested_at: '2026-03-10T12:00:00Z' });
    const redelivered = { ...original, id: randomUUID(), ingested_at: '2026-03-10T12:05:00Z' };
    const other = event({ workspace_id: workspaceId, campaign_id: C1, occurred_at: '2026-03-10T11:00:00Z' });
    await analytics.insertEvents([original, other]);
    await analytics.insertFaultCopies([redelivered]);
    await analytics.insertFaultCopies([{ ...original, id: randomUUID(), ingested_at: '2026-03-10T12:01:00Z' }]);

    const response = await analytics.rpc('listEvents', { filter: { workspaceId }, page: { page: 1, pageSize: 1 } });
    expect(response.page?.total).toBe(2);
    expect(response.events.map((e) => [e.providerEventId, e.id])).toEqual([[original.provider_event_id, redelivered.id]]);
    const second = await analytics.rpc('listEvents', { filter: { workspaceId }, page: { page: 2, pageSize: 1 } });
    expect(second.events.map((e) => e.providerEventId)).toEqual([other.provider_event_id]);
  });
});

describe('ListEvents read again', () => {
  // A repeated read fetches the page where the last identical read found it, beside the day counts.
  const workspaceId = randomUUID();
  const onDay = (day: string, count: number, prefix: string) =>
    Array.from({ length: count }, (_, index) =>
      event({
        workspace_id: workspaceId,
        campaign_id: C1,
        occurred_at: `2026-03-${day}T10:00:${String(index).padStart(2, '0')}Z`,
        provider_event_id: `${prefix}-${index}`,
      }),
    );
  const page = async (pageNumber: number) => {
    const response = await analytics.rpc('listEvents', { filter: { workspaceId }, page: { page: pageNumber, pageSize: 2 } });
    return { ids: response.events.map((e) => e.providerEventId), total: response.page?.total };
  };

  it('answers from the days the counts say now, when events moved the page since the last read', async () => {
    await analytics.insertEvents(onDay('10', 3, 'tenth'));
    expect(await page(1)).toEqual({ ids: ['tenth-2', 'tenth-1'], total: 3 });
    expect(await page(2)).toEqual({ ids: ['tenth-0'], total: 3 });

    // Page 1 now lies on a newer day, and page 2 starts one event later on the same one.
    await analytics.insertEvents(onDay('11', 3, 'eleventh'));
    expect(await page(1)).toEqual({ ids: ['eleventh-2', 'eleventh-1'], total: 6 });
    expect(await page(2)).toEqual({ ids: ['eleventh-0', 'tenth-2'], total: 6 });
  });

  it('answers with the events stored now, when the page stayed on its days', async () => {
    const before = await page(1);
    await analytics.insertEvents(onDay('11', 5, 'later'));
    const after = await page(1);
    expect(after.total).toBe((before.total ?? 0) + 5);
    expect(after.ids).toEqual(['later-4', 'later-3']);
  });

  it("answers a filter's first page from the filter's newest day, which need not be the workspace's", async () => {
    const older = onDay('05', 3, 'other-campaign').map((row) => ({ ...row, campaign_id: C2 }));
    await analytics.insertEvents(older);
    await page(1);
    const response = await analytics.rpc('listEvents', { filter: { workspaceId, campaignId: C2 }, page: { page: 1, pageSize: 2 } });
    expect(response.events.map((e) => e.providerEventId)).toEqual(['other-campaign-2', 'other-campaign-1']);
    expect(response.page?.total).toBe(3);
  });
});
