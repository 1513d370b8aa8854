import type { Kafka, Message, Producer } from 'kafkajs';
import { createIdempotentProducer, type Logger } from '@mail/common';

/** Kafka could not take the events in time; the webhook answers 503 so the provider retries. */
export class PublishError extends Error {}

/**
 * Upper bound of one produce request's payload. The broker refuses a
 * partition's record batch above message.max.bytes (1 MiB by default), and
 * kafkajs groups a request's messages per partition in quadratic time, so
 * requests stay below both limits whatever the key distribution.
 */
const MAX_REQUEST_BYTES = 900_000;

/**
 * The largest record the publisher takes: one that fills a produce request on
 * its own. The broker would refuse a larger one however often it is retried.
 */
export const MAX_MESSAGE_BYTES = MAX_REQUEST_BYTES;

/** What a record counts towards MAX_REQUEST_BYTES. */
export function messageBytes(message: Message): number {
  return (message.value as Buffer).length + Buffer.byteLength(message.key as Buffer | string);
}

interface Chunk {
  request: PendingRequest;
  messages: Message[];
  bytes: number;
}

interface PendingRequest {
  chunksLeft: number;
  done: boolean;
  timer: NodeJS.Timeout;
  resolve(): void;
  reject(error: Error): void;
}

/**
 * The webhook's one long-lived idempotent producer (acks from all in-sync
 * replicas). Requests that arrive while a produce request is in flight are
 * sent together in the next one, so concurrent webhook calls share round
 * trips (the idempotent producer allows one request in flight anyway).
 * `publish` resolves only once every message is acknowledged; it rejects
 * when that does not happen within timeoutMs, and events that had not left
 * by then are not sent at all.
 */
export class EventPublisher {
  private readonly queue: Chunk[] = [];
  private producer?: Promise<Producer>;
  private pumping = false;
  private closed = false;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  publish(messages: Message[]): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    if (this.closed) return Promise.reject(new PublishError('The event publisher is closed'));
    return new Promise<void>((resolve, reject) => {
      const request: PendingRequest = {
        chunksLeft: 0,
        done: false,
        resolve,
        reject,
        timer: setTimeout(
          () => this.fail(request, new PublishError(`Kafka did not acknowledge the events within ${this.timeoutMs} ms`)),
          this.timeoutMs,
        ),
      };
      for (const chunk of chunksOf(messages)) {
        request.chunksLeft += 1;
        this.queue.push({ request, ...chunk });
      }
      void this.pump();
    });
  }

  /** Connects at start-up so the first webhook call does not pay for it; a failure is retried on use. */
  async connect(): Promise<void> {
    await this.connectedProducer();
  }

  /**
   * Disconnects. Called after HTTP drained: every webhook call has had its
   * answer, so whatever may still be in flight belongs to calls that already
   * got a 503 and will be retried by the provider.
   */
  async close(): Promise<void> {
    this.closed = true;
    const producer = this.producer;
    this.producer = undefined;
    await producer?.then((p) => p.disconnect()).catch(() => undefined);
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const chunks = this.takeRequestLoad();
        const producer = this.connectedProducer();
        try {
          await (await producer).send({ topic: this.topic, acks: -1, messages: chunks.flatMap((chunk) => chunk.messages) });
          for (const { request } of chunks) {
            request.chunksLeft -= 1;
            if (request.chunksLeft === 0) this.succeed(request);
          }
        } catch (error) {
          this.logger.warn({ err: error, events: chunks.reduce((n, chunk) => n + chunk.messages.length, 0) }, 'publishing events to kafka failed');
          for (const { request } of chunks) this.fail(request, new PublishError('Kafka is unavailable'));
          this.retire(producer);
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

  private connectedProducer(): Promise<Producer> {
    if (!this.producer) {
      // Its retries are unlimited; callers stop waiting at timeoutMs.
      const producer = createIdempotentProducer(this.kafka);
      const connected = producer.connect().then(() => producer);
      connected.catch(() => this.retire(connected));
      this.producer = connected;
    }
    return this.producer;
  }

  /**
   * After a failed send the broker may hold part of it, and a later send that
   * reused its sequence numbers could be taken for a duplicate and silently
   * dropped: the next send uses a new producer (a new producer id) instead.
   */
  private retire(producer: Promise<Producer>): void {
    if (this.producer === producer) this.producer = undefined;
    void producer.then((p) => p.disconnect()).catch(() => undefined);
  }

  private succeed(request: PendingRequest): void {
    if (request.done) return;
    request.done = true;
    clearTimeout(request.timer);
    request.resolve();
  }

  /** Rejects the call and takes its chunks that have not left yet out of the queue. */
  private fail(request: PendingRequest, error: Error): void {
    if (request.done) return;
    request.done = true;
    clearTimeout(request.timer);
    const kept = this.queue.filter((chunk) => chunk.request !== request);
    this.queue.splice(0, this.queue.length, ...kept);
    request.reject(error);
  }
}

function chunksOf(messages: Message[]): { messages: Message[]; bytes: number }[] {
  const chunks: { messages: Message[]; bytes: number }[] = [];
  let current: { messages: Message[]; bytes: number } = { messages: [], bytes: 0 };
  for (const message of messages) {
    const bytes = messageBytes(message);
    if (current.messages.length > 0 && current.bytes + bytes > MAX_REQUEST_BYTES) {
      chunks.push(current);
      current = { messages: [], bytes: 0 };
    }
    current.messages.push(message);
    current.bytes += bytes;
  }
  chunks.push(current);
  return chunks;
}
