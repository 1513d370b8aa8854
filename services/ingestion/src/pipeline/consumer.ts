import type { ConsumerRunConfig, EachBatchPayload, Kafka } from 'kafkajs';
import {
  RECORD_SCHEMA_HEADER,
  createIdempotentProducer,
  inLinkedSpan,
  isCoordinatorMissing,
  recordSpanContexts,
  sendToPartitions,
  type Logger,
} from '@mail/common';
import { eventsV1 } from '@mail/proto';
import type { IngestionConfig } from '../config';
import type { PoisonRecord } from '../domain/records';
import { ingestionMetrics as metrics } from '../metrics';
import type { WorkspaceDay } from '../store/unsettled';
import { runBatch, type BatchOutcome, type ConsumedBatch } from './runner';
import type { StoreDependencies } from './steps';

/**
 * kafkajs hands the partition batches of one fetch to eachBatch at once (one
 * call per partition, up to this many) and fetches again only after all of
 * them returned; with room for every partition, one fetch is one batch.
 */
const PARTITIONS_CONSUMED_CONCURRENTLY = 64;
/** How soon the consumer joins again after kafkajs gave up finding its group's coordinator. */
const COORDINATOR_RETRY_MS = 1_000;

export interface ConsumerOptions {
  kafka: Kafka;
  config: IngestionConfig;
  store: StoreDependencies;
  markUnsettled: (days: WorkspaceDay[]) => Promise<void>;
  logger: Logger;
  /** kafkajs gave up on the consumer (it restarts it itself after retriable errors). */
  onFatalCrash: (error: Error) => void;
}

export interface EventConsumer {
  /** Joined its group and not crashed: it is consuming. */
  consuming(): boolean;
  /**
   * Consuming, with partition 0 of the events topic assigned: one member of
   * the group at a time (but for the moments of a rebalance), for work only
   * one process should do.
   */
  ownsFirstPartition(): boolean;
  /** The partitions of the events topic this member holds (none while it is not in the group). */
  assignedPartitions(): number[];
  /** Called whenever this process takes partition 0 over (and at once if it holds it already). */
  onFirstPartitionTaken(listener: () => void): void;
  /** Stops fetching, lets the batch in progress finish and commit, leaves the group. */
  stop(): Promise<void>;
}

/**
 * The consumer group on the events topic. Each fetch is one batch, run
 * through the pipeline's steps (runBatch); its offsets are committed only
 * once its events are stored.
 */
