import crypto from 'node:crypto';
import { signTrackingToken } from '@mail/common';
import { createTestTopic, infraEnv, uniqueSuffix } from '@mail/local';
import { readTopic, startWebhookApp, type TopicReader, type WebhookApp } from './webhook-support';

/**
 * TRUSTED_PROXIES (docs/configuration.md): a tracking request's client address, which the machine rules read
 * (Apple's network is a machine open), comes from X-Forwarded-For only when the connection is from a listed
 * proxy; otherwise it is the connection's, whatever a client writes. The gateway here is the real request
 * pipeline in-process, its events read back from a real Kafka topic.
 */
jest.setTimeout(60_000);

const SIGNING_KEY = crypto.randomBytes(32).toString('base64url');
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36';
const APPLE = '17.58.100.2';
const brokers = infraEnv().kafkaBrokers;
const topic = `trusted-proxies-${uniqueSuffix()}`;
let reader: TopicReader;
const apps: WebhookApp[] = [];

beforeAll(async () => {
  await createTestTopic(topic, 1);
  reader = await readTopic(brokers, topic);
  // Joining the reader's group may wait for Kafka to create its offsets topic.
}, 180_000);

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await reader?.close();
});

/** Opens a pixel through a gateway with these TRUSTED_PROXIES, as a client claiming Apple's address; resolves to the event stored. */
async function openFrom(trustedProxies: string) {
  const app = await startWebhookApp({ KAFKA_EVENTS_TOPIC: topic, TRACKING_SIGNING_KEY: SIGNING_KEY, TRUSTED_PROXIES: trustedProxies });
  apps.push(app);
  const email = `proxy-${uniqueSuffix()}@example.com`;
  const token = signTrackingToken(SIGNING_KEY, 'o', {
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    variantId: null,
    runId: crypto.randomUUID(),
    email,
  });
  const before = reader.records.length;
  const answer = await fetch(`${app.url}/t/o/${token}`, { headers: { 'user-agent': BROWSER, 'x-forwarded-for': APPLE } });
  expect(answer.status).toBe(200);
  const stored = await reader.waitFor('tracking-', before + 1);
  const event = stored.map((record) => record.event).find((candidate) => candidate.email === email);
  if (!event) throw new Error(`no event of ${email}`);
  return event;
}

test.each([
  ['none: X-Forwarded-For is never read', ''],
  ['a proxy that is not the connection', '10.0.0.0/8'],
])('with %s, the client address is the connection’s', async (_case, trustedProxies) => {
  expect(await openFrom(trustedProxies)).toMatchObject({ ip: '127.0.0.1', machineOpen: false });
});

test('from a listed proxy, the client address is the one its X-Forwarded-For names', async () => {
  expect(await openFrom('loopback')).toMatchObject({ ip: APPLE, machineOpen: true });
});
