import { InvalidArgumentError, invalidEmail, nulViolation, parseEmail, type Violation } from '@mail/common';
import type { analyticsV1 } from '@mail/proto';
import { SUPPRESSION_REASONS, type SuppressionReason } from '@mail/event-store';
import { normalizeEmail } from './filter';

/** Bounce tracking rules (docs/api.md, "Bounce tracking"): @mail/event-store holds them, beside the SQL that applies them. */
export { SUPPRESSION_REASONS, type SuppressionReason };

/** The longest note a manual suppression keeps, in characters. */
export const NOTE_MAX_LENGTH = 1000;

export interface SuppressionFilter {
  /** Exact address, normalized; or one of several. */
  email?: string | string[];
  reason?: SuppressionReason;
  /** A part of the address, lower case. */
  query?: string;
}

/** Who changed a suppression; empty strings when the caller did not say. */
export interface Actor {
  userId: string;
  email: string;
}

export const actorOf = (actor: analyticsV1.Actor | undefined): Actor => ({ userId: actor?.userId ?? '', email: actor?.email ?? '' });

/** The address and note of a manual suppression, checked as the API documents them. */
export function validManualSuppression(email: string, note: string | undefined): { email: string; note: string } {
  const violations: Violation[] = [];
  const parsed = parseEmail(email);
  if ('reason' in parsed) violations.push(invalidEmail(['email'], email, parsed.reason));
  const given = note ?? '';
  if ([...given].length > NOTE_MAX_LENGTH) {
    violations.push({
      loc: ['note'],
      type: 'string_too_long',
      msg: `String should have at most ${NOTE_MAX_LENGTH} characters`,
      input: given,
      ctx: { max_length: NOTE_MAX_LENGTH },
    });
  }
  const nul = nulViolation(['note'], given);
  if (nul) violations.push(nul);
  if (violations.length > 0 || 'reason' in parsed) throw new InvalidArgumentError(violations);
  return { email: normalizeEmail(parsed.email), note: given };
}
