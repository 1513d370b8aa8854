import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a first-party open pixel or tracked link says of its message. */
export interface TrackingClaims {
  workspaceId: string;
  campaignId: string;
  /** Null when the run sent one template. */
  variantId: string | null;
  runId: string;
  email: string;
}

/** An open pixel's token ('o') or a tracked link's ('c'): a token of one kind never verifies as the other. */
export type TrackingKind = 'o' | 'c';

export type TrackedClaims<Kind extends TrackingKind> = Kind extends 'c' ? TrackingClaims & { url: string } : TrackingClaims;

const FORMAT = 1;
const UUID_BYTES = 16;
const NO_UUID = Buffer.alloc(UUID_BYTES);
/** A truncated HMAC-SHA256 (128 bits, as RFC 2104 allows): a forger must still guess 2^128 values. */
const SIGNATURE_BYTES = 16;
/** The claims' part of a payload before the address's bytes: the format, four UUIDs, the address's length. */
const CLAIMS_BYTES = 1 + 4 * UUID_BYTES + 2;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function writeUuid(target: Buffer, offset: number, id: string): void {
  if (!UUID.test(id)) throw new Error(`not a UUID: ${id}`);
  target.write(id.replace(/-/g, ''), offset, UUID_BYTES, 'hex');
}

function uuidText(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function signature(key: string, kind: TrackingKind, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(kind).update(payload).digest().subarray(0, SIGNATURE_BYTES);
}

/**
 * `<base64url(payload)>.<base64url(signature)>`: the payload is binary to keep every link of a message short (four
 * UUIDs as 16 bytes each, then the address's length and bytes, then a click's link), and the signature covers
 * the kind too. Signed, not encrypted: the recipient already knows each value (TRACKING_SIGNING_KEY).
 */
export function signTrackingToken<Kind extends TrackingKind>(key: string, kind: Kind, claims: TrackedClaims<Kind>): string {
  const signer = trackingTokenSigner(key, claims);
  return kind === 'c' ? signer.click((claims as TrackingClaims & { url: string }).url) : signer.open();
}

/** The tokens of one message: its claims are laid out once for its open pixel and every one of its links. */
export function trackingTokenSigner(key: string, claims: TrackingClaims): { open(): string; click(url: string): string } {
  if (key === '') throw new Error('a tracking signing key is required');
  const email = Buffer.from(claims.email, 'utf8');
  if (email.length > 0xffff) throw new Error('address too long for a tracking token');
  const prefix = Buffer.alloc(CLAIMS_BYTES + email.length);
  prefix[0] = FORMAT;
  writeUuid(prefix, 1, claims.workspaceId);
  writeUuid(prefix, 1 + UUID_BYTES, claims.campaignId);
  if (claims.variantId !== null) writeUuid(prefix, 1 + 2 * UUID_BYTES, claims.variantId);
  writeUuid(prefix, 1 + 3 * UUID_BYTES, claims.runId);
  prefix.writeUInt16BE(email.length, CLAIMS_BYTES - 2);
  email.copy(prefix, CLAIMS_BYTES);
  const token = (kind: TrackingKind, payload: Buffer) =>
    `${payload.toString('base64url')}.${signature(key, kind, payload).toString('base64url')}`;
  return {
    open: () => token('o', prefix),
    click: (url) => token('c', Buffer.concat([prefix, Buffer.from(url, 'utf8')])),
  };
}

/** Canonical base64url only: Buffer's decoder skips foreign characters, so a changed token could decode the same. */
function decoded(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

/** The claims of a token of `kind` this key signed; undefined for anything else (tampered, truncated, another key or kind). */
export function verifyTrackingToken<Kind extends TrackingKind>(key: string, kind: Kind, token: string): TrackedClaims<Kind> | undefined {
  if (key === '') return undefined;
  const parts = token.split('.');
  if (parts.length !== 2) return undefined;
  const payload = decoded(parts[0]);
  const given = decoded(parts[1]);
  if (!payload || !given || given.length !== SIGNATURE_BYTES || !timingSafeEqual(given, signature(key, kind, payload))) return undefined;
  if (payload.length < CLAIMS_BYTES || payload[0] !== FORMAT) return undefined;
  const uuidAt = (index: number) => payload.subarray(1 + index * UUID_BYTES, 1 + (index + 1) * UUID_BYTES);
  const emailLength = payload.readUInt16BE(CLAIMS_BYTES - 2);
  if (payload.length < CLAIMS_BYTES + emailLength) return undefined;
  const variant = uuidAt(2);
  const claims: TrackingClaims = {
    workspaceId: uuidText(uuidAt(0)),
    campaignId: uuidText(uuidAt(1)),
    variantId: variant.equals(NO_UUID) ? null : uuidText(variant),
    runId: uuidText(uuidAt(3)),
    email: payload.subarray(CLAIMS_BYTES, CLAIMS_BYTES + emailLength).toString('utf8'),
  };
  const rest = payload.subarray(CLAIMS_BYTES + emailLength);
  if (kind === 'o') return rest.length === 0 ? (claims as TrackedClaims<Kind>) : undefined;
  return { ...claims, url: rest.toString('utf8') } as TrackedClaims<Kind>;
}
