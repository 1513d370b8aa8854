import type { Admin, IHeaders, Kafka, Message, Producer } from 'kafkajs';
import {
  EVENT_BATCH_SCHEMA,
  RECORD_SCHEMA_HEADER,
  createIdempotentProducer,
  partitionOfKey,
  prometheus,
  readPartitionCount,
  registry,
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
 * Upper bound of one partition's record: the broker refuses a record above
 * message.max.bytes (1 MiB by default).
 */
const MAX_RECORD_BYTES = 900_000;

/**
 * Upper bound of one produce request, whatever the partition count. A
 * request carries up to a full record for each partition, so a slow round
 * trip (a broker lost, a busy host) still moves many calls' events.
 */
const MAX_REQUEST_BYTES = 8 * MAX_RECORD_BYTES;

/**
 * The largest event (eventBytes) the publisher takes: one that fills a record
 * on its own. The broker would refuse a larger one however often it is retried.
 */
export const MAX_EVENT_BYTES = MAX_RECORD_BYTES;

const sendDuration = new prometheus.Histogram({
  name: 'webhook_kafka_send_duration_seconds',
  help: 'Time until Kafka acknowledged every record of one produce request of the webhook (failed sends included)',
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

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

/** What one produce request carries: one record per partition, its events in queue order. */
interface RequestLoad {
  chunks: Chunk[];
  records: Map<number, { values: Buffer[]; bytes: number; spans: Set<Span> }>;
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
 * A request takes queued calls in order while each partition's record stays
 * within MAX_RECORD_BYTES.
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
        const sender = this.connectedSender();
        let current: Sender;
        try {
          current = await this.withCurrentPartitions(sender);
        } catch (error) {
          this.logger.warn({ err: error }, 'connecting to kafka failed');
          for (const { request } of [...this.queue]) this.fail(request, new PublishError('Kafka is unavailable'));
          this.retire(sender);
          continue;
        }
        const load = this.takeRequestLoad(current.partitionCount);
        if (load.chunks.length === 0) continue;
        const stopTimer = sendDuration.startTimer();
        try {
          // The records name their calls' spans; the kafkajs instrumentation would replace them with one of its own.
          await untraced(() => sendToPartitions(current.producer, this.topic, recordsOf(load)));
          for (const { request } of load.chunks) {
            request.chunksLeft -= 1;
            if (request.chunksLeft === 0) this.succeed(request);
          }
        } catch (error) {
          this.logger.warn(
            { err: error, events: load.chunks.reduce((n, chunk) => n + chunk.events.length, 0) },
            'publishing events to kafka failed',
          );
          for (const { request } of load.chunks) this.fail(request, new PublishError('Kafka is unavailable'));
          this.retire(sender);
        } finally {
          stopTimer();
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Queued chunks in order (at least one while any is queued) while each
   * partition's record stays within MAX_RECORD_BYTES and the request within
   * MAX_REQUEST_BYTES. The partition of each event is the one Kafka's default
   * partitioner gives its address, as it did when every event was a record
   * keyed by it.
   */
  private takeRequestLoad(partitionCount: number): RequestLoad {
    const load: RequestLoad = { chunks: [], records: new Map() };
    let requestBytes = 0;
    while (this.queue.length > 0) {
      const chunk = this.queue[0];
      const partitions = chunk.events.map((event) => partitionOfKey(event.key, partitionCount));
      if (load.chunks.length > 0 && !fits(load, chunk, partitions, requestBytes)) break;
      this.queue.shift();
      load.chunks.push(chunk);
      requestBytes += chunk.bytes;
      chunk.events.forEach((event, i) => {
        const record = load.records.get(partitions[i]) ?? { values: [], bytes: 0, spans: new Set<Span>() };
        record.values.push(event.value);
        record.bytes += eventBytes(event);
        record.spans.add(chunk.request.span);
        load.records.set(partitions[i], record);
      });
    }
    return load;
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

/** Whether the chunk, its events on those partitions, still fits the load. */
function fits(load: RequestLoad, chunk: Chunk, partitions: number[], requestBytes: number): boolean {
  if (requestBytes + chunk.bytes > MAX_REQUEST_BYTES) return false;
  const added = new Map<number, number>();
  chunk.events.forEach((event, i) => added.set(partitions[i], (added.get(partitions[i]) ?? 0) + eventBytes(event)));
  return [...added].every(([partition, bytes]) => (load.records.get(partition)?.bytes ?? 0) + bytes <= MAX_RECORD_BYTES);
}

function recordsOf(load: RequestLoad): Message[] {
  return [...load.records].map(([partition, { values, spans }]) => ({
    partition,
    headers: { ...BATCH_HEADERS, ...traceHeaders([...spans]) },
    value: Buffer.concat(values),
  }));
}

function chunksOf(events: KeyedEvent[]): { events: KeyedEvent[]; bytes: number }[] {
  const chunks: { events: KeyedEvent[]; bytes: number }[] = [];
  let current: { events: KeyedEvent[]; bytes: number } = { events: [], bytes: 0 };
  for (const event of events) {
    const bytes = eventBytes(event);
    if (current.events.length > 0 && current.bytes + bytes > MAX_RECORD_BYTES) {
      chunks.push(current);
      current = { events: [], bytes: 0 };
    }
    current.events.push(event);
    current.bytes += bytes;
  }
  chunks.push(current);
  return chunks;
}
