import { setTimeout as sleep } from 'node:timers/promises';
import { Partitioners } from 'kafkajs';
import { call, createClient, createLogger, fromSendgridEvent, type SendgridEventFields } from '@mail/common';
import { NO_VARIANT, workspaceErasure } from '@mail/event-store';
import { uniqueSuffix } from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import { CategoryResolver } from '../src/grpc/categories';
import { encodeRecord } from '../src/domain/events';
import { UnmatchedRematcher } from '../src/background/rematch';
import { UnmatchedEvents } from '../src/store/unmatched';
import { startIngestion, type Ingestion } from './harness';

jest.setTimeout(120_000);

const { EventType, BounceType, BounceClass } = eventsV1;

let ingestion: Ingestion;

beforeAll(async () => {
  ingestion = await startIngestion({ label: 'rematch' });
});

afterAll(async () => {
  await ingestion?.close();
});

const TIMESTAMP = Date.parse('2026-11-18T09:30:00Z') / 1000;

/** A SendGrid event as the webhook receives it, and what the webhook publishes of it. */
function sendgrid(fields: Partial<SendgridEventFields> & { sg_event_id: string; event: string; category: string | string[] }) {
  const raw: SendgridEventFields = { email: 'Late@Example.com', timestamp: TIMESTAMP, sg_message_id: 'msg-late', ...fields };
  return fromSendgridEvent(raw, new Date(TIMESTAMP * 1000), new Date('2026-11-18T09:31:00Z'))!;
}

const countWhere = (table: string, prefix: string, extra = ''): string =>
  `SELECT count() AS n FROM ${table} FINAL WHERE provider_event_id LIKE '${prefix}%' ${extra}`;

/**
 * Ingestion learns of a category change through campaign's change stream, a moment after the change: an event
 * consumed before that still finds the category's old campaign in the cache, as it may in production. Tests that
 * need the change seen first give the stream this long.
 */
const CHANGE_STREAM_MS = 2_000;

/** Publishes events as the webhook does, and waits until unmatched_events holds `total` events of the prefix. */
async function deliverUnmatched(prefix: string, total: number, events: eventsV1.EngagementEvent[]): Promise<void> {
  await ingestion.produceBatches([events]);
  await ingestion.waitForCount(countWhere('unmatched_events', prefix), total);
}

it('stores unmatched events once a campaign takes their category, as they would have been stored', async () => {
  const p = `late-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  const events = [
    sendgrid({ sg_event_id: `${p}-open`, event: 'open', category, useragent: 'Mozilla/5.0', ip: '203.0.113.9' }),
    sendgrid({ sg_event_id: `${p}-click`, event: 'click', category: ['other', category], url: 'https://example.com/offer' }),
    sendgrid({ sg_event_id: `${p}-hard`, event: 'bounce', type: 'bounce', category, reason: '550 no such user' }),
    sendgrid({ sg_event_id: `${p}-soft`, event: 'bounce', type: 'blocked', category, reason: '421 try later' }),
    sendgrid({ sg_event_id: `${p}-unsub`, event: 'group_unsubscribe', category }),
    sendgrid({ sg_event_id: `${p}-spam`, event: 'spamreport', category }),
  ];
  await deliverUnmatched(p, 6, events);
  expect(await ingestion.count(countWhere('events', p))).toBe(0);

  const campaign = await ingestion.createCampaign(category);
  await ingestion.waitForCount(countWhere('events', p), 6);
  await ingestion.waitForCount(countWhere('suppression_signals', p), 4);

  const stored = await ingestion.rows<Record<string, unknown>>(
    `SELECT provider_event_id, workspace_id, campaign_id, event_type, bounce_type, email, occurred_at, received_at, url, reason,
       user_agent, ip, provider_message_id FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  const common = {
    workspace_id: campaign.workspaceId,
    campaign_id: campaign.id,
    email: 'late@example.com',
    occurred_at: '2026-11-18 09:30:00',
    received_at: '2026-11-18 09:31:00',
    provider_message_id: 'msg-late',
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
  };
  expect(stored).toEqual([
    { ...common, provider_event_id: `${p}-click`, event_type: 'click', bounce_type: 'none', url: 'https://example.com/offer' },
    { ...common, provider_event_id: `${p}-hard`, event_type: 'bounce', bounce_type: 'hard', reason: '550 no such user' },
    { ...common, provider_event_id: `${p}-open`, event_type: 'open', bounce_type: 'none', user_agent: 'Mozilla/5.0', ip: '203.0.113.9' },
    { ...common, provider_event_id: `${p}-soft`, event_type: 'bounce', bounce_type: 'soft', reason: '421 try later' },
    { ...common, provider_event_id: `${p}-spam`, event_type: 'spamreport', bounce_type: 'none' },
    { ...common, provider_event_id: `${p}-unsub`, event_type: 'unsubscribe', bounce_type: 'none' },
  ]);
  const reasons = await ingestion.rows<{ reason: string }>(
    `SELECT reason FROM suppression_signals FINAL WHERE provider_event_id LIKE '${p}%' AND workspace_id = toUUID('${campaign.workspaceId}') ORDER BY reason`,
  );
  expect(reasons.map((row) => row.reason)).toEqual(['hard_bounce', 'soft_bounce', 'unsubscribe', 'spam_report']);
  // unmatched_events records what arrived without a campaign; it is not rewritten.
  expect(await ingestion.count(countWhere('unmatched_events', p))).toBe(6);
  expect(await ingestion.metric('ingestion_events_rematched_total')).toBeGreaterThanOrEqual(6);
});

