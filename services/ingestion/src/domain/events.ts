import crypto from 'node:crypto';
import { EVENT_BATCH_SCHEMA, RECORD_SCHEMA_HEADER } from '@mail/common';
import {
  PROTO_BOUNCE_CLASSES,
  PROTO_BOUNCE_TYPES,
  PROTO_EVENT_TYPES,
  SENDER_SIDE_BOUNCE_CLASSES,
  storedNames,
  type SignalReason,
  type StoredBounceClass,
  type StoredBounceType,
  type StoredEventType,
} from '@mail/event-store';
import { eventsV1 } from '@mail/proto';

const { EventType, BounceType } = eventsV1;
type EngagementEvent = eventsV1.EngagementEvent;

/** ClickHouse DateTime holds unsigned 32-bit seconds. */
const MAX_SECONDS = 4_294_967_295;

export type Decoded = { event: EngagementEvent } | { poison: string };

/** Where an event is in its record: the whole record, or one event of a batch record (eventIndex set, value its bytes). */
export interface EventBytes {
  value: Buffer;
  eventIndex?: number;
}

/** What cannot be stored, and why. */
export interface Poison extends EventBytes {
  reason: string;
}

/** A decoded event with its bytes, which its dead letter carries should it prove unstorable later. */
export interface DecodedEvent extends EventBytes {
  event: EngagementEvent;
}

/**
 * The events of a Kafka record and what of it is poison. A record with the
 * batch schema header carries an EngagementEventBatch, whose events are
 * checked one by one; a record without the header (written before batching)
 * is one EngagementEvent.
 */
export function decodeRecord(value: Buffer | null, schema: string | undefined): { events: DecodedEvent[]; poison: Poison[] } {
  const record = value ?? Buffer.alloc(0);
  if (schema === undefined) {
    const decoded = decodeEvent(value);
    return 'event' in decoded
      ? { events: [{ event: decoded.event, value: record }], poison: [] }
      : { events: [], poison: [{ reason: decoded.poison, value: record }] };
  }
  if (schema !== EVENT_BATCH_SCHEMA)
    return { events: [], poison: [{ reason: `unknown record schema ${JSON.stringify(schema)}`, value: record }] };
  if (record.length === 0) return { events: [], poison: [{ reason: 'empty record', value: record }] };
  let batch: eventsV1.EngagementEventBatch;
  try {
    batch = eventsV1.EngagementEventBatch.decode(record);
  } catch (error) {
    return { events: [], poison: [{ reason: `not an EngagementEventBatch: ${(error as Error).message}`, value: record }] };
  }
  const events: DecodedEvent[] = [];
  const poison: Poison[] = [];
  batch.events.forEach((bytes, eventIndex) => {
    const decoded = decodeEvent(bytes);
    if ('event' in decoded) events.push({ event: decoded.event, value: bytes, eventIndex });
    else poison.push({ reason: decoded.poison, value: bytes, eventIndex });
  });
  return { events, poison };
}

/** One event as a record the webhook would write: a one-event EngagementEventBatch, keyed by its address. */
export function encodeRecord(event: EngagementEvent): { key: string; value: Buffer; headers: Record<string, string> } {
  const value = eventsV1.EngagementEventBatch.encode({ events: [Buffer.from(eventsV1.EngagementEvent.encode(event).finish())] }).finish();
  return { key: event.email, value: Buffer.from(value), headers: { [RECORD_SCHEMA_HEADER]: EVENT_BATCH_SCHEMA } };
}

/**
 * A Kafka record as an EngagementEvent, or why it cannot be one (it then
 * goes to the dead-letter topic instead of blocking its partition).
 */
export function decodeEvent(value: Buffer | null): Decoded {
  if (!value || value.length === 0) return { poison: 'empty record' };
  let event: EngagementEvent;
  try {
    event = eventsV1.EngagementEvent.decode(value);
  } catch (error) {
    return { poison: `not an EngagementEvent: ${(error as Error).message}` };
  }
  const problem = invalidity(event);
  return problem ? { poison: problem } : { event };
}

