import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@mail/common';
import { decode } from '../domain/batch';
import type { ConsumedRecord, PoisonRecord, SourcedEvent } from '../domain/records';
import { byTable, checkRows, withoutSources } from '../domain/rows';
import { deadLettered, dropped, ok, okValues, type BatchResult } from '../domain/step-result';
import { ingestionMetrics as metrics } from '../metrics';
import type { WorkspaceDay } from '../store/unsettled';
import { commit, deduplicate, markUnsettled, resolveCampaigns, sendToDeadLetters, store, suppress, type StoreDependencies } from './steps';

const MAX_RETRY_DELAY_MS = 3_000;

export interface StoredEvents {
  inserted: number;
  /** Stored already. */
  duplicates: number;
  unmatched: number;
  signals: number;
  /** The (workspace, day) pairs of the events inserted. */
  written: WorkspaceDay[];
  /** Days owed a mark before the commit: an insert that failed for a refused row may have written some of its rows. */
  owed: WorkspaceDay[];
  /** Events with a row their table would not take (checkRows), to be dead-lettered. */
  invalid: PoisonRecord[];
  /** Events with a row ClickHouse refused, to be dead-lettered. */
  refused: PoisonRecord[];
}

/**
 * Stores decoded events, each provider event once. The order makes a retry
 * of the whole batch, or its redelivery after a crash, safe: suppression
 * signals first and the state of their addresses recomputed from them, then
 * only the events the events table does not hold yet, then the unmatched
 * ones. A retry leaves the batch to be attempted again; nothing is skipped.
 * An event with a row that cannot be stored is left out of every table after
 * it is found (its signal may be stored already when ClickHouse refuses its
 * events row), and handed back to be dead-lettered.
 */
export async function storeEvents(events: SourcedEvent[], deps: StoreDependencies): Promise<BatchResult<StoredEvents>> {
  const resolved = await resolveCampaigns(events, deps);
  if (resolved.kind === 'retry') return resolved;
  const checkedRows = checkRows(resolved.value);
  const rows = byTable(okValues(checkedRows));
  const suppressed = await suppress(rows.signals, deps);
  if (suppressed.kind === 'retry') return suppressed;
  const signals = okValues(suppressed.value);
  const storedSignals = new Set(signals.map(({ source }) => source));
  const refusedSignals = new Set(rows.signals.filter(({ source }) => !storedSignals.has(source)).map(({ source }) => source));
  const checked = await deduplicate(withoutSources(rows.events, refusedSignals), deps);
  if (checked.kind === 'retry') return checked;
  const stored = await store(okValues(checked.value), rows.unmatched, deps);
  if (stored.kind === 'retry') return stored;
  const { written, owed, inserted, unmatched, refused } = stored.value;
  return ok({
    inserted,
    duplicates: dropped(checked.value),
    unmatched,
    signals: signals.length,
    written,
    owed,
    invalid: deadLettered(checkedRows),
    refused: [...deadLettered(suppressed.value), ...refused],
  });
}

/** A batch as the consumer hands it over. */
export interface ConsumedBatch {
  records: ConsumedRecord[];
  /** Commits the offsets past the batch's records. */
  commitOffsets(): Promise<void>;
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** Keeps the group membership while the batch retries; throws while the group rebalances. */
  heartbeat(): Promise<void>;
}

export interface BatchDependencies extends StoreDependencies {
  sendToDeadLetters: (poison: PoisonRecord[]) => Promise<void>;
  markUnsettled: (days: WorkspaceDay[]) => Promise<void>;
  logger: Logger;
}

/** A batch being run: what each attempt at it works with. */
interface BatchRun {
  batch: ConsumedBatch;
  deps: BatchDependencies;
  /** Decoded, each provider event once. */
  events: SourcedEvent[];
}

/** Why events went to the dead-letter topic: the label of ingestion_events_dead_lettered_total. */
export type DeadLetterCause = 'undecodable' | 'invalid_row' | 'refused_by_clickhouse';

export interface BatchOutcome {
  /** Events read, repeated and poison ones included. */
  consumed: number;
  /** Repeated within the batch. */
  repeated: number;
  deadLettered: Record<DeadLetterCause, number>;
  stored: StoredEvents;
}

