import type { Admin, IHeaders, Kafka, Message, Producer } from 'kafkajs';
import {
  EVENT_BATCH_SCHEMA,
  RECORD_SCHEMA_HEADER,
  createIdempotentProducer,
  partitionOfKey,
  readPartitionCount,
  sendToPartitions,
  currentTraceContext,
  endSpan,
  startPublishSpan,
  traceHeaders,
  untraced,
  type Logger,
  type Span,
} from '@mail/common';

/** Kafka could not take the events in time; the webhook answers 503 so the provider retries. */
export class PublishError extends Error {}

/**
 * Upper bound of one produce request's events. The broker refuses a
 * partition's record above message.max.bytes (1 MiB by default); a record
 * holds some of one request's events, so none reaches that limit whatever
 * the key distribution.
 */
const MAX_REQUEST_BYTES = 900_000;

/**
 * The largest event (eventBytes) the publisher takes: one that fills a produce
 * request on its own. The broker would refuse a larger one however often it is retried.
 */
export const MAX_EVENT_BYTES = MAX_REQUEST_BYTES;

const BATCH_HEADERS: IHeaders = { [RECORD_SCHEMA_HEADER]: EVENT_BATCH_SCHEMA };

/** Kafka's partition count is re-read this often (as kafkajs refreshes its metadata), and with every new producer. */
const PARTITIONS_MAX_AGE_MS = 300_000;

/** One kept event: its recipient address, which picks the partition, and its bytes as a one-event EngagementEventBatch. */
export interface KeyedEvent {
  key: string;
  value: Buffer;
}

/** What an event adds to its record. */
export const eventBytes = (event: KeyedEvent): number => event.value.length;

interface Chunk {
  request: PendingRequest;
  events: KeyedEvent[];
  bytes: number;
}

interface Sender {
  producer: Producer;
  partitionCount: number;
  partitionsReadAt: number;
}

interface PendingRequest {
  chunksLeft: number;
  done: boolean;
  /** The call's publish span (a no-op while tracing is off): the records carrying its events name it in their headers. */
  span: Span;
  timer: NodeJS.Timeout;
  resolve(): void;
  reject(error: Error): void;
}

/**
 * The webhook's one long-lived idempotent producer (acks from all in-sync
 * replicas). Requests that arrive while a produce request is in flight are
 * sent together in the next one, so concurrent webhook calls share round
 * trips (the idempotent producer allows one request in flight anyway), and
 * each produce request carries one record per partition, an
 * EngagementEventBatch of its events in the order they came: Kafka and both
 * ends pay their per-record costs once per partition, not once per event.
 * `publish` resolves only once every event is acknowledged; it rejects
 * when that does not happen within timeoutMs, and events that had not left
 * by then are not sent at all. A record's trace headers name the publish
 * span of every call whose events it carries (@mail/common, trace-context).
 */
export class EventPublisher {
  private readonly queue: Chunk[] = [];
  private sender?: Promise<Sender>;
  private pumping = false;
  private closed = false;

