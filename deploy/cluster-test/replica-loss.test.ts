import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, Partitioners, logLevel, type Admin, type Producer } from 'kafkajs';
import { call, createClient } from '@mail/common';
import { clusterNode, createTestPostgres, infraEnv, startStack, uniqueSuffix, type Stack, type TestPostgres } from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import {
  createClusterDatabase,
  nodeUrls,
  startAnalytics,
  waitFor,
  type Analytics,
  type ClusterDatabase,
} from './support/clickhouse-cluster';

/**
 * One shard of two replicas (events_1x2), CLICKHOUSE_URL = ch1,ch2: a real
 * ingestion process consumes events from Kafka while the test produces them,
 * and ch1, the server it writes to, is killed (SIGKILL) in the middle.
 * Ingestion goes on through ch2 with nothing lost or doubled; once ch1 is
 * back it catches up, and each replica, read alone, answers the same lists
 * and stats, those of the events produced.
 */
jest.setTimeout(600_000);

const CLUSTER = 'events_1x2';
const { EventType } = eventsV1;
const BATCHES = 30;
const PER_BATCH = 100;
const BATCH_EVERY_MS = 300;
/** ch1 dies after this many batches, while ingestion writes. */
const KILL_AFTER = 8;
const CATCH_UP_MS = 120_000;

const run = uniqueSuffix();
const topic = `replica-loss-events-${run}`;
let cluster: ClusterDatabase;
let postgres: TestPostgres;
let stack: Stack;
let stateDir: string;
let producer: Producer;
let admin: Admin;
const group = `replica-loss-${run}`;
let campaigns: campaignV1.CampaignServiceClient;
const replicaReaders: Analytics[] = [];
/** Analytics over both servers, as deployed: it reads through ch2 once ch1 is gone. */
let bothServers: Analytics;
const ch1 = clusterNode('clickhouse', 'ch1');

interface Workspace {
  workspaceId: string;
  category: string;
}

beforeAll(async () => {
  const started = Date.now();
  const urls = nodeUrls();
  [cluster, postgres] = await Promise.all([
    createClusterDatabase('replica_loss', CLUSTER, ['ch1', 'ch2']),
    createTestPostgres('replica_loss'),
  ]);
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'replica-loss-'));
  stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['campaign', 'ingestion'],
    env: {
      DATABASE_URL: postgres.url,
      CLICKHOUSE_URL: [urls.ch1, urls.ch2].join(','),
      CLICKHOUSE_DATABASE: cluster.database,
      CLICKHOUSE_CLUSTER: CLUSTER,
      KAFKA_EVENTS_TOPIC: topic,
      KAFKA_DLQ_TOPIC: `replica-loss-dlq-${run}`,
      KAFKA_CONSUMER_GROUP: group,
      INGESTION_MIN_BATCH_BYTES: '1',
      INGESTION_MAX_BATCH_WAIT_MS: '100',
    },
  });
  campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
  const kafka = new Kafka({ clientId: `replica-loss-${run}`, brokers: infraEnv().kafkaBrokers, logLevel: logLevel.NOTHING });
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  admin = kafka.admin();
  await Promise.all([producer.connect(), admin.connect()]);
  bothServers = await startAnalytics('replica-loss-both', {
    CLICKHOUSE_URL: [urls.ch1, urls.ch2].join(','),
    CLICKHOUSE_DATABASE: cluster.database,
    CLICKHOUSE_CLUSTER: CLUSTER,
  });
  console.log(`replica-loss: set up in ${Date.now() - started} ms`);
});

afterAll(async () => {
  if (ch1.pid() === undefined) await ch1.restart();
  await Promise.all([...replicaReaders, bothServers].map((reader) => reader?.close()));
  campaigns?.close();
  await Promise.all([producer?.disconnect(), admin?.disconnect()]);
  await stack?.stopAll();
  await cluster?.drop();
  await postgres?.drop();
  if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
});

