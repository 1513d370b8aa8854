import { randomUUID } from 'node:crypto';
import { NO_VARIANT, createClickHouse } from '@mail/event-store';
import { startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * GET /campaign-events/ and /campaign-events/stats end to end: the gateway's
 * whole pipeline (in-process, DEV_AUTH_ENABLED=1) against the real identity
 * and analytics processes, over events written straight into a private
 * ClickHouse database.
 */

let clickhouse: ReturnType<typeof createClickHouse>;
let gateway: GatewayStack;
let gatewayUrl: string;
let workspace: string;

const C1 = '00000000-0000-4000-8000-0000000000c1';
const C2 = '00000000-0000-4000-8000-0000000000c2';

function event(fields: Record<string, unknown>) {
  return {
    id: randomUUID(),
    workspace_id: workspace,
    campaign_id: C1,
    event_type: 'open',
    bounce_type: 'none',
    email: 'a@example.com',
    received_at: fields.occurred_at,
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
    provider: 'sendgrid',
    provider_event_id: randomUUID(),
    provider_message_id: null,
    raw: '{}',
    ingested_at: new Date().toISOString(),
    variant_id: NO_VARIANT,
    bounce_class: 'none',
    machine_open: 0,
    ...fields,
  };
}

let rows: ReturnType<typeof event>[];
let click: ReturnType<typeof event>;

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'events',
    processes: ['identity', 'campaign', 'analytics'],
    clickhouse: true,
    workspaces: ['Events', 'Variants'],
  });
  gatewayUrl = gateway.url;
  [workspace] = gateway.workspaces;

  // The analytics service created the tables at start.
  const database = gateway.clickhouse!;
  clickhouse = createClickHouse(database.url, database.database);
  click = event({
    event_type: 'click',
    occurred_at: '2026-03-10T09:30:00Z',
    received_at: '2026-03-10T09:30:02Z',
    url: 'https://example.com/offer',
    user_agent: 'Mozilla/5.0',
    ip: '203.0.113.7',
    provider_event_id: 'sg-click-1',
    provider_message_id: 'msg-1',
  });
  rows = [
    event({ occurred_at: '2026-03-09T23:59:59Z' }),
    event({ occurred_at: '2026-03-10T00:00:00Z', email: 'b@example.com', campaign_id: C2 }),
    click,
    event({ occurred_at: '2026-03-10T23:59:59Z', event_type: 'bounce', bounce_type: 'soft', reason: '421 try later' }),
    event({ occurred_at: '2026-03-11T00:00:00Z', event_type: 'unsubscribe' }),
  ];
  await clickhouse.insert({ table: 'events', values: rows, format: 'JSONEachRow' });
  // A second copy of the click, as a fault can store it: ingestion then marks its day unsettled.
  await clickhouse.insert({ table: 'events', values: [{ ...click, id: randomUUID() }], format: 'JSONEachRow' });
  await clickhouse.insert({
    table: 'unsettled_days',
    values: [{ workspace_id: click.workspace_id, day: '2026-03-10', marked_at: new Date().toISOString() }],
    format: 'JSONEachRow',
  });
}, 120_000);

afterAll(async () => {
  await clickhouse?.close();
  await gateway?.close();
});

async function get(route: string, workspaceId = workspace): Promise<{ status: number; body: JsonObject }> {
  const response = await fetch(`${gatewayUrl}${route}`, { headers: { workspace_id: workspaceId } });
  return { status: response.status, body: (await response.json()) as JsonObject };
}

/** provider_event_ids of the listed events, newest first. */
async function listed(query: string): Promise<string[]> {
  const answer = await get(`/campaign-events/?${query}`);
  expect(answer.status).toBe(200);
  return answer.body.items.map((item: JsonObject) => item.provider_event_id);
}

const ids = (...indexes: number[]) => indexes.map((index) => rows[index].provider_event_id);

