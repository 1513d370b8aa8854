import net from 'node:net';
import { eventually, infraEnv, uniqueSuffix } from '@mail/local';
import { startGateway, type GatewayProcess } from './identity-harness';
import { basicHeader, postTo, type ApiBody } from './provider-support';
import { keyPair, readTopic, sendgridEvent, signedHeaders, startWebhookApp, type TopicReader, type WebhookApp } from './webhook-support';

/**
 * The webhook's edges: what one call may make the gateway hold and publish
 * (the built gateway under a heap ceiling), which providers are served, and
 * credentials refused before a body is read or when they are malformed.
 */
jest.setTimeout(180_000);

const run = uniqueSuffix();
const POSTMARK = `postmark:secret-${run}`;
const SENDGRID_BASIC = `sendgrid:secret-${run}`;
type Violations = Exclude<ApiBody['detail'], string | undefined>;

const sesNotification = (messageId: string, sesEvent: unknown): string =>
  JSON.stringify({
    Type: 'Notification',
    MessageId: messageId,
    TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses',
    Message: JSON.stringify(sesEvent),
  });
const addresses = (count: number, prefix = 'r'): string[] => Array.from({ length: count }, (_, i) => `${prefix}${i}@example.com`);
const at = '2025-11-21T10:05:00.000Z';
const sesMail = (destination: string[], extra: Record<string, unknown> = {}) => ({
  timestamp: at,
  messageId: `ses-bounds-${run}`,
  source: 'sender@example.com',
  destination,
  tags: { category: [`bounds-${run}`] },
  ...extra,
});

