import crypto from 'node:crypto';
import { eventsV1 } from '@mail/proto';
import { basicAuthGate } from '../auth';
import { basicAuthCredential, defineProvider } from '../declaration';
import { FieldReader, bodyObject, normalizedEvent, optionalText, parseJsonBody, type EventFields, type JsonObject } from '../provider';
import { isRecord } from '../../pydantic/request-schemas';

const { EventType, BounceType, BounceClass } = eventsV1;

type BounceKind = Pick<eventsV1.EngagementEvent, 'eventType' | 'bounceType' | 'bounceClass'>;
const hard = (bounceClass: eventsV1.BounceClass): BounceKind => ({
  eventType: EventType.EVENT_TYPE_BOUNCE,
  bounceType: BounceType.BOUNCE_TYPE_HARD,
  bounceClass,
});
const soft = (bounceClass: eventsV1.BounceClass): BounceKind => ({
  eventType: EventType.EVENT_TYPE_BOUNCE,
  bounceType: BounceType.BOUNCE_TYPE_SOFT,
  bounceClass,
});
const dropped: BounceKind = {
  eventType: EventType.EVENT_TYPE_DROPPED,
  bounceType: BounceType.BOUNCE_TYPE_UNSPECIFIED,
  bounceClass: BounceClass.BOUNCE_CLASS_UNSPECIFIED,
};

/**
 * Postmark's bounce `Type`s that say something about the recipient's
 * address or the message; the others (auto-responders, address changes,
 * subscribe and unsubscribe requests, challenge and inbound notices) are
 * accepted and not kept. Types where Postmark did not send are dropped.
 */
