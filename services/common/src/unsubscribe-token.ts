import { createHmac, timingSafeEqual } from 'node:crypto';

/** Who a one-click unsubscribe link (RFC 8058) unsubscribes, from which send. */
export interface UnsubscribeClaims {
  workspaceId: string;
  campaignId: string;
  runId: string;
  email: string;
}

/** The claims under short keys: the token travels in every message's List-Unsubscribe header. */
interface Payload {
  w: string;
  c: string;
  r: string;
  e: string;
}

function signature(key: string, payload: string): Buffer {
  return createHmac('sha256', key).update(payload).digest();
}

/**
 * `<base64url(JSON claims)>.<base64url(HMAC-SHA256 of the first part)>`, safe in a URL path. Signed, not
 * encrypted: the link is the recipient's own, and only the signing key (UNSUBSCRIBE_SIGNING_KEY) makes one.
 */
export function signUnsubscribeToken(key: string, claims: UnsubscribeClaims): string {
  if (key === '') throw new Error('an unsubscribe signing key is required');
  const payload: Payload = { w: claims.workspaceId, c: claims.campaignId, r: claims.runId, e: claims.email };
  const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${encoded}.${signature(key, encoded).toString('base64url')}`;
}

const isNonEmptyString = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** The claims of a token this key signed; undefined for anything else (tampered, truncated, another key, not a token). */
export function verifyUnsubscribeToken(key: string, token: string): UnsubscribeClaims | undefined {
  if (key === '') return undefined;
  const parts = token.split('.');
  if (parts.length !== 2) return undefined;
  const [encoded, sent] = parts;
  const expected = signature(key, encoded);
  const given = Buffer.from(sent, 'base64url');
  // Buffer's base64url decoder skips characters outside the alphabet; the canonical spelling alone is accepted.
  if (given.length !== expected.length || given.toString('base64url') !== sent || !timingSafeEqual(given, expected)) return undefined;
  let payload: Partial<Payload>;
  try {
    payload = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as Partial<Payload>;
  } catch {
    return undefined;
  }
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { w, c, r, e } = payload;
  if (![w, c, r, e].every(isNonEmptyString)) return undefined;
  return { workspaceId: w as string, campaignId: c as string, runId: r as string, email: e as string };
}
