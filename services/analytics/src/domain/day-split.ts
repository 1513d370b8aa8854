export const DAY_MS = 86_400_000;

export interface TimeRange {
  from: Date;
  before: Date;
}

/**
 * How a time range is read: whole UTC days from the daily rollups, except
 * the unsettled ones (whose rollups may disagree with the events), and the
 * rest event by event: the partial days at either end, and those unsettled
 * days.
 */
export interface DaySplit {
  /** Whole days of the range (either end open when the range is), undefined when it holds none. */
  wholeDays?: Partial<TimeRange>;
  /** Unsettled days among the whole days (day starts), which the rollups must skip. */
  unsettled: Date[];
  /** What is read event by event. */
  eventRanges: TimeRange[];
}

const startOfDay = (time: Date): Date => new Date(Math.floor(time.getTime() / DAY_MS) * DAY_MS);
const endOfDay = (time: Date): Date => new Date(Math.ceil(time.getTime() / DAY_MS) * DAY_MS);

/** `from` inclusive, `before` exclusive; `unsettled` are day starts. */
export function splitDays(from: Date | undefined, before: Date | undefined, unsettled: Date[]): DaySplit {
  const wholeFrom = from && endOfDay(from);
  const wholeBefore = before && startOfDay(before);
  if (from && before && wholeFrom! >= wholeBefore!) {
    return { unsettled: [], eventRanges: from < before ? [{ from, before }] : [] };
  }
  const inWholeDays = unsettled.filter((day) => (!wholeFrom || day >= wholeFrom) && (!wholeBefore || day < wholeBefore));
  const eventRanges: TimeRange[] = [];
  if (from && from < wholeFrom!) eventRanges.push({ from, before: wholeFrom! });
  for (const day of inWholeDays) eventRanges.push({ from: day, before: new Date(day.getTime() + DAY_MS) });
  if (before && wholeBefore! < before) eventRanges.push({ from: wholeBefore!, before });
  return { wholeDays: { from: wholeFrom, before: wholeBefore }, unsettled: inWholeDays, eventRanges };
}
