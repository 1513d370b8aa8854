import crypto from 'node:crypto';
import { NO_RUN, NO_VARIANT } from '@mail/event-store';
import { uniqueSuffix } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { eventId } from '../src/domain/events';
import { engagementEvent, sleep, startIngestion, type Ingestion } from './harness';

const { EventType, BounceType } = eventsV1;
jest.setTimeout(90_000);

let ingestion: Ingestion;
let campaignA: { id: string; workspaceId: string };
let campaignB: { id: string; workspaceId: string };
const run = uniqueSuffix();
const categoryA = `cat-a-${run}`;
const categoryB = `cat-b-${run}`;

beforeAll(async () => {
  ingestion = await startIngestion({ label: 'ingestion' });
  [campaignA, campaignB] = await Promise.all([ingestion.createCampaign(categoryA), ingestion.createCampaign(categoryB)]);
});

afterAll(async () => {
  await ingestion?.close();
});

const countWhere = (table: string, prefix: string, final = ''): string =>
  `SELECT count() AS n FROM ${table} ${final} WHERE provider_event_id LIKE '${prefix}%'`;

it('stores each kept type with its campaign, type and bounce type; spam reports only suppress; unmatched events are kept apart', async () => {
  const p = `types-${uniqueSuffix()}`;
  const occurredAt = new Date('2026-11-20T10:00:00Z');
  const events = [
    engagementEvent({
      providerEventId: `${p}-open`,
      categories: [categoryA],
      occurredAt,
      userAgent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      providerMessageId: 'msg-1',
    }),
    engagementEvent({
      providerEventId: `${p}-click`,
      eventType: EventType.EVENT_TYPE_CLICK,
      categories: ['unknown', categoryB],
      url: 'https://example.com/x',
    }),
    engagementEvent({
      providerEventId: `${p}-hard`,
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      categories: [categoryA],
      reason: '550 no such user',
    }),
    engagementEvent({
      providerEventId: `${p}-soft`,
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_SOFT,
      categories: [categoryA],
      reason: '421 later',
    }),
    engagementEvent({ providerEventId: `${p}-unsub`, eventType: EventType.EVENT_TYPE_UNSUBSCRIBE, categories: [categoryA] }),
    engagementEvent({ providerEventId: `${p}-spam`, eventType: EventType.EVENT_TYPE_SPAM_REPORT, categories: [categoryA] }),
    engagementEvent({ providerEventId: `${p}-stray`, categories: ['nobody-uses-this'] }),
    engagementEvent({ providerEventId: `${p}-bare`, eventType: EventType.EVENT_TYPE_SPAM_REPORT, categories: [] }),
  ];
  await ingestion.produce(events);

  await ingestion.waitForCount(countWhere('events', p), 6);
  await ingestion.waitForCount(countWhere('unmatched_events', p), 2);
  await ingestion.waitForCount(countWhere('suppression_signals', p), 4);

  const stored = await ingestion.rows<Record<string, unknown>>(
    `SELECT * FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  const byId = new Map(stored.map((row) => [String(row.provider_event_id).slice(p.length + 1), row]));
  expect(byId.get('open')).toEqual({
    id: eventId(events[0]),
    workspace_id: campaignA.workspaceId,
    campaign_id: campaignA.id,
    variant_id: NO_VARIANT,
    event_type: 'open',
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email: 'someone@example.com',
    occurred_at: '2026-11-20 10:00:00',
    received_at: expect.any(String),
    url: null,
    reason: null,
    user_agent: 'Mozilla/5.0',
    ip: '203.0.113.7',
    provider: 'sendgrid',
    provider_event_id: `${p}-open`,
    provider_message_id: 'msg-1',
    raw: events[0].rawJson,
    ingested_at: expect.any(String),
    run_id: NO_RUN,
  });
  expect(byId.get('click')).toMatchObject({
    campaign_id: campaignB.id,
    workspace_id: campaignB.workspaceId,
    event_type: 'click',
    url: 'https://example.com/x',
  });
  expect(byId.get('hard')).toMatchObject({
    campaign_id: campaignA.id,
    event_type: 'bounce',
    bounce_type: 'hard',
    reason: '550 no such user',
  });
  expect(byId.get('soft')).toMatchObject({ event_type: 'bounce', bounce_type: 'soft', reason: '421 later' });
  expect(byId.get('unsub')).toMatchObject({ event_type: 'unsubscribe', bounce_type: 'none' });
  expect(byId.get('spam')).toMatchObject({ event_type: 'spamreport', bounce_type: 'none' });

  const signals = await ingestion.rows<{ provider_event_id: string; reason: string; workspace_id: string; email: string }>(
    `SELECT provider_event_id, reason, workspace_id, email FROM suppression_signals WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  expect(signals).toEqual(
    [
      ['hard', 'hard_bounce'],
      ['soft', 'soft_bounce'],
      ['spam', 'spam_report'],
      ['unsub', 'unsubscribe'],
    ].map(([id, reason]) => ({
      provider_event_id: `${p}-${id}`,
      reason,
      workspace_id: campaignA.workspaceId,
      email: 'someone@example.com',
    })),
  );

  const unmatched = await ingestion.rows<Record<string, unknown>>(
    `SELECT provider_event_id, event_type, categories, raw FROM unmatched_events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  expect(unmatched).toEqual([
    { provider_event_id: `${p}-bare`, event_type: 'spamreport', categories: [], raw: events[7].rawJson },
    { provider_event_id: `${p}-stray`, event_type: 'open', categories: ['nobody-uses-this'], raw: events[6].rawJson },
  ]);
});

it('stores an event once however often it is delivered', async () => {
  const p = `redelivered-${uniqueSuffix()}`;
  const events = Array.from({ length: 300 }, (_, i) =>
    engagementEvent({
      providerEventId: `${p}-${i}`,
      email: `r${i % 37}@example.com`,
      eventType: i % 3 === 0 ? EventType.EVENT_TYPE_CLICK : EventType.EVENT_TYPE_OPEN,
      categories: [i % 2 === 0 ? categoryA : categoryB],
      occurredAt: new Date(Date.UTC(2026, 10, 1 + (i % 20), i % 24)),
    }),
  );
  for (let delivery = 0; delivery < 3; delivery++) {
    await ingestion.produce(events);
    await ingestion.waitUntilCaughtUp();
  }
  await ingestion.produce([...events.slice(0, 50), ...events.slice(0, 50)]);
  await ingestion.waitUntilCaughtUp();

  expect(await ingestion.count(countWhere('events', p))).toBe(300);
  expect(await ingestion.count(countWhere('events', p, 'FINAL'))).toBe(300);
  expect(await ingestion.count(`SELECT uniqExact(id) AS n FROM events WHERE provider_event_id LIKE '${p}%'`)).toBe(300);
});

it('takes the workspace and campaign an event names itself (our sender, one-click unsubscribe) over its categories', async () => {
  const p = `named-${uniqueSuffix()}`;
  const variantId = crypto.randomUUID();
  const named = { workspaceId: campaignB.workspaceId.toUpperCase(), campaignId: campaignB.id.toUpperCase() };
  const events = [
    engagementEvent({
      providerEventId: `${p}-sent`,
      provider: 'smtp',
      eventType: EventType.EVENT_TYPE_SENT,
      email: `sent-${p}@example.com`,
      categories: [categoryA],
      variantId,
      ...named,
    }),
    engagementEvent({
      providerEventId: `${p}-unsubscribe`,
      eventType: EventType.EVENT_TYPE_UNSUBSCRIBE,
      email: `gone-${p}@example.com`,
      ...named,
    }),
    // Only one of the two ids: the categories decide.
    engagementEvent({ providerEventId: `${p}-half`, categories: [categoryA], workspaceId: campaignB.workspaceId }),
    // Ids that are not UUIDs name nothing: kept unmatched, as an event without a known category.
    engagementEvent({ providerEventId: `${p}-bad`, workspaceId: 'not-a-uuid', campaignId: campaignB.id }),
  ];
  await ingestion.produce(events);
  await ingestion.waitUntilCaughtUp();

  const stored = await ingestion.rows<{
    provider_event_id: string;
    workspace_id: string;
    campaign_id: string;
    variant_id: string;
    event_type: string;
  }>(
    `SELECT provider_event_id, workspace_id, campaign_id, variant_id, toString(event_type) AS event_type
     FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  expect(stored).toEqual([
    {
      provider_event_id: `${p}-half`,
      workspace_id: campaignA.workspaceId,
      campaign_id: campaignA.id,
      variant_id: NO_VARIANT,
      event_type: 'open',
    },
    {
      provider_event_id: `${p}-sent`,
      workspace_id: campaignB.workspaceId,
      campaign_id: campaignB.id,
      variant_id: variantId,
      event_type: 'sent',
    },
    {
      provider_event_id: `${p}-unsubscribe`,
      workspace_id: campaignB.workspaceId,
      campaign_id: campaignB.id,
      variant_id: NO_VARIANT,
      event_type: 'unsubscribe',
    },
  ]);
  expect(await ingestion.count(countWhere('unmatched_events', `${p}-bad`))).toBe(1);
  const signals = await ingestion.rows<{ workspace_id: string; email: string; reason: string }>(
    `SELECT workspace_id, email, toString(reason) AS reason FROM suppression_signals WHERE provider_event_id LIKE '${p}%'`,
  );
  expect(signals).toEqual([{ workspace_id: campaignB.workspaceId, email: `gone-${p}@example.com`, reason: 'unsubscribe' }]);
});

it('sends records it cannot decode to the dead-letter topic and carries on', async () => {
  const p = `poison-${uniqueSuffix()}`;
  const missingId = engagementEvent({ providerEventId: '', categories: [categoryA] });
  await ingestion.produce([
    engagementEvent({ providerEventId: `${p}-before`, categories: [categoryA] }),
    Buffer.from('garbage'),
    missingId,
    engagementEvent({ providerEventId: `${p}-after`, categories: [categoryA] }),
  ]);
  await ingestion.waitForCount(countWhere('events', p), 2);

  const consumer = ingestion.kafka.consumer({ groupId: `dlq-reader-${uniqueSuffix()}`, maxWaitTimeInMs: 100 });
  const letters: eventsV1.DeadLetter[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic: ingestion.deadLetterTopic, fromBeginning: true });
  await consumer.run({ eachMessage: ({ message }) => Promise.resolve(void letters.push(eventsV1.DeadLetter.decode(message.value!))) });
  try {
    for (let waited = 0; letters.length < 2 && waited < 20_000; waited += 100) await sleep(100);
  } finally {
    await consumer.disconnect();
  }
  expect(letters).toHaveLength(2);
  const byValue = new Map(letters.map((letter) => [Buffer.from(letter.value).toString('base64'), letter]));
  expect(byValue.get(Buffer.from('garbage').toString('base64'))).toMatchObject({
    sourceTopic: ingestion.topic,
    offset: expect.stringMatching(/^\d+$/),
    reason: expect.stringContaining('not an EngagementEvent'),
  });
  const encoded = Buffer.from(eventsV1.EngagementEvent.encode(missingId).finish()).toString('base64');
  expect(byValue.get(encoded)).toMatchObject({ sourceTopic: ingestion.topic, reason: 'provider_event_id is empty' });
  expect(await ingestion.metric('ingestion_events_dead_lettered_total')).toBe(2);
});

it('stores the events of batch records and dead-letters a poison event of a batch alone, with its index', async () => {
  const p = `batch-poison-${uniqueSuffix()}`;
  const missingId = engagementEvent({ providerEventId: '', categories: [categoryA] });
  const deadLetteredBefore = await ingestion.metric('ingestion_events_dead_lettered_total');
  await ingestion.produceBatches([
    [
      engagementEvent({ providerEventId: `${p}-1`, categories: [categoryA] }),
      missingId,
      engagementEvent({ providerEventId: `${p}-2`, categories: [categoryB] }),
    ],
    Array.from({ length: 40 }, (_, i) =>
      engagementEvent({ providerEventId: `${p}-many-${i}`, categories: [i % 2 === 0 ? categoryA : categoryB] }),
    ),
  ]);
  await ingestion.waitForCount(countWhere('events', p), 42);
  await ingestion.waitUntilCaughtUp();

  const consumer = ingestion.kafka.consumer({ groupId: `dlq-reader-${uniqueSuffix()}`, maxWaitTimeInMs: 100 });
  const letters: eventsV1.DeadLetter[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic: ingestion.deadLetterTopic, fromBeginning: true });
  await consumer.run({ eachMessage: ({ message }) => Promise.resolve(void letters.push(eventsV1.DeadLetter.decode(message.value!))) });
  const encoded = Buffer.from(eventsV1.EngagementEvent.encode(missingId).finish());
  const mine = (): eventsV1.DeadLetter[] =>
    letters.filter((letter) => letter.eventIndex !== undefined && Buffer.from(letter.value).equals(encoded));
  try {
    for (let waited = 0; mine().length < 1 && waited < 20_000; waited += 100) await sleep(100);
  } finally {
    await consumer.disconnect();
  }
  expect(mine()).toEqual([
    expect.objectContaining({
      sourceTopic: ingestion.topic,
      offset: expect.stringMatching(/^\d+$/),
      reason: 'provider_event_id is empty',
      eventIndex: 1,
    }),
  ]);
  expect(await ingestion.metric('ingestion_events_dead_lettered_total')).toBe(deadLetteredBefore + 1);
  expect(
    await ingestion.count(
      `SELECT count() AS n FROM events WHERE provider_event_id LIKE '${p}%' AND campaign_id = toUUID('${campaignB.id}')`,
    ),
  ).toBe(21);
});