describe('GET /campaign-events/', () => {
  it('lists newest first with the documented record, each provider event once', async () => {
    const answer = await get('/campaign-events/');
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ total: 5, page: 1, page_size: 50 });
    expect(answer.body.items.map((item: JsonObject) => item.provider_event_id)).toEqual(ids(4, 3, 2, 1, 0));
    expect(answer.body.items[2]).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      workspace_id: workspace,
      campaign_id: C1,
      event_type: 'click',
      bounce_type: null,
      email: 'a@example.com',
      occurred_at: '2026-03-10T09:30:00.000Z',
      received_at: '2026-03-10T09:30:02.000Z',
      url: 'https://example.com/offer',
      reason: null,
      user_agent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      provider: 'sendgrid',
      provider_event_id: 'sg-click-1',
      provider_message_id: 'msg-1',
      machine_open: false,
      machine_click: false,
      variant_id: null,
      bounce_class: null,
      run_id: null,
    });
    expect(answer.body.items[1]).toMatchObject({ event_type: 'bounce', bounce_type: 'soft', reason: '421 try later' });
  });

  it('filters by type, campaign and address', async () => {
    expect(await listed('event_type=open')).toEqual(ids(1, 0));
    expect(await listed(`campaign_id=${C2}`)).toEqual(ids(1));
    expect(await listed(`campaign_id=${C2.toUpperCase().replace(/-/g, '')}`)).toEqual(ids(1));
    expect(await listed('email=B%40Example.com')).toEqual(ids(1));
    expect(await listed(`event_type=open&campaign_id=${C1}&email=a%40example.com`)).toEqual(ids(0));
  });

  it('reads a bare date_to as the whole day and date-times as inclusive instants', async () => {
    expect(await listed('date_from=2026-03-10&date_to=2026-03-10')).toEqual(ids(3, 2, 1));
    expect(await listed('date_to=2026-03-09')).toEqual(ids(0));
    expect(await listed('date_from=2026-03-10T09:30:00Z&date_to=2026-03-10T23:59:59Z')).toEqual(ids(3, 2));
    expect(await listed('date_from=2026-03-10T09:30:00.001Z')).toEqual(ids(4, 3));
    // No zone means UTC; an offset is honoured.
    expect(await listed('date_from=2026-03-10 09:30&date_to=2026-03-10T09:30')).toEqual(ids(2));
    expect(await listed('date_from=2026-03-10T11:30:00%2B02:00&date_to=2026-03-10T11:30:00%2B02:00')).toEqual(ids(2));
    expect(await get('/campaign-events/?date_from=2026-03-12&date_to=2026-03-01')).toMatchObject({
      status: 200,
      body: { items: [], total: 0 },
    });
  });

  it('reads unix times, and fractions beyond microseconds, as Pydantic does', async () => {
    const seconds = (iso: string) => Date.parse(iso) / 1000;
    expect(await listed(`date_from=${seconds('2026-03-10T09:30:00Z')}&date_to=${seconds('2026-03-10T23:59:59Z')}.5`)).toEqual(ids(3, 2));
    // Beyond 2e10, milliseconds.
    expect(await listed(`date_from=${seconds('2026-03-10T09:30:00Z') * 1000 + 1}`)).toEqual(ids(4, 3));
    expect(await listed('date_from=2026-03-10T09:30:00.0009999Z&date_to=2026-03-10T09:30:00.0000001Z')).toEqual(ids(2));
  });

  it('filters by dates before 1970 or after what ClickHouse holds without wrapping around', async () => {
    const none = { status: 200, body: { items: [], total: 0 } };
    for (const early of ['1900-01-01', '0001-01-01', '-1', '1969-12-31T23:59:59Z']) {
      expect(await listed(`date_from=${early}`)).toEqual(ids(4, 3, 2, 1, 0));
      expect(await get(`/campaign-events/?date_to=${early}`)).toMatchObject(none);
    }
    for (const late of ['2106-02-06', '2106-02-07', '2106-02-08', '2200-01-01', '9999-12-31T23:59:59Z']) {
      expect(await get(`/campaign-events/?date_from=${late}`)).toMatchObject(none);
      expect(await get(`/campaign-events/?date_from=${late}&page_size=1`)).toMatchObject(none);
      expect(await listed(`date_to=${late}`)).toEqual(ids(4, 3, 2, 1, 0));
    }
  });

  it('pages, with an empty page past the end', async () => {
    expect(await get('/campaign-events/?page=2&page_size=2')).toMatchObject({ status: 200, body: { total: 5, page: 2, page_size: 2 } });
    expect(await listed('page=2&page_size=2')).toEqual(ids(2, 1));
    expect(await get('/campaign-events/?page=4&page_size=2')).toMatchObject({ body: { items: [], total: 5, page: 4, page_size: 2 } });
  });

  it('answers 422 like FastAPI for every invalid parameter at once', async () => {
    expect(await get('/campaign-events/?page_size=0')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'greater_than_equal',
            loc: ['query', 'page_size'],
            msg: 'Input should be greater than or equal to 1',
            input: '0',
            ctx: { ge: 1 },
          },
        ],
      },
    });
    const expected = "'open', 'click', 'bounce', 'unsubscribe', 'processed', 'delivered', 'deferred', 'dropped', 'spamreport' or 'sent'";
    expect(await get('/campaign-events/?page_size=501&event_type=spam&campaign_id=nope')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'enum',
            loc: ['query', 'event_type'],
            msg: `Input should be ${expected}`,
            input: 'spam',
            ctx: { expected },
          },
          {
            type: 'uuid_parsing',
            loc: ['query', 'campaign_id'],
            msg: 'Input should be a valid UUID, invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1',
            input: 'nope',
            ctx: { error: 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1' },
          },
          {
            type: 'less_than_equal',
            loc: ['query', 'page_size'],
            msg: 'Input should be less than or equal to 500',
            input: '501',
            ctx: { le: 500 },
          },
        ],
      },
    });
  });

  it.each([
    ['2026-3-1', 'input is too short'],
    ['yesterday!', 'invalid character in year'],
    ['2026/03/01', 'invalid date separator, expected `-`'],
    ['2026-13-01', 'month value is outside expected range of 1-12'],
    ['2026-02-29', 'day value is outside expected range'],
    // A date followed by anything Pydantic does not read as a time: the error of reading it as a date.
    ['2026-03-01X10:00', 'unexpected extra characters at the end of the input'],
    ['2026-03-01T25:00', 'unexpected extra characters at the end of the input'],
    ['2026-03-01T', 'unexpected extra characters at the end of the input'],
    ['2026-03-01T10:00:00+25:00', 'unexpected extra characters at the end of the input'],
    ['2026-03-01T10:00:00Zulu', 'unexpected extra characters at the end of the input'],
    // Numbers are unix times, but only plain decimals, and not beyond year 9999.
    ['1e9', 'input is too short'],
    ['17000000000000000', 'dates after 9999 are not supported as unix timestamps'],
  ])('answers 422 datetime_from_date_parsing for date_from=%s', async (input, error) => {
    expect(await get(`/campaign-events/?date_from=${encodeURIComponent(input)}&date_to=2026-03-10`)).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'datetime_from_date_parsing',
            loc: ['query', 'date_from'],
            msg: `Input should be a valid datetime or date, ${error}`,
            input,
            ctx: { error },
          },
        ],
      },
    });
  });

  it('reports both bad dates at once', async () => {
    const answer = await get('/campaign-events/stats?date_from=soon&date_to=later');
    expect(answer.status).toBe(422);
    expect(answer.body.detail.map((entry: JsonObject) => entry.loc)).toEqual([
      ['query', 'date_from'],
      ['query', 'date_to'],
    ]);
  });

  it('reports bad dates with every other failing field, in query order, then the header', async () => {
    const response = await fetch(`${gatewayUrl}/campaign-events/?event_type=spam&date_from=2026-3-1&page=0`, {
      headers: { workspace_id: 'nope' },
    });
    expect(response.status).toBe(422);
    const { detail } = (await response.json()) as JsonObject;
    expect(detail.map((entry: JsonObject) => [entry.type, entry.loc])).toEqual([
      ['enum', ['query', 'event_type']],
      ['datetime_from_date_parsing', ['query', 'date_from']],
      ['greater_than_equal', ['query', 'page']],
      ['uuid_parsing', ['header', 'workspace_id']],
    ]);
  });

  it('treats injection attempts as data', async () => {
    for (const email of ["' OR 1=1 --", "a@example.com' OR '1'='1", "\\'; DROP TABLE events; --"]) {
      expect(await get(`/campaign-events/?email=${encodeURIComponent(email)}`)).toMatchObject({
        status: 200,
        body: { items: [], total: 0 },
      });
    }
    expect((await get(`/campaign-events/?campaign_id=${encodeURIComponent(`${C1}' OR '1'='1`)}`)).status).toBe(422);
    const refused: [string, string, string][] = [
      ['event_type', "open' OR '1'='1", 'enum'],
      ['date_from', "2026-03-09' OR '1'='1", 'datetime_from_date_parsing'],
      ['date_to', '2026-03-12T00:00:00Z; DROP TABLE events', 'datetime_from_date_parsing'],
    ];
    for (const [parameter, value, type] of refused) {
      for (const path of ['/campaign-events/', '/campaign-events/stats']) {
        const response = await get(`${path}?${parameter}=${encodeURIComponent(value)}`);
        expect([parameter, response.status, response.body.detail.map((entry: JsonObject) => [entry.type, entry.loc, entry.input])]).toEqual(
          [parameter, 422, [[type, ['query', parameter], value]]],
        );
      }
    }
    expect((await get('/campaign-events/')).body.total).toBe(5);
  });

  it('needs the workspace_id header', async () => {
    const response = await fetch(`${gatewayUrl}/campaign-events/`);
    expect(response.status).toBe(422);
    expect(((await response.json()) as JsonObject).detail[0]).toMatchObject({ type: 'missing', loc: ['header', 'workspace_id'] });
  });
});

