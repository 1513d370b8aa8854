import crypto from 'node:crypto';
import { ConfigError, EnvReader, registry } from '@mail/common';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { readGatewayConfig } from '../src/config';
import { parseSendgridPublicKey } from '../src/webhook/auth';
import { cpuMs } from './cpu-time';
import {
  defaultPartitionOf,
  keyPair,
  post,
  readTopic,
  sendgridEvent,
  signedHeaders,
  startWebhookApp,
  topicEnds,
  topicSize,
  WEBHOOK,
  type TopicReader,
  type WebhookApp,
} from './webhook-support';

const { EventType, BounceType, BounceClass } = eventsV1;
const brokers = infraEnv().kafkaBrokers;
const keys = keyPair();
const topics = {
  signed: `webhook-signed-${uniqueSuffix()}`,
  basic: `webhook-basic-${uniqueSuffix()}`,
  both: `webhook-both-${uniqueSuffix()}`,
  open: `webhook-open-${uniqueSuffix()}`,
};
const BASIC = 'sendgrid:s3cret:with:colons';
const basicHeader = (credentials: string): string => `Basic ${Buffer.from(credentials).toString('base64')}`;

let signed: WebhookApp;
let basic: WebhookApp;
let both: WebhookApp;
let open: WebhookApp;
let openTopic: TopicReader;

beforeAll(async () => {
  [signed, basic, both, open] = await Promise.all([
    startWebhookApp({ KAFKA_EVENTS_TOPIC: topics.signed, SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64 }),
    startWebhookApp({ KAFKA_EVENTS_TOPIC: topics.basic, WEBHOOK_BASIC_AUTH: BASIC }),
    startWebhookApp({ KAFKA_EVENTS_TOPIC: topics.both, SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64, WEBHOOK_BASIC_AUTH: BASIC }),
    startWebhookApp({ KAFKA_EVENTS_TOPIC: topics.open }),
  ]);
  openTopic = await readTopic(brokers, topics.open);
  // Joining the reader's group may wait for Kafka to create its offsets topic.
}, 180_000);

afterAll(async () => {
  await openTopic?.close();
  await Promise.all([signed, basic, both, open].map((app) => app?.close()));
});

const batch = (count: number, prefix = 'evt'): string =>
  JSON.stringify(
    Array.from({ length: count }, (_, i) => sendgridEvent({ event: 'open', sg_event_id: `${prefix}-${i}-${uniqueSuffix()}` })),
  );

/** Produce requests the webhook publishers of this process have sent: their send-duration histogram's count. */
async function kafkaSends(): Promise<number> {
  const { values } = await registry.getSingleMetric('webhook_kafka_send_duration_seconds')!.get();
  return (
    (values as { metricName?: string; value: number }[]).find((value) => value.metricName === 'webhook_kafka_send_duration_seconds_count')
      ?.value ?? 0
  );
}

