import { ChangeWatch, call, containsNul, type Logger } from '@mail/common';
import type { campaignV1 } from '@mail/proto';

export type CategoryMatch = campaignV1.CategoryMatch;

/** Ids per ResolveCategories call. */
const LOOKUP_CHUNK = 1_000;
/** Unknown categories are cached too; the cache starts over rather than growing without bound. */
const MAX_CACHED = 100_000;

interface Entry {
  match: CategoryMatch | undefined;
  expiresAt: number;
}

/**
 * Provider category id → campaign, through the campaign service's
 * ResolveCategories, cached in memory. The cache is trusted only while the
 * WatchCategoryChanges stream is live (the service sends response headers
 * once changes reach the stream): a change drops its ids, a broken stream
 * drops everything and is re-subscribed with backoff, and a TTL backs it all.
 */
export class CategoryResolver {
  private readonly cache = new Map<string, Entry>();
  private readonly watch: ChangeWatch<campaignV1.WatchCategoryChangesResponse>;
  /** Bumped by every invalidation: a lookup that overlapped one is used but not cached. */
  private generation = 0;
  private readonly changeListeners: ((providerCategoryIds: string[]) => void)[] = [];
  private readonly gapListeners: (() => void)[] = [];

  constructor(
    private readonly client: campaignV1.CampaignServiceClient,
    private readonly ttlMs: number,
    logger: Logger,
  ) {
    const changed = ({ providerCategoryIds }: campaignV1.WatchCategoryChangesResponse): void => {
      this.generation += 1;
      for (const id of providerCategoryIds) this.cache.delete(id);
      for (const listener of this.changeListeners) listener(providerCategoryIds);
    };
    const reset = (): void => {
      this.generation += 1;
      this.cache.clear();
    };
    const live = (): void => {
      for (const listener of this.gapListeners) listener();
    };
    this.watch = new ChangeWatch('category changes', () => client.watchCategoryChanges({}), { changed, reset, live }, logger);
  }

  /** Called with the categories of each change the stream reports, after the cache dropped them. */
  onChange(listener: (providerCategoryIds: string[]) => void): void {
    this.changeListeners.push(listener);
  }

  /** Called whenever the change stream (re)starts: changes made before may have gone unreported. */
  onChangesMissed(listener: () => void): void {
    this.gapListeners.push(listener);
  }

  start(): void {
    this.watch.start();
  }

  /**
   * The campaign of each category that names one; unknown categories are
   * absent. A category holding NUL names none (a campaign's is PostgreSQL
   * text, which cannot hold it) and is not looked up: the campaign service's
   * query would fail on it, and the batch with it.
   */
  async resolve(categoryIds: Iterable<string>): Promise<Map<string, CategoryMatch>> {
    const now = Date.now();
    const found = new Map<string, CategoryMatch>();
    const missing: string[] = [];
    for (const id of new Set(categoryIds)) {
      if (containsNul(id)) continue;
      const entry = this.cache.get(id);
      if (!entry || entry.expiresAt <= now) missing.push(id);
      else if (entry.match) found.set(id, entry.match);
    }
    const generation = this.generation;
    const cacheable = this.watch.live;
    for (let start = 0; start < missing.length; start += LOOKUP_CHUNK) {
      const ids = missing.slice(start, start + LOOKUP_CHUNK);
      const { matches } = await call(this.client.resolveCategories.bind(this.client), { providerCategoryIds: ids });
      const byId = new Map(matches.map((match) => [match.providerCategoryId, match]));
      for (const id of ids) {
        const match = byId.get(id);
        if (match) found.set(id, match);
        if (cacheable && this.watch.live && generation === this.generation) this.remember(id, { match, expiresAt: now + this.ttlMs });
      }
    }
    return found;
  }

  close(): void {
    this.watch.close();
    this.client.close();
  }

  private remember(id: string, entry: Entry): void {
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(id, entry);
  }
}
