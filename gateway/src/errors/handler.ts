import type { ErrorRequestHandler } from 'express';
import type { Logger } from '@mail/common';
import { HttpError } from './http-error';
import { jsonSyntaxViolations } from '../pydantic/violations';

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  body?: string;
  expose?: boolean;
}

interface OpenApiValidatorError extends Error {
  status: number;
  errors: { path: string; message: string; errorCode?: string }[];
  /** `Allow` on a 405. */
  headers?: Record<string, string>;
}

const isOpenApiValidatorError = (error: unknown): error is OpenApiValidatorError =>
  error instanceof Error &&
  typeof (error as { status?: unknown }).status === 'number' &&
  Array.isArray((error as { errors?: unknown }).errors);

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Request body too large',
  415: 'Unsupported Media Type',
};

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE'];

/** The methods the route has (the validator lists them in document order): RFC 9110 requires `Allow` on a 405. */
function allowHeader(error: OpenApiValidatorError): Record<string, string> {
  const methods = (error.headers?.Allow ?? '')
    .split(',')
    .map((method) => method.trim().toUpperCase())
    .filter(Boolean);
  const rank = (method: string) => (METHOD_ORDER.includes(method) ? METHOD_ORDER.indexOf(method) : METHOD_ORDER.length);
  return methods.length > 0 ? { Allow: methods.sort((a, b) => rank(a) - rank(b)).join(', ') } : {};
}

/** Turns any failure into the API's error format (docs/api.md). Never a stack trace, never internal detail. */
function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  const parserError = error as BodyParserError;
  if (parserError?.type === 'entity.parse.failed') return new HttpError(422, jsonSyntaxViolations(parserError.body ?? ''));
  if (parserError?.type === 'entity.too.large') return new HttpError(413, REASONS[413]);
  if (parserError?.type === 'charset.unsupported' || parserError?.type === 'encoding.unsupported') {
    return new HttpError(415, REASONS[415]);
  }
  if (isOpenApiValidatorError(error)) {
    return new HttpError(error.status, REASONS[error.status] ?? 'Bad Request', error.status === 405 ? allowHeader(error) : {});
  }
  if (parserError?.expose && typeof parserError.status === 'number' && parserError.status < 500) {
    return new HttpError(parserError.status, REASONS[parserError.status] ?? 'Bad Request');
  }
  return new HttpError(500, 'Internal Server Error');
}

/** A 503 means a dependency is down or busy: clients (and SendGrid) are told when to try again. */
const RETRY_UNAVAILABLE_AFTER_S = '5';

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const httpError = toHttpError(error);
    if (httpError.status >= 500) logger.error({ err: error, method: req.method, path: req.path }, 'request failed');
    if (res.headersSent) return;
    const retry = httpError.status === 503 ? { 'Retry-After': RETRY_UNAVAILABLE_AFTER_S } : {};
    res
      .status(httpError.status)
      .set({ ...retry, ...httpError.headers })
      .json({ detail: httpError.detail });
  };
}
