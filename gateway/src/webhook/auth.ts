import crypto, { type KeyObject } from 'node:crypto';
import { ConfigError } from '@mail/common';

/** SendGrid accepts a signed request for this long around its timestamp, in either direction. */
export const SIGNATURE_TOLERANCE_SECONDS = 600;

export const SIGNATURE_HEADER = 'x-twilio-email-event-webhook-signature';
export const TIMESTAMP_HEADER = 'x-twilio-email-event-webhook-timestamp';

/**
 * The verification key as SendGrid's settings page shows it (base64 DER
 * SubjectPublicKeyInfo), or PEM. Parsed once at start-up: a key that is not
 * ECDSA P-256 refuses start-up instead of failing every webhook call.
 */
export function parseSendgridPublicKey(text: string): KeyObject {
  let key: KeyObject;
  try {
    key = text.includes('-----BEGIN')
      ? crypto.createPublicKey(text.replace(/\\n/g, '\n'))
      : crypto.createPublicKey({ key: Buffer.from(text.replace(/\s+/g, ''), 'base64'), format: 'der', type: 'spki' });
  } catch {
    throw new ConfigError('SENDGRID_WEBHOOK_PUBLIC_KEY is not a public key (expected base64 DER SubjectPublicKeyInfo, or PEM)');
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new ConfigError('SENDGRID_WEBHOOK_PUBLIC_KEY must be an ECDSA P-256 public key');
  }
  return key;
}

/**
 * What the signature headers alone show (absent, a malformed or stale
 * timestamp): checked before the body is read, so such a call is refused at
 * once instead of holding its connection while its body arrives.
 */
export function signatureHeadersFailure(
  signature: string | undefined,
  timestamp: string | undefined,
  nowMs = Date.now(),
): string | undefined {
  if (!signature || !timestamp) return 'Missing webhook signature or timestamp header';
  if (!/^\d{1,12}$/.test(timestamp)) return 'Malformed webhook timestamp';
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return 'Webhook timestamp is too old or in the future';
  return undefined;
}

/**
 * SendGrid's signed event webhook: an ECDSA P-256 / SHA-256 signature (base64
 * DER) over the timestamp header's bytes followed by the raw body. Returns why
 * the request fails, or undefined when it is authentic and fresh.
 */
export function signatureFailure(
  key: KeyObject,
  signature: string | undefined,
  timestamp: string | undefined,
  body: Buffer,
  nowMs = Date.now(),
): string | undefined {
  const headersFailure = signatureHeadersFailure(signature, timestamp, nowMs);
  if (headersFailure !== undefined || !signature || !timestamp) return headersFailure;
  const verifier = crypto.createVerify('sha256').update(timestamp, 'utf8').update(body);
  let valid: boolean;
  try {
    valid = verifier.verify(key, Buffer.from(signature, 'base64'));
  } catch {
    valid = false;
  }
  return valid ? undefined : 'Invalid webhook signature';
}

/** Canonical padded base64, nothing before or after it: Node's decoder would skip junk and stop at a stray `=`. */
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The `user:password` of an HTTP Basic header, or undefined when the header
 * is not exactly `Basic <base64>` (strict: junk after the base64, or bits a
 * re-encoding would not give back, refuse it).
 */
function basicCredentials(authorization: string | undefined): string | undefined {
  const match = /^Basic +(\S+)$/i.exec(authorization ?? '');
  if (!match || !STRICT_BASE64.test(match[1])) return undefined;
  const decoded = Buffer.from(match[1], 'base64');
  return decoded.toString('base64') === match[1] ? decoded.toString('utf8') : undefined;
}

/** HTTP Basic against `user:password`, compared in constant time (digests have equal length whatever the input). */
export function basicAuthMatches(expected: string, authorization: string | undefined): boolean {
  const given = basicCredentials(authorization);
  const digest = (value: string): Buffer => crypto.createHash('sha256').update(value, 'utf8').digest();
  return crypto.timingSafeEqual(digest(given ?? ''), digest(expected)) && given !== undefined;
}

/** HTTP Basic in front of a webhook: the 401's challenge and the header check, both empty without credentials. */
export function basicAuthGate(credentials: string | undefined): {
  challenge: Record<string, string>;
  failure(authorization: string | undefined): string | undefined;
} {
  return {
    challenge: credentials ? { 'WWW-Authenticate': 'Basic realm="campaign-events"' } : {},
    failure: (authorization) =>
      credentials && !basicAuthMatches(credentials, authorization) ? 'Invalid or missing webhook credentials' : undefined,
  };
}
