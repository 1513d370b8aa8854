import { ConfigError, smtpBounceClass, valueError, type Logger } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { HttpError, unprocessable } from '../../errors/http-error';
import {
  FieldReader,
  bodyObject,
  normalizedEvent,
  optionalText,
  parseJsonBody,
  strings,
  type EventFields,
  type JsonObject,
  type Loc,
  type Reception,
  type WebhookProvider,
} from '../provider';
import { isRecord } from '../../pydantic/request-schemas';
import { defineProvider, listCredential, setting } from '../declaration';
import { SnsVerifier, allowedSnsUrl, httpsGet } from './sns';

const { EventType, BounceType, BounceClass } = eventsV1;

/** Amazon SNS's regional endpoints (China's included), which serve its signing certificates. */
const DEFAULT_SNS_CERT_HOST_PATTERN = '^sns\\.[a-z0-9-]+\\.amazonaws\\.com(\\.cn)?$';

function hostPattern(source: string): RegExp {
  try {
    return new RegExp(source);
  } catch {
    throw new ConfigError(`SES_SNS_CERT_HOST_PATTERN is not a regular expression: ${source}`);
  }
}

/** SES bounceSubType → class; General and Undetermined are classified from the recipient's SMTP status when there is one. */
const BOUNCE_SUBTYPES: ReadonlyMap<string, eventsV1.BounceClass> = new Map([
  ['NoEmail', BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  ['Suppressed', BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  ['OnAccountSuppressionList', BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  ['MailboxFull', BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE],
  ['MessageTooLarge', BounceClass.BOUNCE_CLASS_CONTENT],
  ['ContentRejected', BounceClass.BOUNCE_CLASS_CONTENT],
  ['AttachmentRejected', BounceClass.BOUNCE_CLASS_CONTENT],
]);

const MESSAGE_LOC: Loc = ['body', 'Message'];
const MAIL_LOC: Loc = [...MESSAGE_LOC, 'mail'];

/**
 * SES sends a message to at most 50 recipients (To, Cc and Bcc together), so
 * an event names at most that many; a longer list is a 422, since each
 * recipient becomes an event of its own.
 */
const MAX_RECIPIENTS = 50;

/**
 * The fields of `mail` that identify the message, kept in each recipient's
 * raw record; `destination` is narrowed to the recipient, and the headers
 * (every recipient again, of any size) are left out.
 */
const MAIL_IDENTITY = ['timestamp', 'messageId', 'source', 'sourceArn', 'sendingAccountId', 'callerIdentity', 'tags'];

/**
 * What a message's events may copy in all: the part of the raw record they
 * share (type, mail identity, the event's object), times the recipients.
 * Real SES events share a few ids, times and tags, far below it; the cap
 * keeps the records of any call within its size plus this much.
 */
const MAX_COPIED_BYTES = 2 * 1024 * 1024;

/** One recipient's event of an SES event, before the fields every event shares; `entry` is its item of the recipient list. */
type RecipientEvent = Omit<EventFields, 'provider' | 'providerEventId' | 'receivedAt' | 'raw' | 'occurredAt'> & { entry: unknown };

interface SesEventReader {
  /** The event's own object (`bounce` for a Bounce), whose `timestamp` is the event's time; Send and Reject use the mail's. */
  detail?: string;
  /** Send's and Reject's own object (`send`, `reject`), beside the mail whose timestamp they use; the others' is the detail. */
  besideMail?: string;
  /** Where the recipients are listed: the detail's list of that name, or else the mail's `destination`. */
  recipientList?: string;
  recipients(detail: JsonObject, mail: JsonObject, fields: FieldReader, loc: Loc, own: JsonObject): RecipientEvent[];
}

/** The events of the mail's `destination` addresses. */
const destinationEvents = (mail: JsonObject, fields: FieldReader, eventType: eventsV1.EventType, extra: Partial<RecipientEvent> = {}) =>
  fields.texts(mail, 'destination', MAIL_LOC, MAX_RECIPIENTS).map((email) => ({ eventType, email, entry: email, ...extra }));

type Recipient = JsonObject & { emailAddress: string };

/** The recipients of a list of recipient objects (bounced, complained, delayed), each with its `emailAddress`. */
function recipientsAt(container: JsonObject, key: string, fields: FieldReader, loc: Loc): Recipient[] {
  return fields
    .objects(container, key, loc, MAX_RECIPIENTS)
    .flatMap(({ object, loc: itemLoc }) => (fields.text(object, 'emailAddress', itemLoc) === undefined ? [] : [object as Recipient]));
}

const EVENT_READERS: ReadonlyMap<string, SesEventReader> = new Map<string, SesEventReader>([
  ['Send', { besideMail: 'send', recipients: (_d, mail, fields) => destinationEvents(mail, fields, EventType.EVENT_TYPE_PROCESSED) }],
  [
    'Reject',
    {
      besideMail: 'reject',
      recipients: (_d, mail, fields, _loc, reject) =>
        destinationEvents(mail, fields, EventType.EVENT_TYPE_DROPPED, { reason: optionalText(reject.reason) }),
    },
  ],
  [
    'Delivery',
    {
      detail: 'delivery',
      recipientList: 'recipients',
      recipients: (detail, _mail, fields, loc) =>
        fields
          .texts(detail, 'recipients', loc, MAX_RECIPIENTS)
          .map((email) => ({ eventType: EventType.EVENT_TYPE_DELIVERED, email, entry: email })),
    },
  ],
  [
    'Bounce',
    {
      detail: 'bounce',
      recipientList: 'bouncedRecipients',
      recipients: (detail, _mail, fields, loc) => {
        const bounceType = detail.bounceType === 'Permanent' ? BounceType.BOUNCE_TYPE_HARD : BounceType.BOUNCE_TYPE_SOFT;
        const subtype = BOUNCE_SUBTYPES.get(String(detail.bounceSubType));
        return recipientsAt(detail, 'bouncedRecipients', fields, loc).map((recipient) => {
          const reason = optionalText(recipient.diagnosticCode) ?? optionalText(recipient.status);
          return {
            eventType: EventType.EVENT_TYPE_BOUNCE,
            bounceType,
            bounceClass: subtype ?? smtpBounceClass(undefined, reason, optionalText(recipient.status)),
            email: recipient.emailAddress,
            reason,
            entry: recipient,
          };
        });
      },
    },
  ],
  [
    'Complaint',
    {
      detail: 'complaint',
      recipientList: 'complainedRecipients',
      recipients: (detail, _mail, fields, loc) =>
        recipientsAt(detail, 'complainedRecipients', fields, loc).map((recipient) => ({
          eventType: EventType.EVENT_TYPE_SPAM_REPORT,
          email: recipient.emailAddress,
          entry: recipient,
        })),
    },
  ],
  [
    'DeliveryDelay',
    {
      detail: 'deliveryDelay',
      recipientList: 'delayedRecipients',
      recipients: (detail, _mail, fields, loc) =>
        recipientsAt(detail, 'delayedRecipients', fields, loc).map((recipient) => ({
          eventType: EventType.EVENT_TYPE_DEFERRED,
          email: recipient.emailAddress,
          reason: optionalText(recipient.diagnosticCode) ?? optionalText(detail.delayType),
          entry: recipient,
        })),
    },
  ],
  [
    'Open',
    {
      detail: 'open',
      recipients: (detail, mail, fields) =>
        destinationEvents(mail, fields, EventType.EVENT_TYPE_OPEN, {
          userAgent: optionalText(detail.userAgent),
          ip: optionalText(detail.ipAddress),
        }),
    },
  ],
  [
    'Click',
    {
      detail: 'click',
      recipients: (detail, mail, fields) =>
        destinationEvents(mail, fields, EventType.EVENT_TYPE_CLICK, {
          url: optionalText(detail.link),
          userAgent: optionalText(detail.userAgent),
          ip: optionalText(detail.ipAddress),
        }),
    },
  ],
  [
    'Subscription',
    {
      detail: 'subscription',
      // Only a change that stops mail: opting out of everything, or of a topic.
      recipients: (detail, mail, fields) => {
        const preferences = isRecord(detail.newTopicPreferences) ? detail.newTopicPreferences : {};
        const topics = Array.isArray(preferences.topicSubscriptionStatus) ? preferences.topicSubscriptionStatus : [];
        const optedOut =
          preferences.unsubscribeAll === true || topics.some((topic) => isRecord(topic) && topic.subscriptionStatus === 'OptOut');
        return optedOut ? destinationEvents(mail, fields, EventType.EVENT_TYPE_UNSUBSCRIBE) : [];
      },
    },
  ],
]);

/**
 * Amazon SES event publishing (or notifications) through an SNS topic
 * subscribed over HTTPS: each SNS message is verified (signature,
 * certificate host, topic), subscriptions are confirmed, and a
 * notification's SES event becomes one event per recipient it names.
 */
export const ses = defineProvider({
  name: 'ses',
  variables: {
    topicArns: listCredential(
      'SES_SNS_TOPIC_ARNS',
      "Comma list of the SNS topics SES publishes to: SES's credential; messages of other topics are refused.",
      'arn:aws:sns:us-east-1:123456789012:ses',
    ),
    certHostPattern: setting(
      'SES_SNS_CERT_HOST_PATTERN',
      DEFAULT_SNS_CERT_HOST_PATTERN,
      'Regular expression the host of an SNS `SigningCertURL` and `SubscribeURL` must match (https on port 443 only); nothing is fetched from another host or port.',
      hostPattern,
    ),
  },
  docs: {
    title: 'Amazon SES',
    verification:
      'SNS (over HTTPS): signatures v1 and v2 of a listed topic, the certificate fetched over https from a host matching `SES_SNS_CERT_HOST_PATTERN`; the subscription is confirmed when SNS asks',
    category: 'message tag `category`',
    variant: 'message tag `variant_id`',
    bounceSource: '`bounceSubType`',
    bounceClasses: {
      invalid_address: 'NoEmail, Suppressed, OnAccountSuppressionList',
      mailbox_unavailable: 'MailboxFull',
      content: 'MessageTooLarge, ContentRejected, AttachmentRejected',
      unclassified: "General, Undetermined (else from the recipient's status as for Mailgun)",
    },
  },
  create: ({ topicArns, certHostPattern }, logger) => sesWebhook(topicArns, certHostPattern, logger),
});

function sesWebhook(topicArns: string[], certHostPattern: RegExp, logger: Logger): Omit<WebhookProvider, 'name' | 'paths' | 'verifies'> {
  const topics = new Set(topicArns);
  const verifier = new SnsVerifier(certHostPattern);
  const verifies = topics.size > 0;
  return {
    challenge: {},
    receive: async (_req, raw, receivedAt): Promise<Reception> => {
      const message = bodyObject(parseJsonBody(raw));
      const fields = new FieldReader();
      const type = fields.text(message, 'Type', ['body']);
      const messageId = fields.text(message, 'MessageId', ['body']);
      const topicArn = fields.text(message, 'TopicArn', ['body']);
      fields.check();
      if (verifies) {
        // Checked first: a message of another topic makes us fetch nothing.
        if (!topics.has(topicArn!)) throw new HttpError(401, 'SNS topic not accepted here');
        const failure = await verifier.failure(message);
        if (failure) throw new HttpError(401, failure);
      }
      switch (type) {
        case 'SubscriptionConfirmation':
          return confirmSubscription(message, certHostPattern, logger);
        case 'UnsubscribeConfirmation':
          logger.warn({ topicArn }, 'SNS reports that the SES topic subscription was removed: its events stop arriving');
          return { kind: 'answer', status: 200, body: { accepted: 0 } };
        case 'Notification':
          return notification(message, messageId!, receivedAt);
        default:
          throw unprocessable([
            valueError(['body', 'Type'], type, 'expected Notification, SubscriptionConfirmation or UnsubscribeConfirmation'),
          ]);
      }
    },
  };
}

async function confirmSubscription(message: JsonObject, certHostPattern: RegExp, logger: Logger): Promise<Reception> {
  const url = allowedSnsUrl(message.SubscribeURL, certHostPattern);
  if (!url) throw new HttpError(401, 'SubscribeURL is not https on an allowed SNS host');
  try {
    await httpsGet(url);
  } catch (error) {
    logger.warn({ err: error, topicArn: message.TopicArn }, 'confirming the SNS subscription failed');
    throw new HttpError(503, 'The SNS subscription could not be confirmed, retry later');
  }
  logger.info({ topicArn: message.TopicArn }, 'confirmed the SNS subscription of the SES topic');
  return { kind: 'answer', status: 200, body: { accepted: 0 } };
}

function notification(message: JsonObject, messageId: string, receivedAt: Date): Reception {
  const fields = new FieldReader();
  const text = fields.text(message, 'Message', ['body']);
  fields.check();
  let sesEvent: unknown;
  try {
    sesEvent = JSON.parse(text!);
  } catch {
    throw unprocessable([valueError(MESSAGE_LOC, text, 'Message is not JSON')]);
  }
  if (!isRecord(sesEvent)) {
    throw unprocessable([
      {
        type: 'model_attributes_type',
        loc: MESSAGE_LOC,
        msg: 'Input should be a valid dictionary or object to extract fields from',
        input: sesEvent,
      },
    ]);
  }
  const events = toEvents(sesEvent, messageId, receivedAt);
  return {
    kind: 'events',
    accepted: Math.max(events.length, 1),
    events,
    sourceOf: () => ({ loc: MESSAGE_LOC, input: sesEvent }),
  };
}

/**
 * One event per recipient the SES event names; none for a type that is
 * accepted but not kept. Each raw record keeps what identifies and explains
 * its own event: the event type, the mail's identity and the event's object
 * with the recipient list narrowed to that recipient, so the records of a
 * call grow with its recipients, not with their number times the message.
 */
function toEvents(sesEvent: JsonObject, messageId: string, receivedAt: Date): eventsV1.EngagementEvent[] {
  const fields = new FieldReader();
  // Event publishing says eventType; the older SES notifications say notificationType.
  const typeKey = Object.hasOwn(sesEvent, 'eventType') ? 'eventType' : 'notificationType';
  const name = fields.text(sesEvent, typeKey, MESSAGE_LOC, 0);
  fields.check();
  const reader = EVENT_READERS.get(name!);
  if (!reader) return [];
  const mail = fields.object(sesEvent, 'mail', MESSAGE_LOC);
  const detailLoc = [...MESSAGE_LOC, reader.detail ?? 'mail'];
  const detail = reader.detail ? fields.object(sesEvent, reader.detail, MESSAGE_LOC) : mail;
  fields.check();
  const ownKey = reader.detail ?? reader.besideMail!;
  const ownValue = sesEvent[ownKey];
  const own = isRecord(ownValue) ? ownValue : undefined;
  const occurredAt = fields.dateTime(detail!, 'timestamp', detailLoc);
  const recipients = reader.recipients(detail!, mail!, fields, detailLoc, own ?? {});
  fields.check();
  const tags = isRecord(mail!.tags) ? mail!.tags : {};
  const mailIdentity = Object.fromEntries(MAIL_IDENTITY.filter((key) => Object.hasOwn(mail!, key)).map((key) => [key, mail![key]]));
  const shared = {
    provider: 'ses',
    providerMessageId: optionalText(mail!.messageId),
    occurredAt: occurredAt!,
    receivedAt,
    categories: strings(tags.category),
    variantId: strings(tags.variant_id)[0],
    runId: strings(tags.run_id)[0],
  };
  const rawOf = (entry: unknown): JsonObject => ({
    [typeKey]: name,
    mail: reader.recipientList ? mailIdentity : { ...mailIdentity, destination: [entry] },
    ...(own ? { [ownKey]: reader.recipientList ? { ...own, [reader.recipientList]: [entry] } : own } : {}),
  });
  const copied = Buffer.byteLength(JSON.stringify(rawOf(null))) * recipients.length;
  if (copied > MAX_COPIED_BYTES) {
    throw unprocessable([
      valueError(
        MESSAGE_LOC,
        sesEvent,
        `the SES event is too large for its ${recipients.length} recipients: ${copied} bytes copied into their records, at most ${MAX_COPIED_BYTES}`,
      ),
    ]);
  }
  return recipients.map(({ entry, ...recipient }) => {
    const raw = rawOf(entry);
    return normalizedEvent({ ...shared, ...recipient, raw, providerEventId: `${messageId}:${recipient.email.trim().toLowerCase()}` });
  });
}
