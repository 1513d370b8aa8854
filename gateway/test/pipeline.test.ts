import crypto from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import { createClient } from '@mail/common';
import { WORKSPACE_TABLES } from '@mail/event-store';
import { createClickHouse } from '@mail/event-store';
import { uniqueSuffix, type Stack } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import type { Json } from './support/json';
import { startPrivateStack, type PrivateStack } from './support/private-stack';
import { keyPair, post, sendgridEvent, signedHeaders, createCategoryCampaign } from './webhook-support';

/**
 * The engagement event pipeline end to end, every process real: SendGrid's
 * webhook call -> gateway -> Kafka -> ingestion -> ClickHouse.
 */
jest.setTimeout(240_000);

const keys = keyPair();
const BASIC = 'sendgrid:pipeline-secret';
const run = uniqueSuffix();
let target: PrivateStack;
let stack: Stack;
let clickhouse: ClickHouseClient;
let campaigns: campaignV1.CampaignServiceClient;

beforeAll(async () => {
  target = await startPrivateStack('pipeline', {
    env: { SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64, WEBHOOK_BASIC_AUTH: BASIC },
  });
  stack = target.stack;
  clickhouse = createClickHouse(target.clickhouse.url, target.clickhouse.database);
  campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
});

afterAll(async () => {
  campaigns?.close();
  await clickhouse?.close();
  await target?.close();
});

const createCampaign = (category: string) => createCategoryCampaign(campaigns, `pipeline ${category}`, category);

/** A webhook call the way SendGrid makes it when both signature and Basic are configured. */
function deliver(events: Record<string, unknown>[]): ReturnType<typeof post> {
  const body = JSON.stringify(events);
  return post(stack.urls.gateway, body, {
    ...signedHeaders(keys.privateKey, body),
    authorization: `Basic ${Buffer.from(BASIC).toString('base64')}`,
  });
}

/** A call to the gateway's API as the dev user (a platform admin). */
async function json(method: string, path: string, workspaceId: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${stack.urls.gateway}${path}`, {
    method,
    headers: { workspace_id: workspaceId, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: response.status === 204 ? undefined : await response.json() };
}

/** A campaign made through the public API (`fields` added to its body), and the ids of its variants. */
async function campaignIn(
  workspaceId: string,
  name: string,
  category?: string,
  fields: Record<string, unknown> = {},
): Promise<{ campaignId: string; variantIds: string[] }> {
  const campaign = await json('POST', '/email-campaigns/', workspaceId, {
    workspace_id: workspaceId,
    name,
    provider_category_id: category ?? null,
    ...fields,
  });
  expect(campaign.status).toBe(201);
  return { campaignId: campaign.body.id, variantIds: (campaign.body.variants ?? []).map((variant: { id: string }) => variant.id) };
}

/** A new workspace with one campaign (whose provider_category_id is `category`, when given), both made through the public API. */
async function workspaceWithCampaign(
  name: string,
  category?: string,
  fields: Record<string, unknown> = {},
): Promise<{ workspaceId: string; campaignId: string; variantIds: string[] }> {
  const workspace = await json('POST', '/workspaces/', crypto.randomUUID(), { name: `${name} ${run}` });
  expect(workspace.status).toBe(201);
  const workspaceId: string = workspace.body.id;
  return { workspaceId, ...(await campaignIn(workspaceId, name, category, fields)) };
}

/** GET /campaign-events/ of the workspace (the filters in `query`), polled until it lists `total` events or the deadline passes. */
async function listedEvents(workspaceId: string, query: string, total: number, deadline: number): Promise<Json> {
  for (;;) {
    const { status, body } = await json('GET', `/campaign-events/?page_size=500&${query}`, workspaceId);
    expect(status).toBe(200);
    if (body.total === total || Date.now() > deadline) return body;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function rows<T>(query: string): Promise<T[]> {
  return (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
}

async function count(query: string): Promise<number> {
  return Number((await rows<{ n: string }>(query))[0].n);
}

async function waitForCount(query: string, expected: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  while (Date.now() < deadline) {
    last = await count(query);
    if (last === expected) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${query}: ${last} after ${timeoutMs} ms, expected ${expected}`);
}

