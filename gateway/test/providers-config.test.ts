import { ConfigError, EnvReader } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { readGatewayConfig } from '../src/config';
import { WEBHOOK_PATH } from '../src/webhook/declaration';
import { PROVIDERS } from '../src/webhook/providers';
import { runGatewayToExit, startGateway } from './identity-harness';
import { basicHeader, mailgunBody, postTo } from './provider-support';
import { sendgridEvent, startWebhookApp, type WebhookApp } from './webhook-support';

/** Which providers are served, by their credentials and DEV_AUTH_ENABLED; and the 503 of every provider while Kafka is away. */
jest.setTimeout(60_000);

const PRODUCTION = {
  NODE_ENV: 'production',
  DEV_AUTH_ENABLED: '0',
  AUTH_JWKS_URL: 'https://idp.example.com/jwks',
  AUTH_ISSUER: 'https://idp.example.com',
  AUTH_AUDIENCE: 'mail',
  TRACKING_SIGNING_KEY: 'tracking-key',
};
const POSTMARK = 'postmark:secret';
const MAILGUN_KEY = 'mailgun-key';

/** Every credential the providers declare. */
const CREDENTIALS = PROVIDERS.flatMap((provider) => provider.variables.filter((variable) => variable.credential));
/** The routes of every provider but these, below the webhook's path. */
const routesBut = (names: string[]) =>
  PROVIDERS.filter((provider) => !names.includes(provider.name)).flatMap((provider) =>
    provider.paths.map((path) => path.slice(WEBHOOK_PATH.length)),
  );
const providersBut = (names: string[]) => PROVIDERS.map((provider) => provider.name).filter((name) => !names.includes(name));

const mailgunEvent = (id: string) => ({ id, event: 'opened', timestamp: Date.now() / 1000, recipient: 'reader@example.com', tags: ['c'] });
const postmarkRecord = {
  RecordType: 'Open',
  Recipient: 'reader@example.com',
  ReceivedAt: new Date().toISOString(),
  MessageID: 'm-1',
  Tag: 'c',
};
const sesNotification = (messageId: string) =>
  JSON.stringify({
    Type: 'Notification',
    MessageId: messageId,
    TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses',
    Message: JSON.stringify({
      eventType: 'Open',
      mail: { messageId: 'm', timestamp: new Date().toISOString(), destination: ['reader@example.com'] },
      open: { timestamp: new Date().toISOString() },
    }),
  });
const sendgridBatch = (id: string) => JSON.stringify([sendgridEvent({ event: 'open', sg_event_id: id })]);

const apps: WebhookApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
});

async function app(env: Record<string, string>, waitForKafka = true): Promise<string> {
  const started = await startWebhookApp(env, { waitForKafka });
  apps.push(started);
  return `${started.url}/campaign-events/webhook`;
}

describe('production', () => {
  it('answers 404 on every provider without its credential, and serves the one that has it', async () => {
    const webhook = await app({
      ...PRODUCTION,
      POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK,
      KAFKA_EVENTS_TOPIC: `providers-prod-${uniqueSuffix()}`,
    });
    for (const path of routesBut(['postmark'])) {
      expect([path, await postTo(`${webhook}${path}`, '[]')]).toMatchObject([path, { status: 404, body: { detail: 'Not Found' } }]);
    }
    expect(await postTo(`${webhook}/postmark`, JSON.stringify(postmarkRecord), basicHeader(POSTMARK))).toMatchObject({
      status: 202,
      body: { accepted: 1 },
    });
    expect((await postTo(`${webhook}/postmark`, JSON.stringify(postmarkRecord))).status).toBe(401);
  });

  it('refuses to start when no provider has its credential; any one of them is enough', async () => {
    expect(() => readGatewayConfig(new EnvReader(PRODUCTION))).toThrow(ConfigError);
    expect(() => readGatewayConfig(new EnvReader(PRODUCTION))).toThrow(/at least one webhook provider needs its credential/);
    for (const { name, example } of CREDENTIALS) {
      const { webhook } = readGatewayConfig(new EnvReader({ ...PRODUCTION, [name]: example }));
      expect([name, webhook.requireCredentials, webhook.providers.filter((provider) => provider.credentialed).length]).toEqual([
        name,
        true,
        1,
      ]);
    }
    const { code, output } = await runGatewayToExit(PRODUCTION);
    expect(code).toBe(2);
    expect(output).toMatch(/refusing to start: In production at least one webhook provider needs its credential/);
  });

  it('refuses to start in production without TRACKING_SIGNING_KEY, which first-party tracking verifies with', () => {
    const { TRACKING_SIGNING_KEY: _key, ...withoutKey } = { ...PRODUCTION, POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK };
    expect(() => readGatewayConfig(new EnvReader(withoutKey))).toThrow(/TRACKING_SIGNING_KEY must be set in production/);
    expect(readGatewayConfig(new EnvReader({ ...withoutKey, NODE_ENV: 'development' })).trackingSigningKey).toBeUndefined();
  });

  it('refuses malformed credentials at start-up', () => {
    const env = { DEV_AUTH_ENABLED: '1' };
    expect(() => readGatewayConfig(new EnvReader({ ...env, POSTMARK_WEBHOOK_BASIC_AUTH: 'no-colon' }))).toThrow(
      /POSTMARK_WEBHOOK_BASIC_AUTH must look like user:password/,
    );
    expect(() => readGatewayConfig(new EnvReader({ ...env, SES_SNS_CERT_HOST_PATTERN: '(' }))).toThrow(/SES_SNS_CERT_HOST_PATTERN/);
  });
});

