import { setTimeout as sleep } from 'node:timers/promises';
import type { SendingStore } from '../store/sending';

/**
 * SEND_RATE_PER_SECOND for one transport across every replica: tokens come
 * from the shared bucket in Postgres (SendingStore.takeTokens), a tenth of a
 * second's worth at a time, and are spent here one per message.
 */
export class RateLimiter {
  private tokens = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: SendingStore,
    private readonly transport: string,
    private readonly ratePerSecond: number,
  ) {}

  /** Resolves when one message may go. */
  take(): Promise<void> {
    if (this.ratePerSecond <= 0) return Promise.resolve();
    const turn = this.queue.then(() => this.takeOne());
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private async takeOne(): Promise<void> {
    const chunk = Math.max(1, Math.ceil(this.ratePerSecond / 10));
    while (this.tokens === 0) {
      this.tokens = await this.store.takeTokens(this.transport, this.ratePerSecond, chunk);
      if (this.tokens === 0) await sleep(Math.max(10, Math.ceil(1000 / this.ratePerSecond)));
    }
    this.tokens -= 1;
  }
}
