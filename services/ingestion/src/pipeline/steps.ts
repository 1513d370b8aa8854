import type { eventsV1 } from '@mail/proto';
import { batchRows, type BatchRows } from '../domain/rows';
import { notStoredYet, type PoisonRecord } from '../domain/batch';
import { ok, retry, type BatchResult, type EventResult } from '../domain/step-result';
import type { CategoryMatch } from '../grpc/categories';
import type { EngagementEventRow, EventWriter, UnmatchedEventRow, SuppressionSignalRow } from '../store/events';
import type { SuppressionStateStore } from '../store/suppressions';
import { workspaceDays, type WorkspaceDay } from '../store/unsettled';

type EngagementEvent = eventsV1.EngagementEvent;

/** What the steps that store events use. */
export interface StoreDependencies {
  /** The campaign of each category that names one (the campaign service, cached). */
  resolve(categoryIds: Iterable<string>): Promise<Map<string, CategoryMatch>>;
  writer: EventWriter;
  suppressions: SuppressionStateStore;
}

/** The work's value, or a retry of the batch (owing `unsettledDays` a mark) if it throws. */
const attempt = <T>(work: () => Promise<T>, unsettledDays?: WorkspaceDay[]): Promise<BatchResult<T>> =>
  work().then(ok, (error: unknown) => retry(error, unsettledDays));

/** Marks the days a failed attempt owes, before anything else is tried: a retry must not hide what the failure left off. */
export function markUnsettled(days: WorkspaceDay[], mark: (days: WorkspaceDay[]) => Promise<void>): Promise<BatchResult<void>> {
  if (days.length === 0) return Promise.resolve(ok(undefined));
  return attempt(() => mark(days), days);
}

/** Sends the batch's poison to the dead-letter topic. */
export function sendToDeadLetters(poison: PoisonRecord[], send: (poison: PoisonRecord[]) => Promise<void>): Promise<BatchResult<number>> {
  if (poison.length === 0) return Promise.resolve(ok(0));
  return attempt(async () => {
    await send(poison);
    return poison.length;
  });
}

/** The rows each event becomes, by the campaign its categories name. */
export function resolveCampaigns(events: EngagementEvent[], deps: StoreDependencies): Promise<BatchResult<BatchRows>> {
  return attempt(async () => {
    const matches = await deps.resolve(events.flatMap((event) => event.categories));
    return batchRows(events, matches, Math.floor(Date.now() / 1000));
  });
}

/**
 * Stores the suppression signals (collapsed by their table's key if written
 * twice), then recomputes the state of their addresses from everything
 * stored for them (the same rows again on a retry).
 */
export function suppress(signals: SuppressionSignalRow[], deps: StoreDependencies): Promise<BatchResult<void>> {
  return attempt(async () => {
    await deps.writer.insertSignals(signals);
    await deps.suppressions.refresh(signals);
  });
}

/** Drops the events the events table holds already. */
export function deduplicate(rows: EngagementEventRow[], deps: StoreDependencies): Promise<BatchResult<EventResult<EngagementEventRow>[]>> {
  return attempt(async () => notStoredYet(rows, await deps.writer.storedEventIds(rows)));
}

/**
 * Inserts the events, then the unmatched ones (collapsed by their key if
 * written twice); answers the (workspace, day) pairs of the events. An
 * events insert that failed may have been committed without the rollups its
 * views feed, and the retry would skip those events as stored: their days
 * are owed a mark.
 */
export async function store(
  fresh: EngagementEventRow[],
  unmatched: UnmatchedEventRow[],
  deps: StoreDependencies,
): Promise<BatchResult<WorkspaceDay[]>> {
  const days = workspaceDays(fresh);
  const inserted = await attempt(() => deps.writer.insertEvents(fresh), days);
  if (inserted.kind === 'retry') return inserted;
  const insertedUnmatched = await attempt(() => deps.writer.insertUnmatched(unmatched));
  if (insertedUnmatched.kind === 'retry') return insertedUnmatched;
  return ok(days);
}

/**
 * Commits the batch's offsets, everything being stored. If that fails,
 * another owner of the partitions may write the events again, doubling
 * their rollups: the days written are owed a mark.
 */
export function commit(written: WorkspaceDay[], commitOffsets: () => Promise<void>): Promise<BatchResult<void>> {
  return attempt(commitOffsets, written);
}
