import crypto from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { verifyUnsubscribeToken, type UnsubscribeClaims } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { HttpError } from '../errors/http-error';
import { encodeEvents } from '../webhook/events';
import { PublishError, type EventPublisher } from '../webhook/publisher';

export const UNSUBSCRIBE_PATH = '/unsubscribe/:token';

export interface UnsubscribeOptions {
  /** UNSUBSCRIBE_SIGNING_KEY; without it no link verifies (404). */
  signingKey: string | undefined;
  publisher: EventPublisher;
}

const notFound = (): HttpError => new HttpError(404, 'Unsubscribe link not found');

function claimsOf(req: Request, signingKey: string | undefined): UnsubscribeClaims {
  const claims = signingKey === undefined ? undefined : verifyUnsubscribeToken(signingKey, req.params.token as string);
  if (!claims) throw notFound();
  return claims;
}

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A self-contained page (no script, no external asset) whose button sends the one-click POST. */
function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${title}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font:inherit;padding:.6rem 1.2rem;border:0;border-radius:4px;background:#1f5fbf;color:#fff;cursor:pointer}</style>
</head><body>${body}</body></html>`;
}

function confirmationPage(token: string, email: string): string {
  return page(
    'Unsubscribe',
    `<h1>Unsubscribe</h1>
<p>Stop sending e-mail to <strong data-testid="email">${escapeHtml(email)}</strong>?</p>
<form method="post" action="/unsubscribe/${encodeURIComponent(token)}">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit" data-testid="unsubscribe">Unsubscribe</button>
</form>`,
  );
}

/** The pages load nothing and run nothing; their one form posts back here, and no other site may frame them. */
const PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const DONE_PAGE = page('Unsubscribed', '<h1>Unsubscribed</h1><p data-testid="done">You will not receive these e-mails any more.</p>');

/**
 * The unsubscribe event of a link: the same id for every click of one link (a repeated POST is stored
 * once), our own provider, and the workspace and campaign set, so ingestion suppresses the address there
 * with reason unsubscribe without matching a category.
 */
function unsubscribeEvent(claims: UnsubscribeClaims, req: Request, now: Date): eventsV1.EngagementEvent {
  const linkId = crypto
    .createHash('sha256')
    .update(JSON.stringify([claims.workspaceId, claims.campaignId, claims.runId, claims.email]))
    .digest('hex');
  return {
    providerEventId: `unsubscribe-${linkId}`,
    provider: 'smtp',
    eventType: eventsV1.EventType.EVENT_TYPE_UNSUBSCRIBE,
    bounceType: eventsV1.BounceType.BOUNCE_TYPE_UNSPECIFIED,
    bounceClass: eventsV1.BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    email: claims.email,
    occurredAt: now,
    receivedAt: now,
    categories: [],
    userAgent: req.get('user-agent'),
    ip: req.ip,
    rawJson: JSON.stringify({ one_click: true, run_id: claims.runId, campaign_id: claims.campaignId }),
    machineOpen: false,
    machineClick: false,
    runId: claims.runId,
    workspaceId: claims.workspaceId,
    campaignId: claims.campaignId,
  };
}

/**
 * One-click unsubscribe (RFC 8058), public: the signed token is the credential. GET shows a page whose
 * button POSTs; the POST (what mail clients send, `List-Unsubscribe=One-Click`; its body is not read)
 * publishes the unsubscribe and answers 200 once Kafka has it (503 when it cannot take it, as the webhook).
 * Mounted before body parsing and authentication.
 */
export function unsubscribeRouter({ signingKey, publisher }: UnsubscribeOptions): Router {
  const router = express.Router({ caseSensitive: true, strict: true });

  router.get(UNSUBSCRIBE_PATH, (req: Request, res: Response) => {
    const claims = claimsOf(req, signingKey);
    res
      .set({ 'Cache-Control': 'no-store', 'Content-Security-Policy': PAGE_POLICY })
      .type('html')
      .send(confirmationPage(req.params.token as string, claims.email));
  });

  router.post(UNSUBSCRIBE_PATH, async (req: Request, res: Response) => {
    const claims = claimsOf(req, signingKey);
    const [value] = encodeEvents([unsubscribeEvent(claims, req, new Date())]);
    try {
      await publisher.publish([{ key: claims.email, value }]);
    } catch (error) {
      if (error instanceof PublishError) throw new HttpError(503, 'Event broker unavailable, retry later');
      throw error;
    }
    res.set('Cache-Control', 'no-store');
    if (req.accepts(['json', 'html']) === 'html') res.set('Content-Security-Policy', PAGE_POLICY).type('html').send(DONE_PAGE);
    else res.json({ unsubscribed: true });
  });

  // A token that is not even valid percent-encoding (`%`, `%zz`) fails Express's decoding of the path before
  // either route runs (a URIError, else a 500): it is a link that does not exist like any other.
  router.use((error: unknown, _req: Request, _res: Response, next: NextFunction) => next(error instanceof URIError ? notFound() : error));

  return router;
}