describe('signed webhook (SENDGRID_WEBHOOK_PUBLIC_KEY)', () => {
  it('accepts a correctly signed batch', async () => {
    const body = batch(3);
    const response = await post(signed.url, body, signedHeaders(keys.privateKey, body));
    expect(response).toMatchObject({ status: 202, body: { accepted: 3 } });
  });

  it('accepts a timestamp up to 10 minutes off, in either direction', async () => {
    const body = batch(1);
    const now = Math.floor(Date.now() / 1000);
    expect((await post(signed.url, body, signedHeaders(keys.privateKey, body, now - 590))).status).toBe(202);
    expect((await post(signed.url, body, signedHeaders(keys.privateKey, body, now + 590))).status).toBe(202);
  });

  it.each([
    ['signed with another key', (body: string) => signedHeaders(keyPair().privateKey, body)],
    ['body altered after signing', (body: string) => signedHeaders(keys.privateKey, body.replace('open', 'click'))],
    [
      'timestamp altered after signing',
      (body: string) => {
        const headers = signedHeaders(keys.privateKey, body);
        return {
          ...headers,
          'X-Twilio-Email-Event-Webhook-Timestamp': String(Number(headers['X-Twilio-Email-Event-Webhook-Timestamp']) + 1),
        };
      },
    ],
    ['stale timestamp', (body: string) => signedHeaders(keys.privateKey, body, Math.floor(Date.now() / 1000) - 11 * 60)],
    ['timestamp in the future', (body: string) => signedHeaders(keys.privateKey, body, Math.floor(Date.now() / 1000) + 11 * 60)],
    [
      'no signature header',
      (body: string) => ({
        'X-Twilio-Email-Event-Webhook-Timestamp': signedHeaders(keys.privateKey, body)['X-Twilio-Email-Event-Webhook-Timestamp'],
      }),
    ],
    [
      'no timestamp header',
      (body: string) => ({
        'X-Twilio-Email-Event-Webhook-Signature': signedHeaders(keys.privateKey, body)['X-Twilio-Email-Event-Webhook-Signature'],
      }),
    ],
    [
      'garbage signature',
      () => ({
        'X-Twilio-Email-Event-Webhook-Signature': 'bm90IGEgc2lnbmF0dXJl',
        'X-Twilio-Email-Event-Webhook-Timestamp': String(Math.floor(Date.now() / 1000)),
      }),
    ],
    ['no headers at all', () => ({})],
  ])('answers 401 for %s', async (_case, headersFor) => {
    const body = batch(1);
    const response = await post(signed.url, body, headersFor(body));
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ detail: expect.any(String) });
  });

  it('checks the signature before validating the body', async () => {
    expect((await post(signed.url, '{not json')).status).toBe(401);
  });

  it('takes the key as PEM too, and refuses to start with a key that is not P-256', () => {
    const pem = readGatewayConfig(new EnvReader({ DEV_AUTH_ENABLED: '1', SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyPem }));
    expect(pem.webhook.providers.find((provider) => provider.name === 'sendgrid')?.credentialed).toBe(true);
    expect(parseSendgridPublicKey(keys.publicKeyPem).asymmetricKeyDetails?.namedCurve).toBe('prime256v1');

    const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'der', type: 'spki' });
    const withKey = (key: string) => () => readGatewayConfig(new EnvReader({ DEV_AUTH_ENABLED: '1', SENDGRID_WEBHOOK_PUBLIC_KEY: key }));
    expect(withKey(rsa.toString('base64'))).toThrow(new ConfigError('SENDGRID_WEBHOOK_PUBLIC_KEY must be an ECDSA P-256 public key'));
    expect(withKey('not-a-key')).toThrow(ConfigError);
    expect(withKey('not-a-key')).toThrow(/SENDGRID_WEBHOOK_PUBLIC_KEY is not a public key/);
  });
});

describe('HTTP Basic (WEBHOOK_BASIC_AUTH)', () => {
  it('accepts the configured credentials', async () => {
    const response = await post(basic.url, batch(2), { authorization: basicHeader(BASIC) });
    expect(response).toMatchObject({ status: 202, body: { accepted: 2 } });
  });

  it.each([
    ['a wrong password', { authorization: basicHeader('sendgrid:wrong') }],
    ['a prefix of the password', { authorization: basicHeader('sendgrid:s3cret') }],
    ['no credentials', {}],
    ['a bearer token', { authorization: 'Bearer abc' }],
  ])('answers 401 with a Basic challenge for %s', async (_case, headers: Record<string, string>) => {
    const response = await post(basic.url, batch(1), headers);
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ detail: expect.any(String) });
    expect(response.headers.get('www-authenticate')).toBe('Basic realm="campaign-events"');
  });
});

describe('signature and HTTP Basic both configured', () => {
  it('accepts a call that passes both', async () => {
    const body = batch(2);
    const response = await post(both.url, body, { ...signedHeaders(keys.privateKey, body), authorization: basicHeader(BASIC) });
    expect(response).toMatchObject({ status: 202, body: { accepted: 2 } });
  });

  it.each([
    ['a valid signature without Basic', (body: string) => signedHeaders(keys.privateKey, body)],
    [
      'a valid signature with a wrong password',
      (body: string) => ({ ...signedHeaders(keys.privateKey, body), authorization: basicHeader('sendgrid:wrong') }),
    ],
    ['valid Basic without a signature', () => ({ authorization: basicHeader(BASIC) })],
    [
      'valid Basic with a signature by another key',
      (body: string) => ({ ...signedHeaders(keyPair().privateKey, body), authorization: basicHeader(BASIC) }),
    ],
  ])('answers 401 for %s', async (_case, headersFor: (body: string) => Record<string, string>) => {
    const body = batch(1);
    const response = await post(both.url, body, headersFor(body));
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ detail: expect.any(String) });
  });
});

