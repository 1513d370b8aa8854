import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import { ConfigResourceTypes, ConfigSource, Kafka, logLevel, type Admin } from 'kafkajs';
import { createClickHouse } from '@mail/event-store';
import { PROCESS_NAMES, clusterNode, type ClusterNode, type Stack } from '@mail/local';
import { accepted, WebhookLoad } from '../../gateway/test/faults/load';
import { devApi } from '../../gateway/test/support/dev-api';
import { startPrivateStack, type PrivateStack } from '../../gateway/test/support/private-stack';
import { post, sendgridCredentials, sendgridEvent } from '../../gateway/test/webhook-support';

/**
 * Losing a Kafka broker under webhook load. The whole pipeline runs for real
 * (every service, the gateway and ingestion as processes, over private
 * databases of the shared PostgreSQL and ClickHouse) on the three-broker
 * cluster of `infra.sh up kafka-cluster`, its topics with replication factor 3
 * and min.insync.replicas 2. While signed SendGrid batches arrive (50,000
 * events over 20 s, a batch answered 503 posted again like the provider
 * does), the leader of a partition of the events topic is SIGKILLed and
 * restarted 10 s later. Then every event of a batch that got 202 is stored
 * exactly once, and the gateway and ingestion, never restarted, take and
 * store a new batch.
 */
jest.setTimeout(600_000);

const EVENTS = 50_000;
const LOAD_MS = 20_000;
const EVENTS_PER_BATCH = 250;
const BATCHES_PER_SECOND = EVENTS / EVENTS_PER_BATCH / (LOAD_MS / 1000);
/** When the leader dies after the load began, and how long it stays down. */
const KILL_AFTER_MS = 5_000;
const DOWN_MS = 10_000;
/** A provider's bounded retries: the load posts a batch at most this often, with backoff. */
const MAX_ATTEMPTS = 20;
const DRAIN_TIMEOUT_MS = 90_000;
const STORED_TIMEOUT_MS = 180_000;
const REPLICATION_FACTOR = 3;
const MIN_INSYNC_REPLICAS = 2;

const sendgrid = sendgridCredentials('sendgrid:broker-loss-secret');

let brokers: string[];
let target: PrivateStack;
let stack: Stack;
let admin: Admin;
let clickhouse: ClickHouseClient;
let topic: string;
let workspaceId: string;
let campaignId: string;
let category: string;
let testPassed = false;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function clusterBrokers(): string[] {
  const value = process.env.KAFKA_CLUSTER_BROKERS?.trim();
  if (!value) {
    throw new Error('KAFKA_CLUSTER_BROKERS is not set: run `npm run test:cluster`, which starts the cluster (infra.sh up kafka-cluster)');
  }
  return value.split(',');
}