it('follows campaign category changes at once (the change stream invalidates the cache)', async () => {
  const p = `moves-${uniqueSuffix()}`;
  const [oldCategory, newCategory] = [`old-${p}`, `new-${p}`];
  await ingestion.produce([engagementEvent({ providerEventId: `${p}-1`, categories: [oldCategory] })]);
  await ingestion.waitForCount(countWhere('unmatched_events', p), 1);

  // "No campaign" is cached for oldCategory now; a new campaign with it must be seen at once (and the first event is
  // re-matched to it).
  const campaign = await ingestion.createCampaign(oldCategory);
  await sleep(1_000);
  await ingestion.produce([engagementEvent({ providerEventId: `${p}-2`, categories: [oldCategory] })]);
  await ingestion.waitForCount(countWhere('events', p), 2);

  // And its move to another category too.
  await ingestion.setCategory(campaign, newCategory);
  await sleep(1_000);
  await ingestion.produce([
    engagementEvent({ providerEventId: `${p}-3`, categories: [oldCategory] }),
    engagementEvent({ providerEventId: `${p}-4`, categories: [newCategory] }),
  ]);
  await ingestion.waitForCount(countWhere('events', p), 3);
  // The first and third: the second was matched as it arrived.
  await ingestion.waitForCount(countWhere('unmatched_events', p), 2);
  const matched = await ingestion.rows<{ provider_event_id: string; campaign_id: string }>(
    `SELECT provider_event_id, toString(campaign_id) AS campaign_id FROM events WHERE provider_event_id LIKE '${p}%' ORDER BY provider_event_id`,
  );
  expect(matched).toEqual([
    { provider_event_id: `${p}-1`, campaign_id: campaign.id },
    { provider_event_id: `${p}-2`, campaign_id: campaign.id },
    { provider_event_id: `${p}-4`, campaign_id: campaign.id },
  ]);
});

