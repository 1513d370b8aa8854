import crypto from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import { EnvReader, createKafka, createLogger, ensureTopics } from '@mail/common';
import { chsql } from '@mail/event-store';
import { createTestEventDatabase, infraEnv, uniqueSuffix, type TestEventDatabase } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { readConfig } from '../src/config';
import { startConsumer } from '../src/pipeline/consumer';
import { storeEvents } from '../src/pipeline/runner';
import type { StoreDependencies } from '../src/pipeline/steps';
import type { EngagementEventRow } from '../src/domain/columns';
import { EventWriter } from '../src/store/events';
import { SuppressionStateStore } from '../src/store/suppressions';
import { UnsettledDays, workspaceDays, type WorkspaceDay } from '../src/store/unsettled';
import { engagementEvent, sleep, sourced } from './harness';

// A failed events insert may have been committed without the rollups its views feed: its days get marked unsettled.
jest.setTimeout(90_000);
const { sql, uuid } = chsql;

/** The real store; its first events insert is written, then reported failed, as when ClickHouse dies before answering. */
class LosesFirstAnswer extends EventWriter {
  failedDays?: WorkspaceDay[];
  override async insertEvents(rows: EngagementEventRow[]): Promise<void> {
    await super.insertEvents(rows);
    if (!this.failedDays && rows.length > 0) {
      this.failedDays = workspaceDays(rows);
      throw new Error('connection reset');
    }
  }
}

let database: TestEventDatabase;
let clickhouse: ClickHouseClient;

beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_unsettled');
  clickhouse = database.clickhouse;
});

afterAll(() => database.close());

function dependencies(writer: EventWriter, workspaceId: string): StoreDependencies {
  const campaignId = crypto.randomUUID();
  return {
    resolve: (ids) =>
      Promise.resolve(new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId, workspaceId, variantIds: [] }]))),
    writer,
    suppressions: new SuppressionStateStore(clickhouse),
  };
}

const opens = (p: string) =>
  ['2026-10-01T10:00:00Z', '2026-10-01T23:59:59Z', '2026-10-02T00:00:00Z'].map((time, i) =>
    engagementEvent({ providerEventId: `${p}-${i}`, categories: ['cat'], occurredAt: new Date(time) }),
  );

async function markedDays(workspaceId: string): Promise<string[]> {
  const rows = await database.rows<{ day: string }>(
    sql`SELECT DISTINCT toString(day) AS day FROM unsettled_days WHERE workspace_id = ${uuid(workspaceId)} ORDER BY day`.text,
  );
  return rows.map((row) => row.day);
}

it('collects the distinct UTC days of each workspace', () => {
  const rows = [
    { workspace_id: 'a', occurred_at: 86_399 },
    { workspace_id: 'a', occurred_at: 0 },
    { workspace_id: 'b', occurred_at: 86_399 },
    { workspace_id: 'a', occurred_at: 86_400 },
    { workspace_id: 'a', occurred_at: 1_763_769_599 },
  ];
  expect(workspaceDays(rows)).toEqual([
    { workspaceId: 'a', day: '1970-01-01' },
    { workspaceId: 'a', day: '1970-01-02' },
    { workspaceId: 'a', day: '2025-11-21' },
    { workspaceId: 'b', day: '1970-01-01' },
  ]);
  expect(workspaceDays([])).toEqual([]);
});

it('reports the days of a failed events insert, and the days written', async () => {
  const workspaceId = crypto.randomUUID();
  const deps = dependencies(new LosesFirstAnswer(clickhouse), workspaceId);
  const events = opens(`pipeline-${uniqueSuffix()}`);

  expect(await storeEvents(sourced(events), deps)).toMatchObject({
    kind: 'retry',
    unsettledDays: [
      { workspaceId, day: '2026-10-01' },
      { workspaceId, day: '2026-10-02' },
    ],
  });
  // The retry finds the events stored and writes nothing: had the rollups missed them, only the mark would tell.
  expect(await storeEvents(sourced(events), deps)).toMatchObject({ kind: 'ok', value: { inserted: 0, duplicates: 3, written: [] } });
});

it('marks the days of a failed events insert unsettled before the consumer retries the batch', async () => {
  const workspaceId = crypto.randomUUID();
  const suffix = uniqueSuffix();
  const config = readConfig(
    new EnvReader({
      KAFKA_BROKERS: infraEnv().kafkaBrokers.join(','),
      KAFKA_EVENTS_TOPIC: `unsettled-events-${suffix}`,
      KAFKA_DLQ_TOPIC: `unsettled-dlq-${suffix}`,
      KAFKA_CONSUMER_GROUP: `unsettled-${suffix}`,
      KAFKA_TOPIC_PARTITIONS: '1',
    }),
  );
  const logger = createLogger('unsettled-test', process.env.LOG_LEVEL ?? 'silent');
  const kafka = createKafka('unsettled-test', config.kafkaBrokers, logger);
  const admin = kafka.admin();
  await admin.connect();
  await ensureTopics(
    admin,
    [config.eventsTopic, config.deadLetterTopic].map((topic) => ({ topic, numPartitions: 1, replicationFactor: 1 })),
  );
  const producer = kafka.producer();
  await producer.connect();

  const store = new LosesFirstAnswer(clickhouse);
  const deps = dependencies(store, workspaceId);
  const unsettled = new UnsettledDays(clickhouse);
  const marks: string[][] = [];
  const consumer = await startConsumer({
    kafka,
    config,
    store: deps,
    markUnsettled: async (days) => {
      marks.push(days.map((day) => day.day));
      await unsettled.mark(days);
    },
    logger,
    onFatalCrash: () => undefined,
  });
  // Told once, whether it joined before or after this.
  let taken = 0;
  consumer.onFirstPartitionTaken(() => (taken += 1));
  try {
    await producer.send({
      topic: config.eventsTopic,
      messages: opens(`consumer-${suffix}`).map((event) => ({
        key: event.email,
        value: Buffer.from(eventsV1.EngagementEvent.encode(event).finish()),
      })),
    });
    const stored = sql`SELECT count() AS n FROM events WHERE workspace_id = ${uuid(workspaceId)}`.text;
    for (let waited = 0; marks.length === 0 || (await countOf(stored)) < 3; waited += 200) {
      if (waited > 30_000) throw new Error('the batch was not retried');
      await sleep(200);
    }
    expect(store.failedDays).toBeDefined();
    expect(marks).toEqual([store.failedDays!.map((day) => day.day)]);
    expect(await markedDays(workspaceId)).toEqual(['2026-10-01', '2026-10-02']);
    // The only member has the topic's one partition: it is the one that rebuilds disagreeing days, and re-matches.
    expect(consumer.ownsFirstPartition()).toBe(true);
    expect(taken).toBe(1);
  } finally {
    await consumer.stop();
    expect(consumer.ownsFirstPartition()).toBe(false);
    await producer.disconnect();
    await admin.deleteTopics({ topics: [config.eventsTopic, config.deadLetterTopic] }).catch(() => undefined);
    await admin.disconnect();
  }
});

async function countOf(query: string): Promise<number> {
  return Number((await database.rows<{ n: string }>(query))[0].n);
}
