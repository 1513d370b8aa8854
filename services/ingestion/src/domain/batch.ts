import type { eventsV1 } from '@mail/proto';
import type { EngagementEventRow } from '../store/events';
import { decodeRecord, eventKey, type Poison } from './events';
import { deadLetter, drop, ok, type EventResult } from './step-result';

type EngagementEvent = eventsV1.EngagementEvent;

/** A record of the events topic, as the pipeline reads it. */
export interface ConsumedRecord {
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  /** Its record schema header, if it has one. */
  schema: string | undefined;
}

/** Poison, with the record it came from: what its dead letter says. */
export interface PoisonRecord extends Poison {
  partition: number;
  offset: string;
  key: Buffer | null;
}

/**
 * The decode step: the events of the records, each provider event once.
 * What cannot be decoded is dead-lettered; an event repeated within the batch
 * (a provider's retry) is dropped but for one copy: the last, in the place of
 * the first.
 */
export function decode(records: readonly ConsumedRecord[]): EventResult<EngagementEvent>[] {
  const results: EventResult<EngagementEvent>[] = [];
  const latest = new Map<string, EngagementEvent>();
  let events = 0;
  for (const record of records) {
    const decoded = decodeRecord(record.value, record.schema);
    for (const event of decoded.events) latest.set(eventKey(event), event);
    events += decoded.events.length;
    for (const poison of decoded.poison) {
      results.push(deadLetter({ ...poison, partition: record.partition, offset: record.offset, key: record.key }));
    }
  }
  for (const event of latest.values()) results.push(ok(event));
  for (let repeat = latest.size; repeat < events; repeat++) results.push(drop('repeated in the batch'));
  return results;
}

/** The rule of the deduplicate step: an event the events table holds already is dropped. */
export function notStoredYet(rows: readonly EngagementEventRow[], storedIds: ReadonlySet<string>): EventResult<EngagementEventRow>[] {
  return rows.map((row) => (storedIds.has(row.id) ? drop('stored already') : ok(row)));
}
