import { eventsV1 } from '@mail/proto';
import type { BounceClass, EventRow, StoredBounceType, StoredEventType } from './events';

const { EventType, BounceType, BounceClass: ProtoBounceClass } = eventsV1;

/** The proto's event types by their stored names (which the API uses too), in the order of EVENT_TYPES. */
export const PROTO_EVENT_TYPES: Readonly<Record<StoredEventType, eventsV1.EventType>> = {
  open: EventType.EVENT_TYPE_OPEN,
  click: EventType.EVENT_TYPE_CLICK,
  bounce: EventType.EVENT_TYPE_BOUNCE,
  unsubscribe: EventType.EVENT_TYPE_UNSUBSCRIBE,
  processed: EventType.EVENT_TYPE_PROCESSED,
  delivered: EventType.EVENT_TYPE_DELIVERED,
  deferred: EventType.EVENT_TYPE_DEFERRED,
  dropped: EventType.EVENT_TYPE_DROPPED,
  spamreport: EventType.EVENT_TYPE_SPAM_REPORT,
  sent: EventType.EVENT_TYPE_SENT,
};

/** The stored bounce types of the proto's ('none': no bounce type, on every event but a bounce). */
export const PROTO_BOUNCE_TYPES: Readonly<Record<StoredBounceType, eventsV1.BounceType>> = {
  none: BounceType.BOUNCE_TYPE_UNSPECIFIED,
  hard: BounceType.BOUNCE_TYPE_HARD,
  soft: BounceType.BOUNCE_TYPE_SOFT,
};

export const PROTO_BOUNCE_CLASSES: Readonly<Record<BounceClass, eventsV1.BounceClass>> = {
  invalid_address: ProtoBounceClass.BOUNCE_CLASS_INVALID_ADDRESS,
  mailbox_unavailable: ProtoBounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE,
  technical: ProtoBounceClass.BOUNCE_CLASS_TECHNICAL,
  content: ProtoBounceClass.BOUNCE_CLASS_CONTENT,
  reputation: ProtoBounceClass.BOUNCE_CLASS_REPUTATION,
  frequency_or_volume: ProtoBounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME,
  unclassified: ProtoBounceClass.BOUNCE_CLASS_UNCLASSIFIED,
};

/** The reverse of a table above: the stored name of a proto value, if it has one. */
export function storedNames<Name extends string, Value>(table: Readonly<Record<Name, Value>>): ReadonlyMap<Value, Name> {
  return new Map(Object.entries(table).map(([name, value]) => [value as Value, name as Name]));
}

/** What the proto's event messages say of an event besides its type, its place and its times. */
export type EventDetails = Pick<
  eventsV1.EngagementEvent,
  'url' | 'reason' | 'userAgent' | 'ip' | 'provider' | 'providerEventId' | 'providerMessageId'
>;
export type StoredEventDetails = Pick<
  EventRow,
  'url' | 'reason' | 'user_agent' | 'ip' | 'provider' | 'provider_event_id' | 'provider_message_id'
>;

/** An event's details under their stored names (which the API uses too), the absent ones null. */
export function storedEventDetails(event: EventDetails): StoredEventDetails {
  return {
    url: event.url ?? null,
    reason: event.reason ?? null,
    user_agent: event.userAgent ?? null,
    ip: event.ip ?? null,
    provider: event.provider,
    provider_event_id: event.providerEventId,
    provider_message_id: event.providerMessageId ?? null,
  };
}

/** The reverse of storedEventDetails: the null ones unset. */
export function eventDetails(row: StoredEventDetails): EventDetails {
  return {
    url: row.url ?? undefined,
    reason: row.reason ?? undefined,
    userAgent: row.user_agent ?? undefined,
    ip: row.ip ?? undefined,
    provider: row.provider,
    providerEventId: row.provider_event_id,
    providerMessageId: row.provider_message_id ?? undefined,
  };
}
