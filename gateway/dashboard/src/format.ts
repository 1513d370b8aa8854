/** Formatting only: every number shown is the API's number. */

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function formatCount(value: number): string {
  return integer.format(value);
}

/** A 0..1 ratio as a percentage with one decimal ("12.5%"); a rate without a denominator as "–". */
export function formatRate(ratio: number | null): string {
  return ratio === null ? '–' : `${(ratio * 100).toFixed(1)}%`;
}

/** "1,200 opens, 35.0% machine": the opens and the share of them flagged as machine-generated. */
export function formatOpens(opens: number, machineOpens: number): string {
  return opens === 0 ? '0 opens' : `${formatCount(opens)} opens, ${formatRate(machineOpens / opens)} machine`;
}

/** "2026-11-21" for day buckets, "2026-11-21 14:00" for hour buckets, in UTC. */
export function formatBucket(iso: string, interval: 'hour' | 'day'): string {
  const text = new Date(iso).toISOString();
  return interval === 'day' ? text.slice(0, 10) : `${text.slice(0, 10)} ${text.slice(11, 16)}`;
}

/** The UTC calendar date `daysAgo` days before now, as the value of a date input. */
export function utcDate(daysAgo: number, now = new Date()): string {
  return new Date(now.getTime() - daysAgo * 86_400_000).toISOString().slice(0, 10);
}