describe('body validation', () => {
  it('answers json_invalid for malformed JSON', async () => {
    const response = await post(open.url, '[{"event": "open",]');
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      detail: [
        {
          type: 'json_invalid',
          loc: ['body', 18],
          msg: 'JSON decode error',
          input: {},
          ctx: { error: 'Expecting property name enclosed in double quotes' },
        },
      ],
    });
  });

  it('wants a list', async () => {
    const response = await post(open.url, '{"event": "open"}');
    expect(response).toMatchObject({
      status: 422,
      body: { detail: [{ type: 'list_type', loc: ['body'], msg: 'Input should be a valid list', input: { event: 'open' } }] },
    });
  });

  it('treats an empty body as a missing one', async () => {
    const response = await post(open.url, '');
    expect(response.body).toEqual({ detail: [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }] });
  });

  it('wants objects in the list', async () => {
    const response = await post(open.url, '[1, "x", null, []]');
    const msg = 'Input should be a valid dictionary or object to extract fields from';
    expect(response).toMatchObject({
      status: 422,
      body: {
        detail: [
          { type: 'model_attributes_type', loc: ['body', 0], msg, input: 1 },
          { type: 'model_attributes_type', loc: ['body', 1], msg, input: 'x' },
          { type: 'model_attributes_type', loc: ['body', 2], msg, input: null },
          { type: 'model_attributes_type', loc: ['body', 3], msg, input: [] },
        ],
      },
    });
  });

  it('refuses an e-mail of white space alone (the address is stored trimmed) rather than accept an event it cannot store', async () => {
    const response = await post(open.url, JSON.stringify([sendgridEvent({ event: 'open', sg_event_id: 'blank', email: ' \t\u00a0 ' })]));
    expect(response).toMatchObject({
      status: 422,
      body: {
        detail: [
          {
            type: 'string_too_short',
            loc: ['body', 0, 'email'],
            msg: 'String should have at least 1 character',
            input: ' \t\u00a0 ',
            ctx: { min_length: 1 },
          },
        ],
      },
    });
  });

  it('reports every missing or mistyped required field at once', async () => {
    const missing = { event: 'open', email: 'a@example.com' };
    const body = [
      sendgridEvent({ event: 'open', sg_event_id: 'fine' }),
      missing,
      { sg_event_id: 7, email: null, event: ['open'], timestamp: 'yesterday' },
      { sg_event_id: '', email: 'a@example.com', event: 'open', timestamp: 1.5 },
      { sg_event_id: 'x', email: 'a@example.com', event: 'open', timestamp: -1 },
      { sg_event_id: 'x', email: 'a@example.com', event: 'open', timestamp: 4_294_857_600 },
      { sg_event_id: 'x', email: 'a@example.com', event: 'open', timestamp: {} },
    ];
    const response = await post(open.url, JSON.stringify(body));
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      detail: [
        { type: 'missing', loc: ['body', 1, 'sg_event_id'], msg: 'Field required', input: missing },
        { type: 'missing', loc: ['body', 1, 'timestamp'], msg: 'Field required', input: missing },
        { type: 'string_type', loc: ['body', 2, 'sg_event_id'], msg: 'Input should be a valid string', input: 7 },
        { type: 'string_type', loc: ['body', 2, 'email'], msg: 'Input should be a valid string', input: null },
        { type: 'string_type', loc: ['body', 2, 'event'], msg: 'Input should be a valid string', input: ['open'] },
        {
          type: 'int_parsing',
          loc: ['body', 2, 'timestamp'],
          msg: 'Input should be a valid integer, unable to parse string as an integer',
          input: 'yesterday',
        },
        {
          type: 'string_too_short',
          loc: ['body', 3, 'sg_event_id'],
          msg: 'String should have at least 1 character',
          input: '',
          ctx: { min_length: 1 },
        },
        {
          type: 'int_from_float',
          loc: ['body', 3, 'timestamp'],
          msg: 'Input should be a valid integer, got a number with a fractional part',
          input: 1.5,
        },
        {
          type: 'greater_than_equal',
          loc: ['body', 4, 'timestamp'],
          msg: 'Input should be greater than or equal to 0',
          input: -1,
          ctx: { ge: 0 },
        },
        {
          type: 'less_than_equal',
          loc: ['body', 5, 'timestamp'],
          msg: 'Input should be less than or equal to 4294857599',
          input: 4_294_857_600,
          ctx: { le: 4294857599 },
        },
        { type: 'int_type', loc: ['body', 6, 'timestamp'], msg: 'Input should be a valid integer', input: {} },
      ],
    });
  });

  it('drops an event of a type it does not keep whatever else it lacks: only its type is read', async () => {
    const body = [{ event: 'group_resubscribe' }, { event: 'group_resubscribe', email: 7, timestamp: 'soon' }, { event: 'open' }];
    expect(await post(open.url, JSON.stringify(body))).toMatchObject({
      status: 422,
      body: {
        detail: ['sg_event_id', 'email', 'timestamp'].map((field) => ({
          type: 'missing',
          loc: ['body', 2, field],
          msg: 'Field required',
          input: { event: 'open' },
        })),
      },
    });
    expect(await post(open.url, JSON.stringify(body.slice(0, 2)))).toMatchObject({ status: 202, body: { accepted: 2 } });
  });

  it('reads timestamps as Pydantic does in lax mode', async () => {
    const body = JSON.stringify([
      sendgridEvent({ event: 'open', sg_event_id: `lax-1-${uniqueSuffix()}`, timestamp: '1763719200' }),
      sendgridEvent({ event: 'open', sg_event_id: `lax-2-${uniqueSuffix()}`, timestamp: 1763719200.0 }),
    ]);
    expect(await post(open.url, body)).toMatchObject({ status: 202, body: { accepted: 2 } });
  });

  it('accepts an empty list', async () => {
    expect(await post(open.url, '[]')).toMatchObject({ status: 202, body: { accepted: 0 } });
  });

  it('reports only the first 1,000 entries, and stops checking there, for a body of 666,000 empty objects', async () => {
    const body = `[${Array(666_000).fill('{}').join(',')}]`;
    expect(body.length).toBeGreaterThan(1.9 * 1024 * 1024);
    // CPU time, not the wall clock (cpu-time.ts); the gateway runs in this process.
    const started = cpuMs();
    const response = await fetch(`${open.url}${WEBHOOK}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const text = await response.text();
    const ms = cpuMs() - started;

    expect(response.status).toBe(422);
    const detail = (JSON.parse(text) as { detail: unknown[] }).detail;
    expect(detail).toHaveLength(1_000);
    expect(detail.slice(0, 4)).toEqual(
      ['sg_event_id', 'email', 'event', 'timestamp'].map((field) => ({
        type: 'missing',
        loc: ['body', 0, field],
        msg: 'Field required',
        input: {},
      })),
    );
    expect(detail[999]).toEqual({ type: 'missing', loc: ['body', 249, 'timestamp'], msg: 'Field required', input: {} });
    // Without the cap the answer would list 2.66 million failures, and take seconds to build.
    expect(text.length).toBeLessThan(150_000);
    expect(ms).toBeLessThan(2_000);
  });

  it('answers 422 at the index of a kept event too large for one Kafka record, and publishes none of the call', async () => {
    const prefix = `too-large-${uniqueSuffix()}`;
    const big = sendgridEvent({ event: 'open', sg_event_id: `${prefix}-big`, pad: 'x'.repeat(1_100_000) });
    const body = [sendgridEvent({ event: 'open', sg_event_id: `${prefix}-small` }), big];
    const topicBefore = await topicSize(brokers, topics.open);
    const response = await post(open.url, JSON.stringify(body));
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      detail: [
        {
          type: 'value_error',
          loc: ['body', 1],
          msg: expect.stringMatching(/^Value error, event too large: \d+ bytes as a Kafka record, at most 900000$/),
          input: big,
          ctx: { error: {} },
        },
      ],
    });
    // The same event with a type that is not kept is accepted: it never goes to Kafka.
    expect(await post(open.url, JSON.stringify([{ ...big, event: 'group_resubscribe' }]))).toMatchObject({
      status: 202,
      body: { accepted: 1 },
    });
    expect(await topicSize(brokers, topics.open)).toBe(topicBefore);
  });

  it('answers 413 above 5 MB and takes a body just below', async () => {
    const item = JSON.stringify(sendgridEvent({ event: 'group_resubscribe', sg_event_id: 'big', padding: 'x'.repeat(1_000) }));
    const count = Math.floor((5 * 1024 * 1024 - 2) / (item.length + 1));
    const below = `[${Array(count).fill(item).join(',')}]`;
    expect(await post(open.url, below)).toMatchObject({ status: 202, body: { accepted: count } });
    const above = `[${Array(count + 20)
      .fill(item)
      .join(',')}]`;
    expect(await post(open.url, above)).toMatchObject({ status: 413, body: { detail: expect.any(String) } });
  });
});

describe('documentation', () => {
  it('documents the webhook as a public operation in /openapi.json', async () => {
    const document = (await (await fetch(`${open.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    const operation = document.paths['/campaign-events/webhook'].post;
    expect(operation).toMatchObject({ 'x-required-role': 'public', security: [] });
    expect(Object.keys(operation.responses as object).sort()).toEqual(['202', '400', '401', '404', '413', '422', '503']);
  });
});

