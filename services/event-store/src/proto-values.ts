import { eventsV1 } from '@mail/proto';
import type { BounceClass, StoredBounceType, StoredEventType } from './schema';

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
