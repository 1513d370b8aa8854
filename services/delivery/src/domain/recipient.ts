import { createHash } from 'node:crypto';
import { parseEmail } from '@mail/common';

/** A row of the recipient database: its `email` column and the template's other fields. */
export type RecipientRow = Record<string, unknown>;

export type Address = { email: string; valid: true } | { email: string; valid: false; reason: string };

/** Lower-cased and trimmed; malformed (Pydantic's EmailStr rules) is `invalid`. */
export function addressOf(row: RecipientRow): Address {
  const raw = row.email;
  const text = typeof raw === 'string' ? raw : raw === null || raw === undefined ? '' : JSON.stringify(raw);
  const email = text.trim().toLowerCase();
  const parsed = parseEmail(email);
  return 'reason' in parsed ? { email, valid: false, reason: parsed.reason } : { email: parsed.email, valid: true };
}

/**
 * The Message-ID of a run's message to an address, without angle brackets: the
 * same on every attempt, so a retried message is the same message.
 */
export function messageIdOf(runId: string, email: string, fromEmail: string): string {
  const domain = fromEmail.slice(fromEmail.lastIndexOf('@') + 1) || 'localhost';
  return `${runId}.${createHash('sha256').update(email).digest('hex').slice(0, 24)}@${domain}`;
}

/** The template fields of a row: JSON values (dates as ISO strings, big numbers as text). */
export function fieldsOf(row: RecipientRow): Record<string, unknown> {
  return JSON.parse(JSON.stringify(row, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))) as Record<
    string,
    unknown
  >;
}
