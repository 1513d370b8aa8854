import { createClickHouse, refreshSuppressionState } from '@mail/event-store';
import { startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * /suppressions/ end to end (list, CSV export, manual add, one address's
 * history, lift with its audit): the
 * gateway (in-process, DEV_AUTH_ENABLED=1) against the real identity and
 * analytics processes, over signals written straight into ClickHouse (with
 * their addresses' state, as ingestion writes them).
 */

let clickhouse: ReturnType<typeof createClickHouse>;
let gateway: GatewayStack;
let gatewayUrl: string;
let workspace: string;
let other: string;
let sequence = 0;

async function signal(email: string, reason: string, occurredAt: string, workspaceId = workspace): Promise<void> {
  sequence += 1;
  const row = {
    workspace_id: workspaceId,
    email,
    reason,
    occurred_at: occurredAt,
    provider_event_id: `sg-${sequence}`,
    ingested_at: occurredAt,
  };
  await clickhouse.insert({ table: 'suppression_signals', values: [row], format: 'JSONEachRow' });
  await refreshSuppressionState(clickhouse, [{ workspaceId, email }]);
}

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'suppressions',
    processes: ['identity', 'analytics'],
    clickhouse: true,
    workspaces: ['Suppressions', 'Console'],
  });
  gatewayUrl = gateway.url;
  [workspace, other] = gateway.workspaces;

  const database = gateway.clickhouse!;
  clickhouse = createClickHouse(database.url, database.database);
  await signal('hard@example.com', 'hard_bounce', '2026-03-01T10:00:00Z');
  await signal('gone@example.com', 'unsubscribe', '2026-03-02T10:00:00Z');
  await signal('spam@example.com', 'spam_report', '2026-03-03T10:00:00Z');
  for (const day of ['01', '05', '09']) await signal('soft+tag@example.com', 'soft_bounce', `2026-03-${day}T08:00:00Z`);
  for (const day of ['01', '05']) await signal('twice@example.com', 'soft_bounce', `2026-03-${day}T08:00:00Z`);
}, 120_000);

afterAll(async () => {
  await clickhouse?.close();
  await gateway?.close();
});

async function api(
  method: string,
  route: string,
  body?: unknown,
  workspaceId = workspace,
): Promise<{ status: number; body: JsonObject | undefined }> {
  const headers: Record<string, string> = { workspace_id: workspaceId };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${gatewayUrl}${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as JsonObject) : undefined };
}

it('lists suppressed addresses newest first with reason and time', async () => {
  expect(await api('GET', '/suppressions/')).toEqual({
    status: 200,
    body: {
      items: [
        { email: 'soft+tag@example.com', reason: 'soft_bounces', suppressed_at: '2026-03-09T08:00:00.000Z' },
        { email: 'spam@example.com', reason: 'spam_report', suppressed_at: '2026-03-03T10:00:00.000Z' },
        { email: 'gone@example.com', reason: 'unsubscribe', suppressed_at: '2026-03-02T10:00:00.000Z' },
        { email: 'hard@example.com', reason: 'hard_bounce', suppressed_at: '2026-03-01T10:00:00.000Z' },
      ],
      total: 4,
      page: 1,
      page_size: 50,
    },
  });
  expect(await api('GET', '/suppressions/?page=2&page_size=3')).toMatchObject({
    status: 200,
    body: { items: [{ email: 'hard@example.com' }], total: 4, page: 2, page_size: 3 },
  });
});

it('filters by exact address; injection attempts are data', async () => {
  expect((await api('GET', '/suppressions/?email=Spam%40Example.com')).body?.items).toEqual([
    { email: 'spam@example.com', reason: 'spam_report', suppressed_at: '2026-03-03T10:00:00.000Z' },
  ]);
  for (const email of ["' OR 1=1 --", "spam@example.com' OR '1'='1", "\\'; DROP TABLE suppression_signals; --"]) {
    expect(await api('GET', `/suppressions/?email=${encodeURIComponent(email)}`)).toMatchObject({
      status: 200,
      body: { items: [], total: 0 },
    });
  }
});