it('makes a SendGrid batch with every event type queryable through the API within 5 seconds', async () => {
  const category = `spring-sale-${run}`;
  const { workspaceId, campaignId } = await workspaceWithCampaign('Spring sale', category);
  const p = `e2e-${uniqueSuffix()}`;
  const batch = [
    sendgridEvent({ event: 'processed', sg_event_id: `${p}-processed`, category }),
    sendgridEvent({ event: 'delivered', sg_event_id: `${p}-delivered`, category, response: '250 OK' }),
    sendgridEvent({ event: 'deferred', sg_event_id: `${p}-deferred`, category }),
    sendgridEvent({ event: 'dropped', sg_event_id: `${p}-dropped`, category }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-open`, category, useragent: 'Mozilla/5.0', ip: '203.0.113.9', customer_id: 'c-17' }),
    sendgridEvent({ event: 'click', sg_event_id: `${p}-click`, category: ['newsletter', category], url: 'https://example.com/offer' }),
    sendgridEvent({ event: 'bounce', sg_event_id: `${p}-hard`, category, type: 'bounce', reason: '550 5.1.1 unknown user' }),
    sendgridEvent({ event: 'bounce', sg_event_id: `${p}-soft`, category, type: 'blocked', reason: '421 4.7.0 try later' }),
    sendgridEvent({ event: 'unsubscribe', sg_event_id: `${p}-unsub`, category }),
    sendgridEvent({ event: 'group_unsubscribe', sg_event_id: `${p}-group-unsub`, category, asm_group_id: 42 }),
    sendgridEvent({ event: 'spamreport', sg_event_id: `${p}-spam`, category }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-stray`, category: 'no-such-campaign' }),
  ];
  const response = await deliver(batch);
  expect(response).toMatchObject({ status: 202, body: { accepted: batch.length } });
  const deadline = Date.now() + 5_000;

  // What the API lists without a type: the six engagement events, no delivery event, no spam report, not the stray.
  const listed = await listedEvents(workspaceId, `campaign_id=${campaignId}`, 6, deadline);
  expect(Date.now()).toBeLessThanOrEqual(deadline);
  const apiById = new Map<string, Json>(listed.items.map((item: Json) => [item.provider_event_id.slice(p.length + 1), item]));
  expect([...apiById.keys()].sort()).toEqual(['click', 'group-unsub', 'hard', 'open', 'soft', 'unsub']);
  const typeOf = (id: string) => [apiById.get(id).event_type, apiById.get(id).bounce_type];
  expect(['open', 'click', 'hard', 'soft', 'unsub', 'group-unsub'].map(typeOf)).toEqual([
    ['open', null],
    ['click', null],
    ['bounce', 'hard'],
    ['bounce', 'soft'],
    ['unsubscribe', null],
    ['unsubscribe', null],
  ]);
  for (const item of apiById.values())
    expect(item).toMatchObject({ workspace_id: workspaceId, campaign_id: campaignId, provider: 'sendgrid' });
  expect(apiById.get('click')).toMatchObject({ url: 'https://example.com/offer', occurred_at: '2025-11-21T10:00:00.000Z' });

  const where = `WHERE provider_event_id LIKE '${p}%'`;
  await waitForCount(`SELECT count() AS n FROM unmatched_events ${where}`, 1, deadline - Date.now());
  await waitForCount(`SELECT count() AS n FROM suppression_signals ${where}`, 5, deadline - Date.now());

  const stored = await rows<Record<string, string | null>>(
    `SELECT provider_event_id, toString(campaign_id) AS campaign_id, toString(workspace_id) AS workspace_id, event_type, bounce_type, email, url, reason, user_agent, ip, occurred_at, raw
     FROM events ${where} ORDER BY provider_event_id`,
  );
  const byId = new Map(stored.map((row) => [row.provider_event_id!.slice(p.length + 1), row]));
  expect([...byId.keys()].sort()).toEqual(
    ['processed', 'delivered', 'deferred', 'dropped', 'spam', 'click', 'group-unsub', 'hard', 'open', 'soft', 'unsub'].sort(),
  );
  for (const row of stored)
    expect(row).toMatchObject({ campaign_id: campaignId, workspace_id: workspaceId, email: 'recipient@example.com' });
  expect(byId.get('open')).toMatchObject({
    event_type: 'open',
    bounce_type: 'none',
    user_agent: 'Mozilla/5.0',
    ip: '203.0.113.9',
    occurred_at: '2025-11-21 10:00:00',
  });
  expect(JSON.parse(byId.get('open')!.raw!)).toMatchObject({ customer_id: 'c-17', sg_event_id: `${p}-open` });
  expect(byId.get('click')).toMatchObject({ event_type: 'click', url: 'https://example.com/offer' });
  expect(byId.get('hard')).toMatchObject({ event_type: 'bounce', bounce_type: 'hard', reason: '550 5.1.1 unknown user' });
  expect(byId.get('soft')).toMatchObject({ event_type: 'bounce', bounce_type: 'soft', reason: '421 4.7.0 try later' });
  expect(byId.get('unsub')).toMatchObject({ event_type: 'unsubscribe' });
  expect(byId.get('group-unsub')).toMatchObject({ event_type: 'unsubscribe' });
  expect(byId.get('delivered')).toMatchObject({ event_type: 'delivered', bounce_type: 'none', reason: '250 OK' });
  for (const type of ['processed', 'deferred', 'dropped']) expect(byId.get(type)).toMatchObject({ event_type: type });
  expect(byId.get('spam')).toMatchObject({ event_type: 'spamreport' });

  const signals = await rows<{ reason: string }>(`SELECT reason FROM suppression_signals ${where}`);
  expect(signals.map((signal) => signal.reason).sort()).toEqual([
    'hard_bounce',
    'soft_bounce',
    'spam_report',
    'unsubscribe',
    'unsubscribe',
  ]);
});

