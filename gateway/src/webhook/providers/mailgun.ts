import crypto from 'node:crypto';
import { smtpBounceClass } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { HttpError } from '../../errors/http-error';
import {
  FieldReader,
  bodyObject,
  normalizedEvent,
  optionalText,
  parseJsonBody,
  strings,
  type EventFields,
  type JsonObject,
} from '../provider';
import { isRecord } from '../../pydantic/request-schemas';
import { defineProvider, secretCredential } from '../declaration';

const { EventType, BounceType, BounceClass } = eventsV1;

/** A signed request is taken for this long around its timestamp, in either direction. */
const MAILGUN_SIGNATURE_TOLERANCE_SECONDS = 600;
/** Tokens remembered at most; a flood beyond it forgets the oldest first. */
const MAX_REMEMBERED_TOKENS = 200_000;

/** Mailgun event → what is stored; `failed` depends on its severity and reason (failedEvent). */
const EVENT_TYPES: ReadonlyMap<string, eventsV1.EventType> = new Map([
  ['accepted', EventType.EVENT_TYPE_PROCESSED],
  ['delivered', EventType.EVENT_TYPE_DELIVERED],
  ['opened', EventType.EVENT_TYPE_OPEN],
  ['clicked', EventType.EVENT_TYPE_CLICK],
  ['unsubscribed', EventType.EVENT_TYPE_UNSUBSCRIBE],
  ['complained', EventType.EVENT_TYPE_SPAM_REPORT],
  ['rejected', EventType.EVENT_TYPE_DROPPED],
  ['failed', EventType.EVENT_TYPE_BOUNCE],
]);

/**
 * Tokens of the signed requests this replica took within the signature
 * window: Mailgun never signs two requests with one token, so a token seen
 * again is a replay. A token is held while its request is in flight and kept
 * only once its events are in Kafka, so Mailgun's retry of a request that
 * got a 503 is taken.
 */
class TokenCache {
  /** token → when it may be forgotten (ms); insertion order is roughly expiry order. */
  private readonly tokens = new Map<string, number>();

  /** Holds the token; false when it is held already. */
  reserve(token: string, expiresAtMs: number): boolean {
    const nowMs = Date.now();
    for (const [held, expiry] of this.tokens) {
      if (expiry > nowMs && this.tokens.size < MAX_REMEMBERED_TOKENS) break;
      this.tokens.delete(held);
    }
    if (this.tokens.has(token)) return false;
    this.tokens.set(token, expiresAtMs);
    return true;
  }

  release(token: string): void {
    this.tokens.delete(token);
  }
}

/**
 * Why Mailgun's `signature` object fails, or undefined when it is authentic
 * and fresh: hex HMAC-SHA256 of timestamp + token under the signing key.
 */
function mailgunSignatureFailure(signingKey: string, signature: unknown): string | undefined {
  if (!isRecord(signature)) return 'Missing webhook signature';
  const { timestamp, token, signature: given } = signature;
  if (typeof timestamp !== 'string' || typeof token !== 'string' || typeof given !== 'string' || token === '') {
    return 'Missing webhook signature, timestamp or token';
  }
  if (!/^\d{1,12}$/.test(timestamp)) return 'Malformed webhook timestamp';
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > MAILGUN_SIGNATURE_TOLERANCE_SECONDS)
    return 'Webhook timestamp is too old or in the future';
  if (!/^[0-9a-f]{64}$/i.test(given)) return 'Invalid webhook signature';
  const expected = crypto
    .createHmac('sha256', signingKey)
    .update(timestamp + token, 'utf8')
    .digest();
  return crypto.timingSafeEqual(expected, Buffer.from(given, 'hex')) ? undefined : 'Invalid webhook signature';
}

/**
 * Mailgun's webhooks: one event per request, `{"signature": {...},
 * "event-data": {...}}`, signed with the account's webhook signing key.
 */
