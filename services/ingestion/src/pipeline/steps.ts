import type { eventsV1 } from '@mail/proto';
import type { CategoryMatch } from '../grpc/categories';
import { eventKey } from '../domain/events';
import { campaignOf, toRows } from '../domain/rows';
import type { EngagementEventRow, EventWriter, SuppressionSignalRow, UnmatchedEventRow } from '../store/events';
import type { SuppressionStateStore } from '../store/suppressions';
import { EventsWriteError, workspaceDays, type WorkspaceDay } from '../store/unsettled';

type EngagementEvent = eventsV1.EngagementEvent;

export interface StoredEvents {
  inserted: number;
  /** Repeated within the batch, or already stored. */
  duplicates: number;
  unmatched: number;
  signals: number;
  /** The (workspace, day) pairs of the events written. */
  written: WorkspaceDay[];
}

export interface StoreDependencies {
  resolve(categoryIds: Iterable<string>): Promise<Map<string, CategoryMatch>>;
  store: EventWriter;
  suppressions: SuppressionStateStore;
}

/**
 * Writes one batch of decoded events. The order makes a retry of the whole
 * batch, or its redelivery after a crash, safe: suppression signals first
 * (collapsed by their table's key if written twice) and the state of their
 * addresses recomputed from them (the same rows again), then only the events
 * engagement_events does not hold yet, then the unmatched ones (collapsed by
 * their key). A throw leaves the batch to be retried; nothing is skipped.
 */
export async function storeEvents(events: EngagementEvent[], deps: StoreDependencies): Promise<StoredEvents> {
  const unique = [...new Map(events.map((event) => [eventKey(event), event])).values()];
  let duplicates = events.length - unique.length;
  const matches = await deps.resolve(unique.flatMap((event) => event.categories));
  const ingestedAt = Math.floor(Date.now() / 1000);

  const signals: SuppressionSignalRow[] = [];
  const rows: EngagementEventRow[] = [];
  const unmatched: UnmatchedEventRow[] = [];
  for (const event of unique) {
    const written = toRows(event, campaignOf(event, matches), ingestedAt);
    if (written.signal) signals.push(written.signal);
    if (written.event) rows.push(written.event);
    if (written.unmatched) unmatched.push(written.unmatched);
  }

  await deps.store.insertSignals(signals);
  await deps.suppressions.refresh(signals);
  const stored = await deps.store.storedEventIds(rows);
  const fresh = rows.filter((row) => !stored.has(row.id));
  duplicates += rows.length - fresh.length;
  await deps.store.insertEvents(fresh).catch((error: unknown) => {
    throw new EventsWriteError(workspaceDays(fresh), error);
  });
  await deps.store.insertUnmatched(unmatched);
  return { inserted: fresh.length, duplicates, unmatched: unmatched.length, signals: signals.length, written: workspaceDays(fresh) };
}
