/**
 * Domain errors. Services throw these; the gRPC layer turns them into status
 * codes, and the gateway turns the status codes into HTTP answers.
 */

/** One failing field, in the shape of a Pydantic v2 error entry. */
export interface Violation {
  /** Path inside the request body (the gateway prefixes "body"). */
  loc: (string | number)[];
  type: string;
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

export class NotFoundError extends Error {
  constructor(what: string) {
    super(`${what} not found`);
  }
}

export class ConflictError extends Error {}

export class UnavailableError extends Error {}

/** The caller used up a quota (429): it may try again after `retryAfterSeconds`. */
export class QuotaExceededError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

export class PermissionDeniedError extends Error {}

export class InvalidArgumentError extends Error {
  constructor(readonly violations: Violation[]) {
    super(violations.map((v) => `${v.loc.join('.')}: ${v.msg}`).join('; '));
  }
}

/** A Pydantic `value_error` raised by a field validator. */
export function valueError(loc: (string | number)[], input: unknown, message: string): Violation {
  return { loc, type: 'value_error', msg: `Value error, ${message}`, input, ctx: { error: {} } };
}
