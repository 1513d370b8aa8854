import { SENDGRID_EVENT_TYPES, fromSendgridEvent, type SendgridEventFields, type Violation } from '@mail/common';
import { chsql } from '@mail/event-store';
import { eventsV1 } from '@mail/proto';
import { isRecord } from '../pydantic/request-schemas';
import { intFromString } from '../pydantic/scalars';
import { MAX_DETAIL_ENTRIES } from '../pydantic/violations';

/**
 * One SendGrid event of a type that is kept, as the webhook requires it.
 * These four fields are validated like a Pydantic v2 model in lax mode would
 * (so the 422 entries read exactly like FastAPI's); every other field is
 * optional, read only when it has the expected type, and kept as received in
 * raw_json. An event of a type that is not kept needs only its `event`.
 */
export interface SendgridEvent extends SendgridEventFields {
  /** Unix seconds, as a lax integer (see laxInteger). */
  timestamp: number | string | boolean;
}

/** The last event time the event store takes and reads right (2106-02-05T23:59:59Z; see DATE_TIME_SECONDS). */
export const MAX_TIMESTAMP = chsql.DATE_TIME_SECONDS.max - 1;

type Loc = (string | number)[];
type Check = (value: unknown, loc: Loc) => Violation | undefined;

const violation = (type: string, loc: Loc, msg: string, input: unknown, ctx?: Record<string, unknown>): Violation =>
  ctx ? { type, loc, msg, input, ctx } : { type, loc, msg, input };

/** A string of at least `minLength` code points; `trimmed`: counted without surrounding white space (Pydantic's strip_whitespace). */
const string =
  (minLength: number, trimmed = false): Check =>
  (value, loc) => {
    if (typeof value !== 'string') return violation('string_type', loc, 'Input should be a valid string', value);
    const counted = trimmed ? value.trim() : value;
    // Pydantic counts code points; spreading the string to count them is needed only when UTF-16 units leave it open.
    if (counted.length < 2 * minLength && [...counted].length < minLength) {
      return violation('string_too_short', loc, `String should have at least ${minLength} character`, value, { min_length: minLength });
    }
    return undefined;
  };

/** Pydantic's lax int: integral numbers, booleans, and integer strings. */
function laxInteger(value: unknown): number | undefined {
  if (typeof value === 'boolean') return Number(value);
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  return typeof value === 'string' ? intFromString(value) : undefined;
}

const unixSeconds: Check = (value, loc) => {
  const seconds = laxInteger(value);
  if (seconds === undefined) {
    if (typeof value === 'number') {
      return violation('int_from_float', loc, 'Input should be a valid integer, got a number with a fractional part', value);
    }
    if (typeof value === 'string') {
      return violation('int_parsing', loc, 'Input should be a valid integer, unable to parse string as an integer', value);
    }
    return violation('int_type', loc, 'Input should be a valid integer', value);
  }
  if (seconds < 0) return violation('greater_than_equal', loc, 'Input should be greater than or equal to 0', value, { ge: 0 });
  if (seconds > MAX_TIMESTAMP) {
    return violation('less_than_equal', loc, `Input should be less than or equal to ${MAX_TIMESTAMP}`, value, { le: MAX_TIMESTAMP });
  }
  return undefined;
};

/** The required fields of an event that is kept, in the order a model would report them. */
const REQUIRED: [keyof SendgridEvent & string, Check][] = [
  ['sg_event_id', string(1)],
  // Stored trimmed (fromSendgridEvent): white space alone would leave no address, and ingestion dead-letters such an event.
  ['email', string(1, true)],
  ['event', string(0)],
  ['timestamp', unixSeconds],
];

/**
 * The body's violations in order, with `loc` from "body": all of them, up to
 * MAX_DETAIL_ENTRIES (checking stops there, so a body of a million bad items
 * costs no more than one of a thousand); an empty list means every item is a SendgridEvent or dropped.
 */
export function bodyViolations(body: unknown): Violation[] {
  if (body === null) return [violation('missing', ['body'], 'Field required', null)];
  if (!Array.isArray(body)) return [violation('list_type', ['body'], 'Input should be a valid list', body)];
  const violations: Violation[] = [];
  for (let index = 0; index < body.length && violations.length < MAX_DETAIL_ENTRIES; index++) {
    const item: unknown = body[index];
    if (!isRecord(item)) {
      violations.push(
        violation('model_attributes_type', ['body', index], 'Input should be a valid dictionary or object to extract fields from', item),
      );
      continue;
    }
    // An event of a type that is not kept is dropped whatever else it holds: only its type is read.
    if (typeof item.event === 'string' && !SENDGRID_EVENT_TYPES.has(item.event)) continue;
    for (const [field, check] of REQUIRED) {
      const loc = ['body', index, field];
      const found = Object.hasOwn(item, field) ? check(item[field], loc) : violation('missing', loc, 'Field required', item);
      if (found) violations.push(found);
    }
  }
  return violations.slice(0, MAX_DETAIL_ENTRIES);
}

/** The normalized event for Kafka, or undefined for an event type that is accepted but not kept. */
export function toEngagementEvent(event: SendgridEvent, receivedAt: Date): eventsV1.EngagementEvent | undefined {
  return fromSendgridEvent(event, new Date(laxInteger(event.timestamp)! * 1000), receivedAt);
}

/** EngagementEventBatch.events: field 1, length-delimited. */
const BATCH_EVENTS_TAG = (1 << 3) | 2;

/**
 * Each event encoded as a one-event EngagementEventBatch. Protobuf appends
 * the repeated fields of concatenated messages, so the record of a partition
 * is its events' buffers back to back, with no second encoding. One writer
 * serves them all: its buffer grows once per call, not once per event.
 */
export function encodeEvents(events: eventsV1.EngagementEvent[]): Buffer[] {
  // An empty batch leaves the writer empty; finish() empties it again after each event.
  const writer = eventsV1.EngagementEventBatch.encode({ events: [] });
  return events.map((event) => {
    eventsV1.EngagementEvent.encode(event, writer.uint32(BATCH_EVENTS_TAG).fork()).join();
    const bytes = writer.finish();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  });
}
