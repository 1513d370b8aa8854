import type * as grpc from '@grpc/grpc-js';
import type { Logger } from './logger';

export interface ChangeWatchHandlers<Res> {
  /** A change the service announced: drop what it makes stale. */
  changed(change: Res): void;
  /** Changes may have been missed (the stream ended, or has just started): drop everything cached. */
  reset(): void;
  /** The stream has (re)started: every change from now on reaches it, those before may not have. */
  live?(): void;
}

/**
 * The client side of a service's Watch...Changes stream (see watchChanges),
 * for a cache that is trusted only while the stream is live: live from the
 * response headers (changes reach the stream from then on) until the stream
 * ends, when it is opened again with backoff.
 */
export class ChangeWatch<Res> {
  private isLive = false;
  private stream?: grpc.ClientReadableStream<Res>;
  private resubscribeTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly name: string,
    private readonly open: () => grpc.ClientReadableStream<Res>,
    private readonly handlers: ChangeWatchHandlers<Res>,
    private readonly logger: Logger,
  ) {}

  get live(): boolean {
    return this.isLive;
  }

  start(): void {
    this.subscribe(0);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.resubscribeTimer);
    this.stream?.cancel();
  }

  private subscribe(failures: number): void {
    const stream = this.open();
    this.stream = stream;
    stream.on('metadata', () => {
      this.handlers.reset();
      this.isLive = true;
      failures = 0;
      this.handlers.live?.();
    });
    stream.on('data', (change: Res) => this.handlers.changed(change));
    // 'error' also comes with 'status'; handled there, listened to so it is not thrown.
    stream.on('error', () => undefined);
    stream.on('status', (status: grpc.StatusObject) => {
      this.isLive = false;
      this.handlers.reset();
      if (this.closed) return;
      const delayMs = Math.min(100 * 2 ** failures, 5_000);
      this.logger.warn(
        { watch: this.name, code: status.code, details: status.details, retryInMs: delayMs },
        'change stream ended, cache dropped',
      );
      // A reconnect alone keeps no process alive.
      this.resubscribeTimer = setTimeout(() => this.subscribe(failures + 1), delayMs).unref();
    });
  }
}
