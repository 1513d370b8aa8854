import type { ClickHouseClient } from '@clickhouse/client';
import { type Logger } from '@mail/common';
import {
  compactClosedMonths,
  eraseClosedWorkspaceLeftovers,
  repairSuppressionStates,
  settleUnsettledDays,
  type EventDatabase,
} from '@mail/event-store';
import { ingestionMetrics } from '../metrics';

export interface MaintenanceSchedule {
  /** Before the first pass: not while the process is starting up. */
  firstAfterMs: number;
  /** Between the end of one pass and the start of the next. */
  intervalMs: number;
}

/**
 * Runs the event store's upkeep now and then: eraseClosedWorkspaceLeftovers,
 * compactClosedMonths, settleUnsettledDays, repairSuppressionStates,
 * then `rematchUnmatched` over the
 * unmatched events stored in the last two intervals (the re-matcher widens it
 * to all of them while it owes a full sweep). Each ingestion replica runs it:
 * two replicas deleting the same leftovers at once only repeat the work, a second OPTIMIZE
 * of a partition already merged, or being merged, does nothing, and settling
 * only reads before it clears what any pass would clear. Only the replica for
 * which `mayRebuild` holds (one at a time) rebuilds the days that disagree,
 * and re-matches, and repairs suppression states. A failed pass is logged and
 * the next one retries.
 */
export interface MaintenanceOptions {
  clickhouse: ClickHouseClient;
  database: EventDatabase;
  schedule: MaintenanceSchedule;
  /** Whether this replica rebuilds the days that disagree, and re-matches (one at a time). */
  mayRebuild: () => boolean;
  /** Logs its own failures. */
  rematchUnmatched: (since: Date) => Promise<unknown>;
  logger: Logger;
}

export function startMaintenance({ clickhouse, database, schedule, mayRebuild, rematchUnmatched, logger }: MaintenanceOptions): {
  stop(): Promise<void>;
} {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<void> = Promise.resolve();

  const run = async () => {
    const startedAt = Date.now();
    try {
      const erased = await eraseClosedWorkspaceLeftovers(clickhouse, database, abort.signal);
      ingestionMetrics.workspacesErased.inc(erased.length);
      if (erased.length > 0) logger.info({ workspaces: erased }, 'deleting events stored for deleted workspaces after their deletion');
    } catch (error) {
      if (!abort.signal.aborted) logger.warn({ err: error }, 'erasing pass failed; the next pass retries');
    }
    try {
      const merged = await compactClosedMonths(clickhouse, database, new Date(), abort.signal);
      ingestionMetrics.partitionsCompacted.inc(merged.length);
      if (merged.length > 0) {
        logger.info({ partitions: merged, durationMs: Date.now() - startedAt }, 'merged closed months into one part each');
      }
    } catch (error) {
      if (!abort.signal.aborted) logger.warn({ err: error }, 'compaction pass failed; the next pass retries');
    }
    try {
      const { settled, rebuilt, disagreeing } = await settleUnsettledDays(clickhouse, database, {
        rebuild: mayRebuild(),
        signal: abort.signal,
      });
      ingestionMetrics.daysSettled.inc(settled.length);
      ingestionMetrics.daysRebuilt.inc(rebuilt.length);
      if (settled.length > 0) {
        logger.info({ days: settled, rebuilt }, 'cleared the marks of unsettled days whose rollups agree with their events');
      }
      if (disagreeing.length > 0) {
        logger.warn({ days: disagreeing }, 'unsettled days whose rollups disagree with their events stay marked (read row by row)');
      }
    } catch (error) {
      if (!abort.signal.aborted) logger.warn({ err: error }, 'settling pass failed; the next pass retries');
    }
    if (mayRebuild()) {
      try {
        const repaired = await repairSuppressionStates(clickhouse);
        ingestionMetrics.suppressionStatesRepaired.inc(repaired.length);
        if (repaired.length > 0) {
          const workspaces = [...new Set(repaired.map((address) => address.workspaceId))];
          logger.warn({ addresses: repaired.length, workspaces }, 'recomputed suppression states that were behind their signals');
        }
      } catch (error) {
        if (!abort.signal.aborted) logger.warn({ err: error }, 'suppression repair failed; the next pass retries');
      }
    }
    await rematchUnmatched(new Date(startedAt - 2 * schedule.intervalMs));
  };
  const runAfter = (delayMs: number) => {
    timer = setTimeout(() => {
      pass = run().then(() => {
        if (!abort.signal.aborted) runAfter(schedule.intervalMs);
      });
    }, delayMs).unref();
  };
  runAfter(schedule.firstAfterMs);

  return {
    stop: async () => {
      abort.abort();
      clearTimeout(timer);
      await pass;
    },
  };
}
