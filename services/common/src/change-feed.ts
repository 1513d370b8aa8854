import * as grpc from '@grpc/grpc-js';
import { Client } from 'pg';
import { UnavailableError } from './errors';
import { toServiceError } from './grpc-status';
import type { Logger } from './logger';

export interface ChangeSubscriber {
  /** One committed NOTIFY on the feed's channel, with its payload. */
  changed(payload: string): void;
  /** The feed missed or may miss changes: the subscriber must drop what it cached. Called once, then forgotten. */
  lost(): void;
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/**
 * One dedicated connection LISTENs on a channel for committed changes
 * (NOTIFY is delivered on commit) and fans them out to every subscriber, the
 * Watch...Changes streams of a service. While that connection is down changes
 * go unheard, so losing it ends every subscription, refuses new ones, and
 * reconnects with exponential backoff.
 */
export class ChangeFeed {
  private readonly subscribers = new Set<ChangeSubscriber>();
  /** The connection being made or in use; any other connection's events are stale. */
  private current?: Client;
  private listening = false;
  private failures = 0;
  private retry?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly databaseUrl: string,
    /** A plain identifier: LISTEN takes no bind parameters. */
    private readonly channel: string,
    private readonly logger: Logger,
    private readonly backoff: Backoff = { initialMs: 100, maxMs: 5_000 },
  ) {}

  /** Resolves after the first attempt; when it fails, attempts go on in the background. */
  start(): Promise<void> {
    return this.connect();
  }

  subscribe(subscriber: ChangeSubscriber): () => void {
    if (!this.listening) throw new UnavailableError(`${this.channel} feed is reconnecting`);
    this.subscribers.add(subscriber);
    return () => this.subscribers.delete(subscriber);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.current;
    this.current = undefined;
    this.listening = false;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl });
    this.current = client;
    client.on('notification', ({ payload }) => {
      for (const subscriber of this.subscribers) subscriber.changed(payload ?? '');
    });
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch (error) {
      this.lose(client, error);
      return;
    }
    if (client !== this.current) return;
    this.listening = true;
    this.failures = 0;
    this.logger.info({ channel: this.channel }, 'listening for changes');
  }

  private lose(client: Client, error?: unknown): void {
    if (client !== this.current || this.closed) return;
    this.current = undefined;
    this.listening = false;
    client.end().catch(() => undefined);
    const lost = [...this.subscribers];
    this.subscribers.clear();
    for (const subscriber of lost) subscriber.lost();
    const delayMs = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** this.failures++);
    this.logger.warn({ err: error, channel: this.channel, delayMs }, 'change feed lost its connection, reconnecting');
    this.retry = setTimeout(() => void this.connect(), delayMs);
  }
}

/**
 * A server-streaming Watch...Changes handler over a feed: one message per
 * change, UNAVAILABLE when the feed is interrupted (the subscriber must then
 * drop what it cached and subscribe again). Response headers are sent once the
 * subscription is in place: from then on changes reach the stream, so the
 * subscriber may start caching.
 */
export function watchChanges<Req, Res>(feed: ChangeFeed, toResponse: (payload: string) => Res): grpc.handleServerStreamingCall<Req, Res> {
  return (call) => {
    let unsubscribe: () => void;
    try {
      unsubscribe = feed.subscribe({
        changed: (payload) => call.write(toResponse(payload)),
        lost: () => call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'Change feed interrupted' }),
      });
    } catch (error) {
      call.emit('error', toServiceError(error));
      return;
    }
    call.on('cancelled', () => unsubscribe());
    call.sendMetadata(new grpc.Metadata());
  };
}