beforeAll(async () => {
  brokers = clusterBrokers();
  // Any node an earlier run left down comes back first (restart() starts whatever of the cluster does not run).
  await clusterNode('kafka', 'k1').restart();
  target = await startPrivateStack('broker-loss', {
    env: {
      KAFKA_BROKERS: brokers.join(','),
      KAFKA_TOPIC_REPLICATION_FACTOR: String(REPLICATION_FACTOR),
      KAFKA_TOPIC_MIN_INSYNC_REPLICAS: String(MIN_INSYNC_REPLICAS),
      ...sendgrid.env,
      // Shorter than a leader's failover, so calls waiting on the dead broker are answered 503 and posted again.
      WEBHOOK_PUBLISH_TIMEOUT_MS: '3000',
      LOG_LEVEL: 'info',
    },
  });
  stack = target.stack;
  topic = target.env.KAFKA_EVENTS_TOPIC;
  admin = new Kafka({ clientId: 'broker-loss-test', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  clickhouse = createClickHouse(target.clickhouse.url, target.clickhouse.database);

  // Every endpoint but /auth/me takes a workspace_id header; creating a workspace ignores its value.
  workspaceId = (await api<{ id: string }>('POST', '/workspaces/', { name: 'Broker loss' }, randomUUID())).id;
  category = `broker-loss-${randomUUID()}`;
  campaignId = (
    await api<{ id: string }>('POST', '/email-campaigns/', {
      workspace_id: workspaceId,
      name: 'Broker loss',
      provider_category_id: category,
    })
  ).id;
}, 300_000);

afterAll(async () => {
  // The next cluster test finds every node running.
  await clusterNode('kafka', 'k1').restart();
  if (stack && !testPassed) {
    const kept = fs.mkdtempSync(path.join(os.tmpdir(), 'broker-loss-logs-'));
    fs.cpSync(stack.logDir, kept, { recursive: true });
    console.log(`broker-loss: the processes' logs are kept in ${kept}`);
  }
  await clickhouse?.close();
  await target?.close();
  if (admin) {
    await admin.deleteTopics({ topics: [target.env.KAFKA_EVENTS_TOPIC, target.env.KAFKA_DLQ_TOPIC] }).catch(() => undefined);
    await admin.disconnect();
  }
});

const api = <T>(method: string, urlPath: string, body?: unknown, workspace = workspaceId): Promise<T> =>
  devApi<T>(stack.urls.gateway, workspace, method, urlPath, body);

/** Partition -> its leader and in-sync replicas (node ids; node N is kN). */
async function partitionStates(): Promise<Map<number, { leader: number; isr: number[] }>> {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  return new Map(topics[0].partitions.map((p) => [p.partitionId, { leader: p.leader, isr: p.isr }]));
}

/** Waits (at most timeoutMs) until every partition of the events topic has all replicas in sync again. */
async function waitUntilFullyReplicated(timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const states = [...(await partitionStates()).values()];
    if (states.every((state) => state.isr.length === REPLICATION_FACTOR)) return Date.now() - started;
    if (Date.now() - started > timeoutMs)
      throw new Error(`partitions still under-replicated after ${timeoutMs} ms: ${JSON.stringify(states)}`);
    await sleep(250);
  }
}

/** provider_event_id -> rows stored for the campaign. */
async function storedCopies(): Promise<Map<string, number>> {
  const result = await clickhouse.query({
    query: `SELECT provider_event_id AS id, count() AS n FROM events WHERE campaign_id = toUUID('${campaignId}') GROUP BY provider_event_id`,
    format: 'JSONEachRow',
  });
  return new Map((await result.json<{ id: string; n: string }>()).map((row) => [row.id, Number(row.n)]));
}

/** Waits (at most timeoutMs) until every id is stored; returns what is stored then. */
async function waitUntilStored(ids: readonly string[], timeoutMs: number): Promise<Map<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stored = await storedCopies();
    if (ids.every((id) => stored.has(id)) || Date.now() > deadline) return stored;
    await sleep(1_000);
  }
}

