import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@mail/common';
import type { eventsV1 } from '@mail/proto';
import { decode, type ConsumedRecord, type PoisonRecord } from '../domain/batch';
import { deadLettered, dropped, ok, okValues, type BatchResult } from '../domain/step-result';
import { ingestionMetrics as metrics } from '../metrics';
import type { WorkspaceDay } from '../store/unsettled';
import { commit, deduplicate, markUnsettled, resolveCampaigns, sendToDeadLetters, store, suppress, type StoreDependencies } from './steps';

type EngagementEvent = eventsV1.EngagementEvent;

const MAX_RETRY_DELAY_MS = 3_000;

export interface StoredEvents {
  inserted: number;
  /** Stored already. */
  duplicates: number;
  unmatched: number;
  signals: number;
  /** The (workspace, day) pairs of the events inserted. */
  written: WorkspaceDay[];
}

/**
 * Stores decoded events, each provider event once. The order makes a retry
 * of the whole batch, or its redelivery after a crash, safe: suppression
 * signals first and the state of their addresses recomputed from them, then
 * only the events the events table does not hold yet, then the unmatched
 * ones. A retry leaves the batch to be attempted again; nothing is skipped.
 */
export async function storeEvents(events: EngagementEvent[], deps: StoreDependencies): Promise<BatchResult<StoredEvents>> {
  const rows = await resolveCampaigns(events, deps);
  if (rows.kind === 'retry') return rows;
  const { signals, unmatched } = rows.value;
  const suppressed = await suppress(signals, deps);
  if (suppressed.kind === 'retry') return suppressed;
  const checked = await deduplicate(rows.value.events, deps);
  if (checked.kind === 'retry') return checked;
  const fresh = okValues(checked.value);
  const stored = await store(fresh, unmatched, deps);
  if (stored.kind === 'retry') return stored;
  return ok({
    inserted: fresh.length,
    duplicates: dropped(checked.value),
    unmatched: unmatched.length,
    signals: signals.length,
    written: stored.value,
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

export interface BatchOutcome {
  /** Events read, repeated and poison ones included. */
  consumed: number;
  /** Repeated within the batch. */
  repeated: number;
  deadLettered: number;
  stored: StoredEvents;
}

/**
 * One batch through the steps: decode, dead-letter the poison, then store
 * and commit. Each stage is attempted until it succeeds (the backoff of
 * `untilDone`): offsets never move past an event that is not stored.
 */
export async function runBatch(batch: ConsumedBatch, deps: BatchDependencies): Promise<BatchOutcome> {
  const decoded = decode(batch.records);
  const events = okValues(decoded);
  const poison = deadLettered(decoded);
  const repeated = dropped(decoded);

  await untilDone(() => sendToDeadLetters(poison, deps.sendToDeadLetters), batch, deps, events.length);
  for (const { partition, offset, reason, eventIndex } of poison) {
    deps.logger.warn({ partition, offset, eventIndex, reason }, 'record dead-lettered');
  }
  const stored = await untilDone((owed) => storeAndCommit(events, owed, batch, deps), batch, deps, events.length);
  return { consumed: events.length + repeated + poison.length, repeated, deadLettered: poison.length, stored };
}

/** One attempt at storing the events and committing the batch, after marking the days the previous attempt owes. */
async function storeAndCommit(
  events: EngagementEvent[],
  owed: WorkspaceDay[],
  batch: ConsumedBatch,
  deps: BatchDependencies,
): Promise<BatchResult<StoredEvents>> {
  const marked = await markUnsettled(owed, deps.markUnsettled);
  if (marked.kind === 'retry') return marked;
  const stored = await storeEvents(events, deps);
  if (stored.kind === 'retry') return stored;
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
async function untilDone<T>(
  step: (owed: WorkspaceDay[]) => Promise<BatchResult<T>>,
  batch: ConsumedBatch,
  deps: BatchDependencies,
  events: number,
): Promise<T> {
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
    deps.logger.warn({ err: result.error, events, retryInMs: delayMs }, 'batch failed, retrying it');
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
