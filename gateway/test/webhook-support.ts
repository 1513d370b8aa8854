import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Kafka, Partitioners, logLevel, type Consumer } from 'kafkajs';
import { EnvReader, Readiness, call, createLogger } from '@mail/common';
import { eventually } from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import { createApp } from '../src/app';
import { devAuthenticator } from '../src/auth/principal';
import { closeServiceClients, createServiceClients } from '../src/clients';
import { readGatewayConfig } from '../src/config';
import { loadOpenApiDocument } from '../src/openapi/document';
import { trackingRouter } from '../src/tracking/router';
import { createWebhook } from '../src/webhook';
import { gatewayTestEnv } from './support/env';

/** Shared by the webhook tests: the real gateway app (in-process) with the webhook, and tracking given its key, on a real Kafka topic. */

export interface WebhookApp {
  url: string;
  /** The gateway's `kafka` readiness check. */
  checkKafka(): Promise<void>;
  close(): Promise<void>;
}

/** The whole gateway request pipeline, configured like main.ts does from these variables (over gatewayTestEnv's); it waits for Kafka unless told not to. */
export async function startWebhookApp(env: Record<string, string>, options: { waitForKafka?: boolean } = {}): Promise<WebhookApp> {
  const config = readGatewayConfig(new EnvReader(gatewayTestEnv(env)));
  const logger = createLogger('gateway', 'silent');
  const webhook = createWebhook(config.webhook, logger);
  const clients = createServiceClients(config.services, logger);
  const rawBodyRoutes = express.Router().use(webhook.router);
  if (config.trackingSigningKey) {
    rawBodyRoutes.use(trackingRouter({ signingKey: config.trackingSigningKey, publisher: webhook.publisher, logger }));
  }
  const app = createApp({
    document: loadOpenApiDocument(),
    clients,
    authenticator: devAuthenticator,
    readiness: new Readiness(),
    logger,
    rawBodyRoutes,
    trustedProxies: config.trustedProxies,
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  if (options.waitForKafka !== false) await eventually(() => webhook.checkKafka(), 30_000);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    checkKafka: () => webhook.checkKafka(),
    close: async () => {
      await new Promise((resolve) => server.close(resolve));
      await webhook.close();
      closeServiceClients(clients);
    },
  };
}

export const WEBHOOK = '/campaign-events/webhook';

export function keyPair(): { privateKey: crypto.KeyObject; publicKeyBase64: string; publicKeyPem: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKey,
    publicKeyBase64: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

/**
 * SendGrid's two credentials for a test gateway (a fresh signing key, and
 * HTTP Basic with `basic`, user:password): the gateway's environment, and the
 * headers of a call that carries both.
 */
export function sendgridCredentials(basic: string): { env: Record<string, string>; headers: (body: string) => Record<string, string> } {
  const keys = keyPair();
  const authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
  return {
    env: { SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64, WEBHOOK_BASIC_AUTH: basic },
    headers: (body) => ({ ...signedHeaders(keys.privateKey, body), authorization }),
  };
}

/** SendGrid's signature headers for a body: ECDSA P-256 / SHA-256 over timestamp + body, base64 DER. */
export function signedHeaders(
  privateKey: crypto.KeyObject,
  body: string,
  timestamp = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const signature = crypto.sign('sha256', Buffer.concat([Buffer.from(String(timestamp)), Buffer.from(body)]), privateKey);
  return {
    'X-Twilio-Email-Event-Webhook-Signature': signature.toString('base64'),
    'X-Twilio-Email-Event-Webhook-Timestamp': String(timestamp),
  };
}

export async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(`${url}${WEBHOOK}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** A SendGrid event as the provider sends it. */
export function sendgridEvent(fields: Record<string, unknown>): Record<string, unknown> {
  return {
    email: 'Recipient@Example.com',
    timestamp: 1_763_719_200,
    'smtp-id': '<14c5d75ce93.dfd.64b469@ismtpd-555>',
    sg_message_id: '14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0',
    category: ['cat-a'],
    ...fields,
  };
}

export interface TopicReader {
  /** The events read, each with its record's partition and offset. */
  records: { partition: number; offset: bigint; event: eventsV1.EngagementEvent }[];
  /** Kafka records read (each an EngagementEventBatch of events). */
  kafkaRecords(): number;
  /** The records whose provider_event_id starts with prefix, once there are `count` of them (fails after timeoutMs). */
  waitFor(prefix: string, count: number, timeoutMs?: number): Promise<TopicReader['records']>;
  close(): Promise<void>;
}

/**
 * How long a reader may take to join its group. The first group on a fresh
 * broker waits for Kafka to create its offsets topic, which took longer than
 * a test's wait for its records on a busy host.
 */
const GROUP_JOIN_TIMEOUT_MS = 120_000;

/** Reads a topic from its beginning with a private consumer group; resolves once the reader has joined its group. */
export async function readTopic(brokers: string[], topic: string): Promise<TopicReader> {
  const kafka = new Kafka({ clientId: 'webhook-test', brokers, logLevel: logLevel.NOTHING });
  const consumer: Consumer = kafka.consumer({ groupId: `reader-${topic}`, maxWaitTimeInMs: 100 });
  const records: TopicReader['records'] = [];
  let kafkaRecords = 0;
  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: ({ partition, message }) => {
      kafkaRecords += 1;
      for (const bytes of eventsV1.EngagementEventBatch.decode(message.value!).events) {
        records.push({ partition, offset: BigInt(message.offset), event: eventsV1.EngagementEvent.decode(bytes) });
      }
      return Promise.resolve();
    },
  });
  await eventually(
    () =>
      joined
        ? Promise.resolve()
        : Promise.reject(new Error(`the reader of ${topic} did not join its group within ${GROUP_JOIN_TIMEOUT_MS / 1000} s`)),
    GROUP_JOIN_TIMEOUT_MS,
  ).catch(async (error: unknown) => {
    await consumer.disconnect();
    throw error;
  });
  return {
    records,
    kafkaRecords: () => kafkaRecords,
    waitFor: async (prefix, count, timeoutMs = 15_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = records.filter((record) => record.event.providerEventId.startsWith(prefix));
        if (found.length >= count) return found;
        if (Date.now() > deadline) throw new Error(`only ${found.length} of ${count} records arrived on ${topic}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () => consumer.disconnect(),
  };
}

/** Records on a topic right now (sum of the partitions' high watermarks). */
export async function topicSize(brokers: string[], topic: string): Promise<number> {
  const admin = new Kafka({ clientId: 'webhook-test', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.high) - Number(partition.low), 0);
  } finally {
    await admin.disconnect();
  }
}

