import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import { Kafka, Partitioners, logLevel, type Producer } from 'kafkajs';
import { EVENT_BATCH_SCHEMA, RECORD_SCHEMA_HEADER, call, createClient } from '@mail/common';
import { NO_RUN, NO_VARIANT, createClickHouse } from '@mail/event-store';
import { createTestClickHouse, createTestPostgres, infraEnv, startStack, uniqueSuffix, type Stack } from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import type { SourcedEvent } from '../src/domain/records';
import type { EngagementEventRow } from '../src/domain/columns';

/**
 * The real campaign and ingestion processes (started by the launcher from
 * their dist/main.js) on a private Postgres database, ClickHouse database and
 * Kafka topics; events go in through a plain producer, results are read from
 * ClickHouse.
 */
export interface Ingestion {
  stack: Stack;
  topic: string;
  deadLetterTopic: string;
  clickhouse: ClickHouseClient;
  kafka: Kafka;
  /**
   * A campaign whose provider_category_id is `category`, in `workspaceId` or a fresh workspace, with a variant for
   * each of `variantTemplates`; its variant ids in their order.
   */
  createCampaign(category: string, workspaceId?: string, variantTemplates?: string[]): Promise<CreatedCampaign>;
  /** Closes a workspace in the campaign service, as its deletion does: its campaigns go, its categories stay retired. */
  closeWorkspace(workspaceId: string): Promise<void>;
  /** A platform admin's release of a category its deleted workspace keeps retired. */
  releaseCategory(category: string): Promise<void>;
  setCategory(campaign: { id: string; workspaceId: string }, category: string | null): Promise<void>;
  /** Records keyed by e-mail, one event each, as written before batching; raw buffers are sent as they are. */
  produce(records: (eventsV1.EngagementEvent | Buffer)[]): Promise<void>;
  /** One EngagementEventBatch record per list, as the webhook writes them; raw buffers go in as events' bytes. */
  produceBatches(batches: (eventsV1.EngagementEvent | Buffer)[][]): Promise<void>;
  rows<T>(query: string): Promise<T[]>;
  count(query: string): Promise<number>;
  /** Resolves once the consumer group has committed everything on the events topic. */
  waitUntilCaughtUp(timeoutMs?: number): Promise<void>;
  /** The offsets the consumer group has committed on the events topic, summed over its partitions. */
  committedOffsets(): Promise<number>;
  /** A counter of the ingestion process's /metrics, summed over its series whose labels include `labels`. */
  metric(name: string, labels?: string): Promise<number>;
  /** Polls a count query until it equals `expected`; fails with the last count after timeoutMs. */
  waitForCount(query: string, expected: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export interface CreatedCampaign {
  id: string;
  workspaceId: string;
  variantIds: string[];
}

export interface IngestionOptions {
  label: string;
  /** Another ClickHouse server (a private one a test stops and starts). */
  clickhouseUrl?: string;
  /** More variables for the processes. */
  env?: Record<string, string>;
}

export async function startIngestion({ label, clickhouseUrl, env = {} }: IngestionOptions): Promise<Ingestion> {
  const postgres = await createTestPostgres(label);
  // On a private server the database goes away with the server; ingestion creates it.
  const shared = clickhouseUrl ? undefined : await createTestClickHouse(label);
  const url = clickhouseUrl ?? shared!.url;
  const databaseName = shared?.database ?? `test_${label.replace(/\W/g, '_')}_${uniqueSuffix()}`.toLowerCase();
  const topic = `${label}-events-${uniqueSuffix()}`;
  const deadLetterTopic = `${label}-dlq-${uniqueSuffix()}`;
  const group = `${label}-${uniqueSuffix()}`;
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-stack-`));
  const cleanUp = async (): Promise<void> => {
    await shared?.drop();
    await postgres.drop();
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  const stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['campaign', 'ingestion'],
    env: {
      DATABASE_URL: postgres.url,
      CLICKHOUSE_URL: url,
      CLICKHOUSE_DATABASE: databaseName,
      KAFKA_EVENTS_TOPIC: topic,
      KAFKA_DLQ_TOPIC: deadLetterTopic,
      KAFKA_CONSUMER_GROUP: group,
      // Small fetches wait less: tests produce a handful of events at a time.
      INGESTION_MIN_BATCH_BYTES: '1',
      INGESTION_MAX_BATCH_WAIT_MS: '100',
      ...env,
    },
  }).catch(async (error: unknown) => {
    await cleanUp();
    throw error;
  });
  const campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
  const clickhouse = createClickHouse(url, databaseName);
  const kafka = new Kafka({ clientId: label, brokers: infraEnv().kafkaBrokers, logLevel: logLevel.NOTHING });
  const producer: Producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const admin = kafka.admin();
  await Promise.all([producer.connect(), admin.connect()]);

  const rows = async <T>(query: string): Promise<T[]> => (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
  /** Each partition's committed offset (0 where the group has committed none). */
  const committed = async (): Promise<Map<number, number>> => {
    const [{ partitions }] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    return new Map(partitions.map((p) => [p.partition, Math.max(Number(p.offset), 0)]));
  };
  const count = async (query: string): Promise<number> => Number((await rows<{ n: string }>(query))[0].n);

  return {
    stack,
    topic,
    deadLetterTopic,
    clickhouse,
    kafka,
    createCampaign: async (category, workspaceId = crypto.randomUUID(), variantTemplates) => {
      const { campaign } = await call(campaigns.createCampaign.bind(campaigns), {
        workspaceId,
        campaign: campaignV1.CampaignInput.fromPartial({
          workspaceId,
          name: `campaign for ${category}`,
          providerCategoryId: category,
          ...(variantTemplates && { variants: { variants: variantTemplates.map((templateId) => ({ templateId, weight: 1 })) } }),
        }),
      });
      return { id: campaign!.id, workspaceId, variantIds: campaign!.variants?.variants.map((variant) => variant.id) ?? [] };
    },
    closeWorkspace: async (workspaceId) => {
      await call(campaigns.closeWorkspace.bind(campaigns), { workspaceId });
    },
    releaseCategory: async (category) => {
      await call(campaigns.releaseProviderCategory.bind(campaigns), {
        providerCategoryId: category,
        releasedByUserId: crypto.randomUUID(),
        releasedByEmail: 'root@example.com',
      });
    },
    setCategory: async ({ id, workspaceId }, category) => {
      await call(campaigns.updateCampaign.bind(campaigns), {
        workspaceId,
        id,
        updateMask: ['provider_category_id'],
        campaign: campaignV1.CampaignInput.fromPartial({ workspaceId, providerCategoryId: category ?? undefined }),
      });
    },
    produce: async (records) => {
      await producer.send({
        topic,
        acks: -1,
        messages: records.map((record) =>
          Buffer.isBuffer(record)
            ? { key: 'poison', value: record }
            : { key: record.email, value: Buffer.from(eventsV1.EngagementEvent.encode(record).finish()) },
        ),
      });
    },
    produceBatches: async (batches) => {
      await producer.send({
        topic,
        acks: -1,
        messages: batches.map((events) => ({
          headers: { [RECORD_SCHEMA_HEADER]: EVENT_BATCH_SCHEMA },
          value: Buffer.from(
            eventsV1.EngagementEventBatch.encode({
              events: events.map((event) =>
                Buffer.isBuffer(event) ? event : Buffer.from(eventsV1.EngagementEvent.encode(event).finish()),
              ),
            }).finish(),
          ),
        })),
      });
    },
    rows,
    count,
    waitUntilCaughtUp: async (timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [ends, done] = await Promise.all([admin.fetchTopicOffsets(topic), committed()]);
        if (ends.every((end) => done.get(end.partition) === Number(end.high))) return;
        if (Date.now() > deadline) throw new Error(`consumer group ${group} has not caught up after ${timeoutMs} ms`);
        await sleep(100);
      }
    },
    committedOffsets: async () => [...(await committed()).values()].reduce((sum, offset) => sum + offset, 0),
    metric: async (name, labels = '') => {
      const text = await (await fetch(`${stack.urls.ops.ingestion}/metrics`)).text();
      // Summed over the series of the name whose labels include `labels` (e.g. 'reason="undecodable"').
      return text
        .split('\n')
        .filter((line) => line.startsWith(`${name} `) || (line.startsWith(`${name}{`) && line.includes(labels)))
        .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
    },
    waitForCount: async (query, expected, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs;
      let last = -1;
      while (Date.now() < deadline) {
        last = await count(query).catch(() => -1);
        if (last === expected) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`${query}: ${last} after ${timeoutMs} ms, expected ${expected}`);
    },
    close: async () => {
      await stack.stopAll();
      await Promise.all([producer.disconnect(), admin.disconnect()]);
      campaigns.close();
      await clickhouse.close();
      await cleanUp();
    },
  };
}

const { EventType, BounceType, BounceClass } = eventsV1;

/** An event as the webhook would publish it. */
export function engagementEvent(fields: Partial<eventsV1.EngagementEvent> & { providerEventId: string }): eventsV1.EngagementEvent {
  return {
    provider: 'sendgrid',
    eventType: EventType.EVENT_TYPE_OPEN,
    bounceType: BounceType.BOUNCE_TYPE_UNSPECIFIED,
    bounceClass: BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    machineOpen: false,
    machineClick: false,
    email: 'someone@example.com',
    occurredAt: new Date('2026-11-20T10:00:00Z'),
    receivedAt: new Date(),
    categories: [],
    rawJson: JSON.stringify({ sg_event_id: fields.providerEventId, custom_arg: 'kept' }),
    ...fields,
  };
}

/** An events row of an open, every column set (times in unix seconds): `overrides` say what the test is about. */
export function eventRow(
  overrides: Partial<EngagementEventRow> & Pick<EngagementEventRow, 'workspace_id' | 'occurred_at'>,
): EngagementEventRow {
  return {
    id: crypto.randomUUID(),
    campaign_id: crypto.randomUUID(),
    variant_id: NO_VARIANT,
    run_id: NO_RUN,
    event_type: 'open',
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email: 'reader@example.com',
    received_at: overrides.occurred_at,
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
    provider: 'sendgrid',
    provider_event_id: crypto.randomUUID(),
    provider_message_id: null,
    raw: '{}',
    ingested_at: overrides.occurred_at,
    ...overrides,
  };
}

/** Events as the decode step hands them on: each from its own record of partition 0. */
export function sourced(events: eventsV1.EngagementEvent[]): SourcedEvent[] {
  return events.map((event, i) => ({
    event,
    source: { partition: 0, offset: String(i), key: null, value: Buffer.from(eventsV1.EngagementEvent.encode(event).finish()) },
  }));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