/** Every count (zero unless given) and the rates they make, null on a zero denominator. */
function counts(values: Record<string, number> = {}): JsonObject {
  const all: Record<string, number> = {
    sent: 0,
    processed: 0,
    delivered: 0,
    deferred: 0,
    dropped: 0,
    hard_bounces: 0,
    soft_bounces: 0,
    spam_reports: 0,
    unsubscribes: 0,
    opens: 0,
    machine_opens: 0,
    unique_opens: 0,
    clicks: 0,
    machine_clicks: 0,
    unique_clicks: 0,
    ...values,
  };
  const ratio = (part: number, whole: number) => (whole === 0 ? null : part / whole);
  return {
    ...all,
    delivery_rate: ratio(all.delivered, all.processed),
    open_rate: ratio(all.unique_opens, all.delivered),
    click_rate: ratio(all.unique_clicks, all.delivered),
    click_to_open_rate: ratio(all.unique_clicks, all.unique_opens),
    bounce_rate: ratio(all.hard_bounces + all.soft_bounces, all.processed),
    unsubscribe_rate: ratio(all.unsubscribes, all.delivered),
    spam_report_rate: ratio(all.spam_reports, all.delivered),
  };
}

describe('GET /campaign-events/stats', () => {
  const zeros = counts();
  const noLeaders = { leader_by_open_rate: null, leader_by_click_rate: null };

  it('answers totals, campaigns, a filled series, top links and suppressions in snake_case', async () => {
    const answer = await get('/campaign-events/stats?date_from=2026-03-09&date_to=2026-03-12');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      totals: counts({ opens: 2, unique_opens: 2, clicks: 1, unique_clicks: 1, soft_bounces: 1, unsubscribes: 1 }),
      campaigns: [
        {
          campaign_id: C1,
          ...counts({ opens: 1, unique_opens: 1, clicks: 1, unique_clicks: 1, soft_bounces: 1, unsubscribes: 1 }),
          ...noLeaders,
        },
        { campaign_id: C2, ...counts({ opens: 1, unique_opens: 1 }), ...noLeaders },
      ],
      variants: [],
      series: [
        { bucket_start: '2026-03-09T00:00:00.000Z', ...counts({ opens: 1, unique_opens: 1 }) },
        {
          bucket_start: '2026-03-10T00:00:00.000Z',
          ...counts({ opens: 1, unique_opens: 1, clicks: 1, unique_clicks: 1, soft_bounces: 1 }),
        },
        { bucket_start: '2026-03-11T00:00:00.000Z', ...counts({ unsubscribes: 1 }) },
        { bucket_start: '2026-03-12T00:00:00.000Z', ...zeros },
      ],
      top_links: [{ campaign_id: C1, url: 'https://example.com/offer', clicks: 1, unique_clicks: 1 }],
      suppressions: { total: 0, hard_bounce: 0, soft_bounces: 0, unsubscribe: 0, spam_report: 0 },
    });
  });

  it('buckets by UTC hour', async () => {
    const answer = await get('/campaign-events/stats?interval=hour&date_from=2026-03-09T23:00Z&date_to=2026-03-10T01:59:59Z');
    expect(answer.body.series.map((bucket: JsonObject) => [bucket.bucket_start, bucket.opens])).toEqual([
      ['2026-03-09T23:00:00.000Z', 1],
      ['2026-03-10T00:00:00.000Z', 1],
      ['2026-03-10T01:00:00.000Z', 0],
    ]);
  });

  it('answers zeros for an empty selection', async () => {
    const answer = await get('/campaign-events/stats?event_type=open&email=nobody%40example.com');
    expect(answer).toEqual({
      status: 200,
      body: {
        totals: zeros,
        campaigns: [],
        variants: [],
        series: [],
        top_links: [],
        suppressions: { total: 0, hard_bounce: 0, soft_bounces: 0, unsubscribe: 0, spam_report: 0 },
      },
    });
    // Ranges outside what ClickHouse holds select nothing, rather than wrapping around.
    for (const range of ['date_to=1900-01-01', 'date_from=2106-02-07', 'date_from=2106-02-08&date_to=2106-02-09']) {
      const { body } = await get(`/campaign-events/stats?${range}`);
      expect(body).toMatchObject({ totals: zeros, campaigns: [], top_links: [] });
      expect(body.series.every((bucket: JsonObject) => bucket.opens === 0 && bucket.clicks === 0)).toBe(true);
    }
  });

  it('answers 422 for a bad interval, and a long range with the buckets that have events', async () => {
    expect(await get('/campaign-events/stats?interval=week')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'enum',
            loc: ['query', 'interval'],
            msg: "Input should be 'hour' or 'day'",
            input: 'week',
            ctx: { expected: "'hour' or 'day'" },
          },
        ],
      },
    });
    const long = await get('/campaign-events/stats?interval=hour&date_from=2026-01-01&date_to=2026-05-01');
    expect(long.status).toBe(200);
    // 2880 hours: only the hours of this workspace's events in them, in time order.
    const starts: string[] = long.body.series.map((bucket: JsonObject) => bucket.bucket_start);
    expect(starts.length).toBeGreaterThan(0);
    expect([...starts].sort()).toEqual(starts);
    for (const bucket of long.body.series)
      expect(bucket.opens + bucket.clicks + bucket.hard_bounces + bucket.soft_bounces + bucket.unsubscribes).toBeGreaterThan(0);
  });
});