it('stores every event of a 202 exactly once while the leader of an events partition is SIGKILLed and restarted under load', async () => {
  const testStarted = Date.now();
  // The topics were created by the processes with the cluster's settings.
  const before = await partitionStates();
  expect([...before.values()].every((state) => state.isr.length === REPLICATION_FACTOR)).toBe(true);
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas'] }],
  });
  expect(resources[0].configEntries[0]).toMatchObject({
    configValue: String(MIN_INSYNC_REPLICAS),
    configSource: ConfigSource.TOPIC_CONFIG,
  });

  const firstOccurredAt = Math.floor(Date.now() / 1000) - 86_400;
  const load = new WebhookLoad({
    gatewayUrl: stack.urls.gateway,
    category,
    prefix: `broker-loss-${randomUUID()}`,
    batchesPerSecond: BATCHES_PER_SECOND,
    eventsPerBatch: EVENTS_PER_BATCH,
    firstOccurredAt,
    headers: sendgrid.headers,
    maxAttempts: MAX_ATTEMPTS,
  });
  let victim: ClusterNode | undefined;
  const loadStarted = Date.now();
  let restartMs = 0;
  load.phase = 'steady';
  load.start();
  try {
    await sleep(KILL_AFTER_MS);
    const leader = before.get(0)!.leader;
    victim = clusterNode('kafka', `k${leader}`);
    expect(victim.pid()).toBeDefined();
    load.phase = 'leader down';
    await victim.kill();
    await sleep(DOWN_MS);
    load.phase = 'restarting';
    const restarting = Date.now();
    await victim.restart();
    restartMs = Date.now() - restarting;
    load.phase = 'recovered';
    await sleep(Math.max(0, loadStarted + LOAD_MS - Date.now()));
  } finally {
    load.stopNewBatches();
  }
  const loadMs = Date.now() - loadStarted;
  await load.drain(DRAIN_TIMEOUT_MS);
  const drainedMs = Date.now() - loadStarted;
  const resyncMs = await waitUntilFullyReplicated(60_000);

  // Recovered without a restart: a new batch is taken at once and stored.
  const finalIds = Array.from({ length: 20 }, (_, i) => `broker-loss-final-${randomUUID()}-${i}`);
  const finalBody = JSON.stringify(
    finalIds.map((id, i) => sendgridEvent({ event: 'open', sg_event_id: id, email: `final${i}@example.com`, category: [category] })),
  );
  const final = await post(stack.urls.gateway, finalBody, sendgrid.headers(finalBody));

  const batches = load.batches;
  const acceptedIds = batches.filter(accepted).flatMap((batch) => batch.eventIds);
  const sentIds = new Set(batches.flatMap((batch) => batch.eventIds));
  const stored = await waitUntilStored([...acceptedIds, ...finalIds], STORED_TIMEOUT_MS);
  const storedMs = Date.now() - loadStarted;

  const missing = acceptedIds.filter((id) => !stored.has(id));
  const doubled = [...stored].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
  const unexpected = [...stored.keys()].filter((id) => !sentIds.has(id) && !finalIds.includes(id));
  const attempts = batches.flatMap((batch) => batch.attempts);
  const byPhase = ['steady', 'leader down', 'restarting', 'recovered'].map((phase) => {
    const mine = attempts.filter((attempt) => attempt.phase === phase);
    return {
      phase,
      posts: mine.length,
      '202': mine.filter((a) => a.status === 202).length,
      '503': mine.filter((a) => a.status === 503).length,
      other: mine.filter((a) => a.status !== undefined && a.status !== 202 && a.status !== 503).length,
      noAnswer: mine.filter((a) => a.connectionError !== undefined).length,
      maxMs: Math.max(0, ...mine.map((a) => a.ms)),
    };
  });
  const after = await partitionStates();
  console.log(
    [
      `broker loss: ${batches.length} batches (${sentIds.size} events) in ${loadMs} ms, leader of partition 0 (k${before.get(0)!.leader}) ` +
        `killed at ${KILL_AFTER_MS} ms, restarted after ${DOWN_MS} ms (infra.sh up: ${restartMs} ms), ${acceptedIds.length} events acknowledged, ` +
        `${load.givenUp.size} batches given up, all answered after ${drainedMs} ms, in sync again ${resyncMs} ms later, ` +
        `all stored after ${storedMs} ms; ${stored.size} distinct events stored, ${missing.length} missing, ${doubled.length} doubled; ` +
        `partition 0 led by k${after.get(0)!.leader} now; test ${Math.round((Date.now() - testStarted) / 1000)} s`,
      JSON.stringify(byPhase),
    ].join('\n'),
  );

  expect(sentIds.size).toBeGreaterThanOrEqual(EVENTS);
  expect(missing.slice(0, 10)).toEqual([]);
  expect(doubled.slice(0, 10)).toEqual([]);
  expect(unexpected.slice(0, 10)).toEqual([]);
  expect(load.givenUp.size).toBe(0);
  expect(batches.filter((batch) => !accepted(batch)).map((batch) => batch.index)).toEqual([]);
  // Nothing but 202 and 503: a broker's loss is never a client's mistake nor a 500.
  expect(byPhase.every((phase) => phase.other === 0 && phase.noAnswer === 0)).toBe(true);
  expect(final.status).toBe(202);
  expect(finalIds.filter((id) => stored.get(id) !== 1)).toEqual([]);
  // The gateway and ingestion were never restarted.
  expect(PROCESS_NAMES.filter((name) => stack.pid(name) === undefined)).toEqual([]);
  testPassed = true;
});