describe('one call under a heap ceiling', () => {
  let gateway: GatewayProcess;
  let topic: TopicReader;
  const topicName = `webhook-bounds-${run}`;

  beforeAll(async () => {
    gateway = await startGateway({
      DEV_AUTH_ENABLED: '1',
      KAFKA_BROKERS: infraEnv().kafkaBrokers.join(','),
      KAFKA_EVENTS_TOPIC: topicName,
      // The heap of a small container: the worst calls below must fit in it, several at once.
      NODE_OPTIONS: '--max-old-space-size=160',
    });
    // The gateway creates its topic in the background: read it once Kafka is ready for the webhook.
    await eventually(async () => {
      const ready = (await (await fetch(`${gateway.opsUrl}/readyz`)).json()) as { dependencies: Record<string, string> };
      if (ready.dependencies.kafka !== 'up') throw new Error('kafka not ready');
    }, 30_000);
    topic = await readTopic(infraEnv().kafkaBrokers, topicName);
  });

  afterAll(async () => {
    await topic?.close();
    await gateway?.stop();
  });

  const ses = (body: string) => postTo(`${gateway.url}/campaign-events/webhook/ses`, body, { 'content-type': 'text/plain; charset=UTF-8' });

  it('answers an SES event naming more than 50 recipients with 422 too_long, whatever the list, and stays up', async () => {
    const lists: [string, unknown, (string | number)[]][] = [
      ['Open', { eventType: 'Open', mail: sesMail(addresses(2_000)), open: { timestamp: at } }, ['mail', 'destination']],
      ['Send', { eventType: 'Send', mail: sesMail(addresses(100_000)), send: {} }, ['mail', 'destination']],
      [
        'Delivery',
        { eventType: 'Delivery', mail: sesMail(['a@example.com']), delivery: { timestamp: at, recipients: addresses(100_000) } },
        ['delivery', 'recipients'],
      ],
      [
        'Bounce',
        {
          eventType: 'Bounce',
          mail: sesMail(['a@example.com']),
          bounce: {
            bounceType: 'Permanent',
            bounceSubType: 'General',
            timestamp: at,
            bouncedRecipients: addresses(51).map((emailAddress) => ({ emailAddress })),
          },
        },
        ['bounce', 'bouncedRecipients'],
      ],
    ];
    const answers = await Promise.all(lists.map(([name, sesEvent]) => ses(sesNotification(`too-many-${name}-${run}`, sesEvent))));
    for (const [i, answer] of answers.entries()) {
      const [name, , loc] = lists[i];
      expect([name, answer.status]).toEqual([name, 422]);
      const [violation] = answer.body.detail as Violations;
      expect(violation).toMatchObject({
        type: 'too_long',
        loc: ['body', 'Message', ...loc],
        msg: expect.stringMatching(/^List should have at most 50 items after validation, not \d+$/),
        ctx: { field_type: 'List', max_length: 50 },
      });
    }
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
  });

  it('takes 50 recipients, each record keeping its own recipient and what explains the event, not the whole message', async () => {
    const messageId = `fifty-${run}`;
    const headers = addresses(50).map((value) => ({ name: 'To', value }));
    const sesEvent = {
      eventType: 'Bounce',
      mail: sesMail(addresses(50), { headers, commonHeaders: { to: addresses(50) } }),
      bounce: {
        bounceType: 'Permanent',
        bounceSubType: 'General',
        timestamp: at,
        feedbackId: 'feedback-1',
        bouncedRecipients: addresses(50).map((emailAddress) => ({ emailAddress, diagnosticCode: `smtp; 550 ${emailAddress}` })),
      },
    };
    expect(await ses(sesNotification(messageId, sesEvent))).toMatchObject({ status: 202, body: { accepted: 50 } });
    const records = await topic.waitFor(`${messageId}:`, 50);
    for (const { event } of records) {
      const raw = JSON.parse(event.rawJson) as Record<string, Record<string, unknown>>;
      expect(raw).toEqual({
        eventType: 'Bounce',
        mail: { timestamp: at, messageId: `ses-bounds-${run}`, source: 'sender@example.com', tags: { category: [`bounds-${run}`] } },
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          timestamp: at,
          feedbackId: 'feedback-1',
          bouncedRecipients: [{ emailAddress: event.email, diagnosticCode: `smtp; 550 ${event.email}` }],
        },
      });
    }
    const open = { eventType: 'Open', mail: sesMail(addresses(3, 'o'), { headers }), open: { timestamp: at, userAgent: 'UA' } };
    expect((await ses(sesNotification(`open-${messageId}`, open))).status).toBe(202);
    for (const { event } of await topic.waitFor(`open-${messageId}:`, 3)) {
      expect(JSON.parse(event.rawJson)).toEqual({
        eventType: 'Open',
        mail: { ...sesMail([event.email]) },
        open: { timestamp: at, userAgent: 'UA' },
      });
    }
  });

  it('refuses with 422 an SES event whose shared fields would be copied into its 50 records past the cap', async () => {
    const sesEvent = { eventType: 'Open', mail: sesMail(addresses(50)), open: { timestamp: at, userAgent: 'x'.repeat(1_000_000) } };
    const answer = await ses(sesNotification(`copied-${run}`, sesEvent));
    expect(answer.status).toBe(422);
    expect((answer.body.detail as Violations).map((v) => [v.type, v.loc])).toEqual([['value_error', ['body', 'Message']]]);
  });

  it('survives the largest bodies of every provider sent at once, and answers each correctly', async () => {
    const webhook = `${gateway.url}/campaign-events/webhook`;
    const smallEvents = Math.floor((4.9 * 1024 * 1024) / 120);
    const sendgrid = JSON.stringify(
      Array.from({ length: smallEvents }, (_, i) => ({
        email: `s${i}@example.com`,
        event: 'open',
        timestamp: 1,
        sg_event_id: `big-${run}-${i}`,
      })),
    );
    expect(sendgrid.length).toBeLessThan(5 * 1024 * 1024);
    const huge = 'x'.repeat(4_800_000);
    const mailgun = JSON.stringify({
      'event-data': { event: 'opened', id: `mg-${run}`, recipient: 'a@example.com', timestamp: 1, url: huge },
    });
    const postmark = JSON.stringify({ RecordType: 'Open', Recipient: 'a@example.com', ReceivedAt: at, UserAgent: huge });
    const sesBig = sesNotification(`ses-big-${run}`, {
      eventType: 'Open',
      mail: sesMail(['a@example.com'], { headers: [{ name: 'X', value: huge }] }),
      open: { timestamp: at },
    });
    const sesMany = sesNotification(`ses-many-${run}`, {
      eventType: 'Send',
      mail: sesMail(addresses(120_000)),
      send: {},
    });
    const [sg, mg, pm, big, many, sg2] = await Promise.all([
      postTo(webhook, sendgrid),
      postTo(`${webhook}/mailgun`, mailgun),
      postTo(`${webhook}/postmark`, postmark),
      ses(sesBig),
      ses(sesMany),
      postTo(`${webhook}/sendgrid`, sendgrid),
    ]);
    expect([sg.status, sg.body.accepted, sg2.status]).toEqual([202, smallEvents, 202]);
    // One event too large for a Kafka record: 422 where it was.
    expect([mg.status, (mg.body.detail as Violations)[0].loc]).toEqual([422, ['body', 'event-data']]);
    expect([pm.status, (pm.body.detail as Violations)[0].loc]).toEqual([422, ['body']]);
    // The headers are not copied: the event is small.
    expect([big.status, big.body.accepted]).toEqual([202, 1]);
    expect([many.status, (many.body.detail as Violations)[0].type]).toEqual([422, 'too_long']);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    expect(gateway.output()).not.toMatch(/heap out of memory/i);
  });
});

