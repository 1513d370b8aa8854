import type { ClickHouseClient } from '@clickhouse/client';
import { createClient } from '@mail/common';
import { chsql, createClickHouse } from '@mail/event-store';
import { eventually, uniqueSuffix, type Stack } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import { startPrivateStack, type PrivateStack } from './support/private-stack';
import { keyPair, post, sendgridEvent, signedHeaders, createCategoryCampaign } from './webhook-support';

/**
 * The payloads of the second attack pass, each in a signed SendGrid call
 * through the real pipeline (gateway -> Kafka -> ingestion -> ClickHouse):
 * every one is stored, or refused with a 422; none is answered 202 and lost,
 * and none stops the storing of what comes after, another workspace's events
 * included.
 */
jest.setTimeout(300_000);

const keys = keyPair();
const run = uniqueSuffix();
let target: PrivateStack;
let stack: Stack;
let clickhouse: ClickHouseClient;
let campaigns: campaignV1.CampaignServiceClient;
const { str } = chsql;

beforeAll(async () => {
  target = await startPrivateStack('attack', { env: { SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64 } });
  stack = target.stack;
  clickhouse = createClickHouse(target.clickhouse.url, target.clickhouse.database);
  campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
});

afterAll(async () => {
  campaigns?.close();
  await clickhouse?.close();
  await target?.close();
});

const createCampaign = (category: string) => createCategoryCampaign(campaigns, `attack ${category}`, category);

/** A signed SendGrid call. */
function deliver(events: Record<string, unknown>[]): ReturnType<typeof post> {
  const body = JSON.stringify(events);
  return post(stack.urls.gateway, body, signedHeaders(keys.privateKey, body));
}

async function count(query: string): Promise<number> {
  const result = await clickhouse.query({ query, format: 'JSONEachRow' });
  return Number((await result.json<{ n: string }>())[0].n);
}

/** Polls until `query` counts `expected`; no deadline of its own beyond eventually's. */
async function waitForCount(query: string, expected: number): Promise<void> {
  await eventually(async () => {
    const found = await count(query);
    if (found !== expected) throw new Error(`${query}: ${found}, expected ${expected}`);
  }, 120_000);
}

it('stores each odd but valid event of the attack pass, then another workspace’s events', async () => {
  const categoryA = `attack-a-${run}`;
  const categoryB = `attack-b-${run}`;
  const [a, b] = await Promise.all([createCampaign(categoryA), createCampaign(categoryB)]);
  const id = (name: string): string => `${run}-${name}`;
  const longId = `${run}-${'x'.repeat(5_000)}`;
  const longEmail = `${'a'.repeat(9_988)}@example.com`;
  const odd = [
    // Pydantic's lax int takes both: 1,000 and 1 seconds after the epoch.
    sendgridEvent({ event: 'open', sg_event_id: id('spaced-underscored'), timestamp: ' 1_000 ', category: categoryA }),
    sendgridEvent({ event: 'click', sg_event_id: id('boolean'), timestamp: true, category: categoryA, url: 'https://example.com/' }),
    // Categories that name no campaign: kept unmatched.
    sendgridEvent({ event: 'open', sg_event_id: id('category-object'), category: { name: categoryA } }),
    sendgridEvent({ event: 'open', sg_event_id: id('category-number'), category: 42 }),
    sendgridEvent({ event: 'open', sg_event_id: id('category-nested'), category: [[categoryA], { x: [categoryA] }] }),
    sendgridEvent({ event: 'bounce', sg_event_id: id('long-email'), email: longEmail, category: categoryA, reason: 'x'.repeat(10_000) }),
    sendgridEvent({ event: 'delivered', sg_event_id: longId, category: categoryA }),
  ];
  expect(await deliver(odd)).toMatchObject({ status: 202, body: { accepted: odd.length } });

  // Lean, to stay within the 5 MB a call may carry.
  const dropped = Array.from({ length: 30_000 }, (_, i) => ({
    event: 'dropped',
    sg_event_id: id(`dropped-${i}`),
    email: `r${i}@example.com`,
    timestamp: 1_763_719_200,
    category: categoryA,
  }));
  expect(await deliver(dropped)).toMatchObject({ status: 202, body: { accepted: 30_000 } });

  const afterwards = [sendgridEvent({ event: 'open', sg_event_id: id('workspace-b'), category: categoryB })];
  expect(await deliver(afterwards)).toMatchObject({ status: 202, body: { accepted: 1 } });

  await waitForCount(`SELECT count() AS n FROM events WHERE workspace_id = toUUID('${b.workspaceId}')`, 1);
  await waitForCount(`SELECT count() AS n FROM events WHERE workspace_id = toUUID('${a.workspaceId}') AND event_type = 'dropped'`, 30_000);
  await waitForCount(`SELECT count() AS n FROM events WHERE workspace_id = toUUID('${a.workspaceId}') AND event_type != 'dropped'`, 4);

  const stored = await (
    await clickhouse.query({
      query: `SELECT provider_event_id, event_type, toUnixTimestamp(occurred_at) AS occurred_at, length(email) AS email_length
        FROM events WHERE workspace_id = toUUID('${a.workspaceId}') AND event_type != 'dropped' ORDER BY occurred_at, provider_event_id`,
      format: 'JSONEachRow',
    })
  ).json<{ provider_event_id: string; event_type: string; occurred_at: string | number; email_length: string | number }>();
  const name = (eventId: string): string => (eventId === longId ? 'the long id' : eventId);
  expect(stored.map((row) => [name(row.provider_event_id), row.event_type, Number(row.occurred_at), Number(row.email_length)])).toEqual([
    [id('boolean'), 'click', 1, 'recipient@example.com'.length],
    [id('spaced-underscored'), 'open', 1_000, 'recipient@example.com'.length],
    [id('long-email'), 'bounce', 1_763_719_200, longEmail.length],
    ['the long id', 'delivered', 1_763_719_200, 'recipient@example.com'.length],
  ]);
  await waitForCount(
    `SELECT count() AS n FROM unmatched_events WHERE provider_event_id IN (${['category-object', 'category-number', 'category-nested']
      .map((name) => str(id(name)).text)
      .join(', ')})`,
    3,
  );
  // The long address bounced: it is suppressed in its workspace.
  await waitForCount(
    `SELECT count() AS n FROM suppression_signals WHERE workspace_id = toUUID('${a.workspaceId}') AND email = ${str(longEmail).text}`,
    1,
  );
});

it('answers 422, never 202, for an event whose address is white space alone: it could not be stored', async () => {
  const response = await deliver([sendgridEvent({ event: 'open', sg_event_id: `${run}-blank`, email: '   ', category: 'any' })]);
  expect(response).toMatchObject({ status: 422, body: { detail: [{ type: 'string_too_short', loc: ['body', 0, 'email'] }] } });
});
