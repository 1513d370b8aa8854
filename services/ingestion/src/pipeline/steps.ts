import { batchRows, type SourcedRows } from '../domain/rows';
import { notStoredYet } from '../domain/batch';
import { poisonOf, type PoisonRecord, type Sourced, type SourcedEvent } from '../domain/records';
import { deadLetter, deadLettered, ok, okValues, retry, type BatchResult, type EventResult } from '../domain/step-result';
import type { CategoryMatch } from '../grpc/categories';
import type { EngagementEventRow, UnmatchedEventRow, SuppressionSignalRow } from '../domain/columns';
import type { EventWriter } from '../store/events';
import { insertIsolating } from '../store/refused-rows';
import type { SuppressionStateStore } from '../store/suppressions';
import { workspaceDays, type WorkspaceDay } from '../store/unsettled';

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
export function resolveCampaigns(events: SourcedEvent[], deps: StoreDependencies): Promise<BatchResult<SourcedRows[]>> {
  return attempt(async () => {
    const matches = await deps.resolve(events.flatMap(({ event }) => event.categories));
    return batchRows(events, matches, Math.floor(Date.now() / 1000));
  });
}

/**
 * Inserts the rows, leaving out those ClickHouse refuses on their own
 * (insertIsolating): each is dead-lettered with ClickHouse's reason, the rest
 * go on. `failed`: some insert failed, which may have written rows before it did.
 */
async function insertRefusing<Row>(
  rows: Sourced<Row>[],
  insert: (rows: Row[]) => Promise<void>,
): Promise<{ results: EventResult<Sourced<Row>>[]; failed: boolean }> {
  const { refused, failed } = await insertIsolating(rows, (part) => insert(part.map(({ row }) => row)));
  if (refused.length === 0) return { results: rows.map(ok), failed };
  const reasons = new Map(refused.map(({ item, reason }) => [item, reason]));
  return {
    results: rows.map((row) => {
      const reason = reasons.get(row);
      return reason === undefined ? ok(row) : deadLetter(poisonOf(row.source, reason));
    }),
    failed,
  };
}

/**
 * Stores the suppression signals (collapsed by their table's key if written
 * twice), then recomputes the state of their addresses from everything
 * stored for them (the same rows again on a retry).
 */
export function suppress(
  signals: Sourced<SuppressionSignalRow>[],
  deps: StoreDependencies,
): Promise<BatchResult<EventResult<Sourced<SuppressionSignalRow>>[]>> {
  return attempt(async () => {
    const { results } = await insertRefusing(signals, (rows) => deps.writer.insertSignals(rows));
    await deps.suppressions.refresh(okValues(results).map(({ row }) => row));
    return results;
  });
}

/** Drops the events the events table holds already. */
export function deduplicate(
  rows: Sourced<EngagementEventRow>[],
  deps: StoreDependencies,
): Promise<BatchResult<EventResult<Sourced<EngagementEventRow>>[]>> {
  return attempt(async () => notStoredYet(rows, await deps.writer.storedEventIds(rows.map(({ row }) => row))));
}

/** What the store step did. */
export interface StoredRows {
  /** The (workspace, day) pairs of the events inserted. */
  written: WorkspaceDay[];
  /** The days of events whose insert failed for a row ClickHouse refused: the failed insert may have written some. */
  owed: WorkspaceDay[];
  inserted: number;
  unmatched: number;
  /** The events ClickHouse refused a row of. */
  refused: PoisonRecord[];
}

/**
 * Inserts the events, then the unmatched ones (collapsed by their key if
 * written twice), leaving out the rows ClickHouse refuses; answers the
 * (workspace, day) pairs of the events inserted. An events insert that
 * failed may have been committed without the rollups its views feed, and the
 * retry would skip those events as stored: their days are owed a mark (`owed`
 * when the failure was a refused row and the others went in after it).
 */
export async function store(
  fresh: Sourced<EngagementEventRow>[],
  unmatched: Sourced<UnmatchedEventRow>[],
  deps: StoreDependencies,
): Promise<BatchResult<StoredRows>> {
  const days = workspaceDays(fresh.map(({ row }) => row));
  const inserted = await attempt(() => insertRefusing(fresh, (rows) => deps.writer.insertEvents(rows)), days);
  if (inserted.kind === 'retry') return inserted;
  const insertedUnmatched = await attempt(() => insertRefusing(unmatched, (rows) => deps.writer.insertUnmatched(rows)));
  if (insertedUnmatched.kind === 'retry') return insertedUnmatched;
  const events = okValues(inserted.value.results).map(({ row }) => row);
  return ok({
    written: events.length === fresh.length ? days : workspaceDays(events),
    owed: inserted.value.failed ? days : [],
    inserted: events.length,
    unmatched: okValues(insertedUnmatched.value.results).length,
    refused: [...deadLettered(inserted.value.results), ...deadLettered(insertedUnmatched.value.results)],
  });
}

/**
 * Commits the batch's offsets, everything being stored. If that fails,
 * another owner of the partitions may write the events again, doubling
 * their rollups: the days written are owed a mark.
 */
export function commit(written: WorkspaceDay[], commitOffsets: () => Promise<void>): Promise<BatchResult<void>> {
  return attempt(commitOffsets, written);
}
