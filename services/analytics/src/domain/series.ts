import type { EventFilter, Interval } from './filter';

/**
 * Time buckets of the stats series: UTC hours or days. Charts expect gaps
 * as zeros, so a range of up to MAX_FILLED_BUCKETS buckets has every bucket;
 * a longer one (hourly over months, or an open range over years of data) has
 * only the buckets with events, so its size is bounded by the data rather
 * than by the span.
 */
export const MAX_FILLED_BUCKETS = 2000;

const BUCKET_MS: Record<Interval, number> = { hour: 3_600_000, day: 86_400_000 };

export function bucketStart(time: Date, interval: Interval): Date {
  const size = BUCKET_MS[interval];
  return new Date(Math.floor(time.getTime() / size) * size);
}

/** Bucket starts from the first to the last bucket, both included. */
function bucketsBetween(first: Date, last: Date, interval: Interval): Date[] {
  const buckets: Date[] = [];
  for (let time = first.getTime(); time <= last.getTime(); time += BUCKET_MS[interval]) buckets.push(new Date(time));
  return buckets;
}

/**
 * The series range: the requested bounds, and where one is open, the first or
 * last bucket that has events. Undefined when an open bound has no events to
 * stand on (nothing to draw).
 */
function seriesRange(
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

/** The bucket starts of the series, in time order: the range's every bucket, or only `dataBuckets` when it has too many. */
export function seriesBuckets(filter: Pick<EventFilter, 'from' | 'before'>, interval: Interval, dataBuckets: Date[]): Date[] {
  const range = seriesRange(filter, interval, dataBuckets);
  if (!range) return [];
  const count = Math.floor((range.last.getTime() - range.first.getTime()) / BUCKET_MS[interval]) + 1;
  if (count <= MAX_FILLED_BUCKETS) return bucketsBetween(range.first, range.last, interval);
  return [...dataBuckets].sort((a, b) => a.getTime() - b.getTime());
}
