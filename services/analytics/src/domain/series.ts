import { InvalidArgumentError } from '@mail/common';
import type { EventFilter, Interval } from './filter';

/**
 * Time buckets of the stats series: UTC hours or days, every bucket of the
 * range present (charts expect gaps as zeros), at most MAX_SERIES_BUCKETS so
 * one request cannot ask for an unbounded series.
 */
export const MAX_SERIES_BUCKETS = 1000;

const BUCKET_MS: Record<Interval, number> = { hour: 3_600_000, day: 86_400_000 };

export function bucketStart(time: Date, interval: Interval): Date {
  const size = BUCKET_MS[interval];
  return new Date(Math.floor(time.getTime() / size) * size);
}

/** Bucket starts from the first to the last bucket, both included. */
export function bucketsBetween(first: Date, last: Date, interval: Interval): Date[] {
  const buckets: Date[] = [];
  for (let time = first.getTime(); time <= last.getTime(); time += BUCKET_MS[interval]) buckets.push(new Date(time));
  return buckets;
}

/**
 * The series range: the requested bounds, and where one is open, the first or
 * last bucket that has events. Undefined when an open bound has no events to
 * stand on (nothing to draw).
 */
export function seriesRange(
  filter: Pick<EventFilter, 'from' | 'before'>,
  interval: Interval,
  dataBuckets: Date[],
): { first: Date; last: Date } | undefined {
  const times = dataBuckets.map((bucket) => bucket.getTime());
  const first = filter.from ? bucketStart(filter.from, interval) : times.length ? new Date(Math.min(...times)) : undefined;
  // `before` is exclusive: its bucket is only part of the range when it starts before `before`.
  const last = filter.before
    ? bucketStart(new Date(filter.before.getTime() - 1), interval)
    : times.length
      ? new Date(Math.max(...times))
      : undefined;
  return first && last ? { first, last } : undefined;
}

/** 422 when the range holds more buckets than a series may have. */
export function checkSeriesSize(range: { first: Date; last: Date } | undefined, interval: Interval): void {
  if (!range) return;
  const count = Math.floor((range.last.getTime() - range.first.getTime()) / BUCKET_MS[interval]) + 1;
  if (count <= MAX_SERIES_BUCKETS) return;
  throw new InvalidArgumentError([
    {
      loc: ['interval'],
      type: 'value_error',
      msg:
        `Value error, the date range spans ${count} ${interval} buckets, more than ${MAX_SERIES_BUCKETS}: ` +
        `narrow date_from/date_to${interval === 'hour' ? ' or use interval=day' : ''}`,
      input: interval,
      ctx: { error: {} },
    },
  ]);
}