describe('delivery events and A/B variants', () => {
  let workspaceB: string;
  let campaignId: string;
  let variants: Record<'A' | 'B' | 'C', JsonObject>;
  const DELIVERED = 100;
  /** Human unique opens, machine opens (by addresses that never opened themselves) and unique clicks per variant. */
  const OUTCOMES = { A: { opens: 40, machine: 5, clicks: 6 }, B: { opens: 15, machine: 0, clicks: 5 } };
  const stored: JsonObject[] = [];

  /** The pooled two-proportion z statistic, computed here on its own. */
  const z = (a: number, b: number, n: number) => {
    const pooled = (a + b) / (2 * n);
    return (a / n - b / n) / Math.sqrt(pooled * (1 - pooled) * (2 / n));
  };

  async function api(method: string, route: string, body: unknown): Promise<JsonObject> {
    const response = await fetch(`${gatewayUrl}${route}`, {
      method,
      headers: { workspace_id: workspaceB, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBeLessThan(300);
    return (await response.json()) as JsonObject;
  }

  beforeAll(async () => {
    workspaceB = gateway.workspaces[1];
    const campaign = await api('POST', '/email-campaigns/', {
      workspace_id: workspaceB,
      name: 'A/B',
      delivery_mode: 'variants',
      variants: [
        { template_id: 'tpl-a', weight: 3, label: 'A' },
        { template_id: 'tpl-b', weight: 1, label: 'B' },
        { template_id: 'tpl-c', weight: 1, label: 'C', is_active: false },
      ],
    });
    campaignId = campaign.id;
    const [A, B, C] = campaign.variants as JsonObject[];
    variants = { A, B, C };
    const on = (day: string) => `2026-06-${day}T10:00:00Z`;
    const add = (fields: JsonObject) => stored.push(event({ workspace_id: workspaceB, campaign_id: campaignId, ...fields }));
    for (const name of ['A', 'B'] as const) {
      const outcome = OUTCOMES[name];
      for (let i = 0; i < DELIVERED; i++) {
        const base = { variant_id: variants[name].id, email: `${name.toLowerCase()}${i}@example.com` };
        add({ ...base, event_type: 'processed', occurred_at: on('01') });
        add({ ...base, event_type: 'delivered', occurred_at: on('01') });
        if (i < outcome.opens) add({ ...base, event_type: 'open', occurred_at: on(i % 2 === 0 ? '02' : '03') });
        if (i >= DELIVERED - outcome.machine) add({ ...base, event_type: 'open', machine_open: 1, occurred_at: on('02') });
        if (i < outcome.clicks) add({ ...base, event_type: 'click', url: 'https://example.com/ab', occurred_at: on('03') });
      }
    }
    add({ event_type: 'bounce', bounce_type: 'hard', bounce_class: 'invalid_address', email: 'gone@example.com', occurred_at: on('04') });
    add({ event_type: 'spamreport', email: 'a0@example.com', occurred_at: on('04') });
    await clickhouse.insert({ table: 'events', values: stored, format: 'JSONEachRow' });
  });

  const inB = (route: string) => get(route, workspaceB);

  it('lists the four engagement types without event_type, any stored type with it', async () => {
    const all = await inB('/campaign-events/?page_size=500');
    const engagement = stored.filter((row) => ['open', 'click', 'bounce', 'unsubscribe'].includes(row.event_type as string));
    expect(all.body.total).toBe(engagement.length);
    expect(new Set(all.body.items.map((item: JsonObject) => item.event_type))).toEqual(new Set(['open', 'click', 'bounce']));
    const delivered = await inB('/campaign-events/?event_type=delivered&page_size=1');
    expect(delivered.body).toMatchObject({ total: 2 * DELIVERED, items: [{ event_type: 'delivered', bounce_class: null }] });
    expect((await inB('/campaign-events/?event_type=spamreport')).body.items).toMatchObject([
      { event_type: 'spamreport', email: 'a0@example.com', variant_id: null },
    ]);
    expect((await inB('/campaign-events/?event_type=bounce')).body.items).toMatchObject([
      { bounce_type: 'hard', bounce_class: 'invalid_address', machine_open: false },
    ]);
    const machine = await inB(`/campaign-events/?event_type=open&variant_id=${variants.A.id}&date_from=2026-06-02&date_to=2026-06-02`);
    expect(machine.body.items.filter((item: JsonObject) => item.machine_open)).toHaveLength(OUTCOMES.A.machine);
    expect(machine.body.items.every((item: JsonObject) => item.variant_id === variants.A.id)).toBe(true);
  });

  it('answers each variant with its label, weight and rates, and names the leader only where it is significant', async () => {
    expect(Math.abs(z(OUTCOMES.A.opens, OUTCOMES.B.opens, DELIVERED))).toBeGreaterThan(1.959964);
    expect(Math.abs(z(OUTCOMES.A.clicks, OUTCOMES.B.clicks, DELIVERED))).toBeLessThan(1.959964);
    const answer = await inB('/campaign-events/stats?date_from=2026-06-01&date_to=2026-06-04');
    expect(answer.status).toBe(200);
    const variantCounts = (name: 'A' | 'B') =>
      counts({
        processed: DELIVERED,
        delivered: DELIVERED,
        opens: OUTCOMES[name].opens + OUTCOMES[name].machine,
        machine_opens: OUTCOMES[name].machine,
        unique_opens: OUTCOMES[name].opens,
        clicks: OUTCOMES[name].clicks,
        unique_clicks: OUTCOMES[name].clicks,
      });
    expect(answer.body.variants).toEqual([
      { campaign_id: campaignId, variant_id: variants.A.id, label: 'A', weight: 3, is_active: true, ...variantCounts('A') },
      { campaign_id: campaignId, variant_id: variants.B.id, label: 'B', weight: 1, is_active: true, ...variantCounts('B') },
      { campaign_id: campaignId, variant_id: variants.C.id, label: 'C', weight: 1, is_active: false, ...counts() },
    ]);
    expect(answer.body.campaigns).toEqual([
      {
        campaign_id: campaignId,
        ...counts({
          processed: 2 * DELIVERED,
          delivered: 2 * DELIVERED,
          hard_bounces: 1,
          spam_reports: 1,
          opens: 60,
          machine_opens: 5,
          unique_opens: 55,
          clicks: 11,
          unique_clicks: 11,
        }),
        leader_by_open_rate: variants.A.id,
        leader_by_click_rate: null,
      },
    ]);
    expect(answer.body.totals).toMatchObject({ delivery_rate: 1, open_rate: 55 / 200, bounce_rate: 1 / 200, spam_report_rate: 1 / 200 });
  });

  it('narrows the stats to one variant', async () => {
    const answer = await inB(`/campaign-events/stats?variant_id=${variants.B.id}&campaign_id=${campaignId}`);
    expect(answer.body.variants.map((variant: JsonObject) => variant.variant_id)).toEqual([variants.B.id]);
    expect(answer.body.totals).toMatchObject({ delivered: DELIVERED, unique_opens: OUTCOMES.B.opens });
    expect(answer.body.campaigns[0]).toMatchObject({ leader_by_open_rate: null, leader_by_click_rate: null });
    const spelledOtherwise = (id: string) => id.toUpperCase().replace(/-/g, '');
    const same = await inB(
      `/campaign-events/stats?variant_id=${spelledOtherwise(variants.B.id)}&campaign_id=${spelledOtherwise(campaignId)}`,
    );
    expect(same.body).toEqual(answer.body);
    expect((await inB('/campaign-events/stats?variant_id=nope')).status).toBe(422);
  });
});
