import type { ClickHouseClient } from '@clickhouse/client';
import { compactClosedMonths, type Logger } from '@mail/common';
import { ingestionMetrics } from './metrics';

export interface CompactionSchedule {
  /** Before the first pass: not while the process is starting up. */
  firstAfterMs: number;
  /** Between the end of one pass and the start of the next. */
  intervalMs: number;
}

/**
 * Runs compactClosedMonths now and then. Each ingestion replica runs it: a
 * second OPTIMIZE of a partition already merged, or being merged, does nothing.
 * A failed pass is logged and the next one retries.
 */
export function startCompaction(
  clickhouse: ClickHouseClient,
  database: string,
  schedule: CompactionSchedule,
  logger: Logger,
): { stop(): Promise<void> } {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<void> = Promise.resolve();

  const run = async () => {
    const startedAt = Date.now();
    try {
      const merged = await compactClosedMonths(clickhouse, database, new Date(), abort.signal);
      ingestionMetrics.partitionsCompacted.inc(merged.length);
      if (merged.length > 0) {
        logger.info({ partitions: merged, durationMs: Date.now() - startedAt }, 'merged closed months into one part each');
      }
    } catch (error) {
      if (!abort.signal.aborted) logger.warn({ err: error }, 'compaction pass failed; the next pass retries');
    }
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
