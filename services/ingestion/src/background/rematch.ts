import type { Logger } from '@mail/common';
import type { eventsV1 } from '@mail/proto';
import { fromUnmatched } from '../domain/unmatched';
import type { CategoryMatch } from '../grpc/categories';
import { ingestionMetrics } from '../metrics';
import type { UnmatchedEvents } from '../store/unmatched';

type EngagementEvent = eventsV1.EngagementEvent;

/** Unmatched events read and republished at a time. */
const PAGE_SIZE = 2_000;
/** Categories per read: each is a literal of the query. */
const CATEGORY_CHUNK = 1_000;

export interface RematchDependencies {
  unmatched: UnmatchedEvents;
  resolve(categoryIds: Iterable<string>): Promise<Map<string, CategoryMatch>>;
  /** Writes events to the events topic as the webhook does; resolves once Kafka has acknowledged them. */
  publish(events: EngagementEvent[]): Promise<void>;
  logger: Logger;
}

export interface RematchScope {
  /** Only these categories (else every category the unmatched events name). */
  categories?: string[];
  /** Only events stored unmatched since then. */
  since?: Date;
}

/**
 * Sends the unmatched events that name a category a campaign now has back
 * through the events topic, keyed by address like the webhook's, so the
 * consumer that owns the address writes them as it writes every event (the
 * stored-id check, suppression signals, unsettled days): repeating a sweep
 * never stores an event twice. Events re-matched before, or that a campaign
 * took already in any workspace, are left out: an event is matched once, to
 * the first campaign that took its category, and one erased with its
 * workspace does not come back. unmatched_events keeps its rows: it records
 * what arrived without a campaign. Returns how many events were republished.
 */
export async function rematchUnmatched(deps: RematchDependencies, scope: RematchScope): Promise<number> {
  // Most changes are of categories no unmatched event names: one read, and no campaign lookup.
  const candidates = await deps.unmatched.categories({ among: scope.categories, since: scope.since });
  const matched = [...(await deps.resolve(candidates)).keys()];
  let republished = 0;
  for (let start = 0; start < matched.length; start += CATEGORY_CHUNK) {
    const categories = matched.slice(start, start + CATEGORY_CHUNK);
    for (let after = ''; ;) {
      const page = await deps.unmatched.naming(categories, { since: scope.since, after, limit: PAGE_SIZE });
      if (page.length === 0) break;
      after = page[page.length - 1].provider_event_id;
      const events = page.flatMap((row) => {
        const event = fromUnmatched(row);
        if (!event)
          deps.logger.warn({ providerEventId: row.provider_event_id }, 'unmatched event without SendGrid JSON cannot be re-matched');
        return event ? [event] : [];
      });
      const times = page.map((row) => row.occurred_at);
      const matchedAlready = await deps.unmatched.matchedIds(
        events.map((event) => event.providerEventId),
        Math.min(...times),
        Math.max(...times),
      );
      const fresh = events.filter((event) => !matchedAlready.has(event.providerEventId));
      await deps.publish(fresh);
      // After Kafka has them: a crash in between only repeats the publishing, which the consumer deduplicates.
      await deps.unmatched.markRematched(fresh.map((event) => event.providerEventId));
      ingestionMetrics.rematched.inc(fresh.length);
      republished += fresh.length;
      if (page.length < PAGE_SIZE) break;
    }
  }
  return republished;
}

export interface RematcherOptions {
  /** Whether this process sweeps (one member of the consumer group at a time). */
  mayRun(): boolean;
  /** The categories of changes are swept this long after the first of them (one sweep for a burst of changes). */
  delayMs: number;
  /**
   * And once more this long after it: an event whose category was looked up
   * just before the change may be stored unmatched after the first sweep.
   */
  followUpMs: number;
}

/** Categories gathered until `delayMs` after the first one, then handed to `flush` together. */
class CategoryBatch {
  private readonly categories = new Set<string>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly delayMs: number,
    private readonly flush: (categories: string[]) => void,
  ) {}

  add(categories: string[]): void {
    for (const category of categories) this.categories.add(category);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      const due = [...this.categories];
      this.categories.clear();
      this.flush(due);
    }, this.delayMs).unref();
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.categories.clear();
  }
}