export const mailgun = defineProvider({
  name: 'mailgun',
  variables: {
    signingKey: secretCredential(
      'MAILGUN_WEBHOOK_SIGNING_KEY',
      "Mailgun's HTTP webhook signing key: its credential.",
      'key-0123456789abcdef',
    ),
  },
  docs: {
    title: 'Mailgun',
    verification: 'HMAC-SHA256 of timestamp and token (10 minutes either way, a token never taken twice by a replica)',
    category: '`tags`',
    variant: '`variant_id` user variable',
    bounceSource: 'SMTP status (enhanced code, else reply code)',
    bounceClasses: {
      invalid_address: 'x.1.0-3, x.1.6, x.1.10; 550, 551, 553',
      mailbox_unavailable: 'x.2.x (but x.2.3); 450, 452, 552',
      technical: 'other x.1.x, x.3.x (but x.3.4), x.4.x, x.5.x, x.7.7, x.7.23-27 (authentication); 451',
      content: 'x.2.3, x.3.4, x.6.x',
      reputation: '5.7.x (other)',
      frequency_or_volume: '4.7.x (other); 421',
      unclassified: 'anything else',
    },
  },
  create: ({ signingKey }) => {
    const tokens = new TokenCache();
    return {
      challenge: {},
      receive: (_req, raw, receivedAt) => {
        const body = bodyObject(parseJsonBody(raw));
        let token: string | undefined;
        if (signingKey) {
          const failure = mailgunSignatureFailure(signingKey, body.signature);
          if (failure) throw new HttpError(401, failure);
          const signature = body.signature as { timestamp: string; token: string };
          token = signature.token;
          if (!tokens.reserve(token, (Number(signature.timestamp) + MAILGUN_SIGNATURE_TOLERANCE_SECONDS) * 1000)) {
            throw new HttpError(401, 'Webhook token used before');
          }
        }
        try {
          const event = toEvent(body, receivedAt);
          return Promise.resolve({
            kind: 'events',
            accepted: 1,
            events: event ? [event] : [],
            sourceOf: () => ({ loc: ['body', 'event-data'], input: body['event-data'] }),
            settled: (published) => {
              if (token !== undefined && !published) tokens.release(token);
            },
          });
        } catch (error) {
          if (token !== undefined) tokens.release(token);
          throw error;
        }
      },
    };
  },
});

/** The normalized event, or undefined for an event type that is accepted but not kept; a 422 for a malformed kept one. */
function toEvent(body: JsonObject, receivedAt: Date): eventsV1.EngagementEvent | undefined {
  const fields = new FieldReader();
  const data = fields.object(body, 'event-data', ['body']);
  const loc = ['body', 'event-data'];
  const name = data && fields.text(data, 'event', loc, 0);
  fields.check();
  const eventType = EVENT_TYPES.get(name!);
  if (eventType === undefined) return undefined;
  const id = fields.text(data!, 'id', loc);
  const email = fields.text(data!, 'recipient', loc);
  const occurredAt = fields.unixSeconds(data!, 'timestamp', loc);
  fields.check();
  const message = isRecord(data!.message) ? data!.message : {};
  const headers = isRecord(message.headers) ? message.headers : {};
  const clientInfo = isRecord(data!['client-info']) ? data!['client-info'] : {};
  const variables = isRecord(data!['user-variables']) ? data!['user-variables'] : {};
  const event: EventFields = {
    provider: 'mailgun',
    // Mailgun's event ids are unique within a day only.
    providerEventId: `${id!}:${occurredAt!.toISOString().slice(0, 10)}`,
    providerMessageId: optionalText(headers['message-id']),
    eventType,
    email: email!,
    occurredAt: occurredAt!,
    receivedAt,
    categories: strings(data!.tags),
    variantId: optionalText(variables.variant_id),
    runId: optionalText(variables.run_id),
    url: optionalText(data!.url),
    userAgent: optionalText(clientInfo['user-agent']),
    ip: optionalText(data!.ip),
    machineOpen: eventType === EventType.EVENT_TYPE_OPEN && clientInfo.bot === 'apple',
    raw: data,
  };
  return normalizedEvent(eventType === EventType.EVENT_TYPE_BOUNCE ? { ...event, ...failedEvent(data!) } : event);
}

/**
 * A `failed` event: a permanent failure is a hard bounce, a temporary one a
 * deferral (Mailgun retries); one Mailgun did not even attempt, because the
 * address is on its suppression lists (reason `suppress-*`), is dropped.
 */
function failedEvent(data: JsonObject): Partial<EventFields> {
  const status = isRecord(data['delivery-status']) ? data['delivery-status'] : {};
  const code = typeof status.code === 'number' ? status.code : undefined;
  const text = optionalText(status.message) ?? optionalText(status.description);
  const reason = [code, text ?? optionalText(data.reason)].filter((part) => part !== undefined).join(' ') || undefined;
  if (optionalText(data.reason)?.startsWith('suppress-')) return { eventType: EventType.EVENT_TYPE_DROPPED, reason };
  if (data.severity !== 'permanent') return { eventType: EventType.EVENT_TYPE_DEFERRED, reason };
  const bounceClass =
    data.reason === 'espblock' && code === undefined
      ? BounceClass.BOUNCE_CLASS_REPUTATION
      : smtpBounceClass(code, [text, optionalText(status.description)].join(' '), optionalText(status['enhanced-code']));
  return { bounceType: BounceType.BOUNCE_TYPE_HARD, bounceClass, reason };
}
