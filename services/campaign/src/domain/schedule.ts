import { CronExpressionParser } from 'cron-parser';

/**
 * The next fire times computed so far: a cron-parser parse is costly
 * (bench/README.md, "Campaign and Postgres"), and every campaign answer
 * carries a next_run_at. An entry computed at `from` stays right until `next`
 * passes.
 */
const nextRuns = new Map<string, { from: number; next: Date }>();
const NEXT_RUNS_MAX = 10_000;

/** The first fire time strictly after `now`, in UTC; null without a schedule. */
export function nextRunAt(expression: string | null, now: Date): Date | null {
  if (expression === null) return null;
  const known = nextRuns.get(expression);
  if (known && known.from <= now.getTime() && now < known.next) return known.next;
  const next = CronExpressionParser.parse(expression, { tz: 'UTC', currentDate: now }).next().toDate();
  if (nextRuns.size >= NEXT_RUNS_MAX) nextRuns.clear();
  nextRuns.set(expression, { from: now.getTime(), next });
  return next;
}
