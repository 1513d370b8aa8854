import { decodeRecord, eventKey } from './events';
import type { ConsumedRecord, Sourced, SourcedEvent } from './records';
import { deadLetter, drop, ok, type EventResult } from './step-result';

/**
 * The decode step: the events of the records, each provider event once.
 * What cannot be decoded is dead-lettered; an event repeated within the batch
 * (a provider's retry) is dropped but for one copy: the last, in the place of
 * the first.
 */
export function decode(records: readonly ConsumedRecord[]): EventResult<SourcedEvent>[] {
  const results: EventResult<SourcedEvent>[] = [];
  const latest = new Map<string, SourcedEvent>();
  let events = 0;
  for (const record of records) {
    const decoded = decodeRecord(record.value, record.schema);
    const { partition, offset, key } = record;
    for (const { event, value, eventIndex } of decoded.events) {
      latest.set(eventKey(event), { event, source: { partition, offset, key, value, eventIndex } });
    }
    events += decoded.events.length;
    for (const poison of decoded.poison) results.push(deadLetter({ ...poison, partition, offset, key }));
  }
  for (const event of latest.values()) results.push(ok(event));
  for (let repeat = latest.size; repeat < events; repeat++) results.push(drop('repeated in the batch'));
  return results;
}

/** The rule of the deduplicate step: an event the events table holds already is dropped. */
export function notStoredYet<Row extends { id: string }>(
  rows: readonly Sourced<Row>[],
  storedIds: ReadonlySet<string>,
): EventResult<Sourced<Row>>[] {
  return rows.map((row) => (storedIds.has(row.row.id) ? drop('stored already') : ok(row)));
}