describe('DEV_AUTH_ENABLED=1', () => {
  it('takes unverified posts on a provider without its credential, and says so in its log', async () => {
    const webhook = await app({ KAFKA_EVENTS_TOPIC: `providers-dev-${uniqueSuffix()}` });
    const unsigned = JSON.stringify({ 'event-data': mailgunEvent(`dev-${uniqueSuffix()}`) });
    expect(await postTo(`${webhook}/mailgun`, unsigned)).toMatchObject({ status: 202, body: { accepted: 1 } });
    expect(await postTo(`${webhook}/postmark`, JSON.stringify(postmarkRecord))).toMatchObject({ status: 202, body: { accepted: 1 } });
    expect(await postTo(`${webhook}/ses`, sesNotification(`dev-${uniqueSuffix()}`), { 'content-type': 'text/plain' })).toMatchObject({
      status: 202,
      body: { accepted: 1 },
    });

    const gateway = await startGateway({ DEV_AUTH_ENABLED: '1', MAILGUN_WEBHOOK_SIGNING_KEY: MAILGUN_KEY });
    try {
      const warnings = gateway
        .output()
        .split('\n')
        .filter((line) => line.includes('UNVERIFIED'))
        .map((line) => (JSON.parse(line) as { provider: string }).provider);
      expect(warnings.sort()).toEqual(providersBut(['mailgun']).sort());
    } finally {
      await gateway.stop();
    }
  });
});

describe('Kafka away', () => {
  it('answers 503 on every provider route, and a Mailgun retry of the same signed request is not taken for a replay', async () => {
    const webhook = await app(
      {
        KAFKA_BROKERS: '127.0.0.1:1',
        KAFKA_EVENTS_TOPIC: `providers-down-${uniqueSuffix()}`,
        WEBHOOK_PUBLISH_TIMEOUT_MS: '1000',
        MAILGUN_WEBHOOK_SIGNING_KEY: MAILGUN_KEY,
        POSTMARK_WEBHOOK_BASIC_AUTH: POSTMARK,
      },
      false,
    );
    const mailgun = mailgunBody(MAILGUN_KEY, mailgunEvent(`down-${uniqueSuffix()}`));
    const calls: [string, string, Record<string, string>][] = [
      ['', sendgridBatch(`down-${uniqueSuffix()}`), {}],
      ['/sendgrid', sendgridBatch(`down-${uniqueSuffix()}`), {}],
      ['/mailgun', mailgun, {}],
      ['/mailgun', mailgun, {}],
      ['/ses', sesNotification(`down-${uniqueSuffix()}`), { 'content-type': 'text/plain; charset=UTF-8' }],
      ['/postmark', JSON.stringify(postmarkRecord), basicHeader(POSTMARK)],
    ];
    for (const [path, body, headers] of calls) {
      expect([path, await postTo(`${webhook}${path}`, body, headers)]).toMatchObject([
        path,
        { status: 503, body: { detail: 'Event broker unavailable, retry later' } },
      ]);
    }
  });
});
