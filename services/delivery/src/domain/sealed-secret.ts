import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Secrets at rest (a workspace's recipient database URL): AES-256-GCM under
 * RECIPIENTS_ENCRYPTION_KEY, a random 96-bit IV per value, authenticated. The
 * `context` (the workspace id) is bound as additional data, so a value copied
 * to another workspace's row does not open there.
 */

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The format's version, first in every sealed value, so another scheme can be told apart later. */
const VERSION = 'v1';

/** 32 bytes in base64 or base64url, padded or not (`openssl rand -base64 32`). */
const KEY_PATTERN = /^[A-Za-z0-9+/_-]{43}=?$/;

/** The key of RECIPIENTS_ENCRYPTION_KEY; undefined when the text is not 32 bytes in base64. */
export function parseEncryptionKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!KEY_PATTERN.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return key.length === 32 ? key : undefined;
}

/** `v1:` + base64 of IV, tag and ciphertext. */
export function seal(key: Buffer, plaintext: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64')}`;
}

/** Thrown when a sealed value does not open: another key, another context, or altered bytes. */
export class UnsealError extends Error {}

export function unseal(key: Buffer, sealed: string, context: string): string {
  const [version, body] = sealed.split(':', 2);
  if (version !== VERSION || body === undefined) throw new UnsealError(`unknown sealed value format ${JSON.stringify(version)}`);
  const bytes = Buffer.from(body, 'base64');
  if (bytes.length < IV_BYTES + TAG_BYTES) throw new UnsealError('sealed value too short');
  const decipher = createDecipheriv(ALGORITHM, key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new UnsealError('sealed value does not open with this key');
  }
}