describe('providers without their credential', () => {
  const apps: WebhookApp[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  const start = async (env: Record<string, string>): Promise<string> => {
    const app = await startWebhookApp({ KAFKA_EVENTS_TOPIC: `bounds-providers-${uniqueSuffix()}`, ...env });
    apps.push(app);
    return `${app.url}/campaign-events/webhook`;
  };

  it.each([
    ['NODE_ENV unset', {}],
    ['NODE_ENV=development', { NODE_ENV: 'development' }],
    ['NODE_ENV=test', { NODE_ENV: 'test' }],
  ])('answer 404 without DEV_AUTH_ENABLED=1 (%s), and the provider with its credential is served', async (_case, env) => {
    const webhook = await start({
      ...env,
      DEV_AUTH_ENABLED: '0',
      AUTH_ISSUER: 'https://idp.example.com',
      AUTH_AUDIENCE: 'mail',
      AUTH_JWKS_URL: 'https://idp.example.com/jwks',
      POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK,
    });
    for (const path of ['', '/sendgrid', '/mailgun', '/ses']) {
      expect([path, await postTo(`${webhook}${path}`, '[]')]).toEqual([
        path,
        expect.objectContaining({ status: 404, body: { detail: 'Not Found' } }),
      ]);
    }
    const record = JSON.stringify({ RecordType: 'Open', Recipient: 'a@example.com', ReceivedAt: at, Tag: 'c' });
    expect(await postTo(`${webhook}/postmark`, record, basicHeader(POSTMARK))).toMatchObject({ status: 202, body: { accepted: 1 } });
  });
});

/**
 * Sends a request head announcing a body that never comes; resolves with the
 * whole answer once the gateway has closed the connection, which it must do
 * without the body.
 */
function headOnly(url: string, path: string, headers: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    socket.setTimeout(30_000, () => socket.destroy(new Error(`POST ${path}: not answered and closed before the body: ${answer}`)));
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.once('end', () => {
      socket.destroy();
      resolve(answer);
    });
    socket.once('error', reject);
    const lines = Object.entries({ Host: 'gateway', 'Content-Type': 'application/json', 'Content-Length': '1000000', ...headers });
    socket.write([`POST ${path} HTTP/1.1`, ...lines.map(([name, value]) => `${name}: ${value}`), '', ''].join('\r\n'));
  });
}