  constructor(
    private readonly kafka: Kafka,
    /** Reads the topic's partitions. */
    private readonly admin: Admin,
    private readonly topic: string,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  publish(events: KeyedEvent[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    if (this.closed) return Promise.reject(new PublishError('The event publisher is closed'));
    return new Promise<void>((resolve, reject) => {
      const request: PendingRequest = {
        chunksLeft: 0,
        done: false,
        span: startPublishSpan(currentTraceContext(), this.topic, events.length),
        resolve,
        reject,
        timer: setTimeout(
          () => this.fail(request, new PublishError(`Kafka did not acknowledge the events within ${this.timeoutMs} ms`)),
          this.timeoutMs,
        ),
      };
      for (const chunk of chunksOf(events)) {
        request.chunksLeft += 1;
        this.queue.push({ request, ...chunk });
      }
      void this.pump();
    });
  }

  /** Connects at start-up so the first webhook call does not pay for it; a failure is retried on use. */
  async connect(): Promise<void> {
    await this.connectedSender();
  }

  /**
   * Disconnects. Called after HTTP drained: every webhook call has had its
   * answer, so whatever may still be in flight belongs to calls that already
   * got a 503 and will be retried by the provider.
   */
  async close(): Promise<void> {
    this.closed = true;
    const sender = this.sender;
    this.sender = undefined;
    await sender?.then(({ producer }) => producer.disconnect()).catch(() => undefined);
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const chunks = this.takeRequestLoad();
        const sender = this.connectedSender();
        try {
          const current = await this.withCurrentPartitions(sender);
          const messages = this.records(chunks, current);
          // The records name their calls' spans; the kafkajs instrumentation would replace them with one of its own.
          await untraced(() => sendToPartitions(current.producer, this.topic, messages));
          for (const { request } of chunks) {
            request.chunksLeft -= 1;
            if (request.chunksLeft === 0) this.succeed(request);
          }
        } catch (error) {
          this.logger.warn(
            { err: error, events: chunks.reduce((n, chunk) => n + chunk.events.length, 0) },
            'publishing events to kafka failed',
          );
          for (const { request } of chunks) this.fail(request, new PublishError('Kafka is unavailable'));
          this.retire(sender);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Queued chunks up to MAX_REQUEST_BYTES (at least one). */
  private takeRequestLoad(): Chunk[] {
    let bytes = 0;
    let count = 0;
    while (count < this.queue.length && (count === 0 || bytes + this.queue[count].bytes <= MAX_REQUEST_BYTES)) {
      bytes += this.queue[count].bytes;
      count += 1;
    }
    return this.queue.splice(0, count);
  }

  /**
   * One record per partition, its events in queue order. The partition of
   * each event is the one Kafka's default partitioner gives its address, as
   * it did when every event was a record keyed by it.
   */
  private records(chunks: Chunk[], sender: Sender): Message[] {
    const byPartition = new Map<number, { values: Buffer[]; spans: Set<Span> }>();
    for (const chunk of chunks) {
      for (const event of chunk.events) {
        const partition = partitionOfKey(event.key, sender.partitionCount);
        const record = byPartition.get(partition) ?? { values: [], spans: new Set<Span>() };
        record.values.push(event.value);
        record.spans.add(chunk.request.span);
        byPartition.set(partition, record);
      }
    }
    return [...byPartition].map(([partition, { values, spans }]) => ({
      partition,
      headers: { ...BATCH_HEADERS, ...traceHeaders([...spans]) },
      value: Buffer.concat(values),
    }));
  }

  private connectedSender(): Promise<Sender> {
    if (!this.sender) {
      // Its retries are unlimited; callers stop waiting at timeoutMs.
      const producer = createIdempotentProducer(this.kafka);
      const connected = Promise.all([producer.connect(), this.readPartitionCount()]).then(([, partitionCount]) => ({
        producer,
        partitionCount,
        partitionsReadAt: Date.now(),
      }));
      // A failed start leaves no sender whose producer retire() could reach.
      connected.catch(() => {
        if (this.sender === connected) this.sender = undefined;
        void producer.disconnect().catch(() => undefined);
      });
      this.sender = connected;
    }
    return this.sender;
  }

  /** The sender, its partition count re-read first when it is older than PARTITIONS_MAX_AGE_MS. */
  private async withCurrentPartitions(sender: Promise<Sender>): Promise<Sender> {
    const current = await sender;
    if (Date.now() - current.partitionsReadAt > PARTITIONS_MAX_AGE_MS) {
      current.partitionCount = await this.readPartitionCount();
      current.partitionsReadAt = Date.now();
    }
    return current;
  }

  private async readPartitionCount(): Promise<number> {
    await this.admin.connect();
    return readPartitionCount(this.admin, this.topic);
  }

  /**
   * After a failed send the broker may hold part of it, and a later send that
   * reused its sequence numbers could be taken for a duplicate and silently
   * dropped: the next send uses a new producer (a new producer id) instead.
   */
  private retire(sender: Promise<Sender>): void {
    if (this.sender === sender) this.sender = undefined;
    void sender.then(({ producer }) => producer.disconnect()).catch(() => undefined);
  }

  private succeed(request: PendingRequest): void {
    if (request.done) return;
    request.done = true;
    clearTimeout(request.timer);
    endSpan(request.span);
    request.resolve();
  }

  /** Rejects the call and takes its chunks that have not left yet out of the queue. */
  private fail(request: PendingRequest, error: Error): void {
    if (request.done) return;
    request.done = true;
    clearTimeout(request.timer);
    endSpan(request.span, error);
    const kept = this.queue.filter((chunk) => chunk.request !== request);
    this.queue.splice(0, this.queue.length, ...kept);
    request.reject(error);
  }
}

function chunksOf(events: KeyedEvent[]): { events: KeyedEvent[]; bytes: number }[] {
  const chunks: { events: KeyedEvent[]; bytes: number }[] = [];
  let current: { events: KeyedEvent[]; bytes: number } = { events: [], bytes: 0 };
  for (const event of events) {
    const bytes = eventBytes(event);
    if (current.events.length > 0 && current.bytes + bytes > MAX_REQUEST_BYTES) {
      chunks.push(current);
      current = { events: [], bytes: 0 };
    }
    current.events.push(event);
    current.bytes += bytes;
  }
  chunks.push(current);
  return chunks;
}
