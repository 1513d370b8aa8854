import { fromSendgridEvent, type SendgridEventFields } from '@mail/common';
import type { eventsV1 } from '@mail/proto';
import type { UnmatchedEvent } from '../store/unmatched';

const isSendgridEvent = (value: unknown): value is SendgridEventFields =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as SendgridEventFields).sg_event_id === 'string' &&
  typeof (value as SendgridEventFields).email === 'string' &&
  typeof (value as SendgridEventFields).event === 'string';

/** The event the webhook made of the row's SendGrid JSON, or undefined for a row that holds none. */
export function fromUnmatched(row: UnmatchedEvent): eventsV1.EngagementEvent | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(row.raw);
  } catch {
    return undefined;
  }
  if (row.provider !== 'sendgrid' || !isSendgridEvent(raw) || raw.sg_event_id !== row.provider_event_id) return undefined;
  return fromSendgridEvent(raw, new Date(row.occurred_at * 1000), new Date(row.received_at * 1000));
}