it('lifts a suppression (204), then answers 404 for it', async () => {
  expect(await api('DELETE', `/suppressions/${encodeURIComponent('Soft+Tag@example.com')}`)).toEqual({ status: 204, body: undefined });
  expect((await api('GET', '/suppressions/?email=soft%2Btag%40example.com')).body?.total).toBe(0);
  expect(await api('DELETE', '/suppressions/soft%2Btag%40example.com')).toEqual({ status: 404, body: { detail: 'Suppression not found' } });
});

it('answers 404 for an address that is not suppressed', async () => {
  for (const email of ['twice@example.com', 'nobody@example.com', "hard@example.com' OR '1'='1"]) {
    expect(await api('DELETE', `/suppressions/${encodeURIComponent(email)}`)).toEqual({
      status: 404,
      body: { detail: 'Suppression not found' },
    });
  }
  expect((await api('GET', '/suppressions/?email=hard%40example.com')).body?.total).toBe(1);
});

it('validates paging like FastAPI', async () => {
  expect(await api('GET', '/suppressions/?page_size=0&page=0')).toEqual({
    status: 422,
    body: {
      detail: [
        {
          type: 'greater_than_equal',
          loc: ['query', 'page'],
          msg: 'Input should be greater than or equal to 1',
          input: '0',
          ctx: { ge: 1 },
        },
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
});

describe('management', () => {
  const inOther = (method: string, route: string, body?: unknown) => api(method, route, body, other);
  const DEV = { user_id: expect.stringMatching(/^[0-9a-f-]{36}$/), email: 'dev@example.com' };

  beforeAll(async () => {
    await signal('bounced@console.example', 'hard_bounce', '2026-04-01T10:00:00Z', other);
    await signal('soft@console.example', 'soft_bounce', '2026-04-01T08:00:00Z', other);
    await signal('soft@console.example', 'soft_bounce', '2026-04-02T08:00:00Z', other);
    await signal('soft@console.example', 'soft_bounce', '2026-04-03T08:00:00Z', other);
    await signal('left@console.example', 'unsubscribe', '2026-04-04T10:00:00Z', other);
  });

  it('suppresses an address by hand: 201 with the record, then listed with reason manual', async () => {
    const added = await inOther('POST', '/suppressions/', { email: 'Asked <Asked.Me@Console.Example>', note: 'phoned in' });
    expect(added).toEqual({
      status: 201,
      body: { email: 'asked.me@console.example', reason: 'manual', suppressed_at: expect.any(String), note: 'phoned in' },
    });
    expect(Date.now() - Date.parse(added.body!.suppressed_at as string)).toBeLessThan(60_000);
    expect((await inOther('GET', '/suppressions/?email=asked.me%40console.example')).body?.items).toEqual([
      { email: 'asked.me@console.example', reason: 'manual', suppressed_at: added.body!.suppressed_at },
    ]);
  });

  it('validates the body like FastAPI', async () => {
    expect(await inOther('POST', '/suppressions/', { note: 5 })).toEqual({
      status: 422,
      body: {
        detail: [
          { type: 'missing', loc: ['body', 'email'], msg: 'Field required', input: { note: 5 } },
          { type: 'string_type', loc: ['body', 'note'], msg: 'Input should be a valid string', input: 5 },
        ],
      },
    });
    const invalid = await inOther('POST', '/suppressions/', { email: 'nobody' });
    expect(invalid).toMatchObject({ status: 422, body: { detail: [{ type: 'value_error', loc: ['body', 'email'] }] } });
  });

  it("shows one address's state, the events behind it, its additions and lifts", async () => {
    const soft = await inOther('GET', `/suppressions/${encodeURIComponent('Soft@Console.example')}`);
    expect(soft).toEqual({
      status: 200,
      body: {
        email: 'soft@console.example',
        suppressed: true,
        reason: 'soft_bounces',
        suppressed_at: '2026-04-03T08:00:00.000Z',
        note: null,
        events: ['03', '02', '01'].map((day) => ({
          reason: 'soft_bounce',
          event_type: 'bounce',
          bounce_type: 'soft',
          occurred_at: `2026-04-${day}T08:00:00.000Z`,
          provider_event_id: expect.any(String),
        })),
        additions: [],
        lifts: [],
      },
    });
    const manual = await inOther('GET', '/suppressions/asked.me%40console.example');
    expect(manual.body).toMatchObject({
      suppressed: true,
      reason: 'manual',
      note: 'phoned in',
      events: [],
      additions: [{ note: 'phoned in', added_by: DEV }],
    });
  });

  it('keeps an audit of each lift: who and when', async () => {
    const before = Date.now();
    expect((await inOther('DELETE', '/suppressions/left%40console.example')).status).toBe(204);
    const lifted = await inOther('GET', '/suppressions/left%40console.example');
    expect(lifted.body).toMatchObject({
      suppressed: false,
      reason: null,
      suppressed_at: null,
      events: [{ reason: 'unsubscribe', event_type: 'unsubscribe', bounce_type: null, occurred_at: '2026-04-04T10:00:00.000Z' }],
      lifts: [{ lifted_at: expect.any(String), lifted_by: DEV }],
    });
    expect(Date.parse(lifted.body!.lifts[0].lifted_at as string)).toBeGreaterThanOrEqual(before);
  });

  it('answers 404 for an address never suppressed here, and for one suppressed in another workspace', async () => {
    for (const email of ['never@console.example', 'twice@example.com']) {
      expect(await inOther('GET', `/suppressions/${encodeURIComponent(email)}`)).toEqual({
        status: 404,
        body: { detail: 'Suppression not found' },
      });
    }
    expect(await api('GET', '/suppressions/bounced%40console.example')).toEqual({ status: 404, body: { detail: 'Suppression not found' } });
    expect(await api('DELETE', '/suppressions/bounced%40console.example')).toMatchObject({ status: 404 });
    expect((await inOther('GET', '/suppressions/hard%40example.com')).status).toBe(404);
  });

  it('filters the list by reason and by a part of the address', async () => {
    const emails = async (query: string) =>
      ((await inOther('GET', `/suppressions/?${query}`)).body?.items as JsonObject[]).map((item) => item.email);
    expect(await emails('reason=manual')).toEqual(['asked.me@console.example']);
    expect(await emails('reason=soft_bounces&q=SOFT')).toEqual(['soft@console.example']);
    expect(await emails('q=console.example')).toEqual(['asked.me@console.example', 'soft@console.example', 'bounced@console.example']);
    expect(await emails('q=nothing-like-it')).toEqual([]);
    expect(await inOther('GET', '/suppressions/?reason=bounced')).toMatchObject({
      status: 422,
      body: { detail: [{ type: 'enum', loc: ['query', 'reason'] }] },
    });
  });

  it('answers CSV to Accept: text/csv, every row of the paged list, with the filters', async () => {
    for (let i = 0; i < 120; i++)
      await inOther('POST', '/suppressions/', { email: `bulk-${i}@csv.example`, note: i % 2 ? '=cmd()' : 'a "quoted", note' });
    const csv = async (query: string) => {
      const response = await fetch(`${gatewayUrl}/suppressions/${query}`, { headers: { workspace_id: other, accept: 'text/csv' } });
      expect(response.headers.get('content-type')).toMatch(/^text\/csv/);
      return { status: response.status, text: await response.text() };
    };
    const paged: JsonObject[] = [];
    for (let page = 1; ; page++) {
      const answer = await inOther('GET', `/suppressions/?page=${page}&page_size=50`);
      paged.push(...(answer.body!.items as JsonObject[]));
      if (paged.length >= (answer.body!.total as number)) break;
    }
    const all = await csv('?page_size=1');
    expect(all.status).toBe(200);
    expect(all.text).toBe(
      ['email,reason,suppressed_at', ...paged.map((row) => `${row.email},${row.reason},${row.suppressed_at}`)].join('\r\n') + '\r\n',
    );
    expect(paged.length).toBeGreaterThan(120);
    expect((await csv('?reason=hard_bounce')).text).toBe(
      'email,reason,suppressed_at\r\nbounced@console.example,hard_bounce,2026-04-01T10:00:00.000Z\r\n',
    );
    expect((await csv('?q=nothing-like-it')).text).toBe('email,reason,suppressed_at\r\n');
  });
});
