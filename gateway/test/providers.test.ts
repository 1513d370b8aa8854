import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { ClickHouseClient } from '@clickhouse/client';
import { createClickHouse } from '@mail/event-store';
import { eventually, infraEnv, uniqueSuffix, type Stack } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import {
  basicHeader,
  loopbackAddress,
  makeTlsFixtures,
  mailgunBody,
  postTo,
  type ApiBody,
  signedSnsMessage,
  startCertificateServer,
  type CertificateServer,
  type TlsFixtures,
} from './provider-support';
import { startPrivateStack, type PrivateStack } from './support/private-stack';
import { keyPair, readTopic, sendgridEvent, signedHeaders, type TopicReader } from './webhook-support';

/**
 * Every provider's webhook end to end, every process real: requests signed
 * as each provider signs them (HMAC, SNS certificates served over HTTPS by a
 * local server the gateway trusts through NODE_EXTRA_CA_CERTS, HTTP Basic),
 * through the gateway and Kafka into the store, the API and the stats.
 */
jest.setTimeout(240_000);

const { EventType, BounceType, BounceClass } = eventsV1;
const run = uniqueSuffix();
const sendgridKeys = keyPair();
const MAILGUN_KEY = `mailgun-signing-key-${run}`;
const POSTMARK = `postmark:secret-${run}`;
const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:ses-events';
const tlsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'providers-tls-'));
/** SNS URLs name port 443 only: each server has a loopback address of its own. */
const ALLOWED_HOST = loopbackAddress();
const OTHER_HOST = loopbackAddress();
const tls: TlsFixtures = makeTlsFixtures(tlsDir, [ALLOWED_HOST, OTHER_HOST]);

let stack: Stack;
let target: PrivateStack;
let clickhouse: ClickHouseClient;
let topic: TopicReader;
/** Serves the SNS certificate at the allowed host, on port 443. */
let certificates: CertificateServer;
/** On port 443 of a host the pattern does not allow, and on another port of the allowed host: they must never see a request. */
let otherHost: CertificateServer;
let otherPort: CertificateServer;

beforeAll(async () => {
  [certificates, otherHost, otherPort] = await Promise.all([
    startCertificateServer(tls, ALLOWED_HOST),
    startCertificateServer(tls, OTHER_HOST),
    startCertificateServer(tls, ALLOWED_HOST, 0),
  ]);
  target = await startPrivateStack('providers', {
    env: {
      SENDGRID_WEBHOOK_PUBLIC_KEY: sendgridKeys.publicKeyBase64,
      MAILGUN_WEBHOOK_SIGNING_KEY: MAILGUN_KEY,
      SES_SNS_TOPIC_ARNS: `arn:aws:sns:eu-west-1:123456789012:other,${TOPIC_ARN}`,
      SES_SNS_CERT_HOST_PATTERN: `^${ALLOWED_HOST.replaceAll('.', '\\.')}$`,
      POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK,
      NODE_EXTRA_CA_CERTS: tls.caFile,
    },
  });
  stack = target.stack;
  clickhouse = createClickHouse(target.clickhouse.url, target.clickhouse.database);
  topic = await readTopic(infraEnv().kafkaBrokers, target.env.KAFKA_EVENTS_TOPIC);
});

afterAll(async () => {
  await topic?.close();
  await clickhouse?.close();
  await target?.close();
  await Promise.all([certificates?.close(), otherHost?.close(), otherPort?.close()]);
  fs.rmSync(tlsDir, { recursive: true, force: true });
});

const webhook = (provider: string): string => `${stack.urls.gateway}/campaign-events/webhook/${provider}`;

