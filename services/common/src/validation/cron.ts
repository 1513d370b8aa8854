import { CronExpressionParser } from 'cron-parser';
import { valueError, type Violation } from '../errors';
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
  const fields = expression
    .trim()
    .split(/\s+/)
    .filter((field) => field !== '');
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

/** The value_error for a schedule that is not a valid 5-field cron expression. */
export function cronViolation(loc: (string | number)[], expression: string): Violation | undefined {
  const problem = cronProblem(expression);
  return problem === undefined ? undefined : valueError(loc, expression, `invalid cron expression: ${problem}`);
}