export async function startConsumer({
  kafka,
  config,
  store,
  markUnsettled,
  logger,
  onFatalCrash,
}: ConsumerOptions): Promise<EventConsumer> {
  const consumer = kafka.consumer({
    groupId: config.consumerGroup,
    minBytes: config.minBatchBytes,
    maxBytes: config.maxBatchBytes,
    maxBytesPerPartition: config.maxBatchBytes,
    maxWaitTimeInMs: config.maxBatchWaitMs,
    // After a crash the broker hands the partitions on only when the dead member's session expires:
    // kafkajs's 30 s default kept events waiting that long. Batches heartbeat while they retry.
    sessionTimeout: 10_000,
    heartbeatInterval: 1_000,
  });
  const deadLetters = createIdempotentProducer(kafka);
  let joined = false;
  let firstPartition = false;
  let assigned: number[] = [];
  const firstPartitionListeners: (() => void)[] = [];
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const held = joined && firstPartition;
    joined = true;
    assigned = payload.memberAssignment[config.eventsTopic] ?? [];
    firstPartition = assigned.includes(0);
    if (firstPartition && !held) for (const listener of firstPartitionListeners) listener();
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    joined = false;
    if (payload.restart) return;
    if (!isCoordinatorMissing(payload.error)) return onFatalCrash(payload.error);
    // kafkajs stops for good here, but a restarted broker's coordinator comes back: join again (not ready meanwhile).
    logger.warn({ err: payload.error, retryInMs: COORDINATOR_RETRY_MS }, 'kafka group coordinator not found; joining again');
    setTimeout(() => void consumer.run(runSettings).catch(onFatalCrash), COORDINATOR_RETRY_MS);
  });
  consumer.on(consumer.events.STOP, () => (joined = false));

  const sendToDeadLetters = async (poison: PoisonRecord[]): Promise<void> => {
    await sendToPartitions(
      deadLetters,
      config.deadLetterTopic,
      poison.map(({ key, partition, offset, reason, value, eventIndex }) => ({
        key,
        value: Buffer.from(
          eventsV1.DeadLetter.encode({ sourceTopic: config.eventsTopic, partition, offset, reason, value, eventIndex }).finish(),
        ),
      })),
    );
  };

  const processBatches = async (payloads: EachBatchPayload[]): Promise<void> => {
    const stopTimer = metrics.batchDuration.startTimer();
    const [first] = payloads;
    const offsets = payloads.map(({ batch }) => ({ partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() }));
    const batch: ConsumedBatch = {
      records: payloads.flatMap(({ batch: { partition, messages } }) =>
        messages.map(({ offset, key, value, headers }) => ({
          partition,
          offset,
          key: key ?? null,
          value,
          schema: headers?.[RECORD_SCHEMA_HEADER]?.toString(),
        })),
      ),
      commitOffsets: () => first.commitOffsetsIfNecessary({ topics: [{ topic: config.eventsTopic, partitions: offsets }] }),
      isRunning: () => first.isRunning(),
      heartbeat: () => first.heartbeat(),
    };
    // One span for the batch, linked to the webhook calls whose events it stores (their records' trace headers).
    const calls = payloads.flatMap(({ batch }) => batch.messages.flatMap(({ headers }) => recordSpanContexts(headers)));
    const outcome = await inLinkedSpan('ingest events', calls, async (span) => {
      const result = await runBatch(batch, { ...store, sendToDeadLetters, markUnsettled, logger });
      span.setAttributes({
        'messaging.batch.message_count': batch.records.length,
        'ingestion.events.consumed': result.consumed,
        'ingestion.events.inserted': result.stored.inserted,
        'ingestion.events.dead_lettered': deadLetteredCount(result),
      });
      logger.debug(
        {
          records: batch.records.length,
          consumed: result.consumed,
          inserted: result.stored.inserted,
          deadLettered: deadLetteredCount(result),
        },
        'batch stored',
      );
      return result;
    });
    for (const payload of payloads) {
      payload.resolveOffset(payload.batch.lastOffset());
      metrics.lag.set({ partition: String(payload.batch.partition) }, Number(payload.batch.offsetLag()));
    }
    metrics.consumed.inc(outcome.consumed);
    for (const [reason, count] of Object.entries(outcome.deadLettered)) metrics.deadLettered.inc({ reason }, count);
    metrics.inserted.inc(outcome.stored.inserted);
    metrics.duplicates.inc(outcome.repeated + outcome.stored.duplicates);
    metrics.unmatched.inc(outcome.stored.unmatched);
    metrics.signals.inc(outcome.stored.signals);
    stopTimer();
  };

  const collector = new FetchCollector(processBatches);
  const runSettings: ConsumerRunConfig = {
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: PARTITIONS_CONSUMED_CONCURRENTLY,
    eachBatch: (payload) => collector.add(payload),
  };
  await deadLetters.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [config.eventsTopic], fromBeginning: true });
  await consumer.run(runSettings);
  return {
    consuming: () => joined,
    ownsFirstPartition: () => joined && firstPartition,
    assignedPartitions: () => (joined ? assigned : []),
    onFirstPartitionTaken: (listener) => {
      firstPartitionListeners.push(listener);
      if (joined && firstPartition) listener();
    },
    stop: async () => {
      await consumer.disconnect();
      await deadLetters.disconnect();
    },
  };
}

const deadLetteredCount = ({ deadLettered }: BatchOutcome): number => Object.values(deadLettered).reduce((sum, count) => sum + count, 0);

/** Joins the eachBatch calls kafkajs makes for one fetch (all in the same tick) into one call of `process`. */
class FetchCollector {
  private waiting: { payload: EachBatchPayload; resolve: () => void; reject: (error: unknown) => void }[] = [];

  constructor(private readonly process: (payloads: EachBatchPayload[]) => Promise<void>) {}

  add(payload: EachBatchPayload): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ payload, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const group = this.waiting;
    this.waiting = [];
    this.process(group.map(({ payload }) => payload)).then(
      () => group.forEach(({ resolve }) => resolve()),
      (error: unknown) => group.forEach(({ reject }) => reject(error)),
    );
  }
}
