import { setTimeout as sleep } from 'node:timers/promises';
import type { EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import { RECORD_SCHEMA_HEADER, createIdempotentProducer, type Logger } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import type { IngestionConfig } from '../config';
import { decodeRecord, type Poison } from '../domain/events';
import { ingestionMetrics as metrics } from '../metrics';
import type { StoredEvents } from './steps';
import { EventsWriteError, type WorkspaceDay } from '../store/unsettled';

/**
 * kafkajs hands the partition batches of one fetch to eachBatch at once (one
 * call per partition, up to this many) and fetches again only after all of
 * them returned; with room for every partition, one fetch is one batch.
 */
const PARTITIONS_CONSUMED_CONCURRENTLY = 64;
const MAX_RETRY_DELAY_MS = 3_000;

interface PoisonRecord extends Poison {
  message: KafkaMessage;
  partition: number;
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
  /** Called whenever this process takes partition 0 over (and at once if it holds it already). */
  onFirstPartitionTaken(listener: () => void): void;
  /** Stops fetching, lets the batch in progress finish and commit, leaves the group. */
  stop(): Promise<void>;
}

/**
 * The consumer group on the events topic. Each batch is decoded (records that
 * cannot be decoded go to the dead-letter topic), written by `storeEvents`, and
 * only then are its offsets committed. A failed write is retried, with
 * backoff and heartbeats, until it succeeds, the consumer stops, or the group
 * rebalances: offsets never move past an event that is not stored.
 * A write that failed, or whose offsets then failed to commit (another owner
 * may write the same events again), may leave the rollups of its days short
 * or doubled: those days are marked unsettled before the batch is retried or
 * handed over.
 */
export async function startConsumer(
  kafka: Kafka,
  config: IngestionConfig,
  storeEvents: (events: eventsV1.EngagementEvent[]) => Promise<StoredEvents>,
  markUnsettled: (days: WorkspaceDay[]) => Promise<void>,
  logger: Logger,
  /** kafkajs gave up on the consumer (it restarts it itself after retriable errors). */
  onFatalCrash: (error: Error) => void,
): Promise<EventConsumer> {
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
  const firstPartitionListeners: (() => void)[] = [];
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const held = joined && firstPartition;
    joined = true;
    firstPartition = payload.memberAssignment[config.eventsTopic]?.includes(0) ?? false;
    if (firstPartition && !held) for (const listener of firstPartitionListeners) listener();
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    joined = false;
    if (!payload.restart) onFatalCrash(payload.error);
  });
  consumer.on(consumer.events.STOP, () => (joined = false));

  const sendToDeadLetters = async (poison: PoisonRecord[]): Promise<void> => {
    await deadLetters.send({
      topic: config.deadLetterTopic,
      acks: -1,
      messages: poison.map(({ message, partition, reason, value, eventIndex }) => ({
        key: message.key,
        value: Buffer.from(
          eventsV1.DeadLetter.encode({
            sourceTopic: config.eventsTopic,
            partition,
            offset: message.offset,
            reason,
            value,
            eventIndex,
          }).finish(),
        ),
      })),
    });
  };

  const processBatches = async (payloads: EachBatchPayload[]): Promise<void> => {
    const stopTimer = metrics.batchDuration.startTimer();
    const events: eventsV1.EngagementEvent[] = [];
    const poison: PoisonRecord[] = [];
    for (const { batch } of payloads) {
      for (const message of batch.messages) {
        const decoded = decodeRecord(message.value, message.headers?.[RECORD_SCHEMA_HEADER]?.toString());
        for (const event of decoded.events) events.push(event);
        for (const found of decoded.poison) poison.push({ ...found, message, partition: batch.partition });
      }
    }
    const offsets = payloads.map(({ batch }) => ({ partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() }));
    let deadLettered = poison.length === 0;
    let result: StoredEvents | undefined;
    const unsettled = new Map<string, WorkspaceDay>();
    const collect = (days: WorkspaceDay[]) => days.forEach((day) => unsettled.set(`${day.workspaceId} ${day.day}`, day));
    const markCollected = async () => {
      if (unsettled.size === 0) return;
      await markUnsettled([...unsettled.values()]);
      unsettled.clear();
    };
    /** Before the next owner retries the batch; if ClickHouse is still down, there is nothing more to do. */
    const handOver = () =>
      markCollected().catch((error: unknown) =>
        logger.error({ err: error, days: [...unsettled.values()] }, 'could not mark days unsettled; their rollups may be off'),
      );
    for (let failures = 0; !result; failures += 1) {
      try {
        await markCollected();
        if (!deadLettered) {
          await sendToDeadLetters(poison);
          deadLettered = true;
          for (const { partition, message, reason, eventIndex } of poison) {
            logger.warn({ partition, offset: message.offset, eventIndex, reason }, 'record dead-lettered');
          }
        }
        const written = await storeEvents(events);
        await payloads[0]
          .commitOffsetsIfNecessary({ topics: [{ topic: config.eventsTopic, partitions: offsets }] })
          .catch((error: unknown) => {
            collect(written.written);
            throw error;
          });
        result = written;
      } catch (error) {
        if (error instanceof EventsWriteError) collect(error.days);
        metrics.retries.inc();
        if (!payloads[0].isRunning()) {
          await handOver();
          throw new Error('consumer stopping; the batch stays uncommitted for the next owner');
        }
        const delayMs = Math.min(100 * 2 ** failures, MAX_RETRY_DELAY_MS);
        logger.warn({ err: error, events: events.length, retryInMs: delayMs }, 'batch failed, retrying it');
        await sleep(delayMs);
        // Throws while the group rebalances: the partitions' next owner then takes the batch over from the committed offsets.
        await payloads[0].heartbeat().catch(async (heartbeatError: unknown) => {
          await handOver();
          throw heartbeatError;
        });
      }
    }
    for (const { batch, resolveOffset } of payloads) {
      resolveOffset(batch.lastOffset());
      metrics.lag.set({ partition: String(batch.partition) }, Number(batch.offsetLag()));
    }
    metrics.consumed.inc(events.length + poison.length);
    metrics.deadLettered.inc(poison.length);
    metrics.inserted.inc(result.inserted);
    metrics.duplicates.inc(result.duplicates);
    metrics.unmatched.inc(result.unmatched);
    metrics.signals.inc(result.signals);
    stopTimer();
  };

  const collector = new FetchCollector(processBatches);
  await deadLetters.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [config.eventsTopic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: PARTITIONS_CONSUMED_CONCURRENTLY,
    eachBatch: (payload) => collector.add(payload),
  });
  return {
    consuming: () => joined,
    ownsFirstPartition: () => joined && firstPartition,
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

/** Joins the eachBatch calls kafkajs makes for one fetch (all in the same tick) into one call of `process`. */
class FetchCollector {
  private waiting: { payload: EachBatchPayload; resolve(): void; reject(error: unknown): void }[] = [];

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