/** A call to the gateway's API as the dev user (a platform admin). */
async function json(method: string, url: string, workspaceId: string, body?: unknown): Promise<{ status: number; body: ApiBody }> {
  const response = await fetch(`${stack.urls.gateway}${url}`, {
    method,
    headers: { workspace_id: workspaceId, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (response.status === 204 ? {} : await response.json()) as ApiBody };
}

/** A new workspace with one campaign whose provider_category_id is `category`. */
async function campaignFor(category: string): Promise<{ workspaceId: string; campaignId: string }> {
  const workspace = await json('POST', '/workspaces/', crypto.randomUUID(), { name: `providers ${category}` });
  expect(workspace.status).toBe(201);
  const workspaceId = workspace.body.id!;
  const campaign = await json('POST', '/email-campaigns/', workspaceId, {
    workspace_id: workspaceId,
    name: category,
    provider_category_id: category,
  });
  expect(campaign.status).toBe(201);
  return { workspaceId, campaignId: campaign.body.id! };
}

type Violations = Exclude<ApiBody['detail'], string | undefined>;

const ENGAGEMENT_TYPES = new Set(['open', 'click', 'bounce', 'unsubscribe']);

/** The engagement events GET /campaign-events/ lists for the campaign, polled until there are `total`. */
async function listed(workspaceId: string, campaignId: string, total: number): Promise<NonNullable<ApiBody['items']>> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { status, body } = await json('GET', `/campaign-events/?page_size=500&campaign_id=${campaignId}`, workspaceId);
    expect(status).toBe(200);
    const items = body.items!.filter((item) => ENGAGEMENT_TYPES.has(item.event_type));
    if (items.length === total || Date.now() > deadline) {
      expect(items.length).toBe(total);
      return items;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function storedCount(providerEventId: string): Promise<number> {
  // The ids of this test are plain (letters, digits, '-', ':', '@', '.').
  const result = await clickhouse.query({
    query: `SELECT count() AS n FROM events WHERE provider_event_id = '${providerEventId}'`,
    format: 'JSONEachRow',
  });
  return Number((await result.json<{ n: string }>())[0].n);
}

/** The stored events whose provider_event_id is LIKE `pattern`, by that id. */
async function storedRows(pattern: string): Promise<Map<string, Record<string, unknown>>> {
  const result = await clickhouse.query({
    query: `SELECT provider_event_id, event_type, bounce_type, bounce_class, machine_open FROM events WHERE provider_event_id LIKE '${pattern}'`,
    format: 'JSONEachRow',
  });
  const rows = await result.json<Record<string, unknown> & { provider_event_id: string }>();
  return new Map(rows.map((row) => [row.provider_event_id, row]));
}

type Mapped = [eventsV1.EventType, eventsV1.BounceType, eventsV1.BounceClass];
const kept = (eventType: eventsV1.EventType): Mapped => [
  eventType,
  BounceType.BOUNCE_TYPE_UNSPECIFIED,
  BounceClass.BOUNCE_CLASS_UNSPECIFIED,
];
const hard = (bounceClass: eventsV1.BounceClass): Mapped => [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_HARD, bounceClass];
const soft = (bounceClass: eventsV1.BounceClass): Mapped => [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_SOFT, bounceClass];
const mappedOf = (event: eventsV1.EngagementEvent): Mapped => [event.eventType, event.bounceType, event.bounceClass];

describe('Mailgun', () => {
  const category = `mailgun-${run}`;
  const prefix = `mg-${run}`;
  const day = '2025-11-21';
  const eventData = (name: string, event: string, fields: Record<string, unknown> = {}): Record<string, unknown> => ({
    id: `${prefix}-${name}`,
    event,
    timestamp: 1_763_719_200.25,
    recipient: 'Reader@Example.com',
    tags: ['newsletter', category],
    'user-variables': { variant_id: 'variant-b' },
    message: { headers: { 'message-id': `${name}@mg.example.com` } },
    ...fields,
  });
  const failed = (name: string, severity: string, status: Record<string, unknown>, reason = 'generic') =>
    eventData(name, 'failed', { severity, reason, 'delivery-status': status });
  const cases: [Record<string, unknown>, Mapped | undefined][] = [
    [eventData('accepted', 'accepted'), kept(EventType.EVENT_TYPE_PROCESSED)],
    [eventData('delivered', 'delivered'), kept(EventType.EVENT_TYPE_DELIVERED)],
    [eventData('opened-bot', 'opened', { 'client-info': { bot: 'apple', 'user-agent': 'Mozilla/5.0' } }), kept(EventType.EVENT_TYPE_OPEN)],
    [eventData('opened', 'opened', { 'client-info': { 'user-agent': 'Mozilla/5.0' }, ip: '203.0.113.7' }), kept(EventType.EVENT_TYPE_OPEN)],
    [eventData('clicked', 'clicked', { url: 'https://example.com/offer' }), kept(EventType.EVENT_TYPE_CLICK)],
    [eventData('unsubscribed', 'unsubscribed'), kept(EventType.EVENT_TYPE_UNSUBSCRIBE)],
    [eventData('complained', 'complained'), kept(EventType.EVENT_TYPE_SPAM_REPORT)],
    [eventData('rejected', 'rejected'), kept(EventType.EVENT_TYPE_DROPPED)],
    [
      failed('unknown-user', 'permanent', { code: 550, message: '5.1.1 The email account does not exist' }),
      hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS),
    ],
    [failed('full', 'permanent', { code: 552, message: '5.2.2 Mailbox full' }), hard(BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE)],
    [
      failed('blocked', 'permanent', { code: 550, message: '5.7.1 Message rejected due to local policy' }),
      hard(BounceClass.BOUNCE_CLASS_REPUTATION),
    ],
    [failed('plain-550', 'permanent', { code: 550, message: 'No such user' }), hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
    [failed('spam-content', 'permanent', { code: 554, message: '5.6.0 Message content rejected' }), hard(BounceClass.BOUNCE_CLASS_CONTENT)],
    [failed('unknown-554', 'permanent', { code: 554, message: 'Transaction failed' }), hard(BounceClass.BOUNCE_CLASS_UNCLASSIFIED)],
    [failed('rate', 'temporary', { code: 421, message: '4.7.0 Try again later, too many messages' }), kept(EventType.EVENT_TYPE_DEFERRED)],
    [
      failed('suppressed', 'permanent', { code: 605, message: 'Not delivering to previously bounced address' }, 'suppress-bounce'),
      kept(EventType.EVENT_TYPE_DROPPED),
    ],
    [eventData('stored', 'stored'), undefined],
  ];

  it('takes signed events of every type: each normalized, stored once, listed and counted', async () => {
    const { workspaceId, campaignId } = await campaignFor(category);
    for (const [data] of cases) {
      expect(await postTo(webhook('mailgun'), mailgunBody(MAILGUN_KEY, data))).toMatchObject({ status: 202, body: { accepted: 1 } });
    }
    // Delivered again (a new signature, as Mailgun's retry has), then one more event for the same address, which arrives after it.
    expect((await postTo(webhook('mailgun'), mailgunBody(MAILGUN_KEY, cases[4][0]))).status).toBe(202);
    expect(
      (await postTo(webhook('mailgun'), mailgunBody(MAILGUN_KEY, eventData('last', 'clicked', { url: 'https://example.com/b' })))).status,
    ).toBe(202);

    const keptCases = cases.filter(([, mapped]) => mapped !== undefined);
    const records = await topic.waitFor(`${prefix}-`, keptCases.length + 2);
    const byId = new Map(records.map(({ event }) => [event.providerEventId, event]));
    for (const [data, mapped] of keptCases) {
      const event = byId.get(`${data.id as string}:${day}`);
      expect([data.id, event && mappedOf(event)]).toEqual([data.id, mapped]);
    }
    expect(byId.has(`${prefix}-stored:${day}`)).toBe(false);
    const open = byId.get(`${prefix}-opened:${day}`)!;
    expect(open).toMatchObject({
      provider: 'mailgun',
      email: 'reader@example.com',
      categories: ['newsletter', category],
      variantId: 'variant-b',
      machineOpen: false,
      providerMessageId: 'opened@mg.example.com',
      userAgent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      occurredAt: new Date(1_763_719_200_250),
    });
    expect(byId.get(`${prefix}-opened-bot:${day}`)!.machineOpen).toBe(true);
    expect(byId.get(`${prefix}-clicked:${day}`)!.url).toBe('https://example.com/offer');
    expect(byId.get(`${prefix}-rate:${day}`)!.reason).toBe('421 4.7.0 Try again later, too many messages');
    expect(byId.get(`${prefix}-unknown-user:${day}`)!.reason).toBe('550 5.1.1 The email account does not exist');

    // Listed: the engagement types (2 opens, 2 clicks, 1 unsubscribe, 6 bounces); the redelivered click once.
    const items = await listed(workspaceId, campaignId, 11);
    for (const item of items) expect(item).toMatchObject({ provider: 'mailgun', campaign_id: campaignId, email: 'reader@example.com' });
    expect(await storedCount(`${prefix}-clicked:${day}`)).toBe(1);
    // Stored as normalized: the class of each bounce, the machine open.
    const stored = await storedRows(`${prefix}-%`);
    expect(stored.get(`${prefix}-unknown-user:${day}`)).toMatchObject({
      event_type: 'bounce',
      bounce_type: 'hard',
      bounce_class: 'invalid_address',
    });
    expect(stored.get(`${prefix}-blocked:${day}`)).toMatchObject({ bounce_class: 'reputation' });
    expect(stored.get(`${prefix}-rate:${day}`)).toMatchObject({ event_type: 'deferred', bounce_class: 'none' });
    expect(stored.get(`${prefix}-opened-bot:${day}`)).toMatchObject({ event_type: 'open', machine_open: 1 });
    expect(stored.get(`${prefix}-opened:${day}`)).toMatchObject({ event_type: 'open', machine_open: 0 });
    const stats = await json('GET', `/campaign-events/stats?campaign_id=${campaignId}`, workspaceId);
    expect(stats.body.totals).toMatchObject({ clicks: 2, unique_clicks: 1, hard_bounces: 6, soft_bounces: 0, unsubscribes: 1 });
  });

  it.each([
    ['signed with another key', () => mailgunBody('another-key', eventData('x', 'opened'))],
    ['a stale timestamp', () => mailgunBody(MAILGUN_KEY, eventData('x', 'opened'), { timestamp: Math.floor(Date.now() / 1000) - 601 })],
    // Well past the 600 s tolerance: the time the request takes on a busy host brings a timestamp ahead back towards it.
    [
      'a timestamp too far ahead',
      () => mailgunBody(MAILGUN_KEY, eventData('x', 'opened'), { timestamp: Math.floor(Date.now() / 1000) + 11 * 60 }),
    ],
    [
      'a timestamp altered after signing',
      () => {
        const body = JSON.parse(mailgunBody(MAILGUN_KEY, eventData('x', 'opened')));
        body.signature.timestamp = String(Number(body.signature.timestamp) - 1);
        return JSON.stringify(body);
      },
    ],
    ['no signature', () => JSON.stringify({ 'event-data': eventData('x', 'opened') })],
  ])('refuses %s with 401', async (_case, body) => {
    const response = await postTo(webhook('mailgun'), body());
    expect(response).toMatchObject({ status: 401, body: { detail: expect.any(String) } });
  });

  it('refuses a token it has seen (a replay) with 401', async () => {
    const body = mailgunBody(MAILGUN_KEY, eventData('replayed', 'opened'));
    expect((await postTo(webhook('mailgun'), body)).status).toBe(202);
    expect(await postTo(webhook('mailgun'), body)).toMatchObject({ status: 401, body: { detail: 'Webhook token used before' } });
  });

  it('answers a malformed event with 422 in the API format', async () => {
    const { recipient: _recipient, ...withoutRecipient } = eventData('bad', 'opened');
    const response = await postTo(webhook('mailgun'), mailgunBody(MAILGUN_KEY, { ...withoutRecipient, timestamp: 'soon' }));
    expect(response.status).toBe(422);
    expect((response.body.detail as Violations).map((v) => [v.type, v.loc])).toEqual([
      ['missing', ['body', 'event-data', 'recipient']],
      ['float_type', ['body', 'event-data', 'timestamp']],
    ]);
  });
});

describe('Amazon SES through SNS', () => {
  const category = `ses-${run}`;
  const certUrl = () => `https://${ALLOWED_HOST}/cert.pem`;
  const mail = (destination: string[]) => ({
    timestamp: '2025-11-21T10:00:00.000Z',
    messageId: `ses-message-${run}`,
    destination,
    tags: { category: [category], variant_id: ['variant-a'] },
  });
  const sesNotification = (sesEvent: Record<string, unknown>, options: { version?: '1' | '2'; certUrl?: string; topicArn?: string } = {}) =>
    signedSnsMessage(
      {
        Type: 'Notification',
        TopicArn: options.topicArn ?? TOPIC_ARN,
        Subject: 'Amazon SES Email Event Notification',
        Message: JSON.stringify(sesEvent),
      },
      tls.signingKey,
      { version: options.version, certUrl: options.certUrl ?? certUrl() },
    );
  const post = (message: Record<string, string>) =>
    postTo(webhook('ses'), JSON.stringify(message), { 'content-type': 'text/plain; charset=UTF-8' });
  const at = '2025-11-21T10:05:00.000Z';
  const one = ['reader@example.com'];
  /** A Bounce of the one reader, of SES's bounceType and bounceSubType. */
  const bounceOfOne = (bounceType: string, bounceSubType: string) => ({
    eventType: 'Bounce',
    mail: mail(one),
    bounce: { bounceType, bounceSubType, timestamp: at, bouncedRecipients: [{ emailAddress: 'reader@example.com' }] },
  });
  const cases: [string, Record<string, unknown>, [string, Mapped][]][] = [
    ['send', { eventType: 'Send', mail: mail(one), send: {} }, [['reader@example.com', kept(EventType.EVENT_TYPE_PROCESSED)]]],
    [
      'delivery',
      { eventType: 'Delivery', mail: mail(one), delivery: { timestamp: at, recipients: one, smtpResponse: '250 ok' } },
      [['reader@example.com', kept(EventType.EVENT_TYPE_DELIVERED)]],
    ],
    [
      'hard',
      {
        eventType: 'Bounce',
        mail: mail(['a@example.com', 'b@example.com']),
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          timestamp: at,
          bouncedRecipients: [
            { emailAddress: 'a@example.com', status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 user unknown' },
            { emailAddress: 'b@example.com', status: '5.7.1', diagnosticCode: 'smtp; 550 5.7.1 blocked by policy' },
          ],
        },
      },
      [
        ['a@example.com', hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
        ['b@example.com', hard(BounceClass.BOUNCE_CLASS_REPUTATION)],
      ],
    ],
    ['no-email', bounceOfOne('Permanent', 'NoEmail'), [['reader@example.com', hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)]]],
    ['full', bounceOfOne('Transient', 'MailboxFull'), [['reader@example.com', soft(BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE)]]],
    ['content', bounceOfOne('Transient', 'ContentRejected'), [['reader@example.com', soft(BounceClass.BOUNCE_CLASS_CONTENT)]]],
    ['undetermined', bounceOfOne('Undetermined', 'Undetermined'), [['reader@example.com', soft(BounceClass.BOUNCE_CLASS_UNCLASSIFIED)]]],
    [
      'complaint',
      {
        eventType: 'Complaint',
        mail: mail(one),
        complaint: { timestamp: at, complainedRecipients: [{ emailAddress: 'reader@example.com' }] },
      },
      [['reader@example.com', kept(EventType.EVENT_TYPE_SPAM_REPORT)]],
    ],
    [
      'reject',
      { eventType: 'Reject', mail: mail(one), reject: { reason: 'Bad content' } },
      [['reader@example.com', kept(EventType.EVENT_TYPE_DROPPED)]],
    ],
    [
      'open',
      { eventType: 'Open', mail: mail(one), open: { timestamp: at, userAgent: 'Mozilla/5.0', ipAddress: '203.0.113.8' } },
      [['reader@example.com', kept(EventType.EVENT_TYPE_OPEN)]],
    ],
    [
      'click',
      {
        eventType: 'Click',
        mail: mail(one),
        click: { timestamp: at, link: 'https://example.com/ses', userAgent: 'Mozilla/5.0', ipAddress: '203.0.113.8' },
      },
      [['reader@example.com', kept(EventType.EVENT_TYPE_CLICK)]],
    ],
    [
      'delay',
      {
        eventType: 'DeliveryDelay',
        mail: mail(one),
        deliveryDelay: {
          timestamp: at,
          delayType: 'MailboxFull',
          delayedRecipients: [{ emailAddress: 'reader@example.com', diagnosticCode: 'smtp; 452 4.2.2 full' }],
        },
      },
      [['reader@example.com', kept(EventType.EVENT_TYPE_DEFERRED)]],
    ],
    [
      'unsubscribe',
      {
        eventType: 'Subscription',
        mail: mail(one),
        subscription: { timestamp: at, contactList: 'news', newTopicPreferences: { unsubscribeAll: true } },
      },
      [['reader@example.com', kept(EventType.EVENT_TYPE_UNSUBSCRIBE)]],
    ],
    ['rendering', { eventType: 'Rendering Failure', mail: mail(one), failure: { errorMessage: 'missing variable' } }, []],
  ];

  it('confirms a subscription with exactly one GET of its SubscribeURL', async () => {
    const subscribePath = `/confirm?Action=ConfirmSubscription&Token=${run}`;
    const message = signedSnsMessage(
      {
        Type: 'SubscriptionConfirmation',
        TopicArn: TOPIC_ARN,
        Token: run,
        Message: `You have chosen to subscribe to the topic ${TOPIC_ARN}.`,
        SubscribeURL: `https://${ALLOWED_HOST}${subscribePath}`,
      },
      tls.signingKey,
      { version: '1', certUrl: certUrl() },
    );
    expect((await post(message)).status).toBe(200);
    expect(certificates.requests.get(subscribePath)).toBe(1);
    const unsubscribed = signedSnsMessage(
      { ...message, Type: 'UnsubscribeConfirmation', Timestamp: new Date().toISOString() },
      tls.signingKey,
      { certUrl: certUrl() },
    );
    expect((await post(unsubscribed)).status).toBe(200);
    expect(certificates.requests.get(subscribePath)).toBe(1);
  });

  it('takes signed notifications (v1 and v2): one event per recipient, each normalized, stored once, listed and counted', async () => {
    const { workspaceId, campaignId } = await campaignFor(category);
    const messageIds = new Map<string, string>();
    for (const [index, [name, sesEvent, expected]] of cases.entries()) {
      const message = sesNotification(sesEvent, { version: index % 2 === 0 ? '1' : '2' });
      messageIds.set(name, message.MessageId);
      expect(await post(message)).toMatchObject({ status: 202, body: { accepted: Math.max(expected.length, 1) } });
    }
    // The click delivered again by SNS: the same message.
    const click = sesNotification(cases[10][1]);
    expect((await post(click)).status).toBe(202);
    expect((await post(click)).status).toBe(202);
    const last = sesNotification({ ...(cases[10][1] as object), click: { timestamp: at, link: 'https://example.com/last' } });
    expect((await post(last)).status).toBe(202);

    for (const [name, , expected] of cases) {
      for (const [email, mapped] of expected) {
        const [record] = await topic.waitFor(`${messageIds.get(name)!}:${email}`, 1);
        expect([name, mappedOf(record.event)]).toEqual([name, mapped]);
        expect(record.event).toMatchObject({ provider: 'ses', email, categories: [category], variantId: 'variant-a' });
      }
    }
    const [open] = await topic.waitFor(`${messageIds.get('open')!}:`, 1);
    expect(open.event).toMatchObject({
      userAgent: 'Mozilla/5.0',
      ip: '203.0.113.8',
      occurredAt: new Date(at),
      providerMessageId: `ses-message-${run}`,
    });
    const [hardBounce] = await topic.waitFor(`${messageIds.get('hard')!}:a@example.com`, 1);
    expect(hardBounce.event.reason).toBe('smtp; 550 5.1.1 user unknown');

    // Listed: open, 3 clicks (one delivered twice), unsubscribe, 6 bounces.
    const items = await listed(workspaceId, campaignId, 11);
    for (const item of items) expect(item).toMatchObject({ provider: 'ses', campaign_id: campaignId });
    expect(await storedCount(`${click.MessageId}:reader@example.com`)).toBe(1);
    const stats = await json('GET', `/campaign-events/stats?campaign_id=${campaignId}`, workspaceId);
    expect(stats.body.totals).toMatchObject({ clicks: 3, hard_bounces: 3, soft_bounces: 3, unsubscribes: 1 });
    // The certificate was fetched once, then cached.
    expect(certificates.requests.get('/cert.pem')).toBe(1);
  });

  it('refuses a message altered after signing, or signed with another key, with 401', async () => {
    const altered = sesNotification(cases[9][1]);
    altered.Message = altered.Message.replace('203.0.113.8', '203.0.113.9');
    expect((await post(altered)).status).toBe(401);
    const otherKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const forged = signedSnsMessage({ Type: 'Notification', TopicArn: TOPIC_ARN, Message: JSON.stringify(cases[9][1]) }, otherKey, {
      certUrl: certUrl(),
    });
    expect((await post(forged)).status).toBe(401);
  });

  it('refuses an unknown topic with 401 without fetching its certificate', async () => {
    const url = `https://${ALLOWED_HOST}/unknown-topic.pem`;
    const message = sesNotification(cases[9][1], { topicArn: 'arn:aws:sns:us-east-1:999999999999:elsewhere', certUrl: url });
    expect((await post(message)).status).toBe(401);
    expect(certificates.requests.get('/unknown-topic.pem')).toBeUndefined();
  });

  it.each([
    ['a host the pattern does not allow', () => `https://${OTHER_HOST}/cert.pem`],
    ['plain http', () => `http://${ALLOWED_HOST}:${otherPort.port}/cert.pem`],
    ['a port other than 443', () => `https://${ALLOWED_HOST}:${otherPort.port}/cert.pem`],
  ])('refuses a certificate URL on %s with 401, and never fetches it', async (_case, url) => {
    expect((await post(sesNotification(cases[9][1], { certUrl: url() }))).status).toBe(401);
    const subscription = signedSnsMessage(
      {
        Type: 'SubscriptionConfirmation',
        TopicArn: TOPIC_ARN,
        Token: 't',
        Message: 'subscribe',
        SubscribeURL: url().replace('/cert.pem', '/confirm'),
      },
      tls.signingKey,
      { certUrl: certUrl() },
    );
    expect((await post(subscription)).status).toBe(401);
    expect(otherHost.total() + otherPort.total()).toBe(0);
  });

  it('answers lists that are not lists, or hold the wrong items, with 422 naming each item', async () => {
    const delivery = await post(
      sesNotification({ eventType: 'Delivery', mail: mail(one), delivery: { timestamp: at, recipients: ['ok@example.com', 5, ''] } }),
    );
    expect(delivery.status).toBe(422);
    expect((delivery.body.detail as Violations).map((v) => [v.type, v.loc])).toEqual([
      ['string_type', ['body', 'Message', 'delivery', 'recipients', 1]],
      ['string_type', ['body', 'Message', 'delivery', 'recipients', 2]],
    ]);

    const bounce = bounceOfOne('Permanent', 'General');
    const notList = await post(sesNotification({ ...bounce, bounce: { ...bounce.bounce, bouncedRecipients: 'reader@example.com' } }));
    expect(notList.status).toBe(422);
    expect((notList.body.detail as Violations).map((v) => [v.type, v.loc])).toEqual([
      ['list_type', ['body', 'Message', 'bounce', 'bouncedRecipients']],
    ]);

    const badItems = await post(
      sesNotification({ ...bounce, bounce: { ...bounce.bounce, bouncedRecipients: ['reader@example.com', {}] } }),
    );
    expect(badItems.status).toBe(422);
    expect((badItems.body.detail as Violations).map((v) => [v.type, v.loc])).toEqual([
      ['model_attributes_type', ['body', 'Message', 'bounce', 'bouncedRecipients', 0]],
      ['missing', ['body', 'Message', 'bounce', 'bouncedRecipients', 1, 'emailAddress']],
    ]);
  });

  it('answers a Message that is not JSON with 422', async () => {
    const message = signedSnsMessage({ Type: 'Notification', TopicArn: TOPIC_ARN, Message: 'not json' }, tls.signingKey, {
      certUrl: certUrl(),
    });
    const response = await post(message);
    expect(response.status).toBe(422);
    expect((response.body.detail as Violations)[0]).toMatchObject({ type: 'value_error', loc: ['body', 'Message'] });
  });
});

describe('Postmark', () => {
  const category = `postmark-${run}`;
  const auth = basicHeader(POSTMARK);
  const shared = { MessageID: `pm-${run}`, MessageStream: 'outbound', Tag: category, Metadata: { variant_id: 'variant-c' } };
  const bounce = (id: number, type: string) => ({
    RecordType: 'Bounce',
    ID: id,
    Type: type,
    Email: 'Reader@Example.com',
    BouncedAt: '2025-11-21T10:00:00Z',
    Details: `${type} details`,
    ...shared,
  });
  const base = 4_000_000_000 + Math.floor(Math.random() * 1_000_000) * 100;
  const cases: [string, Record<string, unknown>, Mapped | undefined][] = [
    [
      'delivery',
      { RecordType: 'Delivery', Recipient: 'reader@example.com', DeliveredAt: '2025-11-21T10:00:00Z', Details: 'ok', ...shared },
      kept(EventType.EVENT_TYPE_DELIVERED),
    ],
    ['hard', bounce(base + 1, 'HardBounce'), hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
    ['bad-address', bounce(base + 2, 'BadEmailAddress'), hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
    ['soft', bounce(base + 3, 'SoftBounce'), soft(BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE)],
    ['transient', bounce(base + 4, 'Transient'), soft(BounceClass.BOUNCE_CLASS_TECHNICAL)],
    ['dns', bounce(base + 5, 'DnsError'), soft(BounceClass.BOUNCE_CLASS_TECHNICAL)],
    ['blocked', bounce(base + 6, 'Blocked'), soft(BounceClass.BOUNCE_CLASS_REPUTATION)],
    ['spam-notification', bounce(base + 7, 'SpamNotification'), soft(BounceClass.BOUNCE_CLASS_CONTENT)],
    ['unknown', bounce(base + 8, 'Unknown'), soft(BounceClass.BOUNCE_CLASS_UNCLASSIFIED)],
    ['deactivated', bounce(base + 9, 'ManuallyDeactivated'), kept(EventType.EVENT_TYPE_DROPPED)],
    ['auto-responder', bounce(base + 10, 'AutoResponder'), undefined],
    ['complaint', { ...bounce(base + 11, 'SpamComplaint'), RecordType: 'SpamComplaint' }, kept(EventType.EVENT_TYPE_SPAM_REPORT)],
    [
      'open',
      {
        RecordType: 'Open',
        Recipient: 'reader@example.com',
        ReceivedAt: '2025-11-21T10:01:00Z',
        UserAgent: 'Mozilla/5.0',
        FirstOpen: true,
        ...shared,
      },
      kept(EventType.EVENT_TYPE_OPEN),
    ],
    [
      'click',
      {
        RecordType: 'Click',
        Recipient: 'reader@example.com',
        ReceivedAt: '2025-11-21T10:02:00Z',
        OriginalLink: 'https://example.com/pm',
        ...shared,
      },
      kept(EventType.EVENT_TYPE_CLICK),
    ],
    [
      'unsubscribe',
      {
        RecordType: 'SubscriptionChange',
        Recipient: 'reader@example.com',
        ChangedAt: '2025-11-21T10:03:00Z',
        SuppressSending: true,
        SuppressionReason: 'ManualSuppression',
        ...shared,
      },
      kept(EventType.EVENT_TYPE_UNSUBSCRIBE),
    ],
    [
      'after-bounce',
      {
        RecordType: 'SubscriptionChange',
        Recipient: 'reader@example.com',
        ChangedAt: '2025-11-21T10:04:00Z',
        SuppressSending: true,
        SuppressionReason: 'HardBounce',
        ...shared,
      },
      undefined,
    ],
    [
      'resubscribe',
      {
        RecordType: 'SubscriptionChange',
        Recipient: 'reader@example.com',
        ChangedAt: '2025-11-21T10:05:00Z',
        SuppressSending: false,
        ...shared,
      },
      undefined,
    ],
  ];

  it('takes records of every type behind HTTP Basic: each normalized, stored once, listed and counted', async () => {
    const { workspaceId, campaignId } = await campaignFor(category);
    for (const [, record] of cases) {
      expect(await postTo(webhook('postmark'), JSON.stringify(record), auth)).toMatchObject({ status: 202, body: { accepted: 1 } });
    }
    // Delivered again: the click, and a bounce.
    expect((await postTo(webhook('postmark'), JSON.stringify(cases[13][1]), auth)).status).toBe(202);
    expect((await postTo(webhook('postmark'), JSON.stringify(cases[1][1]), auth)).status).toBe(202);
    const last = { ...(cases[13][1] as object), ReceivedAt: '2025-11-21T11:00:00Z', OriginalLink: 'https://example.com/last' };
    expect((await postTo(webhook('postmark'), JSON.stringify(last), auth)).status).toBe(202);

    // Listed: open, 2 clicks, unsubscribe, 8 bounces.
    const items = await listed(workspaceId, campaignId, 12);
    for (const item of items) expect(item).toMatchObject({ provider: 'postmark', campaign_id: campaignId, email: 'reader@example.com' });
    const stats = await json('GET', `/campaign-events/stats?campaign_id=${campaignId}`, workspaceId);
    expect(stats.body.totals).toMatchObject({ clicks: 2, hard_bounces: 2, soft_bounces: 6, unsubscribes: 1 });
    expect(await storedCount(`bounce-${base + 1}`)).toBe(1);

    // On the topic: the 14 kept records, the two redeliveries and the last click.
    const records = await eventually(() => {
      const found = topic.records.filter(({ event }) => event.provider === 'postmark' && event.providerMessageId === `pm-${run}`);
      if (found.length < 17) throw new Error(`${found.length} Postmark records on the topic`);
      return Promise.resolve(found);
    }, 15_000);
    const byDetails = (check: (event: eventsV1.EngagementEvent) => boolean) => records.find(({ event }) => check(event))?.event;
    for (const [name, record, mapped] of cases) {
      const found = byDetails((event) => isDeepStrictEqual(JSON.parse(event.rawJson), record));
      expect([name, found && mappedOf(found)]).toEqual([name, mapped]);
      if (found) expect(found).toMatchObject({ email: 'reader@example.com', categories: [category], variantId: 'variant-c' });
    }
    expect(byDetails((event) => event.eventType === EventType.EVENT_TYPE_CLICK)!.url).toBe('https://example.com/pm');
    expect(byDetails((event) => event.providerEventId === `bounce-${base + 1}`)!.reason).toBe('HardBounce details');
  });

  it.each([
    ['wrong credentials', basicHeader('postmark:wrong')],
    ['no credentials', {}],
  ])('refuses %s with 401 and a Basic challenge', async (_case, headers) => {
    const response = await postTo(webhook('postmark'), JSON.stringify(cases[0][1]), headers);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Basic realm="campaign-events"');
  });

  it('answers a bounce whose ID is not an integer with 422', async () => {
    const response = await postTo(webhook('postmark'), JSON.stringify({ ...bounce(1, 'HardBounce'), ID: 1.5 }), auth);
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual([{ type: 'int_type', loc: ['body', 'ID'], msg: 'Input should be a valid integer', input: 1.5 }]);
  });

  it('answers a record without its fields with 422', async () => {
    const response = await postTo(webhook('postmark'), JSON.stringify({ RecordType: 'Bounce', Type: 'HardBounce' }), auth);
    expect(response.status).toBe(422);
    expect((response.body.detail as Violations).map((v) => v.loc)).toEqual([
      ['body', 'Email'],
      ['body', 'BouncedAt'],
      ['body', 'ID'],
    ]);
  });
});

describe('Events that arrive before their campaign', () => {
  type StoredEvent = { provider: string; event_type: string; bounce_type: string; bounce_class: string; machine_open: number };

  /**
   * Waits until the `count` events of `category` are kept as unmatched, gives the category to a new campaign, and
   * expects its events (sorted by type, bounce class, machine open) stored for it once each, as normalized.
   */
  async function storedOnceTaken(category: string, expected: StoredEvent[]): Promise<void> {
    const count = async (query: string): Promise<number> =>
      Number((await (await clickhouse.query({ query, format: 'JSONEachRow' })).json<{ n: string }>())[0].n);
    await eventually(async () => {
      const kept = await count(`SELECT count() AS n FROM unmatched_events FINAL WHERE has(categories, '${category}')`);
      if (kept < expected.length) throw new Error(`${kept} unmatched events of ${category}`);
    }, 20_000);
    const { campaignId } = await campaignFor(category);
    const ofCampaign = `campaign_id = toUUID('${campaignId}')`;
    await eventually(async () => {
      const stored = await count(`SELECT count() AS n FROM events WHERE ${ofCampaign}`);
      if (stored < expected.length) throw new Error(`${stored} events of ${category} stored`);
    }, 20_000);
    const result = await clickhouse.query({
      query: `SELECT provider, event_type, bounce_type, bounce_class, machine_open FROM events WHERE ${ofCampaign}
        ORDER BY toString(event_type), toString(bounce_class), machine_open`,
      format: 'JSONEachRow',
    });
    // Without FINAL: a row for each time it was stored.
    expect(await result.json()).toEqual(expected);
  }

  const kept = (provider: string, event_type: string, machine_open = 0): StoredEvent => ({
    provider,
    event_type,
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open,
  });
  const bounced = (provider: string, bounce_type: string, bounce_class: string): StoredEvent => ({
    provider,
    event_type: 'bounce',
    bounce_type,
    bounce_class,
    machine_open: 0,
  });

  it('stores Mailgun events once a campaign takes their category', async () => {
    const category = `late-mailgun-${run}`;
    const data = (name: string, event: string, fields: Record<string, unknown> = {}) => ({
      id: `late-mg-${run}-${name}`,
      event,
      timestamp: 1_763_719_200,
      recipient: 'reader@example.com',
      tags: [category],
      ...fields,
    });
    for (const eventData of [
      data('bot', 'opened', { 'client-info': { bot: 'apple' } }),
      data('human', 'opened', { 'client-info': { 'user-agent': 'Mozilla/5.0' } }),
      data('bounce', 'failed', {
        severity: 'permanent',
        reason: 'generic',
        'delivery-status': { code: 550, message: '5.1.1 no such user' },
      }),
      data('rate', 'failed', { severity: 'temporary', reason: 'generic', 'delivery-status': { code: 421, message: '4.7.0 Try later' } }),
    ]) {
      expect((await postTo(webhook('mailgun'), mailgunBody(MAILGUN_KEY, eventData))).status).toBe(202);
    }
    await storedOnceTaken(category, [
      bounced('mailgun', 'hard', 'invalid_address'),
      kept('mailgun', 'deferred'),
      kept('mailgun', 'open'),
      kept('mailgun', 'open', 1),
    ]);
  });

  it('stores SES events once a campaign takes their category', async () => {
    const category = `late-ses-${run}`;
    const at = '2025-11-21T10:05:00.000Z';
    const mail = { timestamp: at, messageId: `late-ses-${run}`, destination: ['reader@example.com'], tags: { category: [category] } };
    for (const sesEvent of [
      { eventType: 'Open', mail, open: { timestamp: at, userAgent: 'Mozilla/5.0', ipAddress: '203.0.113.8' } },
      { eventType: 'Delivery', mail, delivery: { timestamp: at, recipients: ['reader@example.com'], smtpResponse: '250 ok' } },
      {
        eventType: 'Bounce',
        mail,
        bounce: {
          bounceType: 'Transient',
          bounceSubType: 'MailboxFull',
          timestamp: at,
          bouncedRecipients: [{ emailAddress: 'reader@example.com' }],
        },
      },
    ]) {
      const message = signedSnsMessage({ Type: 'Notification', TopicArn: TOPIC_ARN, Message: JSON.stringify(sesEvent) }, tls.signingKey, {
        certUrl: `https://${ALLOWED_HOST}/cert.pem`,
      });
      const response = await postTo(webhook('ses'), JSON.stringify(message), { 'content-type': 'text/plain; charset=UTF-8' });
      expect(response.status).toBe(202);
    }
    await storedOnceTaken(category, [bounced('ses', 'soft', 'mailbox_unavailable'), kept('ses', 'delivered'), kept('ses', 'open')]);
  });

  it('stores Postmark events once a campaign takes their category', async () => {
    const category = `late-postmark-${run}`;
    const shared = { MessageID: `late-pm-${run}`, MessageStream: 'outbound', Tag: category };
    const id = 5_000_000_000 + Math.floor(Math.random() * 1_000_000) * 10;
    const bounce = (offset: number, type: string, recordType = 'Bounce') => ({
      RecordType: recordType,
      ID: id + offset,
      Type: type,
      Email: 'reader@example.com',
      BouncedAt: '2025-11-21T10:00:00Z',
      Details: type,
      ...shared,
    });
    for (const record of [
      { RecordType: 'Open', Recipient: 'reader@example.com', ReceivedAt: '2025-11-21T10:01:00Z', FirstOpen: true, ...shared },
      bounce(1, 'HardBounce'),
      bounce(2, 'Blocked'),
      bounce(3, 'SpamComplaint', 'SpamComplaint'),
    ]) {
      expect((await postTo(webhook('postmark'), JSON.stringify(record), basicHeader(POSTMARK))).status).toBe(202);
    }
    await storedOnceTaken(category, [
      bounced('postmark', 'hard', 'invalid_address'),
      bounced('postmark', 'soft', 'reputation'),
      kept('postmark', 'open'),
      kept('postmark', 'spamreport'),
    ]);
  });
});

describe('SendGrid under its own name', () => {
  it('takes the same signed batch at /campaign-events/webhook/sendgrid', async () => {
    const category = `sendgrid-${run}`;
    const { workspaceId, campaignId } = await campaignFor(category);
    const body = JSON.stringify([sendgridEvent({ event: 'open', sg_event_id: `sg-${run}`, category })]);
    expect(await postTo(webhook('sendgrid'), body, signedHeaders(sendgridKeys.privateKey, body))).toMatchObject({
      status: 202,
      body: { accepted: 1 },
    });
    expect(await postTo(webhook('sendgrid'), body, signedHeaders(keyPair().privateKey, body))).toMatchObject({ status: 401 });
    const [item] = await listed(workspaceId, campaignId, 1);
    expect(item).toMatchObject({ provider: 'sendgrid', provider_event_id: `sg-${run}`, event_type: 'open' });
  });
});
