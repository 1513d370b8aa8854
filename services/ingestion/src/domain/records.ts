import type { eventsV1 } from '@mail/proto';
import type { EventBytes, Poison } from './events';

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

/** Where an event came from: its record, and its bytes there. */
export interface EventSource extends EventBytes {
  partition: number;
  offset: string;
  key: Buffer | null;
}

/** A row and the event it was made of. */
export interface Sourced<Row> {
  row: Row;
  source: EventSource;
}

/** Poison, with the record it came from: what its dead letter says. */
export interface PoisonRecord extends Poison, EventSource {}

/** A decoded event and where it came from. */
export interface SourcedEvent {
  event: EngagementEvent;
  source: EventSource;
}

/** The poison of an event found unstorable after decoding: its dead letter carries its bytes and their place. */
export const poisonOf = (source: EventSource, reason: string): PoisonRecord => ({ ...source, reason });