/**
 * One batch through the steps: decode, dead-letter the poison, then store,
 * dead-letter what could not be stored, and commit. Each stage is attempted
 * until it succeeds (the backoff of `untilDone`): offsets never move past an
 * event that is neither stored nor dead-lettered.
 */
export async function runBatch(batch: ConsumedBatch, deps: BatchDependencies): Promise<BatchOutcome> {
  const decoded = decode(batch.records);
  const events = okValues(decoded);
  const poison = deadLettered(decoded);
  const repeated = dropped(decoded);

  const run: BatchRun = { batch, deps, events };
  await untilDone(run, () => sendToDeadLetters(poison, deps.sendToDeadLetters));
  for (const { partition, offset, reason, eventIndex } of poison) {
    deps.logger.warn({ partition, offset, eventIndex, reason }, 'record dead-lettered');
  }
  const stored = await untilDone(run, (owed) => storeAndCommit(run, owed));
  for (const { partition, offset, reason, eventIndex } of [...stored.invalid, ...stored.refused]) {
    deps.logger.error({ partition, offset, eventIndex, reason }, 'event not storable, dead-lettered');
  }
  return {
    consumed: events.length + repeated + poison.length,
    repeated,
    deadLettered: { undecodable: poison.length, invalid_row: stored.invalid.length, refused_by_clickhouse: stored.refused.length },
    stored,
  };
}

/**
 * One attempt at storing the events and committing the batch, after marking
 * the days the previous attempt owes; what could not be stored goes to the
 * dead-letter topic before the commit.
 */
async function storeAndCommit({ batch, deps, events }: BatchRun, owed: WorkspaceDay[]): Promise<BatchResult<StoredEvents>> {
  const marked = await markUnsettled(owed, deps.markUnsettled);
  if (marked.kind === 'retry') return marked;
  const stored = await storeEvents(events, deps);
  if (stored.kind === 'retry') return stored;
  const markedRefused = await markUnsettled(stored.value.owed, deps.markUnsettled);
  if (markedRefused.kind === 'retry') return markedRefused;
  const sent = await sendToDeadLetters([...stored.value.invalid, ...stored.value.refused], deps.sendToDeadLetters);
  if (sent.kind === 'retry') return sent;
  const committed = await commit(stored.value.written, () => batch.commitOffsets());
  if (committed.kind === 'retry') return committed;
  return stored;
}

/**
 * Attempts `step` until it succeeds, with backoff and heartbeats, handing
 * each attempt the days the one before owes a mark. Throws when the
 * consumer stops or the group rebalances: the partitions' next owner takes
 * the batch over from the committed offsets, once the owed days are marked.
 */
async function untilDone<T>({ batch, deps, events }: BatchRun, step: (owed: WorkspaceDay[]) => Promise<BatchResult<T>>): Promise<T> {
  let owed: WorkspaceDay[] = [];
  for (let failures = 0; ; failures += 1) {
    const result = await step(owed);
    if (result.kind === 'ok') return result.value;
    owed = result.unsettledDays;
    metrics.retries.inc();
    if (!batch.isRunning()) {
      await handOver(owed, deps);
      throw new Error('consumer stopping; the batch stays uncommitted for the next owner');
    }
    const delayMs = Math.min(100 * 2 ** failures, MAX_RETRY_DELAY_MS);
    deps.logger.warn({ err: result.error, events: events.length, retryInMs: delayMs }, 'batch failed, retrying it');
    await sleep(delayMs);
    await batch.heartbeat().catch(async (error: unknown) => {
      await handOver(owed, deps);
      throw error;
    });
  }
}

/** Before the next owner retries the batch; if ClickHouse is still down, there is nothing more to do. */
async function handOver(owed: WorkspaceDay[], deps: BatchDependencies): Promise<void> {
  const marked = await markUnsettled(owed, deps.markUnsettled);
  if (marked.kind === 'retry')
    deps.logger.error({ err: marked.error, days: owed }, 'could not mark days unsettled; their rollups may be off');
}