/**
 * Re-matches unmatched events when campaigns take their categories, one
 * sweep at a time: soon after the changes the category stream reports, and
 * whenever sweepRecent is called (ingestion's maintenance pass). Where this
 * process may have missed changes, it owes a sweep of every unmatched event:
 * from its start, and again whenever sweepAllSoon reports a gap (the change
 * stream broke, or this process took over the sweeps from another). The owed
 * sweep runs once this process may sweep, and until one has succeeded.
 */
export class UnmatchedRematcher {
  private readonly batches: CategoryBatch[];
  private sweeping: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Bumped by every gap: a full sweep settles the gaps reported before it started. */
  private gaps = 1;
  private gapsSwept = 0;
  private fullSweepTimer?: NodeJS.Timeout;

  constructor(
    private readonly deps: RematchDependencies,
    private readonly options: RematcherOptions,
  ) {
    const sweepIfMine = (categories: string[]) => {
      if (!this.options.mayRun()) return;
      void this.sweep({ categories }).then((republished) => {
        // Failed (ClickHouse or Kafka down): tried again with the next follow-up.
        if (republished === undefined && !this.closed) followUp.add(categories);
      });
    };
    const followUp = new CategoryBatch(options.followUpMs, sweepIfMine);
    this.batches = [new CategoryBatch(options.delayMs, sweepIfMine), followUp];
  }

  categoriesChanged(categories: string[]): void {
    if (this.closed || categories.length === 0) return;
    for (const batch of this.batches) batch.add(categories);
  }

  /** Changes may have been missed: every unmatched event is swept delayMs from now, or once this process may sweep. */
  sweepAllSoon(): void {
    if (this.closed) return;
    this.gaps += 1;
    this.sweepAllAfter(this.options.delayMs);
  }

  /**
   * The categories of the events stored unmatched since `since`, or of all
   * of them while a full sweep is owed (or without `since`). Resolves to
   * whether it swept: false when it is another process's turn or the sweep failed.
   */
  async sweepRecent(since?: Date): Promise<boolean> {
    if (!this.options.mayRun()) return false;
    const gaps = this.gaps;
    const owed = gaps > this.gapsSwept;
    const swept = (await this.sweep({ since: owed ? undefined : since })) !== undefined;
    if (swept && owed) this.gapsSwept = Math.max(this.gapsSwept, gaps);
    return swept;
  }

  /** Drops the sweeps not started yet and waits for the one in progress. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.fullSweepTimer);
    for (const batch of this.batches) batch.clear();
    await this.sweeping.catch(() => undefined);
  }

  /** A failed full sweep is tried again followUpMs later; one owed while it is another process's turn waits for the next gap or pass. */
  private sweepAllAfter(delayMs: number): void {
    this.fullSweepTimer ??= setTimeout(() => {
      this.fullSweepTimer = undefined;
      if (this.closed || !this.options.mayRun()) return;
      void this.sweepRecent().then((swept) => {
        if (!swept) this.sweepAllAfter(this.options.followUpMs);
      });
    }, delayMs).unref();
  }

  /** The number of events republished, undefined when the sweep failed (it is logged). */
  private sweep(scope: RematchScope): Promise<number | undefined> {
    const run = this.sweeping
      .catch(() => undefined)
      .then(async () => {
        if (this.closed) return 0;
        const republished = await rematchUnmatched(this.deps, scope);
        if (republished > 0)
          this.deps.logger.info(
            { republished, categories: scope.categories },
            're-matched unmatched events to campaigns that took their categories',
          );
        return republished;
      });
    this.sweeping = run;
    return run.catch((error: unknown) => {
      this.deps.logger.warn({ err: error, categories: scope.categories }, 're-matching unmatched events failed; it is tried again later');
      return undefined;
    });
  }
}