/** An event as the Mailgun, SES or Postmark webhook publishes it (normalized as their providers' modules do). */
function normalized(fields: Partial<eventsV1.EngagementEvent> & { provider: string; providerEventId: string; raw: object }) {
  const { raw, ...event } = fields;
  return eventsV1.EngagementEvent.fromPartial({
    email: 'late@example.com',
    occurredAt: new Date(TIMESTAMP * 1000),
    receivedAt: new Date('2026-11-18T09:31:00Z'),
    rawJson: JSON.stringify(raw),
    ...event,
  });
}

it('stores the events of every provider once a campaign takes their category, with what their normalization gave them', async () => {
  const p = `providers-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  // The campaign and its variant exist before the events; it takes their category after them.
  const campaign = await ingestion.createCampaign(`cat-${p}-before`, undefined, ['tpl-a']);
  expect(campaign.variantIds).toHaveLength(1);
  const [variant] = campaign.variantIds;
  const mailgun = (name: string, fields: Partial<eventsV1.EngagementEvent>) =>
    normalized({
      provider: 'mailgun',
      providerEventId: `${p}-mg-${name}:2026-11-18`,
      categories: ['newsletter', category],
      variantId: variant,
      providerMessageId: `${name}@mg.example.com`,
      raw: { id: `${p}-mg-${name}`, event: name, tags: ['newsletter', category] },
      ...fields,
    });
  const ses = (name: string, fields: Partial<eventsV1.EngagementEvent>) =>
    normalized({
      provider: 'ses',
      providerEventId: `${p}-ses-${name}:late@example.com`,
      categories: [category],
      variantId: variant,
      providerMessageId: `${p}-ses-${name}`,
      raw: { eventType: name, mail: { tags: { category: [category] } } },
      ...fields,
    });
  const postmark = (name: string, fields: Partial<eventsV1.EngagementEvent>) =>
    normalized({
      provider: 'postmark',
      providerEventId: `${p}-pm-${name}`,
      categories: [category],
      raw: { RecordType: name, Tag: category },
      ...fields,
    });
  const events = [
    mailgun('opened', { eventType: EventType.EVENT_TYPE_OPEN, machineOpen: true, userAgent: 'Mozilla/5.0' }),
    mailgun('failed', {
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      bounceClass: BounceClass.BOUNCE_CLASS_INVALID_ADDRESS,
      reason: '550 5.1.1 The email account does not exist',
    }),
    ses('Click', { eventType: EventType.EVENT_TYPE_CLICK, url: 'https://example.com/offer', ip: '203.0.113.8' }),
    ses('Bounce', {
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_SOFT,
      bounceClass: BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE,
      reason: 'smtp; 452 4.2.2 mailbox full',
    }),
    ses('DeliveryDelay', { eventType: EventType.EVENT_TYPE_DEFERRED }),
    postmark('Open', { eventType: EventType.EVENT_TYPE_OPEN, variantId: variant.toUpperCase() }),
    postmark('SpamComplaint', { eventType: EventType.EVENT_TYPE_SPAM_REPORT }),
    postmark('Bounce', {
      providerEventId: `${p}-pm-4242`,
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      bounceClass: BounceClass.BOUNCE_CLASS_CONTENT,
    }),
  ];
  await deliverUnmatched(p, events.length, events);
  // Kept under the type names unmatched events always had, with their provider.
  expect(
    await ingestion.rows(
      `SELECT provider_event_id, provider, event_type FROM unmatched_events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
    ),
  ).toEqual([
    { provider_event_id: `${p}-mg-failed:2026-11-18`, provider: 'mailgun', event_type: 'bounce' },
    { provider_event_id: `${p}-mg-opened:2026-11-18`, provider: 'mailgun', event_type: 'open' },
    { provider_event_id: `${p}-pm-4242`, provider: 'postmark', event_type: 'bounce' },
    { provider_event_id: `${p}-pm-Open`, provider: 'postmark', event_type: 'open' },
    { provider_event_id: `${p}-pm-SpamComplaint`, provider: 'postmark', event_type: 'spamreport' },
    { provider_event_id: `${p}-ses-Bounce:late@example.com`, provider: 'ses', event_type: 'bounce' },
    { provider_event_id: `${p}-ses-Click:late@example.com`, provider: 'ses', event_type: 'click' },
    { provider_event_id: `${p}-ses-DeliveryDelay:late@example.com`, provider: 'ses', event_type: 'deferred' },
  ]);

  await ingestion.setCategory(campaign, category);
  await ingestion.waitForCount(countWhere('events', p), events.length);
  await ingestion.waitForCount(countWhere('suppression_signals', p), 4);
  await ingestion.waitUntilCaughtUp();
  // Each once (no FINAL), as its provider's normalization gave it.
  const stored = await ingestion.rows<Record<string, unknown>>(
    `SELECT provider_event_id, provider, campaign_id, event_type, bounce_type, bounce_class, machine_open, variant_id, email,
       url, reason, user_agent, ip, provider_message_id, raw
     FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  const common = {
    campaign_id: campaign.id,
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    variant_id: variant,
    email: 'late@example.com',
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
  };
  const byId = new Map(events.map((event) => [event.providerEventId, event]));
  expect(stored).toEqual(
    [
      {
        ...common,
        provider_event_id: `${p}-mg-failed:2026-11-18`,
        provider: 'mailgun',
        event_type: 'bounce',
        bounce_type: 'hard',
        bounce_class: 'invalid_address',
        reason: '550 5.1.1 The email account does not exist',
      },
      {
        ...common,
        provider_event_id: `${p}-mg-opened:2026-11-18`,
        provider: 'mailgun',
        event_type: 'open',
        machine_open: 1,
        user_agent: 'Mozilla/5.0',
      },
      {
        ...common,
        provider_event_id: `${p}-pm-4242`,
        provider: 'postmark',
        event_type: 'bounce',
        bounce_type: 'hard',
        bounce_class: 'content',
        variant_id: NO_VARIANT,
      },
      { ...common, provider_event_id: `${p}-pm-Open`, provider: 'postmark', event_type: 'open' },
      { ...common, provider_event_id: `${p}-pm-SpamComplaint`, provider: 'postmark', event_type: 'spamreport', variant_id: NO_VARIANT },
      {
        ...common,
        provider_event_id: `${p}-ses-Bounce:late@example.com`,
        provider: 'ses',
        event_type: 'bounce',
        bounce_type: 'soft',
        bounce_class: 'mailbox_unavailable',
        reason: 'smtp; 452 4.2.2 mailbox full',
      },
      {
        ...common,
        provider_event_id: `${p}-ses-Click:late@example.com`,
        provider: 'ses',
        event_type: 'click',
        url: 'https://example.com/offer',
        ip: '203.0.113.8',
      },
      { ...common, provider_event_id: `${p}-ses-DeliveryDelay:late@example.com`, provider: 'ses', event_type: 'deferred' },
    ].map((row) => ({
      ...row,
      provider_message_id: byId.get(row.provider_event_id)!.providerMessageId ?? null,
      raw: byId.get(row.provider_event_id)!.rawJson,
    })),
  );
  const signals = await ingestion.rows<{ reason: string }>(
    `SELECT reason FROM suppression_signals WHERE provider_event_id LIKE '${p}%' ORDER BY reason`,
  );
  expect(signals.map((row) => row.reason)).toEqual(['hard_bounce', 'hard_bounce', 'soft_bounce', 'spam_report']);
});

it('re-matches an unmatched event stored before unmatched events kept their encoding, from its SendGrid JSON', async () => {
  const p = `old-row-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  const old = sendgrid({ sg_event_id: `${p}-click`, event: 'click', category, url: 'https://example.com/old', useragent: 'Mozilla/5.0' });
  // As ingestion wrote it then: no encoded_event, which the column's default leaves ''.
  await ingestion.clickhouse.insert({
    table: 'unmatched_events',
    values: [
      {
        provider_event_id: old.providerEventId,
        provider: 'sendgrid',
        event_type: 'click',
        email: old.email,
        categories: old.categories,
        occurred_at: TIMESTAMP,
        received_at: TIMESTAMP + 60,
        raw: old.rawJson,
        ingested_at: TIMESTAMP + 61,
      },
    ],
    format: 'JSONEachRow',
  });
  expect(await ingestion.rows(`SELECT encoded_event FROM unmatched_events WHERE provider_event_id = '${p}-click'`)).toEqual([
    { encoded_event: '' },
  ]);

  const campaign = await ingestion.createCampaign(category);
  await ingestion.waitForCount(countWhere('events', p), 1);
  expect(
    await ingestion.rows(
      `SELECT provider, campaign_id, event_type, url, user_agent, provider_message_id, raw FROM events WHERE provider_event_id = '${p}-click'`,
    ),
  ).toEqual([
    {
      provider: 'sendgrid',
      campaign_id: campaign.id,
      event_type: 'click',
      url: 'https://example.com/old',
      user_agent: 'Mozilla/5.0',
      provider_message_id: 'msg-late',
      raw: old.rawJson,
    },
  ]);
});

