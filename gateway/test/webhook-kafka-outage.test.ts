import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, freePorts, lendInstalledServers, runPrivateInfra, uniqueSuffix } from '@mail/local';
import { post, readTopic, sendgridEvent, startWebhookApp, type WebhookApp } from './webhook-support';

/**
 * The broker goes away and comes back. This runs its own Kafka node (infra.sh
 * with a private state folder and ports), so stopping it disturbs no other
 * test; it reuses the jars of the shared state folder instead of fetching them.
 */
jest.setTimeout(240_000);

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'webhook-kafka-'));
const topic = `webhook-outage-${uniqueSuffix()}`;
let infraEnv: NodeJS.ProcessEnv;
let brokers: string[];
let app: WebhookApp;

const infra = (command: 'up' | 'down'): Promise<void> => runPrivateInfra(infraEnv, command, 'kafka');

const batch = (prefix: string, count = 20): string =>
  JSON.stringify(
    Array.from({ length: count }, (_, i) => sendgridEvent({ event: 'click', sg_event_id: `${prefix}-${i}`, email: `r${i}@example.com` })),
  );

beforeAll(async () => {
  const [kafkaPort, controllerPort] = await freePorts(2);
  infraEnv = {
    ...process.env,
    STATE_DIR: stateDir,
    KAFKA_PORT: String(kafkaPort),
    KAFKA_CONTROLLER_PORT: String(controllerPort),
    KAFKA_HEAP: '-Xmx256m',
  };
  brokers = [`127.0.0.1:${kafkaPort}`];
  lendInstalledServers(stateDir);
  await infra('up');
  app = await startWebhookApp({ KAFKA_BROKERS: brokers.join(','), KAFKA_EVENTS_TOPIC: topic, WEBHOOK_PUBLISH_TIMEOUT_MS: '3000' });
});

afterAll(async () => {
  await app?.close();
  await infra('down');
  fs.rmSync(stateDir, { recursive: true, force: true });
});

it('answers 503 while the broker is down, recovers when it is back, and never acknowledges an event it lost', async () => {
  const accepted: string[] = [];
  expect(await post(app.url, batch('before'))).toMatchObject({ status: 202, body: { accepted: 20 } });
  accepted.push('before');

  await infra('down');
  const started = Date.now();
  const during = await post(app.url, batch('during'));
  expect(during).toMatchObject({ status: 503, body: { detail: expect.any(String) } });
  expect(Date.now() - started).toBeLessThan(10_000);
  await expect(app.checkKafka()).rejects.toThrow();

  await infra('up');
  // The first calls may still meet a broker that is electing leaders; the provider retries those.
  let round = 0;
  await eventually(async () => {
    const prefix = `after-${round++}`;
    const response = await post(app.url, batch(prefix));
    if (response.status !== 202) throw new Error(`answered ${response.status}`);
    accepted.push(prefix);
  }, 90_000);
  for (const prefix of ['steady-1', 'steady-2']) {
    expect((await post(app.url, batch(prefix))).status).toBe(202);
    accepted.push(prefix);
  }
  await eventually(() => app.checkKafka(), 30_000);

  const reader = await readTopic(brokers, topic);
  try {
    for (const prefix of accepted) {
      const records = await reader.waitFor(`${prefix}-`, 20, 30_000);
      expect(new Set(records.map((record) => record.event.providerEventId)).size).toBe(20);
    }
  } finally {
    await reader.close();
  }
});