it('stores a batch delivered three times once: listed and counted once', async () => {
  const category = `thrice-${run}`;
  const { workspaceId, campaignId } = await workspaceWithCampaign('Delivered thrice', category);
  const p = `thrice-${uniqueSuffix()}`;
  const batch = [
    sendgridEvent({ event: 'open', sg_event_id: `${p}-open-1`, category, email: 'ann@example.com' }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-open-2`, category, email: 'ann@example.com', timestamp: 1_763_722_800 }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-open-3`, category, email: 'bob@example.com' }),
    sendgridEvent({ event: 'click', sg_event_id: `${p}-click`, category, email: 'ann@example.com', url: 'https://example.com/a' }),
    sendgridEvent({ event: 'bounce', sg_event_id: `${p}-hard`, category, email: 'gone@example.com', type: 'bounce' }),
    sendgridEvent({ event: 'bounce', sg_event_id: `${p}-soft`, category, email: 'busy@example.com', type: 'blocked' }),
  ];
  // Each delivery is consumed before the next arrives, as a provider's retry is: the copies meet stored events, not each other.
  // An address's events share a partition, consumed in order: once its sentinel is stored, so is everything before it.
  const addresses = ['ann@example.com', 'bob@example.com', 'gone@example.com', 'busy@example.com'];
  for (let delivery = 0; delivery < 3; delivery++) {
    expect(await deliver(batch)).toMatchObject({ status: 202, body: { accepted: batch.length } });
    const sentinels = addresses.map((email, i) =>
      sendgridEvent({ event: 'open', sg_event_id: `${p}-sentinel-${delivery}-${i}`, category: `unmatched-${p}`, email }),
    );
    expect((await deliver(sentinels)).status).toBe(202);
    await waitForCount(
      `SELECT count() AS n FROM unmatched_events WHERE provider_event_id LIKE '${p}-sentinel-${delivery}-%'`,
      addresses.length,
      15_000,
    );
  }

  expect(await count(`SELECT count() AS n FROM events WHERE provider_event_id LIKE '${p}%'`)).toBe(batch.length);
  const { body: listed } = await json('GET', '/campaign-events/?page_size=500', workspaceId);
  expect(listed.total).toBe(batch.length);
  expect(listed.items.map((item: { provider_event_id: string }) => item.provider_event_id).sort()).toEqual(
    batch.map((event) => event.sg_event_id).sort(),
  );

  const stats = await json('GET', '/campaign-events/stats', workspaceId);
  expect(stats.status).toBe(200);
  // Nothing was processed or delivered: the rates over them are null.
  const counts = {
    sent: 0,
    processed: 0,
    delivered: 0,
    deferred: 0,
    dropped: 0,
    hard_bounces: 1,
    soft_bounces: 1,
    spam_reports: 0,
    unsubscribes: 0,
    opens: 3,
    machine_opens: 0,
    unique_opens: 2,
    clicks: 1,
    machine_clicks: 0,
    unique_clicks: 1,
    delivery_rate: null,
    open_rate: null,
    click_rate: null,
    click_to_open_rate: 0.5,
    bounce_rate: null,
    unsubscribe_rate: null,
    spam_report_rate: null,
  };
  expect(stats.body.totals).toEqual(counts);
  expect(stats.body.campaigns).toEqual([{ campaign_id: campaignId, ...counts, leader_by_open_rate: null, leader_by_click_rate: null }]);
  expect(stats.body.variants).toEqual([]);
  expect(stats.body.top_links).toEqual([{ campaign_id: campaignId, url: 'https://example.com/a', clicks: 1, unique_clicks: 1 }]);
});

