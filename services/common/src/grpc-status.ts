import * as grpc from '@grpc/grpc-js';
import { commonV1Errors } from '@mail/proto';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  QuotaExceededError,
  UnavailableError,
  type Violation,
} from './errors';

/** Binary trailer that carries field violations with INVALID_ARGUMENT. */
export const VALIDATION_TRAILER = 'common-v1-validation-errors-bin';

/** Trailer that carries a QuotaExceededError's wait, in whole seconds, with RESOURCE_EXHAUSTED. */
export const RETRY_AFTER_TRAILER = 'retry-after-seconds';

/**
 * Status details and the violations trailer travel as HTTP/2 headers; a peer
 * refuses a header list much over 64 KiB and stalls the whole connection for
 * seconds doing so. A failed write echoing a huge input (a 1 MB query) must
 * not take the channel down, so both stay well below that.
 */
const DETAILS_MAX_CHARS = 1_000;
const TRAILER_BUDGET_BYTES = 32 * 1024;

/** The violations in order while they fit the budget; an input too big to fit is left out (the gateway reads null). */
function encodeViolations(violations: Violation[]): Uint8Array {
  const fitting: commonV1Errors.FieldViolation[] = [];
  // Each entry also costs its field tag and length prefix: at most 4 bytes below 2 MiB.
  const sizeOf = (entry: commonV1Errors.FieldViolation): number => commonV1Errors.FieldViolation.encode(entry).finish().length + 4;
  let total = 0;
  for (const v of violations) {
    const entry = {
      loc: v.loc.map(String),
      type: v.type,
      msg: v.msg,
      inputJson: JSON.stringify(v.input ?? null),
      ctxJson: v.ctx === undefined ? '' : JSON.stringify(v.ctx),
    };
    if (total + sizeOf(entry) > TRAILER_BUDGET_BYTES) entry.inputJson = '';
    if (total + sizeOf(entry) > TRAILER_BUDGET_BYTES) break;
    total += sizeOf(entry);
    fitting.push(entry);
  }
  return commonV1Errors.ValidationErrors.encode({ violations: fitting }).finish();
}

/**
 * Socket errors, and the SQLSTATEs of a server going away (57P01-03), of a
 * transaction that lost to a concurrent one (40001 serialization failure,
 * 40P01 deadlock) and of a server out of resources (class 53: too many
 * connections, out of memory, disk full): the same call may succeed later.
 */
const PG_UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '57P01', '57P02', '57P03', '40001', '40P01']);

/** True for errors that mean "a dependency is down or busy: try again later", not "the request is wrong". */
export function isDependencyFailure(error: unknown): boolean {
  if (error instanceof UnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (PG_UNAVAILABLE_CODES.has(code) || code.startsWith('08') || code.startsWith('53'))) return true;
  return (
    error.name === 'KnexTimeoutError' ||
    // pg pool and socket failures, and @clickhouse/client's request timeout ("Timeout error.").
    /Connection terminated|connect ECONNREFUSED|socket hang up|Client has encountered a connection error|^Timeout error/i.test(
      error.message,
    )
  );
}

export function toServiceError(error: unknown): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  const make = (code: grpc.status, message: string): grpc.ServiceError => {
    const details = message.length > DETAILS_MAX_CHARS ? `${message.slice(0, DETAILS_MAX_CHARS)}...` : message;
    return Object.assign(new Error(details), { code, details, metadata });
  };

  if (error instanceof NotFoundError) return make(grpc.status.NOT_FOUND, error.message);
  if (error instanceof ConflictError) return make(grpc.status.ALREADY_EXISTS, error.message);
  if (error instanceof PermissionDeniedError) return make(grpc.status.PERMISSION_DENIED, error.message);
  if (error instanceof InvalidArgumentError) {
    const payload = encodeViolations(error.violations);
    metadata.set(VALIDATION_TRAILER, Buffer.from(payload));
    return make(grpc.status.INVALID_ARGUMENT, error.message);
  }
  if (error instanceof QuotaExceededError) {
    metadata.set(RETRY_AFTER_TRAILER, String(Math.max(1, Math.ceil(error.retryAfterSeconds))));
    return make(grpc.status.RESOURCE_EXHAUSTED, error.message);
  }
  if (isDependencyFailure(error)) return make(grpc.status.UNAVAILABLE, 'a dependency is unavailable');
  return make(grpc.status.INTERNAL, 'internal error');
}

/** The wait a service attached to a RESOURCE_EXHAUSTED status for a used-up quota; undefined for any other exhaustion. */
export function retryAfterOf(error: grpc.ServiceError): number | undefined {
  const raw = error.metadata?.get(RETRY_AFTER_TRAILER)[0];
  const seconds = typeof raw === 'string' ? Number(raw) : NaN;
  return Number.isInteger(seconds) && seconds > 0 ? seconds : undefined;
}

/** Reads the violations a service attached to an INVALID_ARGUMENT status. */
export function violationsOf(error: grpc.ServiceError): Violation[] {
  const raw = error.metadata?.get(VALIDATION_TRAILER)[0];
  if (!raw || typeof raw === 'string') return [];
  return commonV1Errors.ValidationErrors.decode(raw).violations.map((v) => {
    const violation: Violation = {
      loc: v.loc.map((part) => (/^\d+$/.test(part) ? Number(part) : part)),
      type: v.type,
      msg: v.msg,
      input: JSON.parse(v.inputJson || 'null'),
    };
    if (v.ctxJson) violation.ctx = JSON.parse(v.ctxJson) as Violation['ctx'];
    return violation;
  });
}