async function workspace(): Promise<Workspace> {
  const workspaceId = crypto.randomUUID();
  const category = `replica-loss-${uniqueSuffix()}`;
  await call(campaigns.createCampaign.bind(campaigns), {
    workspaceId,
    campaign: campaignV1.CampaignInput.fromPartial({ workspaceId, name: category, providerCategoryId: category }),
  });
  return { workspaceId, category };
}

/** Event `i` of a batch: opens (every fifth a machine's), clicks, deliveries and unsubscribes over 40 addresses. */
function event(target: Workspace, batch: number, i: number): eventsV1.EngagementEvent {
  const kind = i % 10;
  const eventType =
    kind < 4
      ? EventType.EVENT_TYPE_OPEN
      : kind < 7
        ? EventType.EVENT_TYPE_CLICK
        : kind < 9
          ? EventType.EVENT_TYPE_DELIVERED
          : EventType.EVENT_TYPE_UNSUBSCRIBE;
  const providerEventId = `${target.category}-${batch}-${i}`;
  return eventsV1.EngagementEvent.fromPartial({
    providerEventId,
    provider: 'sendgrid',
    eventType,
    email: `reader${(batch * 7 + i) % 40}@example.com`,
    occurredAt: new Date(Date.UTC(2026, 10, 20, 10) + batch * 60_000 + i * 1_000),
    receivedAt: new Date(),
    categories: [target.category],
    url: eventType === EventType.EVENT_TYPE_CLICK ? `https://example.com/${i % 3}` : undefined,
    machineOpen: eventType === EventType.EVENT_TYPE_OPEN && i % 5 === 0,
    rawJson: JSON.stringify({ sg_event_id: providerEventId }),
  });
}

/** What the workspace's list and stats must say about these events. */
function expected(events: eventsV1.EngagementEvent[]) {
  const of = (type: eventsV1.EventType) => events.filter((e) => e.eventType === type);
  const people = (list: eventsV1.EngagementEvent[]) => new Set(list.map((e) => e.email)).size;
  const opens = of(EventType.EVENT_TYPE_OPEN);
  const clicks = of(EventType.EVENT_TYPE_CLICK);
  const unsubscribes = of(EventType.EVENT_TYPE_UNSUBSCRIBE);
  return {
    listed: opens.length + clicks.length + unsubscribes.length,
    totals: {
      opens: opens.length,
      machineOpens: opens.filter((e) => e.machineOpen).length,
      uniqueOpens: people(opens.filter((e) => !e.machineOpen)),
      clicks: clicks.length,
      uniqueClicks: people(clicks),
      delivered: of(EventType.EVENT_TYPE_DELIVERED).length,
      unsubscribes: unsubscribes.length,
    },
  };
}

async function answers(reader: Analytics, workspaceId: string) {
  const [list, stats] = await Promise.all([reader.list(workspaceId), reader.stats(workspaceId)]);
  return { listed: list.page?.total, totals: stats.totals, list, stats };
}

