import { CronExpressionParser } from 'cron-parser';
import { memoized } from './memo';

/**
 * Schedules are classic 5-field cron expressions (minute hour day-of-month
 * month day-of-week), evaluated in UTC. cron-parser also takes 6 fields
 * (seconds), @-macros and Jenkins-style `H` (a random minute per parse, so the
 * next run would change on every read): those are refused here.
 */
const FIELD_NAMES = 'minute hour day-of-month month day-of-week';

/** Why `expression` is not a valid schedule, or undefined when it is. */
export const cronProblem = memoized((expression: string): string | undefined => {
  const fields = expression.trim().split(/\s+/).filter((field) => field !== '');
  if (fields.length !== 5) return `expected 5 fields (${FIELD_NAMES}), got ${fields.length}`;
  try {
    CronExpressionParser.parse(fields.join(' '), { tz: 'UTC' });
  } catch (error) {
    return (error as Error).message;
  }
  // THU is the only alias with an H in it.
  if (fields.some((field) => /h/i.test(field.replace(/thu/gi, '')))) return 'the H (hashed) notation is not supported';
  return undefined;
});

/**
 * The next fire times computed so far: cron-parser (over luxon) costs about
 * half a millisecond of CPU per parse, and every campaign answer carries a
 * next_run_at. An entry computed at `from` stays right until `next` passes.
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
