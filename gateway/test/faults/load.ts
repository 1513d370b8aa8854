import { WEBHOOK, sendgridEvent } from '../webhook-support';

/**
 * A steady SendGrid webhook load: batches of unique events posted at a fixed
 * rate, every attempt recorded. Like SendGrid, a batch that got no 2xx (a
 * 503, or no answer at all) is posted again, unchanged, with backoff, until
 * it is accepted (or, with maxAttempts, given up).
 */

/** One POST of a batch: the answer, or why there was none (the connection failed: not a response). */
export interface Attempt {
  phase: string;
  startedAt: number;
  ms: number;
  status?: number;
  body?: string;
  connectionError?: string;
}

export interface Batch {
  index: number;
  eventIds: string[];
  attempts: Attempt[];
}

export interface LoadOptions {
  gatewayUrl: string;
  /** Provider category of the campaign the events belong to. */
  category: string;
  /** Prefix of every sg_event_id, unique to the run. */
  prefix: string;
  batchesPerSecond: number;
  eventsPerBatch: number;
  /** Headers for a body (webhook authentication). */
  headers(body: string): Record<string, string>;
  /** Seconds since the epoch of batch 0's events; batch i's events happened i seconds later. */
  firstOccurredAt: number;
  /** No answer within this time counts as a client timeout. */
  requestTimeoutMs?: number;
  /** New batches wait while this many calls are open (the provider's connection limit). */
  maxInFlight?: number;
  /** Posts of a batch before it is given up (default: no limit). */
  maxAttempts?: number;
}

export class WebhookLoad {
  readonly batches: Batch[] = [];
  /** Batches posted maxAttempts times without a 2xx. */
  readonly givenUp = new Set<Batch>();
  /** Ticks that found maxInFlight calls open and sent no new batch. */
  skippedTicks = 0;
  /** Set by the test; every attempt is labelled with the phase it started in. */
  phase = 'start';
  private readonly bodies = new Map<number, string>();
  private readonly pending = new Set<Promise<void>>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private inFlight = 0;
  private ticker?: NodeJS.Timeout;
  private retrying = true;

  constructor(private readonly options: LoadOptions) {}

  /** Starts sending new batches at the fixed rate. */
  start(): void {
    const interval = 1000 / this.options.batchesPerSecond;
    const startedAt = Date.now();
    let ticks = 0;
    const tick = (): void => {
      ticks += 1;
      if (this.inFlight >= (this.options.maxInFlight ?? 200)) this.skippedTicks += 1;
      else this.send(this.newBatch());
      // Scheduled against the start, so a late tick does not slow the rate down.
      this.ticker = setTimeout(tick, Math.max(0, startedAt + ticks * interval - Date.now()));
    };
    tick();
  }

  /** Stops new batches; retries go on. */
  stopNewBatches(): void {
    clearTimeout(this.ticker);
    this.ticker = undefined;
  }

  /** Stops new batches and waits until every batch is accepted or given up (or timeoutMs passed); then stops retrying. */
  async drain(timeoutMs: number): Promise<void> {
    this.stopNewBatches();
    const deadline = Date.now() + timeoutMs;
    while (this.batches.some((batch) => !accepted(batch) && !this.givenUp.has(batch)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await this.stop();
  }

  /** Stops new batches and retries; resolves once the calls still open are answered. */
  async stop(): Promise<void> {
    this.stopNewBatches();
    this.retrying = false;
    this.retryTimers.forEach(clearTimeout);
    this.retryTimers.clear();
    await Promise.all(this.pending);
  }

  private newBatch(): Batch {
    const index = this.batches.length;
    const { prefix, eventsPerBatch, category, firstOccurredAt } = this.options;
    const batch: Batch = { index, eventIds: [], attempts: [] };
    const events = Array.from({ length: eventsPerBatch }, (_, i) => {
      const id = `${prefix}-${index}-${i}`;
      batch.eventIds.push(id);
      const n = index * eventsPerBatch + i;
      return sendgridEvent({
        event: n % 4 === 0 ? 'click' : 'open',
        sg_event_id: id,
        sg_message_id: `${prefix}-message-${n}`,
        email: `r${n % 997}@example.com`,
        timestamp: firstOccurredAt + index,
        category: [category],
        ...(n % 4 === 0 ? { url: `https://example.com/offer/${n % 13}` } : {}),
      });
    });
    this.batches.push(batch);
    this.bodies.set(index, JSON.stringify(events));
    return batch;
  }

  private send(batch: Batch): void {
    const done = this.post(batch).finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  private async post(batch: Batch): Promise<void> {
    const body = this.bodies.get(batch.index)!;
    const attempt: Attempt = { phase: this.phase, startedAt: Date.now(), ms: 0 };
    batch.attempts.push(attempt);
    this.inFlight += 1;
    try {
      const response = await fetch(`${this.options.gatewayUrl}${WEBHOOK}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...this.options.headers(body) },
        body,
        signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
      });
      attempt.body = await response.text();
      attempt.status = response.status;
    } catch (error) {
      attempt.connectionError = describeFailure(error);
    } finally {
      attempt.ms = Date.now() - attempt.startedAt;
      this.inFlight -= 1;
    }
    if (attempt.status !== undefined && attempt.status < 300) {
      this.bodies.delete(batch.index);
      return;
    }
    // SendGrid retries anything but a 2xx; 4xx would be a test bug, so only 503 and no answer are retried.
    if (batch.attempts.length >= (this.options.maxAttempts ?? Infinity)) {
      this.givenUp.add(batch);
      return;
    }
    if (this.retrying && (attempt.status === undefined || attempt.status === 503)) {
      const delayMs = Math.min(250 * 2 ** Math.min(batch.attempts.length - 1, 3), 2_000) + Math.random() * 250;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        this.send(batch);
      }, delayMs);
      this.retryTimers.add(timer);
    }
  }
}

export function accepted(batch: Batch): boolean {
  return batch.attempts.some((attempt) => attempt.status === 202);
}

/** The cause of a failed fetch, e.g. ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET, TimeoutError. */
export function describeFailure(error: unknown): string {
  // Duck-typed: fetch's errors come from another realm than jest's Error.
  const failure = error as { name?: string; message?: string; cause?: { code?: string; message?: string } } | undefined;
  if (failure?.name === 'TimeoutError' || failure?.name === 'AbortError') return 'TimeoutError';
  return failure?.cause?.code ?? failure?.cause?.message ?? failure?.message ?? String(error);
}
