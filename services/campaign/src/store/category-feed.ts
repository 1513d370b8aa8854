import { Client } from 'pg';
import { UnavailableError, type Logger } from '@mail/common';
import { CATEGORY_CHANNEL } from './campaigns';

export interface CategorySubscriber {
  changed(providerCategoryIds: string[]): void;
  /** The feed missed or may miss changes: the subscriber must drop what it cached. Called once, then forgotten. */
  lost(): void;
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/**
 * One dedicated connection LISTENs for committed category changes and fans
 * them out to every subscriber (the WatchCategoryChanges streams). While that
 * connection is down changes go unheard, so losing it ends every
 * subscription, refuses new ones, and reconnects with exponential backoff.
 */
export class CategoryFeed {
  private readonly subscribers = new Set<CategorySubscriber>();
  /** The connection being made or in use; any other connection's events are stale. */
  private current?: Client;
  private listening = false;
  private failures = 0;
  private retry?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly logger: Logger,
    private readonly backoff: Backoff = { initialMs: 100, maxMs: 5_000 },
  ) {}

  /** Resolves after the first attempt; when it fails, attempts go on in the background. */
  start(): Promise<void> {
    return this.connect();
  }

  subscribe(subscriber: CategorySubscriber): () => void {
    if (!this.listening) throw new UnavailableError('category change feed is reconnecting');
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
      if (payload) for (const subscriber of this.subscribers) subscriber.changed([payload]);
    });
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CATEGORY_CHANNEL}`);
    } catch (error) {
      this.lose(client, error);
      return;
    }
    if (client !== this.current) return;
    this.listening = true;
    this.failures = 0;
    this.logger.info('listening for campaign category changes');
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
    this.logger.warn({ err: error, delayMs }, 'category change feed lost its connection, reconnecting');
    this.retry = setTimeout(() => void this.connect(), delayMs);
  }
}