/** The partitions' high watermarks right now. */
export async function topicEnds(brokers: string[], topic: string): Promise<Map<number, bigint>> {
  const admin = new Kafka({ clientId: 'webhook-test', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    return new Map((await admin.fetchTopicOffsets(topic)).map(({ partition, high }) => [partition, BigInt(high)]));
  } finally {
    await admin.disconnect();
  }
}

/** The partition kafkajs's default partitioner gives a record keyed by `key` on this topic. */
export async function defaultPartitionOf(brokers: string[], topic: string): Promise<(key: string) => number> {
  const admin = new Kafka({ clientId: 'webhook-test', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const [{ partitions }] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
    const partitioner = Partitioners.DefaultPartitioner();
    return (key) => partitioner({ topic, partitionMetadata: partitions, message: { key, value: null } });
  } finally {
    await admin.disconnect();
  }
}

/** A campaign of a fresh workspace that takes the events of `category`, made through the campaign service. */
export async function createCategoryCampaign(
  campaigns: campaignV1.CampaignServiceClient,
  name: string,
  category: string,
): Promise<{ id: string; workspaceId: string }> {
  const workspaceId = crypto.randomUUID();
  const { campaign } = await call(campaigns.createCampaign.bind(campaigns), {
    workspaceId,
    campaign: campaignV1.CampaignInput.fromPartial({ workspaceId, name, providerCategoryId: category }),
  });
  return { id: campaign!.id, workspaceId };
}