it('goes on through the other replica when one dies, losing and doubling nothing, and the dead one catches up', async () => {
  const targets = await Promise.all([workspace(), workspace(), workspace()]);
  const produced = new Map<string, eventsV1.EngagementEvent[]>(targets.map((target) => [target.workspaceId, []]));
  const started = Date.now();
  let killedAt = 0;
  for (let batch = 0; batch < BATCHES; batch += 1) {
    const target = targets[batch % targets.length];
    const events = Array.from({ length: PER_BATCH }, (_, i) => event(target, batch, i));
    produced.get(target.workspaceId)!.push(...events);
    await producer.send({
      topic,
      acks: -1,
      messages: events.map((e) => ({ key: e.email, value: Buffer.from(eventsV1.EngagementEvent.encode(e).finish()) })),
    });
    if (batch === KILL_AFTER) {
      await ch1.kill();
      killedAt = Date.now();
    }
    await new Promise((resolve) => setTimeout(resolve, BATCH_EVERY_MS));
  }
  console.log(`replica-loss: produced ${BATCHES * PER_BATCH} events in ${Date.now() - started} ms, ch1 killed at ${killedAt - started} ms`);

  // Ingestion goes on through ch2 alone: it commits every offset, having stored every event produced after the kill
  // there. (An insert ch1 took just before it died reaches ch2 once ch1 is back: replication is asynchronous.)
  await waitFor('ingestion caught up with ch1 down', CATCH_UP_MS, async () => {
    const [ends, [{ partitions }]] = await Promise.all([
      admin.fetchTopicOffsets(topic),
      admin.fetchOffsets({ groupId: group, topics: [topic] }),
    ]);
    const committed = new Map(partitions.map((p) => [p.partition, Number(p.offset)]));
    return ends.every((end) => committed.get(end.partition) === Number(end.high)) ? true : undefined;
  });
  const metrics = await (await fetch(`${stack.urls.ops.ingestion}/metrics`)).text();
  const retries = /^ingestion_batch_retries_total (\d+)/m.exec(metrics)?.[1] ?? '0';
  const [{ marked }] = await cluster.rows<{ marked: string }>('ch2', 'SELECT count() AS marked FROM unsettled_days');
  console.log(
    `replica-loss: ingestion caught up ${Date.now() - killedAt} ms after the kill (${retries} batch retries, ${marked} days marked unsettled)`,
  );
  expect(ch1.pid()).toBeUndefined();
  const afterKill = [...produced.values()].flat().filter((e) => Number(e.providerEventId.split('-').at(-2)) > KILL_AFTER);
  const [{ n }] = await cluster.rows<{ n: string }>(
    'ch2',
    `SELECT uniqExact(provider_event_id) AS n FROM events_local WHERE provider_event_id IN (${afterKill.map((e) => `'${e.providerEventId}'`).join(',')})`,
  );
  expect(Number(n)).toBe(afterKill.length);
  // Analytics, its first server dead, answers through the second; and a process starts with a server of the
  // cluster down (its schema set-up needs no ON CLUSTER statement when its server holds the whole store).
  const during = await bothServers.list(targets[targets.length - 1].workspaceId);
  expect(during.page?.total).toBeGreaterThan(0);
  const urls = nodeUrls();
  const reader = (node: 'ch1' | 'ch2') =>
    startAnalytics(`replica-loss-${node}`, {
      CLICKHOUSE_URL: urls[node],
      CLICKHOUSE_DATABASE: cluster.database,
      CLICKHOUSE_CLUSTER: CLUSTER,
    });
  const onCh2 = await reader('ch2');
  replicaReaders.push(onCh2);

  const restartedAt = Date.now();
  await ch1.restart();
  // ch1 catches up: nothing left in either replica's queue, and both hold the same rows in every table.
  await waitFor('both replicas in sync', CATCH_UP_MS, async () => {
    const queues = await Promise.all(
      (['ch1', 'ch2'] as const).map((node) =>
        cluster.rows<{ queued: string; counts: string }>(
          node,
          `SELECT (SELECT sum(queue_size) FROM system.replicas WHERE database = '${cluster.database}') AS queued,
            (SELECT toString(groupArray((table, rows))) FROM (SELECT table, sum(rows) AS rows FROM system.parts
               WHERE active AND database = '${cluster.database}' GROUP BY table ORDER BY table)) AS counts`,
        ),
      ),
    );
    const [[a], [b]] = queues;
    return Number(a.queued) === 0 && Number(b.queued) === 0 && a.counts === b.counts ? true : undefined;
  });
  console.log(`replica-loss: ch1 caught up ${Date.now() - restartedAt} ms after its restart`);

  const onCh1 = await reader('ch1');
  replicaReaders.push(onCh1);
  for (const target of targets) {
    const want = expected(produced.get(target.workspaceId)!);
    const [fromCh1, fromCh2] = await Promise.all([answers(onCh1, target.workspaceId), answers(onCh2, target.workspaceId)]);
    expect({ listed: fromCh2.listed, totals: fromCh2.totals }).toMatchObject(want);
    expect(fromCh1).toEqual(fromCh2);
  }
});
