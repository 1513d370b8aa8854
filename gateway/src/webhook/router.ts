import type { KeyObject } from 'node:crypto';
import express, { type Request, type RequestHandler, type Router } from 'express';
import { prometheus, registry, valueError, type Violation } from '@mail/common';
import { HttpError, unprocessable } from '../errors/http-error';
import { readableJsonText } from '../pydantic/json-body';
import { jsonSyntaxViolations } from '../pydantic/violations';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, basicAuthMatches, signatureFailure } from './auth';
import { bodyViolations, encodeEvents, toEngagementEvent, type SendgridEvent } from './events';
import { MAX_EVENT_BYTES, PublishError, eventBytes, type EventPublisher, type KeyedEvent } from './publisher';

export const WEBHOOK_PATH = '/campaign-events/webhook';
/** SendGrid posts up to 768 KB; the API takes up to 5 MB (docs/api.md, "Errors"). */
export const WEBHOOK_BODY_LIMIT = '5mb';

const webhookEvents = new prometheus.Counter({
  name: 'webhook_events_total',
  help: 'Provider events received by the webhook, by what became of them',
  labelNames: ['outcome'],
  registers: [registry],
});

export interface WebhookOptions {
  /** Verifies SendGrid's signature when set. */
  sendgridPublicKey?: KeyObject;
  /** `user:password` required through HTTP Basic when set. */
  basicAuth?: string;
  publisher: EventPublisher;
}

/**
 * POST /campaign-events/webhook, mounted before the JSON parser: the
 * signature covers the raw bytes. It answers every request itself, so the
 * OpenAPI validator (which documents it) never runs on it.
 */
export function webhookRouter(options: WebhookOptions): Router {
  // Exact case and trailing slash, like every other route of the app.
  const router = express.Router({ caseSensitive: true, strict: true });
  const unauthorized = (detail: string): HttpError =>
    new HttpError(401, detail, options.basicAuth ? { 'WWW-Authenticate': 'Basic realm="campaign-events"' } : {});

  // Checked before the body is read, so an unauthenticated caller cannot make us buffer 5 MB.
  const basicAuth: RequestHandler = (req, _res, next) => {
    if (options.basicAuth && !basicAuthMatches(options.basicAuth, req.headers.authorization)) {
      throw unauthorized('Invalid or missing webhook credentials');
    }
    next();
  };

  router.post(WEBHOOK_PATH, labelRoute, basicAuth, express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT }), async (req, res) => {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    if (options.sendgridPublicKey) {
      const failure = signatureFailure(options.sendgridPublicKey, req.get(SIGNATURE_HEADER), req.get(TIMESTAMP_HEADER), raw);
      if (failure) throw unauthorized(failure);
    }
    const { accepted, events } = toKeyedEvents(raw);
    try {
      await options.publisher.publish(events);
    } catch (error) {
      if (error instanceof PublishError) throw new HttpError(503, 'Event broker unavailable, retry later');
      throw error;
    }
    webhookEvents.inc({ outcome: 'published' }, events.length);
    webhookEvents.inc({ outcome: 'dropped' }, accepted - events.length);
    res.status(202).json({ accepted });
  });
  return router;
}

/**
 * The kept events of a body, encoded, and how many events it held. Nothing
 * else of the parsed body outlives this call, so it does not stay on the heap
 * while the events wait for Kafka's acknowledgement. A kept event too large
 * for one Kafka record is a 422 at its index: a 503 would be retried forever.
 */
function toKeyedEvents(raw: Buffer): { accepted: number; events: KeyedEvent[] } {
  const events = parseEvents(raw);
  const receivedAt = new Date();
  const kept = events.flatMap((event, index) => {
    const normalized = toEngagementEvent(event, receivedAt);
    return normalized ? [{ index, normalized }] : [];
  });
  const values = encodeEvents(kept.map(({ normalized }) => normalized));
  const keyed = kept.map(({ normalized }, i) => ({ key: normalized.email, value: values[i] }));
  const tooLarge = keyed.flatMap((event, i): Violation[] => {
    const bytes = eventBytes(event);
    if (bytes <= MAX_EVENT_BYTES) return [];
    const index = kept[i].index;
    return [valueError(['body', index], events[index], `event too large: ${bytes} bytes as a Kafka record, at most ${MAX_EVENT_BYTES}`)];
  });
  if (tooLarge.length > 0) throw unprocessable(tooLarge);
  return { accepted: events.length, events: keyed };
}

/**
 * The body as SendGrid events, or a 422 in the API's format (400 for bytes that are not UTF-8
 * or nesting too deep, as in FastAPI). An empty body is a missing one, as in FastAPI.
 */
function parseEvents(raw: Buffer): SendgridEvent[] {
  const text = readableJsonText(raw);
  let body: unknown = null;
  if (raw.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      throw unprocessable(jsonSyntaxViolations(text));
    }
  }
  const violations = bodyViolations(body);
  if (violations.length > 0) throw unprocessable(violations);
  return body as SendgridEvent[];
}

/** The request-duration metric labels routes by their OpenAPI path, which the validator would have set. */
const labelRoute: RequestHandler = (req: Request & { openapi?: { openApiRoute: string } }, _res, next) => {
  req.openapi = { openApiRoute: WEBHOOK_PATH };
  next();
};
