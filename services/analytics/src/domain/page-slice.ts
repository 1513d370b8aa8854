import { DAY_MS } from './day-split';
import type { PageWindow } from './filter';

export interface DayCount {
  /** Start of the UTC day. */
  day: Date;
  events: number;
}

/** The days that hold one page of a newest-first list, and how many of their rows come before the page. */
export interface PageSlice {
  from: Date;
  before: Date;
  skip: number;
}

/**
 * ClickHouse 18.16 cannot read a table in sort order, so ORDER BY ... LIMIT
 * reads every matching row. Knowing how many events each day holds, the page
 * query reads only the days the page falls on. Undefined when the page starts
 * after the last event.
 */
export function pageSlice(newestFirst: DayCount[], window: PageWindow): PageSlice | undefined {
  let before = 0;
  let index = 0;
  while (index < newestFirst.length && before + newestFirst[index].events <= window.offset) {
    before += newestFirst[index].events;
    index += 1;
  }
  if (index === newestFirst.length) return undefined;
  const newest = newestFirst[index];
  let covered = before;
  let oldest = newest;
  while (index < newestFirst.length && covered < window.offset + window.pageSize) {
    oldest = newestFirst[index];
    covered += oldest.events;
    index += 1;
  }
  return { from: oldest.day, before: new Date(newest.day.getTime() + DAY_MS), skip: window.offset - before };
}
