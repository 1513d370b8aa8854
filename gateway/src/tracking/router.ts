import crypto from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { verifyTrackingToken, type Logger, type TrackingClaims, type TrackingKind } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { HttpError } from '../errors/http-error';
import { encodeEvents } from '../webhook/events';
import type { EventPublisher } from '../webhook/publisher';
import { isMachineClick, isMachineOpen } from './machines';

export const OPEN_PATH = '/t/o/:token';
export const CLICK_PATH = '/t/c/:token';

export interface TrackingOptions {
  /** TRACKING_SIGNING_KEY; without it no token verifies (404). */
  signingKey: string | undefined;
  publisher: EventPublisher;
  logger: Logger;
}

/** The smallest transparent GIF: 1×1, one colour. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

const notFound = (): HttpError => new HttpError(404, 'Tracking link not found');

function claimsOf<Kind extends TrackingKind>(req: Request, signingKey: string | undefined, kind: Kind) {
  const claims = signingKey === undefined ? undefined : verifyTrackingToken(signingKey, kind, req.params.token as string);
  // Only a link the sender tracked (http or https) is ever redirected to.
  if (!claims || (kind === 'c' && !/^https?:\/\//i.test((claims as TrackingClaims & { url: string }).url))) throw notFound();
  return claims;
}

/**
 * The event of one request: an id of its own (each request is one open or click, and a redelivered record of it
 * is stored once), provider `tracking`, and the token's workspace, campaign, variant and run, so ingestion stores
 * it without matching a category.
 */
function trackingEvent(claims: TrackingClaims, req: Request, now: Date, click?: { url: string }): eventsV1.EngagementEvent {
  const request = { userAgent: req.get('user-agent'), ip: req.ip };
  return {
    providerEventId: `tracking-${crypto.randomUUID()}`,
    provider: 'tracking',
    eventType: click ? eventsV1.EventType.EVENT_TYPE_CLICK : eventsV1.EventType.EVENT_TYPE_OPEN,
    bounceType: eventsV1.BounceType.BOUNCE_TYPE_UNSPECIFIED,
    bounceClass: eventsV1.BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    email: claims.email,
    occurredAt: now,
    receivedAt: now,
    categories: [],
    url: click?.url,
    userAgent: request.userAgent,
    ip: request.ip,
    rawJson: JSON.stringify({ tracking: click ? 'click' : 'open', run_id: claims.runId, variant_id: claims.variantId }),
    machineOpen: !click && isMachineOpen(request),
    machineClick: click !== undefined && isMachineClick(request),
    variantId: claims.variantId ?? undefined,
    runId: claims.runId,
    workspaceId: claims.workspaceId,
    campaignId: claims.campaignId,
  };
}

/**
 * First-party open pixels and tracked links (docs/api.md, "First-party tracking"), public: the signed token is
 * all they take. GET stores an event through Kafka, as a provider's, then answers; HEAD answers the same and
 * stores nothing. The recipient is answered even when Kafka cannot take the event (logged): a mail client does
 * not retry. Mounted before body parsing and authentication.
 */
export function trackingRouter({ signingKey, publisher, logger }: TrackingOptions): Router {
  const router = express.Router({ caseSensitive: true, strict: true });
  const store = async (event: eventsV1.EngagementEvent) => {
    const [value] = encodeEvents([event]);
    try {
      await publisher.publish([{ key: event.email, value }]);
    } catch (error) {
      logger.warn({ err: error, eventType: event.eventType }, 'tracking event not stored: Kafka did not take it');
    }
  };
  const pixel = (res: Response) => res.status(200).set({ 'Cache-Control': 'no-store', 'Content-Type': 'image/gif' }).end(PIXEL);
  const redirect = (res: Response, url: string) => res.set('Cache-Control', 'no-store').redirect(302, url);

  router.head(OPEN_PATH, (req, res) => {
    claimsOf(req, signingKey, 'o');
    pixel(res);
  });
  router.head(CLICK_PATH, (req, res) => {
    redirect(res, claimsOf(req, signingKey, 'c').url);
  });
  router.get(OPEN_PATH, async (req, res) => {
    const claims = claimsOf(req, signingKey, 'o');
    await store(trackingEvent(claims, req, new Date()));
    pixel(res);
  });
  router.get(CLICK_PATH, async (req, res) => {
    const claims = claimsOf(req, signingKey, 'c');
    await store(trackingEvent(claims, req, new Date(), { url: claims.url }));
    redirect(res, claims.url);
  });

  // A token that is not even valid percent-encoding fails Express's decoding of the path: a link that does not exist.
  router.use((error: unknown, _req: Request, _res: Response, next: NextFunction) => next(error instanceof URIError ? notFound() : error));
  return router;
}