function invalidity(event: EngagementEvent): string | undefined {
  if (event.providerEventId === '') return 'provider_event_id is empty';
  if (event.provider === '') return 'provider is empty';
  if (event.email === '') return 'email is empty';
  if (!STORED_TYPES.has(event.eventType)) return `unknown event_type ${event.eventType}`;
  if (event.eventType === EventType.EVENT_TYPE_BOUNCE && (BOUNCE_TYPES.get(event.bounceType) ?? 'none') === 'none') {
    return 'bounce without bounce_type';
  }
  for (const [name, date] of [
    ['occurred_at', event.occurredAt],
    ['received_at', event.receivedAt],
  ] as const) {
    const seconds = date ? date.getTime() / 1000 : Number.NaN;
    if (!(seconds >= 0 && seconds <= MAX_SECONDS)) return `${name} is missing or out of range`;
  }
  return undefined;
}

const STORED_TYPES = storedNames(PROTO_EVENT_TYPES);
const BOUNCE_TYPES = storedNames(PROTO_BOUNCE_TYPES);

/** The stored type of a decoded event (decodeEvent has checked that it has one). */
export function storedType(event: EngagementEvent): StoredEventType {
  return STORED_TYPES.get(event.eventType)!;
}

export function storedBounceType(event: EngagementEvent): StoredBounceType {
  return event.eventType === EventType.EVENT_TYPE_BOUNCE ? BOUNCE_TYPES.get(event.bounceType)! : 'none';
}

const BOUNCE_CLASSES = storedNames(PROTO_BOUNCE_CLASSES);

/** 'none' on every event but a bounce; a bounce without a class (one written before classes) is unclassified. */
export function storedBounceClass(event: EngagementEvent): StoredBounceClass {
  if (event.eventType !== EventType.EVENT_TYPE_BOUNCE) return 'none';
  return BOUNCE_CLASSES.get(event.bounceClass) ?? 'unclassified';
}

/**
 * Why an event suppresses its address, if it does. A soft bounce the
 * provider blames on the sender's side (SENDER_SIDE_BOUNCE_CLASSES) says
 * nothing about the address and does not count towards its soft bounces.
 */
export function signalReason(event: EngagementEvent): SignalReason | undefined {
  switch (event.eventType) {
    case EventType.EVENT_TYPE_BOUNCE:
      if (event.bounceType !== BounceType.BOUNCE_TYPE_SOFT) return 'hard_bounce';
      return SENDER_SIDE_BOUNCE_CLASSES.includes(storedBounceClass(event)) ? undefined : 'soft_bounce';
    case EventType.EVENT_TYPE_UNSUBSCRIBE:
      return 'unsubscribe';
    case EventType.EVENT_TYPE_SPAM_REPORT:
      return 'spam_report';
    default:
      return undefined;
  }
}

/** Identity of a provider event: redeliveries of one event share it. */
export const eventKey = (event: EngagementEvent): string => `${event.provider}:${event.providerEventId}`;

const EVENT_ID_NAMESPACE = Buffer.from('5b0d6a4e8f3c4d2a9c1e7f60a2b4c6d8', 'hex');

/** The RFC 4122 variant digit for each value of the hash's two low bits there. */
const VARIANT_DIGITS = '89ab';

/** Name-based (SHA-1, version 5) UUID of provider + provider_event_id, so a redelivered event gets the same id. */
export function eventId(event: EngagementEvent): string {
  const key = eventKey(event);
  // One buffer and the one-shot hash rather than a Hash object per event (bench/README.md, "Ingestion: event ids").
  const input = Buffer.allocUnsafe(EVENT_ID_NAMESPACE.length + Buffer.byteLength(key, 'utf8'));
  EVENT_ID_NAMESPACE.copy(input);
  input.write(key, EVENT_ID_NAMESPACE.length, 'utf8');
  // The hash as hex, with the version and variant set on its digits, rather than through a Buffer.
  const hex = crypto.hash('sha1', input, 'hex');
  const variant = VARIANT_DIGITS[Number.parseInt(hex[16], 16) & 0x3];
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