describe('normalization and delivery', () => {
  it('publishes the kept types, delivery events included, as EngagementEvents on the partition of the lower-cased address, and drops the others', async () => {
    const id = uniqueSuffix();
    const raw = [
      sendgridEvent({ event: 'processed', sg_event_id: `${id}-processed` }),
      sendgridEvent({ event: 'delivered', sg_event_id: `${id}-delivered`, response: '250 OK' }),
      sendgridEvent({ event: 'deferred', sg_event_id: `${id}-deferred`, response: '451 4.7.1 try again later', attempt: '2' }),
      sendgridEvent({ event: 'dropped', sg_event_id: `${id}-dropped`, reason: 'Bounced Address' }),
      sendgridEvent({ event: 'group_resubscribe', sg_event_id: `${id}-resub` }),
      sendgridEvent({ event: 'open', sg_event_id: `${id}-open`, useragent: 'Mozilla/5.0', ip: '203.0.113.7', account_id: 'custom-arg-1' }),
      sendgridEvent({ event: 'open', sg_event_id: `${id}-machine`, sg_machine_open: true, variant_id: 'v-1' }),
      sendgridEvent({ event: 'click', sg_event_id: `${id}-click`, url: 'https://example.com/x', category: 'single-cat' }),
      sendgridEvent({
        event: 'bounce',
        sg_event_id: `${id}-hard`,
        type: 'bounce',
        reason: '550 5.1.1 no such user',
        bounce_classification: 'Invalid Address',
      }),
      sendgridEvent({
        event: 'bounce',
        sg_event_id: `${id}-soft`,
        type: 'blocked',
        reason: '421 try later',
        bounce_classification: 'Frequency or Volume Issues',
      }),
      sendgridEvent({ event: 'bounce', sg_event_id: `${id}-untyped`, response: 'bounced' }),
      sendgridEvent({ event: 'unsubscribe', sg_event_id: `${id}-unsub`, category: ['a', 7, 'b'] }),
      sendgridEvent({ event: 'group_unsubscribe', sg_event_id: `${id}-group-unsub`, asm_group_id: 10 }),
      sendgridEvent({ event: 'spamreport', sg_event_id: `${id}-spam`, email: 'OTHER@example.com' }),
    ];
    const response = await post(open.url, JSON.stringify(raw));
    expect(response).toMatchObject({ status: 202, body: { accepted: raw.length } });

    const published = await openTopic.waitFor(id, 13);
    const byId = new Map(published.map((record) => [record.event.providerEventId.slice(id.length + 1), record]));
    expect([...byId.keys()].sort()).toEqual(
      [
        'processed',
        'delivered',
        'deferred',
        'dropped',
        'click',
        'group-unsub',
        'hard',
        'machine',
        'open',
        'soft',
        'spam',
        'unsub',
        'untyped',
      ].sort(),
    );

    const partitionOf = await defaultPartitionOf(brokers, topics.open);
    const open0 = byId.get('open')!;
    expect(open0.partition).toBe(partitionOf('recipient@example.com'));
    expect(open0.event).toEqual({
      providerEventId: `${id}-open`,
      providerMessageId: '14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0',
      provider: 'sendgrid',
      eventType: EventType.EVENT_TYPE_OPEN,
      bounceType: BounceType.BOUNCE_TYPE_UNSPECIFIED,
      email: 'recipient@example.com',
      occurredAt: new Date(1_763_719_200_000),
      receivedAt: expect.any(Date),
      categories: ['cat-a'],
      url: undefined,
      reason: undefined,
      userAgent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      rawJson: expect.any(String),
      machineOpen: false,
      machineClick: false,
      variantId: undefined,
      bounceClass: BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    });
    expect(JSON.parse(open0.event.rawJson)).toEqual(raw[5]);
    expect(byId.get('machine')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_OPEN, machineOpen: true, variantId: 'v-1' });
    expect(byId.get('processed')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_PROCESSED, reason: undefined });
    expect(byId.get('delivered')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_DELIVERED, reason: '250 OK' });
    expect(byId.get('deferred')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_DEFERRED, reason: '451 4.7.1 try again later' });
    expect(byId.get('dropped')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_DROPPED, reason: 'Bounced Address' });
    expect(Math.abs(open0.event.receivedAt!.getTime() - Date.now())).toBeLessThan(60_000);

    expect(byId.get('click')!.event).toMatchObject({
      eventType: EventType.EVENT_TYPE_CLICK,
      url: 'https://example.com/x',
      categories: ['single-cat'],
    });
    expect(byId.get('hard')!.event).toMatchObject({
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      bounceClass: BounceClass.BOUNCE_CLASS_INVALID_ADDRESS,
      reason: '550 5.1.1 no such user',
    });
    expect(byId.get('soft')!.event).toMatchObject({
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_SOFT,
      bounceClass: BounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME,
      reason: '421 try later',
    });
    expect(byId.get('untyped')!.event).toMatchObject({
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      bounceClass: BounceClass.BOUNCE_CLASS_UNCLASSIFIED,
      reason: 'bounced',
    });
    expect(byId.get('unsub')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_UNSUBSCRIBE, categories: ['a', 'b'] });
    expect(byId.get('group-unsub')!.event).toMatchObject({ eventType: EventType.EVENT_TYPE_UNSUBSCRIBE });
    expect(byId.get('spam')).toMatchObject({
      partition: partitionOf('other@example.com'),
      event: { eventType: EventType.EVENT_TYPE_SPAM_REPORT },
    });
  });

  it('answers 202 only once the events are in Kafka', async () => {
    const prefix = `durable-${uniqueSuffix()}`;
    for (let round = 0; round < 5; round++) {
      const response = await post(open.url, batch(40, `${prefix}-${round}`));
      expect(response.status).toBe(202);
      // Read right after the answer, from another client: already on the broker, below the high watermarks.
      const ends = await topicEnds(brokers, topics.open);
      const published = await openTopic.waitFor(`${prefix}-${round}-`, 40);
      expect(published.filter(({ partition, offset }) => offset >= ends.get(partition)!)).toEqual([]);
    }
  });

  it("keeps each recipient's events on its partition and in order, one record per partition and produce request", async () => {
    const prefix = `ordered-${uniqueSuffix()}`;
    const recipients = 25;
    const calls = Array.from({ length: 20 }, (_, call) =>
      Array.from({ length: 50 }, (_, i) =>
        sendgridEvent({
          event: 'click',
          email: `Reader-${i % recipients}@Example.com`,
          sg_event_id: `${prefix}-${call}-${i}`,
          url: `https://example.com/${i}`,
        }),
      ),
    );
    const recordsBefore = openTopic.kafkaRecords();
    const responses = await Promise.all(calls.map((body) => post(open.url, JSON.stringify(body))));
    expect(responses.map((response) => response.status)).toEqual(Array(calls.length).fill(202));

    const published = await openTopic.waitFor(prefix, 1_000);
    const partitionOf = await defaultPartitionOf(brokers, topics.open);
    for (let r = 0; r < recipients; r++) {
      const email = `reader-${r}@example.com`;
      const mine = published.filter(({ event }) => event.email === email);
      expect(new Set(mine.map(({ partition }) => partition))).toEqual(new Set([partitionOf(email)]));
      // Within each call, in the order of its body.
      for (let call = 0; call < calls.length; call++) {
        const order = mine
          .filter(({ event }) => event.providerEventId.startsWith(`${prefix}-${call}-`))
          .map(({ event }) => Number(event.providerEventId.split('-').at(-1)));
        expect(order).toEqual([...order].sort((a, b) => a - b));
        expect(order).toHaveLength(2);
      }
    }
    // Concurrent calls share produce requests, and each request carries one record per partition.
    expect(openTopic.kafkaRecords() - recordsBefore).toBeLessThanOrEqual(
      calls.length * new Set(published.map(({ partition }) => partition)).size,
    );
  });

  it('splits a call larger than one Kafka request over several, and accepts it', async () => {
    const prefix = `split-${uniqueSuffix()}`;
    // Four records of 600 KB: no two fit one 900 KB produce request.
    const body = Array.from({ length: 4 }, (_, i) =>
      sendgridEvent({ event: 'click', sg_event_id: `${prefix}-${i}`, pad: 'x'.repeat(600_000) }),
    );
    expect(await post(open.url, JSON.stringify(body))).toMatchObject({ status: 202, body: { accepted: 4 } });
    const published = await openTopic.waitFor(prefix, 4);
    expect(published.map((record) => record.event.providerEventId).sort()).toEqual(body.map((event) => event.sg_event_id).sort());
  });

  it('sends a full record for each partition in one produce request, and two for one partition in two', async () => {
    const prefix = `per-partition-${uniqueSuffix()}`;
    const partitionOf = await defaultPartitionOf(brokers, topics.open);
    const addresses = Array.from({ length: 50 }, (_, i) => `reader-${i}@example.com`);
    const first = addresses[0];
    const elsewhere = addresses.find((address) => partitionOf(address) !== partitionOf(first))!;
    const sameAs = addresses.find((address) => address !== first && partitionOf(address) === partitionOf(first))!;
    // Two events of 600 KB: a record holds one of them, a request one record per partition.
    const call = (suffix: string, emails: string[]) =>
      emails.map((email, i) => sendgridEvent({ event: 'click', email, sg_event_id: `${prefix}-${suffix}-${i}`, pad: 'x'.repeat(600_000) }));
    for (const [suffix, emails, requests] of [
      ['apart', [first, elsewhere], 1],
      ['together', [first, sameAs], 2],
    ] as const) {
      const sendsBefore = await kafkaSends();
      expect(await post(open.url, JSON.stringify(call(suffix, [...emails])))).toMatchObject({ status: 202, body: { accepted: 2 } });
      expect((await kafkaSends()) - sendsBefore).toBe(requests);
      expect(await openTopic.waitFor(`${prefix}-${suffix}-`, 2)).toHaveLength(2);
    }
  });

  it('publishes concurrent calls together without losing any', async () => {
    const prefix = `concurrent-${uniqueSuffix()}`;
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => post(open.url, batch(50, `${prefix}-${i}`))));
    expect(responses.map((response) => response.status)).toEqual(Array(30).fill(202));
    const published = await openTopic.waitFor(prefix, 1_500);
    expect(new Set(published.map((record) => record.event.providerEventId)).size).toBe(1_500);
  });
});