describe('credentials in headers', () => {
  let webhook: WebhookApp;
  const sendgridKeys = keyPair();
  let signedOnly: WebhookApp;

  beforeAll(async () => {
    [webhook, signedOnly] = await Promise.all([
      startWebhookApp({
        KAFKA_EVENTS_TOPIC: `bounds-credentials-${run}`,
        WEBHOOK_BASIC_AUTH: SENDGRID_BASIC,
        POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK,
      }),
      startWebhookApp({ KAFKA_EVENTS_TOPIC: `bounds-signed-${run}`, SENDGRID_WEBHOOK_PUBLIC_KEY: sendgridKeys.publicKeyBase64 }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([webhook?.close(), signedOnly?.close()]);
  });

  it('are refused with 401 before the body is read: a call without them is answered while its body is still due', async () => {
    const stale = String(Math.floor(Date.now() / 1000) - 3_600);
    const cases: [WebhookApp, string, Record<string, string>][] = [
      [signedOnly, '/campaign-events/webhook', {}],
      [signedOnly, '/campaign-events/webhook/sendgrid', { 'X-Twilio-Email-Event-Webhook-Signature': 'c2ln' }],
      [
        signedOnly,
        '/campaign-events/webhook',
        { 'X-Twilio-Email-Event-Webhook-Signature': 'c2ln', 'X-Twilio-Email-Event-Webhook-Timestamp': stale },
      ],
      [webhook, '/campaign-events/webhook', {}],
      [webhook, '/campaign-events/webhook/postmark', {}],
      [webhook, '/campaign-events/webhook/postmark', { Authorization: 'Basic bm9ib2R5Om5vdGhpbmc=' }],
    ];
    for (const [app, path, headers] of cases) {
      const answer = await headOnly(app.url, path, headers);
      expect([path, headers, answer.split('\r\n')[0]]).toEqual([path, headers, 'HTTP/1.1 401 Unauthorized']);
      // The unread body is not drained: the connection ends with the answer.
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    }
  });

  it('still verifies the signature over the body once the headers pass', async () => {
    const body = JSON.stringify([sendgridEvent({ event: 'open', sg_event_id: `signed-${run}` })]);
    expect((await postTo(`${signedOnly.url}/campaign-events/webhook`, body, signedHeaders(sendgridKeys.privateKey, body))).status).toBe(
      202,
    );
    const forged = signedHeaders(keyPair().privateKey, body);
    expect(await postTo(`${signedOnly.url}/campaign-events/webhook`, body, forged)).toMatchObject({
      status: 401,
      body: { detail: 'Invalid webhook signature' },
    });
  });

  it('take HTTP Basic only as strict base64: junk after it, or bits a re-encoding would not give back, is a 401', async () => {
    const record = JSON.stringify({ RecordType: 'Open', Recipient: 'a@example.com', ReceivedAt: at, Tag: 'c' });
    const batch = JSON.stringify([sendgridEvent({ event: 'open', sg_event_id: `basic-${run}` })]);
    const calls: [string, string, string][] = [
      ['/campaign-events/webhook/postmark', record, POSTMARK],
      ['/campaign-events/webhook', batch, SENDGRID_BASIC],
    ];
    for (const [path, body, credentials] of calls) {
      const encoded = Buffer.from(credentials).toString('base64');
      const url = `${webhook.url}${path}`;
      expect([path, (await postTo(url, body, { authorization: `Basic ${encoded}` })).status]).toEqual([path, 202]);
      const unpadded = encoded.replace(/=+$/, '');
      for (const junk of [`${encoded}!!`, `${encoded}=junk`, `${unpadded}=x`, `${encoded}.`, `${encoded} x`]) {
        const answer = await postTo(url, body, { authorization: `Basic ${junk}` });
        expect([path, junk, answer.status, answer.headers.get('www-authenticate')]).toEqual([
          path,
          junk,
          401,
          'Basic realm="campaign-events"',
        ]);
      }
    }
  });
});