const BOUNCE_TYPES: ReadonlyMap<string, BounceKind> = new Map([
  ['HardBounce', hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
  ['BadEmailAddress', hard(BounceClass.BOUNCE_CLASS_INVALID_ADDRESS)],
  ['SoftBounce', soft(BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE)],
  ['Transient', soft(BounceClass.BOUNCE_CLASS_TECHNICAL)],
  ['DnsError', soft(BounceClass.BOUNCE_CLASS_TECHNICAL)],
  ['DMARCPolicy', soft(BounceClass.BOUNCE_CLASS_TECHNICAL)],
  ['SpamNotification', soft(BounceClass.BOUNCE_CLASS_CONTENT)],
  ['VirusNotification', soft(BounceClass.BOUNCE_CLASS_CONTENT)],
  ['Blocked', soft(BounceClass.BOUNCE_CLASS_REPUTATION)],
  ['Unknown', soft(BounceClass.BOUNCE_CLASS_UNCLASSIFIED)],
  ['ManuallyDeactivated', dropped],
  ['Unconfirmed', dropped],
  ['SMTPApiError', dropped],
  ['TemplateRenderingFailed', dropped],
]);

/** Suppressions Postmark reports for a bounce or complaint it reported already: not an unsubscribe. */
const CONSEQUENTIAL_SUPPRESSIONS = new Set(['HardBounce', 'SpamComplaint']);

/** Per record type: the recipient field, the time field, and what it becomes. */
interface RecordShape {
  recipient: 'Recipient' | 'Email';
  time: string;
  kind(record: JsonObject): BounceKind | undefined;
}

const plain = (eventType: eventsV1.EventType): BounceKind => ({
  eventType,
  bounceType: BounceType.BOUNCE_TYPE_UNSPECIFIED,
  bounceClass: BounceClass.BOUNCE_CLASS_UNSPECIFIED,
});

const RECORD_TYPES: ReadonlyMap<string, RecordShape> = new Map([
  ['Delivery', { recipient: 'Recipient', time: 'DeliveredAt', kind: () => plain(EventType.EVENT_TYPE_DELIVERED) }],
  ['Bounce', { recipient: 'Email', time: 'BouncedAt', kind: (record) => BOUNCE_TYPES.get(String(record.Type)) }],
  ['SpamComplaint', { recipient: 'Email', time: 'BouncedAt', kind: () => plain(EventType.EVENT_TYPE_SPAM_REPORT) }],
  ['Open', { recipient: 'Recipient', time: 'ReceivedAt', kind: () => plain(EventType.EVENT_TYPE_OPEN) }],
  ['Click', { recipient: 'Recipient', time: 'ReceivedAt', kind: () => plain(EventType.EVENT_TYPE_CLICK) }],
  [
    'SubscriptionChange',
    {
      recipient: 'Recipient',
      time: 'ChangedAt',
      kind: (record) =>
        record.SuppressSending === true && !CONSEQUENTIAL_SUPPRESSIONS.has(String(record.SuppressionReason))
          ? plain(EventType.EVENT_TYPE_UNSUBSCRIBE)
          : undefined,
    },
  ],
] satisfies [string, RecordShape][]);

/** Postmark's webhooks: one record per request, behind HTTP Basic credentials set in the webhook's URL. */
export const postmark = defineProvider({
  name: 'postmark',
  variables: {
    basicAuth: basicAuthCredential('POSTMARK_WEBHOOK_BASIC_AUTH', "`user:password` for HTTP Basic on Postmark's webhook: its credential."),
  },
  docs: {
    title: 'Postmark',
    verification: 'HTTP Basic (the credentials set in the webhook URL)',
    category: '`Tag`',
    variant: '`Metadata` `variant_id`',
    bounceSource: '`Type`',
    bounceClasses: {
      invalid_address: 'HardBounce, BadEmailAddress',
      mailbox_unavailable: 'SoftBounce',
      technical: 'Transient, DnsError, DMARCPolicy',
      content: 'SpamNotification, VirusNotification',
      reputation: 'Blocked',
      unclassified: 'Unknown',
    },
  },
  create: ({ basicAuth }) => {
    const basic = basicAuthGate(basicAuth);
    return {
      challenge: basic.challenge,
      headerFailure: (req) => basic.failure(req.headers.authorization),
      receive: (_req, raw, receivedAt) => {
        const record = bodyObject(parseJsonBody(raw));
        const event = toEvent(record, receivedAt);
        return Promise.resolve({
          kind: 'events',
          accepted: 1,
          events: event ? [event] : [],
          sourceOf: () => ({ loc: ['body'], input: record }),
        });
      },
    };
  },
});

function toEvent(record: JsonObject, receivedAt: Date): eventsV1.EngagementEvent | undefined {
  const fields = new FieldReader();
  const recordType = fields.text(record, 'RecordType', ['body'], 0);
  fields.check();
  const shape = RECORD_TYPES.get(recordType!);
  const kind = shape?.kind(record);
  if (!shape || !kind) return undefined;
  const email = fields.text(record, shape.recipient, ['body']);
  const occurredAt = fields.dateTime(record, shape.time, ['body']);
  const bounceId = shape.recipient === 'Email' ? bounceIdOf(record, fields) : undefined;
  fields.check();
  const metadata = isRecord(record.Metadata) ? record.Metadata : {};
  const tag = optionalText(record.Tag);
  const event: EventFields = {
    provider: 'postmark',
    providerEventId: bounceId ?? recordHash(record, recordType!, email!, shape.time),
    providerMessageId: optionalText(record.MessageID),
    ...kind,
    email: email!,
    occurredAt: occurredAt!,
    receivedAt,
    categories: tag ? [tag] : [],
    variantId: optionalText(metadata.variant_id),
    runId: optionalText(metadata.run_id),
    url: optionalText(record.OriginalLink),
    reason:
      kind.eventType === EventType.EVENT_TYPE_BOUNCE || kind.eventType === EventType.EVENT_TYPE_DROPPED ? bounceReason(record) : undefined,
    userAgent: optionalText(record.UserAgent),
    raw: record,
  };
  return normalizedEvent(event);
}

/** Bounces and spam complaints carry Postmark's bounce ID, an integer. */
function bounceIdOf(record: JsonObject, fields: FieldReader): string | undefined {
  const id = fields.integer(record, 'ID', ['body']);
  return id === undefined ? undefined : `bounce-${id}`;
}

/** Other records have no id of their own: what identifies one (a click per link) is hashed, so a redelivery gets the same id. */
function recordHash(record: JsonObject, recordType: string, email: string, timeField: string): string {
  const identity = [recordType, optionalText(record.MessageID), email, record[timeField], optionalText(record.OriginalLink)];
  return `${recordType.toLowerCase()}-${crypto.createHash('sha256').update(JSON.stringify(identity)).digest('hex').slice(0, 32)}`;
}

function bounceReason(record: JsonObject): string | undefined {
  return optionalText(record.Details) ?? optionalText(record.Description);
}