it('matches an event once, to the first campaign that took its category', async () => {
  const p = `once-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  await deliverUnmatched(p, 1, [sendgrid({ sg_event_id: `${p}-first`, event: 'open', category })]);

  const first = await ingestion.createCampaign(category);
  await ingestion.waitForCount(countWhere('events', p, `AND campaign_id = toUUID('${first.id}')`), 1);

  // The category moves to another campaign of the workspace (it stays bound to it) while a second event waits unmatched.
  await ingestion.setCategory(first, null);
  await sleep(CHANGE_STREAM_MS);
  await deliverUnmatched(p, 2, [sendgrid({ sg_event_id: `${p}-second`, event: 'click', category, url: 'https://example.com/' })]);
  const second = await ingestion.createCampaign(category, first.workspaceId);

  // One sweep reads both unmatched events: the second goes to the new campaign, the first stays with the old one.
  await ingestion.waitForCount(countWhere('events', p, `AND campaign_id = toUUID('${second.id}')`), 1);
  await ingestion.waitUntilCaughtUp();
  const rows = await ingestion.rows<{ provider_event_id: string; workspace_id: string }>(
    `SELECT provider_event_id, workspace_id FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  expect(rows).toEqual([
    { provider_event_id: `${p}-first`, workspace_id: first.workspaceId },
    { provider_event_id: `${p}-second`, workspace_id: first.workspaceId },
  ]);
  expect(await ingestion.rows(`SELECT campaign_id FROM events WHERE provider_event_id = '${p}-first'`)).toEqual([
    { campaign_id: first.id },
  ]);
});

