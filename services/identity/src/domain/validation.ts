import { InvalidArgumentError, invalidEmail, isAddressSyntax, nulViolation, parseEmail, type Violation } from '@mail/common';

export const NAME_MAX_LENGTH = 200;
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Lengths count characters as Pydantic does, not UTF-16 code units. */
function length(value: string): number {
  return [...value].length;
}

/** Users are found by e-mail, so it is stored trimmed and entirely lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** The address as Pydantic's EmailStr reads it, normalized; or its violation (which also covers NUL). */
export function validEmail(loc: string[], input: string): string {
  const parsed = parseEmail(input);
  if ('reason' in parsed) throw new InvalidArgumentError([invalidEmail(loc, input, parsed.reason)]);
  return normalizeEmail(parsed.email);
}

/**
 * A token's e-mail claim, normalized: any syntactic address, whatever its
 * domain (the identity provider vouches for it), where a request body's
 * address must pass EmailStr.
 */
export function validTokenEmail(input: string): string {
  // Checked as sent: surrounding whitespace makes the claim invalid (docs/api.md), it is not trimmed into an address.
  if (!isAddressSyntax(input)) {
    throw new InvalidArgumentError([{ loc: ['email'], type: 'value_error', msg: 'value is not an email address', input }]);
  }
  return normalizeEmail(input);
}

function lengthViolation(loc: string[], input: string, min: number): Violation | undefined {
  if (length(input) < min) {
    return {
      loc,
      type: 'string_too_short',
      msg: `String should have at least ${min} character${min === 1 ? '' : 's'}`,
      input,
      ctx: { min_length: min },
    };
  }
  if (length(input) > NAME_MAX_LENGTH) {
    return {
      loc,
      type: 'string_too_long',
      msg: `String should have at most ${NAME_MAX_LENGTH} characters`,
      input,
      ctx: { max_length: NAME_MAX_LENGTH },
    };
  }
  return undefined;
}

export function validWorkspaceName(name: string): string {
  const violation = lengthViolation(['name'], name, 1) ?? nulViolation(['name'], name);
  if (violation) throw new InvalidArgumentError([violation]);
  return name;
}

/** A display name as given, or the e-mail's local part when it is blank. */
export function displayNameOrDefault(displayName: string | undefined, email: string): string {
  const given = displayName?.trim() ?? '';
  if (given === '') return email.slice(0, email.lastIndexOf('@'));
  const violation = lengthViolation(['display_name'], given, 0) ?? nulViolation(['display_name'], given);
  if (violation) throw new InvalidArgumentError([violation]);
  return given;
}

export function requireText(loc: string, value: string): string {
  const violation = value.trim() === '' ? { loc: [loc], type: 'missing', msg: 'Field required', input: null } : nulViolation([loc], value);
  if (violation) throw new InvalidArgumentError([violation]);
  return value;
}

export interface PageWindow {
  page: number;
  pageSize: number;
  offset: number;
}

/** proto3 sends 0 for an unset page or page_size, which means the default. */
export function pageWindow(request: { page: number; pageSize: number } | undefined): PageWindow {
  const page = request?.page || 1;
  const pageSize = Math.min(request?.pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  return { page, pageSize, offset: (page - 1) * pageSize };
}

/** Runs every check and reports all their violations at once, as Pydantic does. */
export function validateAll<T extends unknown[]>(...checks: { [K in keyof T]: () => T[K] }): T {
  const violations: Violation[] = [];
  const values = checks.map((check) => {
    try {
      return check();
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      violations.push(...error.violations);
      return undefined;
    }
  });
  if (violations.length > 0) throw new InvalidArgumentError(violations);
  return values as T;
}
