import { InvalidArgumentError, type Violation } from '@mail/common';

export const NAME_MAX_LENGTH = 200;
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;
// RFC 5321 limits a forward path to 256 octets, of which 254 are the address.
const EMAIL_MAX_LENGTH = 254;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Lengths count characters as Pydantic does, not UTF-16 code units. */
function length(value: string): number {
  return [...value].length;
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function emailProblem(email: string): string | undefined {
  const at = email.lastIndexOf('@');
  if (at < 0) return 'An email address must have an @-sign.';
  if (at === 0) return 'There must be something before the @-sign.';
  if (at === email.length - 1) return 'There must be something after the @-sign.';
  if (length(email) > EMAIL_MAX_LENGTH) return `The email address is too long (${length(email) - EMAIL_MAX_LENGTH} characters too many).`;
  if (/\s/.test(email) || email.indexOf('@') !== at) return 'The email address is not valid.';
  if (!email.slice(at + 1).includes('.')) return 'The part after the @-sign is not valid. It should have a period.';
  return undefined;
}

/** Normalized e-mail, or a violation worded like Pydantic's EmailStr. */
export function validEmail(loc: string[], input: string): string {
  const email = normalizeEmail(input);
  const reason = emailProblem(email);
  if (reason === undefined) return email;
  throw new InvalidArgumentError([
    { loc, type: 'value_error', msg: `value is not a valid email address: ${reason}`, input, ctx: { reason } },
  ]);
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
  const violation = lengthViolation(['name'], name, 1);
  if (violation) throw new InvalidArgumentError([violation]);
  return name;
}

/** A display name as given, or the e-mail's local part when it is blank. */
export function displayNameOrDefault(displayName: string | undefined, email: string): string {
  const given = displayName?.trim() ?? '';
  if (given === '') return email.slice(0, email.lastIndexOf('@'));
  const violation = lengthViolation(['display_name'], given, 0);
  if (violation) throw new InvalidArgumentError([violation]);
  return given;
}

export function requireText(loc: string, value: string): string {
  if (value.trim() !== '') return value;
  throw new InvalidArgumentError([{ loc: [loc], type: 'missing', msg: 'Field required', input: null }]);
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