it('does not bring back an event erased with the workspace it was re-matched to', async () => {
  const p = `erased-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  await deliverUnmatched(p, 1, [sendgrid({ sg_event_id: `${p}-first`, event: 'open', category })]);
  const first = await ingestion.createCampaign(category);
  await ingestion.waitForCount(countWhere('events', p), 1);

  // The workspace is deleted: its campaign goes, its category is retired until a platform admin releases it, and its
  // events are erased.
  await ingestion.closeWorkspace(first.workspaceId);
  await ingestion.releaseCategory(category);
  await sleep(CHANGE_STREAM_MS);
  const [{ database }] = await ingestion.rows<{ database: string }>('SELECT currentDatabase() AS database');
  for (const statement of workspaceErasure(database, first.workspaceId)) await ingestion.clickhouse.command({ query: statement.text });
  await ingestion.waitForCount(countWhere('events', p), 0);

  await deliverUnmatched(p, 2, [sendgrid({ sg_event_id: `${p}-second`, event: 'click', category, url: 'https://example.com/' })]);
  const second = await ingestion.createCampaign(category);
  await ingestion.waitForCount(countWhere('events', p, `AND campaign_id = toUUID('${second.id}')`), 1);
  await ingestion.waitUntilCaughtUp();
  expect(await ingestion.rows(`SELECT provider_event_id FROM events WHERE provider_event_id LIKE '${p}%'`)).toEqual([
    { provider_event_id: `${p}-second` },
  ]);
});

it('sweeps every unmatched event where changes may have been missed: at start, after a reported gap, once it may sweep', async () => {
  const p = `missed-${uniqueSuffix()}`;
  const [atStart, afterGap, whenMine] = ['start', 'gap', 'mine'].map((name) => `cat-${p}-${name}`);
  await deliverUnmatched(p, 3, [
    sendgrid({ sg_event_id: `${p}-start`, event: 'open', category: atStart }),
    sendgrid({ sg_event_id: `${p}-gap`, event: 'open', category: afterGap }),
    sendgrid({ sg_event_id: `${p}-mine`, event: 'open', category: whenMine }),
  ]);

  // No ingestion process hears of the changes: the sweeps run here, in the test.
  await ingestion.stack.stop('ingestion');
  const campaign = await ingestion.createCampaign(atStart);
  const campaigns = createClient(campaignV1.CampaignServiceClient, ingestion.stack.urls.grpc.campaign);
  const producer = ingestion.kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const published: string[] = [];
  let mine = false;
  const rematcher = new UnmatchedRematcher(
    {
      unmatched: new UnmatchedEvents(ingestion.clickhouse),
      resolve: async (ids) => {
        const { matches } = await call(campaigns.resolveCategories.bind(campaigns), { providerCategoryIds: [...ids] });
        return new Map(matches.map((match) => [match.providerCategoryId, match]));
      },
      publish: async (events) => {
        published.push(...events.map((event) => event.providerEventId));
        await producer.send({ topic: ingestion.topic, acks: -1, messages: events.map(encodeRecord) });
      },
      logger: createLogger('test', 'silent'),
    },
    { mayRun: () => mine, delayMs: 0, followUpMs: 0 },
  );
  const waitUntilPublished = async (expected: string[]) => {
    for (const deadline = Date.now() + 10_000; published.length < expected.length && Date.now() < deadline;) await sleep(50);
    expect(published).toEqual(expected);
  };
  // Only events stored unmatched since then, when no full sweep is owed: none since an hour from now.
  const inAnHour = () => new Date(Date.now() + 3_600_000);
  try {
    // Another process's turn: nothing.
    expect(await rematcher.sweepRecent(inAnHour())).toBe(false);
    // A new re-matcher owes a full sweep; the others of this file's unmatched events are stored already.
    mine = true;
    expect(await rematcher.sweepRecent(inAnHour())).toBe(true);
    expect(published).toEqual([`${p}-start`]);
    expect(await rematcher.sweepRecent(inAnHour())).toBe(true);
    expect(published).toEqual([`${p}-start`]);

    // A change this process did not hear of, then a gap reported (the change stream restarted).
    await ingestion.createCampaign(afterGap);
    expect(await rematcher.sweepRecent(inAnHour())).toBe(true);
    expect(published).toEqual([`${p}-start`]);
    rematcher.sweepAllSoon();
    await waitUntilPublished([`${p}-start`, `${p}-gap`]);

    // A gap reported while it is another process's turn: the full sweep stays owed until this one may sweep.
    await ingestion.createCampaign(whenMine);
    mine = false;
    rematcher.sweepAllSoon();
    await sleep(300);
    expect(published).toEqual([`${p}-start`, `${p}-gap`]);
    mine = true;
    expect(await rematcher.sweepRecent(inAnHour())).toBe(true);
    expect(published).toEqual([`${p}-start`, `${p}-gap`, `${p}-mine`]);
    // A later sweep of every category does not go through events re-matched before.
    const pending = await new UnmatchedEvents(ingestion.clickhouse).categories({});
    expect(pending.filter((category) => category.includes(p))).toEqual([]);
  } finally {
    await rematcher.close();
    await producer.disconnect();
    campaigns.close();
  }

  await ingestion.stack.restart('ingestion');
  await ingestion.waitForCount(countWhere('events', p), 3);
  await ingestion.waitForCount(countWhere('events', p, `AND campaign_id = toUUID('${campaign.id}')`), 1);
});

it('reports a possible gap each time the category change stream starts', async () => {
  const resolver = new CategoryResolver(
    createClient(campaignV1.CampaignServiceClient, ingestion.stack.urls.grpc.campaign),
    60_000,
    createLogger('test', 'silent'),
  );
  let gaps = 0;
  resolver.onChangesMissed(() => (gaps += 1));
  resolver.start();
  try {
    for (const deadline = Date.now() + 10_000; gaps < 1 && Date.now() < deadline;) await sleep(50);
    expect(gaps).toBe(1);
    await ingestion.stack.restart('campaign');
    for (const deadline = Date.now() + 20_000; gaps < 2 && Date.now() < deadline;) await sleep(50);
    expect(gaps).toBe(2);
  } finally {
    resolver.close();
  }
});
