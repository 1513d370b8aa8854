import type { ServerOptions } from 'node:http';
import type { Request, RequestHandler } from 'express';

export interface RequestTimeouts {
  /** A request's head, and the body of every request but the webhook's, must arrive within this. */
  requestMs: number;
  /** The webhook's body (up to 5 MB, from the provider) must arrive within this. */
  webhookMs: number;
}

/** How often Node looks for requests past their time; its default (30 s) would let one run twice as long. */
const CHECK_INTERVAL_MS = 1_000;

/**
 * Node's own limits: the head within requestMs, and any whole request within
 * the longest time one may take (the webhook's); bodyTimeout holds the others
 * to requestMs. Node answers a request past its time through the server's
 * clientError handler (408).
 */
export function serverTimeoutOptions(timeouts: RequestTimeouts): ServerOptions {
  return {
    headersTimeout: timeouts.requestMs,
    requestTimeout: Math.max(timeouts.requestMs, timeouts.webhookMs),
    connectionsCheckingInterval: Math.min(CHECK_INTERVAL_MS, timeouts.requestMs),
  };
}

/**
 * Cuts off a body still arriving after its time (webhookMs for `isWebhook`
 * requests, else requestMs): 408 and the connection closed, so a client that
 * trickles its body cannot hold a connection and its buffer for minutes.
 */
export function bodyTimeout(timeouts: RequestTimeouts, isWebhook: (req: Request) => boolean): RequestHandler {
  return (req, res, next) => {
    if (req.complete) return next();
    const timer = setTimeout(
      () => {
        if (req.complete) return;
        if (res.headersSent) {
          req.socket.destroy();
          return;
        }
        res.status(408).set('Connection', 'close').json({ detail: 'Request timeout' });
      },
      isWebhook(req) ? timeouts.webhookMs : timeouts.requestMs,
    );
    res.once('close', () => clearTimeout(timer));
    next();
  };
}