it('lists and counts events that came before their campaign took the category, once it does', async () => {
  const { workspaceId, campaignId } = await workspaceWithCampaign('Configured late');
  const category = `late-${run}`;
  const p = `late-${uniqueSuffix()}`;
  const batch = [
    sendgridEvent({ event: 'open', sg_event_id: `${p}-open`, category, email: 'late@example.com' }),
    sendgridEvent({ event: 'click', sg_event_id: `${p}-click`, category, email: 'late@example.com', url: 'https://example.com/a' }),
    sendgridEvent({
      event: 'bounce',
      sg_event_id: `${p}-hard`,
      category,
      email: 'gone@example.com',
      type: 'bounce',
      reason: '550 unknown user',
    }),
  ];
  expect((await deliver(batch)).status).toBe(202);
  await waitForCount(`SELECT count() AS n FROM unmatched_events WHERE provider_event_id LIKE '${p}%'`, 3, 10_000);
  const listed = () => json('GET', `/campaign-events/?campaign_id=${campaignId}`, workspaceId);
  expect((await listed()).body.total).toBe(0);

  expect((await json('PUT', `/email-campaigns/${campaignId}`, workspaceId, { provider_category_id: category })).status).toBe(200);
  const deadline = Date.now() + 15_000;
  while ((await listed()).body.total < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
  const { body } = await listed();
  expect(body.total).toBe(3);
  expect(body.items.map((item: { event_type: string; bounce_type: string | null }) => [item.event_type, item.bounce_type]).sort()).toEqual([
    ['bounce', 'hard'],
    ['click', null],
    ['open', null],
  ]);
  const suppressed = await json('GET', '/suppressions/', workspaceId);
  expect(suppressed.body.items.map((item: { email: string }) => item.email)).toEqual(['gone@example.com']);

  // The provider delivering the batch again, now matched at once, adds nothing; a new event still lands.
  expect(
    (await deliver([...batch, sendgridEvent({ event: 'open', sg_event_id: `${p}-later`, category, email: 'late@example.com' })])).status,
  ).toBe(202);
  await waitForCount(`SELECT count() AS n FROM events WHERE provider_event_id = '${p}-later'`, 1, 10_000);
  expect((await listed()).body.total).toBe(4);
});

it('stores delivery events, machine opens, variants and bounce classes once, and suppresses as the rules say', async () => {
  const category = `variants-${run}`;
  const twoVariants = { delivery_mode: 'variants', variants: [{ template_id: 'tpl-a' }, { template_id: 'tpl-b' }] };
  const { workspaceId, campaignId, variantIds } = await workspaceWithCampaign('Variants', category, twoVariants);
  const [variantA, variantB] = variantIds;
  const other = await campaignIn(workspaceId, 'Other', `other-${run}`, twoVariants);
  const p = `variants-${uniqueSuffix()}`;
  const soft = (id: string, email: string, classification: string | undefined, day: number) =>
    sendgridEvent({
      event: 'bounce',
      type: 'blocked',
      sg_event_id: `${p}-${id}`,
      category,
      email,
      reason: '421 try later',
      timestamp: 1_763_719_200 + day * 86_400,
      ...(classification === undefined ? {} : { bounce_classification: classification }),
    });
  const batch = [
    sendgridEvent({ event: 'processed', sg_event_id: `${p}-processed`, category, variant_id: variantA }),
    sendgridEvent({ event: 'delivered', sg_event_id: `${p}-delivered`, category, response: '250 2.0.0 OK', variant_id: variantA }),
    sendgridEvent({ event: 'deferred', sg_event_id: `${p}-deferred`, category, response: '451 4.7.1 greylisted', attempt: '1' }),
    sendgridEvent({ event: 'dropped', sg_event_id: `${p}-dropped`, category, reason: 'Bounced Address' }),
    sendgridEvent({ event: 'spamreport', sg_event_id: `${p}-spam`, category, email: 'spam@example.com' }),
    sendgridEvent({ event: 'group_resubscribe', sg_event_id: `${p}-resub`, category }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-human`, category, variant_id: variantA, sg_machine_open: false }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-machine`, category, variant_id: variantB.toUpperCase(), sg_machine_open: true }),
    sendgridEvent({ event: 'click', sg_event_id: `${p}-unknown`, category, url: 'https://example.com/u', variant_id: crypto.randomUUID() }),
    sendgridEvent({ event: 'click', sg_event_id: `${p}-malformed`, category, url: 'https://example.com/m', variant_id: 'not-a-uuid' }),
    sendgridEvent({ event: 'open', sg_event_id: `${p}-foreign`, category, variant_id: other.variantIds[0] }),
    sendgridEvent({
      event: 'bounce',
      type: 'bounce',
      sg_event_id: `${p}-hard`,
      category,
      email: 'gone@example.com',
      reason: '550 5.1.1 unknown user',
      bounce_classification: 'Invalid Address',
    }),
    soft('reputation', 'busy@example.com', 'Reputation', 0),
    soft('content', 'busy@example.com', 'Content', 1),
    soft('volume', 'busy@example.com', 'Frequency or Volume Issues', 2),
    soft('technical', 'busy@example.com', 'Technical', 3),
    soft('full-1', 'full@example.com', 'Mailbox Unavailable', 0),
    soft('full-2', 'full@example.com', 'Unclassified', 1),
    soft('full-3', 'full@example.com', undefined, 2),
  ];
  const stored = batch.length - 1;
  // Delivered twice, as a provider's retry does: each event is stored once.
  for (let delivery = 0; delivery < 2; delivery++) {
    expect(await deliver(batch)).toMatchObject({ status: 202, body: { accepted: batch.length } });
    await waitForCount(`SELECT count() AS n FROM events WHERE provider_event_id LIKE '${p}%'`, stored, 15_000);
  }
  const addresses = ['recipient@example.com', 'spam@example.com', 'gone@example.com', 'busy@example.com', 'full@example.com'];
  const sentinels = addresses.map((email, i) =>
    sendgridEvent({ event: 'open', sg_event_id: `${p}-sentinel-${i}`, category: `unmatched-${p}`, email }),
  );
  expect((await deliver(sentinels)).status).toBe(202);
  await waitForCount(`SELECT count() AS n FROM unmatched_events WHERE provider_event_id LIKE '${p}-sentinel-%'`, addresses.length, 15_000);
  expect(await count(`SELECT count() AS n FROM events WHERE provider_event_id LIKE '${p}%'`)).toBe(stored);

  const records = await rows<Record<string, string | number | null>>(
    `SELECT provider_event_id, toString(campaign_id) AS campaign_id, toString(variant_id) AS variant_id, event_type, bounce_type,
       bounce_class, machine_open, email, reason
     FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  const nil = '00000000-0000-0000-0000-000000000000';
  const record = (id: string, fields: Record<string, string | number | null>) => ({
    provider_event_id: `${p}-${id}`,
    campaign_id: campaignId,
    variant_id: nil,
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email: 'recipient@example.com',
    reason: null,
    ...fields,
  });
  const softRecord = (id: string, email: string, bounceClass: string) =>
    record(id, { event_type: 'bounce', bounce_type: 'soft', bounce_class: bounceClass, email, reason: '421 try later' });
  expect(records).toEqual(
    [
      record('processed', { event_type: 'processed', variant_id: variantA }),
      record('delivered', { event_type: 'delivered', variant_id: variantA, reason: '250 2.0.0 OK' }),
      record('deferred', { event_type: 'deferred', reason: '451 4.7.1 greylisted' }),
      record('dropped', { event_type: 'dropped', reason: 'Bounced Address' }),
      record('spam', { event_type: 'spamreport', email: 'spam@example.com' }),
      record('human', { event_type: 'open', variant_id: variantA }),
      record('machine', { event_type: 'open', variant_id: variantB, machine_open: 1 }),
      record('unknown', { event_type: 'click' }),
      record('malformed', { event_type: 'click' }),
      record('foreign', { event_type: 'open' }),
      record('hard', {
        event_type: 'bounce',
        bounce_type: 'hard',
        bounce_class: 'invalid_address',
        email: 'gone@example.com',
        reason: '550 5.1.1 unknown user',
      }),
      softRecord('reputation', 'busy@example.com', 'reputation'),
      softRecord('content', 'busy@example.com', 'content'),
      softRecord('volume', 'busy@example.com', 'frequency_or_volume'),
      softRecord('technical', 'busy@example.com', 'technical'),
      softRecord('full-1', 'full@example.com', 'mailbox_unavailable'),
      softRecord('full-2', 'full@example.com', 'unclassified'),
      softRecord('full-3', 'full@example.com', 'unclassified'),
    ].sort((a, b) => a.provider_event_id.localeCompare(b.provider_event_id)),
  );
  // Custom args stay in raw whether or not they name a variant.
  const [malformed] = await rows<{ raw: string }>(`SELECT raw FROM events WHERE provider_event_id = '${p}-malformed'`);
  expect(JSON.parse(malformed.raw)).toMatchObject({ variant_id: 'not-a-uuid' });

  // Without a type the list shows the engagement events only: three opens, two clicks, eight bounces.
  const listed = await listedEvents(workspaceId, `campaign_id=${campaignId}`, 13, Date.now() + 10_000);
  expect(listed.total).toBe(13);
  expect(new Set(listed.items.map((item: { event_type: string }) => item.event_type))).toEqual(new Set(['open', 'click', 'bounce']));

  // The hard bounce, the spam report and three soft bounces of the address suppress; soft bounces blamed on the sender do not.
  const suppressed = await json('GET', '/suppressions/', workspaceId);
  expect(suppressed.body.items.map((item: { email: string; reason: string }) => [item.email, item.reason]).sort()).toEqual([
    ['full@example.com', 'soft_bounces'],
    ['gone@example.com', 'hard_bounce'],
    ['spam@example.com', 'spam_report'],
  ]);
});

it('loses and duplicates nothing when ingestion is SIGKILLed mid-stream and restarted', async () => {
  const category = `crash-${run}`;
  const campaign = await createCampaign(category);
  const p = `crash-${uniqueSuffix()}`;
  const calls = 200;
  const perCall = 100;
  const total = calls * perCall;
  const inCampaign = `FROM events WHERE campaign_id = toUUID('${campaign.id}')`;

  let next = 0;
  const sender = async (): Promise<void> => {
    while (next < calls) {
      const call = next++;
      const events = Array.from({ length: perCall }, (_, i) =>
        sendgridEvent({
          event: i % 5 === 0 ? 'click' : 'open',
          sg_event_id: `${p}-${call}-${i}`,
          email: `r${(call * perCall + i) % 1009}@example.com`,
          category,
        }),
      );
      // A 503 is what the provider retries: so do we.
      for (let attempt = 0; (await deliver(events)).status !== 202; attempt++) {
        if (attempt > 20) throw new Error(`call ${call} never accepted`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  };
  const sending = Promise.all(Array.from({ length: 4 }, sender));

  for (let stored = 0; stored < total / 10; stored = await count(`SELECT count() AS n ${inCampaign}`)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await stack.kill('ingestion', 'SIGKILL');
  expect(await count(`SELECT count() AS n ${inCampaign}`)).toBeLessThan(total);
  await stack.restart('ingestion');
  await sending;

  await waitForCount(`SELECT count() AS n ${inCampaign}`, total, 120_000);
  // Whatever was redelivered after the kill has been processed by now; nothing may have been added twice.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  expect(await count(`SELECT count() AS n ${inCampaign}`)).toBe(total);
  const copies = await rows<{ copies: string; ids: string }>(
    `SELECT copies, count() AS ids FROM (SELECT provider_event_id, count() AS copies ${inCampaign} GROUP BY provider_event_id) GROUP BY copies`,
  );
  expect(copies).toEqual([{ copies: '1', ids: String(total) }]);
});

it('deletes a deleted workspace’s events, rollups and suppressions from ClickHouse, and nobody else’s', async () => {
  const category = `doomed-${run}`;
  const { workspaceId: doomed } = await workspaceWithCampaign('Doomed', category);
  const kept = await createCampaign(`kept-${run}`);

  const p = `erase-${uniqueSuffix()}`;
  const eventsOf = (prefix: string, eventCategory: string) => [
    sendgridEvent({ event: 'open', sg_event_id: `${prefix}-open`, category: eventCategory }),
    sendgridEvent({ event: 'click', sg_event_id: `${prefix}-click`, category: eventCategory, url: 'https://example.com/a' }),
    sendgridEvent({ event: 'bounce', sg_event_id: `${prefix}-hard`, category: eventCategory, type: 'bounce' }),
  ];
  expect((await deliver([...eventsOf(`${p}-doomed`, category), ...eventsOf(`${p}-kept`, `kept-${run}`)])).status).toBe(202);
  await waitForCount(`SELECT count() AS n FROM events WHERE provider_event_id LIKE '${p}%'`, 6, 10_000);
  // A lift (with its audit), an address suppressed by hand and a day marked unsettled (as after a fault), so that
  // every table holds some of the workspace.
  await waitForCount(
    `SELECT count() AS n FROM suppression_state FINAL WHERE workspace_id = toUUID('${doomed}') AND reason = 'hard_bounce'`,
    1,
    10_000,
  );
  expect((await json('DELETE', '/suppressions/recipient@example.com', doomed)).status).toBe(204);
  expect((await json('POST', '/suppressions/', doomed, { email: 'by-hand@example.com' })).status).toBe(201);
  await clickhouse.command({ query: `INSERT INTO unsettled_days SELECT toUUID('${doomed}'), today(), now()` });

  const rowsOf = (workspaceId: string) =>
    Promise.all(
      WORKSPACE_TABLES.map(async (table): Promise<[string, number]> => [
        table,
        await count(`SELECT count() AS n FROM ${table} WHERE workspace_id = toUUID('${workspaceId}')`),
      ]),
    );
  for (const [table, n] of await rowsOf(doomed)) expect([table, n > 0]).toEqual([table, true]);
  const keptBefore = await rowsOf(kept.workspaceId);

  expect((await json('DELETE', `/workspaces/${doomed}`, doomed)).status).toBe(204);
  for (const table of WORKSPACE_TABLES) {
    await waitForCount(`SELECT count() AS n FROM ${table} WHERE workspace_id = toUUID('${doomed}')`, 0, 30_000);
  }
  expect(await rowsOf(kept.workspaceId)).toEqual(keptBefore);
  expect(await count(`SELECT count() AS n FROM closed_workspaces WHERE workspace_id = toUUID('${doomed}')`)).toBe(1);
});
