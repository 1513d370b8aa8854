import express, { type Request, type RequestHandler, type Router } from 'express';
import { prometheus, registry, valueError, type Violation } from '@mail/common';
import { HttpError, notFound, unprocessable } from '../errors/http-error';
import { encodeEvents } from './events';
import { PROVIDERS } from './providers';
import type { Reception, WebhookProvider } from './provider';
import { MAX_EVENT_BYTES, PublishError, eventBytes, type EventPublisher, type KeyedEvent } from './publisher';

/** SendGrid posts up to 768 KB; the API takes up to 5 MB (docs/api.md, "Errors"). */
const WEBHOOK_BODY_LIMIT = '5mb';

const webhookEvents = new prometheus.Counter({
  name: 'webhook_events_total',
  help: 'Provider events received by the webhook, by what became of them',
  labelNames: ['outcome', 'provider'],
  registers: [registry],
});

export interface WebhookOptions {
  providers: WebhookProvider[];
  /** A provider without its credential is not served (404); only DEV_AUTH_ENABLED=1 serves it unverified. */
  requireCredentials: boolean;
  publisher: EventPublisher;
}

const WEBHOOK_PATHS = new Set(PROVIDERS.flatMap((provider) => provider.paths));

/** Whether a request path is one of the provider webhooks (their bodies may take longer to arrive). */
export const isWebhookPath = (path: string): boolean => WEBHOOK_PATHS.has(path);

/**
 * One POST route per provider path, mounted before the JSON parser: the
 * signatures cover the raw bytes. Each answers every request itself, so the
 * OpenAPI validator (which documents them) never runs on them.
 */
export function webhookRouter(options: WebhookOptions): Router {
  // Exact case and trailing slash, like every other route of the app.
  const router = express.Router({ caseSensitive: true, strict: true });
  for (const provider of options.providers) {
    for (const path of provider.paths) {
      if (options.requireCredentials && !provider.verifies) {
        router.post(path, labelRoute(path), () => {
          throw notFound();
        });
      } else {
        router.post(
          path,
          labelRoute(path),
          headerCheck(provider),
          express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT }),
          (req, res) => receive(provider, options.publisher, req, res),
        );
      }
    }
  }
  return router;
}

/**
 * Refuses a call whose header credentials fail before its body is read; the
 * connection is closed after the 401, so the unread body is not drained.
 */
const headerCheck =
  (provider: WebhookProvider): RequestHandler =>
  (req, _res, next) => {
    const failure = provider.headerFailure?.(req);
    if (failure) throw new HttpError(401, failure, { ...provider.challenge, Connection: 'close' });
    next();
  };

async function receive(provider: WebhookProvider, publisher: EventPublisher, req: Request, res: express.Response): Promise<void> {
  const prepared = await prepare(provider, req);
  if ('answer' in prepared) {
    res.status(prepared.answer.status).json(prepared.answer.body);
    return;
  }
  const { accepted, events, settled } = prepared;
  let published = false;
  try {
    await publisher.publish(events);
    published = true;
  } catch (error) {
    if (error instanceof PublishError) throw new HttpError(503, 'Event broker unavailable, retry later');
    throw error;
  } finally {
    settled?.(published);
  }
  webhookEvents.inc({ outcome: 'published', provider: provider.name }, events.length);
  webhookEvents.inc({ outcome: 'dropped', provider: provider.name }, accepted - events.length);
  res.status(202).json({ accepted });
}

interface Prepared {
  accepted: number;
  events: KeyedEvent[];
  settled?: (published: boolean) => void;
}

/**
 * The request's events, encoded and keyed by address, or the answer to a
 * request without events. Nothing else of the parsed body outlives this
 * call, so it does not stay on the heap while the events wait for Kafka's
 * acknowledgement. A kept event too large for one Kafka record is a 422
 * where it was in the body: a 503 would be retried forever.
 */
async function prepare(provider: WebhookProvider, req: Request): Promise<Prepared | { answer: Extract<Reception, { kind: 'answer' }> }> {
  const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const reception = await provider.receive(req, raw, new Date());
  if (reception.kind === 'answer') return { answer: reception };
  const values = encodeEvents(reception.events);
  const keyed = reception.events.map((event, i) => ({ key: event.email, value: values[i] }));
  const tooLarge = keyed.flatMap((event, i): Violation[] => {
    const bytes = eventBytes(event);
    if (bytes <= MAX_EVENT_BYTES) return [];
    const { loc, input } = reception.sourceOf(i);
    return [valueError(loc, input, `event too large: ${bytes} bytes as a Kafka record, at most ${MAX_EVENT_BYTES}`)];
  });
  if (tooLarge.length > 0) {
    reception.settled?.(false);
    throw unprocessable(tooLarge);
  }
  return { accepted: reception.accepted, events: keyed, settled: reception.settled };
}

/** The request-duration metric labels routes by their OpenAPI path, which the validator would have set. */
const labelRoute =
  (path: string): RequestHandler =>
  (req: Request & { openapi?: { openApiRoute: string } }, _res, next) => {
    req.openapi = { openApiRoute: path };
    next();
  };
