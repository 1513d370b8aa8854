import { eventsV1 } from '@mail/proto';

const { EventType, BounceType, BounceClass } = eventsV1;

/**
 * SendGrid event name → what is stored; names not listed (group_resubscribe,
 * ...) are dropped. The webhook applies it to what the provider posts, and
 * ingestion again to the raw JSON of an event that matched no campaign when
 * it later re-matches it.
 */
export const SENDGRID_EVENT_TYPES: ReadonlyMap<string, eventsV1.EventType> = new Map([
  ['open', EventType.EVENT_TYPE_OPEN],
  ['click', EventType.EVENT_TYPE_CLICK],
  ['bounce', EventType.EVENT_TYPE_BOUNCE],
  ['unsubscribe', EventType.EVENT_TYPE_UNSUBSCRIBE],
  ['group_unsubscribe', EventType.EVENT_TYPE_UNSUBSCRIBE],
  ['spamreport', EventType.EVENT_TYPE_SPAM_REPORT],
  ['processed', EventType.EVENT_TYPE_PROCESSED],
  ['delivered', EventType.EVENT_TYPE_DELIVERED],
  ['deferred', EventType.EVENT_TYPE_DEFERRED],
  ['dropped', EventType.EVENT_TYPE_DROPPED],
]);

/** SendGrid's bounce_classification → the stored class; any other value (or none) is unclassified. */
export const SENDGRID_BOUNCE_CLASSES: ReadonlyMap<string, eventsV1.BounceClass> = new Map([
  ['Invalid Address', BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  ['Mailbox Unavailable', BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE],
  ['Technical', BounceClass.BOUNCE_CLASS_TECHNICAL],
  ['Content', BounceClass.BOUNCE_CLASS_CONTENT],
  ['Reputation', BounceClass.BOUNCE_CLASS_REPUTATION],
  ['Frequency or Volume Issues', BounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME],
  ['Unclassified', BounceClass.BOUNCE_CLASS_UNCLASSIFIED],
]);

/** The fields of a SendGrid event the webhook requires of a kept one (it validates them first). */
export interface SendgridEventFields {
  sg_event_id: string;
  email: string;
  event: string;
  [field: string]: unknown;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

function categoriesOf(category: unknown): string[] {
  if (typeof category === 'string') return [category];
  return Array.isArray(category) ? category.filter((item): item is string => typeof item === 'string') : [];
}

/**
 * The normalized event, or undefined for an event type that is accepted but
 * not kept. A bounce is soft only when SendGrid says `blocked`; `bounce`, a
 * missing type or any other type counts as hard. Custom args arrive as
 * top-level fields: `variant_id` names the message's variant, `run_id` its run. `reason` is
 * SendGrid's `reason` (bounces, dropped) or else its `response` (deferred,
 * delivered). `occurredAt` is the event's `timestamp`, which the caller has
 * read (the webhook validates it as a lax integer).
 */
export function fromSendgridEvent(event: SendgridEventFields, occurredAt: Date, receivedAt: Date): eventsV1.EngagementEvent | undefined {
  const eventType = SENDGRID_EVENT_TYPES.get(event.event);
  if (eventType === undefined) return undefined;
  const bounce = eventType === EventType.EVENT_TYPE_BOUNCE;
  const bounceType = !bounce
    ? BounceType.BOUNCE_TYPE_UNSPECIFIED
    : event.type === 'blocked'
      ? BounceType.BOUNCE_TYPE_SOFT
      : BounceType.BOUNCE_TYPE_HARD;
  const classification = event.bounce_classification;
  const bounceClass = !bounce
    ? BounceClass.BOUNCE_CLASS_UNSPECIFIED
    : ((typeof classification === 'string' ? SENDGRID_BOUNCE_CLASSES.get(classification) : undefined) ??
      BounceClass.BOUNCE_CLASS_UNCLASSIFIED);
  return {
    providerEventId: event.sg_event_id,
    providerMessageId: text(event.sg_message_id),
    provider: 'sendgrid',
    eventType,
    bounceType,
    email: event.email.trim().toLowerCase(),
    occurredAt,
    receivedAt,
    categories: categoriesOf(event.category),
    url: text(event.url),
    reason: text(event.reason) ?? text(event.response),
    userAgent: text(event.useragent),
    ip: text(event.ip),
    rawJson: JSON.stringify(event),
    machineOpen: eventType === EventType.EVENT_TYPE_OPEN && event.sg_machine_open === true,
    machineClick: false,
    variantId: text(event.variant_id),
    runId: text(event.run_id),
    bounceClass,
  };
}
