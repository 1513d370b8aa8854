import { CronExpressionParser } from 'cron-parser';

/**
 * The fire time a scheduler tick runs for a campaign: the latest one at or
 * before `now`, if it comes after the schedule was set and is at most
 * `graceMs` old (after downtime, older missed fire times are skipped).
 */
export function dueFireTime(cron: string, scheduleSetAt: Date, now: Date, graceMs: number): Date | undefined {
  const latest = CronExpressionParser.parse(cron, { tz: 'UTC', currentDate: new Date(now.getTime() + 1) })
    .prev()
    .toDate();
  if (latest <= scheduleSetAt || now.getTime() - latest.getTime() > graceMs) return undefined;
  return latest;
}
