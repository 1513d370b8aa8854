import * as grpc from '@grpc/grpc-js';
import { isServiceError, retryAfterOf, violationsOf, type Violation } from '@mail/common';

/** A violation with its keys in the order Pydantic gives them: type, loc, msg, input, then ctx where there is one. */
const inPydanticOrder = ({ type, loc, msg, input, ctx }: Violation): Violation =>
  ctx === undefined ? { type, loc, msg, input } : { type, loc, msg, input, ctx };

/** An answer other than success, in the API's format (docs/api.md, "Errors"): `{"detail": ...}`. */
export class HttpError extends Error {
  readonly detail: string | Violation[];

  constructor(
    readonly status: number,
    detail: string | Violation[],
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof detail === 'string' ? detail : 'Validation failed');
    this.detail = typeof detail === 'string' ? detail : detail.map(inPydanticOrder);
  }
}

export const unauthorized = (detail: string): HttpError => new HttpError(401, detail, { 'WWW-Authenticate': 'Bearer' });

export const forbidden = (detail = 'Not enough permissions'): HttpError => new HttpError(403, detail);

export const notFound = (detail = 'Not Found'): HttpError => new HttpError(404, detail);

export const unprocessable = (violations: Violation[]): HttpError => new HttpError(422, violations);

/** Where a request's fields live, and so the first element of a violation's loc. */
export type FieldLocation = 'body' | 'query';

/** Maps a failed gRPC call to the HTTP answer; anything unexpected is a plain 500. */
export function fromGrpcError(error: unknown, fields: FieldLocation = 'body'): HttpError {
  if (!isServiceError(error)) return new HttpError(500, 'Internal Server Error');
  switch (error.code) {
    case grpc.status.NOT_FOUND:
      return notFound(error.details || 'Not Found');
    case grpc.status.ALREADY_EXISTS:
    case grpc.status.ABORTED:
      return new HttpError(409, error.details || 'Conflict');
    case grpc.status.INVALID_ARGUMENT:
      return unprocessable(violationsOf(error).map((v) => ({ ...v, loc: [fields, ...v.loc] })));
    case grpc.status.PERMISSION_DENIED:
      return forbidden(error.details);
    case grpc.status.RESOURCE_EXHAUSTED: {
      // A service's quota (QuotaExceededError) says when to come back; any other exhaustion is a 503.
      const retryAfter = retryAfterOf(error);
      if (retryAfter !== undefined) return new HttpError(429, error.details || 'Too many requests', { 'Retry-After': String(retryAfter) });
      return new HttpError(503, 'Service temporarily unavailable, retry later');
    }
    case grpc.status.UNAVAILABLE:
    case grpc.status.DEADLINE_EXCEEDED:
      return new HttpError(503, 'Service temporarily unavailable, retry later');
    default:
      return new HttpError(500, 'Internal Server Error');
  }
}
