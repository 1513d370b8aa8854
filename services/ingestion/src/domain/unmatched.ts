import { fromSendgridEvent, type SendgridEventFields } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import type { UnmatchedEvent } from '../store/unmatched';

type EngagementEvent = eventsV1.EngagementEvent;

/**
 * What an unmatched event keeps of itself for re-matching, whatever its
 * provider: base64 of the encoded event without raw_json, which the row's
 * raw column holds already.
 */
export function encodeUnmatched(event: EngagementEvent): string {
  return Buffer.from(eventsV1.EngagementEvent.encode({ ...event, rawJson: '' }).finish()).toString('base64');
}

const isSendgridEvent = (value: unknown): value is SendgridEventFields =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as SendgridEventFields).sg_event_id === 'string' &&
  typeof (value as SendgridEventFields).email === 'string' &&
  typeof (value as SendgridEventFields).event === 'string';

/**
 * The event an unmatched row was stored from: decoded from its encoded_event,
 * or, in a row stored before rows kept it, made again of its SendGrid JSON as
 * the webhook made it (SendGrid was the only provider of the releases that
 * stored such rows). Undefined for a damaged row.
 */
export function fromUnmatched(row: UnmatchedEvent): EngagementEvent | undefined {
  if (row.encoded_event !== '') {
    try {
      return { ...eventsV1.EngagementEvent.decode(Buffer.from(row.encoded_event, 'base64')), rawJson: row.raw };
    } catch {
      return undefined;
    }
  }
  let raw: unknown;
  try {
    raw = JSON.parse(row.raw);
  } catch {
    return undefined;
  }
  if (row.provider !== 'sendgrid' || !isSendgridEvent(raw) || raw.sg_event_id !== row.provider_event_id) return undefined;
  return fromSendgridEvent(raw, new Date(row.occurred_at * 1000), new Date(row.received_at * 1000));
}
