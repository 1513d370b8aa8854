import { createClickHouse, refreshSuppressionState } from '@mail/event-store';
import { startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * GET /suppressions/ and DELETE /suppressions/{email} end to end: the
 * gateway (in-process, DEV_AUTH_ENABLED=1) against the real identity and
 * analytics processes, over signals written straight into ClickHouse (with
 * their addresses' state, as ingestion writes them).
 */

let clickhouse: ReturnType<typeof createClickHouse>;
let gateway: GatewayStack;
let gatewayUrl: string;
let workspace: string;
let sequence = 0;

async function signal(email: string, reason: string, occurredAt: string): Promise<void> {
  sequence += 1;
  const row = {
    workspace_id: workspace,
    email,
    reason,
    occurred_at: occurredAt,
    provider_event_id: `sg-${sequence}`,
    ingested_at: occurredAt,
  };
  await clickhouse.insert({ table: 'suppression_signals', values: [row], format: 'JSONEachRow' });
  await refreshSuppressionState(clickhouse, [{ workspaceId: workspace, email }]);
}

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'suppressions',
    processes: ['identity', 'analytics'],
    clickhouse: true,
    workspaces: ['Suppressions'],
  });
  gatewayUrl = gateway.url;
  [workspace] = gateway.workspaces;

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

async function api(method: string, route: string): Promise<{ status: number; body: JsonObject | undefined }> {
  const response = await fetch(`${gatewayUrl}${route}`, { method, headers: { workspace_id: workspace } });
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