it('retries a batch while the campaign service is down and loses nothing', async () => {
  const p = `campaign-down-${uniqueSuffix()}`;
  const category = `fresh-${p}`;
  const campaign = await ingestion.createCampaign(category);
  const retriesBefore = await ingestion.metric('ingestion_batch_retries_total');

  await ingestion.stack.stop('campaign');
  try {
    await ingestion.produce(
      Array.from({ length: 50 }, (_, i) => engagementEvent({ providerEventId: `${p}-${i}`, categories: [category] })),
    );
    await sleep(3_000);
    expect(await ingestion.count(countWhere('events', p))).toBe(0);
    expect(await ingestion.metric('ingestion_batch_retries_total')).toBeGreaterThan(retriesBefore);
  } finally {
    await ingestion.stack.restart('campaign');
  }

  await ingestion.waitForCount(countWhere('events', p), 50);
  await ingestion.waitUntilCaughtUp();
  expect(await ingestion.count(`SELECT count() AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`)).toBe(50);
  expect(await ingestion.count(countWhere('unmatched_events', p))).toBe(0);
});

it('stores an event with a category holding NUL, which no campaign can have, without asking the campaign service about it', async () => {
  const p = `nul-category-${uniqueSuffix()}`;
  await ingestion.produce([
    engagementEvent({ providerEventId: `${p}-matched`, categories: [`nul\u0000${p}`, categoryA] }),
    engagementEvent({ providerEventId: `${p}-unmatched`, categories: [`nul\u0000${p}`] }),
  ]);
  await ingestion.waitForCount(countWhere('events', p), 1);
  await ingestion.waitForCount(countWhere('unmatched_events', p), 1);
  await ingestion.waitUntilCaughtUp();
});
