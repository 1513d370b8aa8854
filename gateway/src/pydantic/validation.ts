import express, { type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { MSSQL_QUERY_MAX_LENGTH, cronProblem, parseEmail, providerCategoryProblem, readOnlySelectProblem } from '@mail/common';
import { HttpError, notFound, unprocessable } from '../errors/http-error';
import type { MatchedOperation, OpenApiDocument } from '../openapi/document';
import { memoizeValidatorRouteMatchers } from '../openapi/route-matchers';
import { laxRequests } from './lax-requests';
import { isRecord } from './request-schemas';
import { parseDateOrDateTime, parseUuid } from './scalars';
import { openApiViolations } from './violations';

/**
 * Validates every documented request as FastAPI with Pydantic v2 would, in
 * three steps: Pydantic's lax conversions (lax-requests.ts), which return
 * the request's context; express-openapi-validator with the document as the
 * model; its failures, with that context, as a 422 of Pydantic's `detail`
 * entries (violations.ts). Any other failure of the validator (404, 405,
 * 415) goes on to the error handler as it is.
 */
export function pydanticValidation(
  document: OpenApiDocument,
  match: (method: string, path: string) => MatchedOperation | undefined,
): RequestHandler {
  const laxRequest = laxRequests(document);
  memoizeValidatorRouteMatchers();
  const validate = express.Router().use(
    OpenApiValidator.middleware({
      apiSpec: validatorDocument(document) as never,
      validateRequests: { allErrors: true, allowUnknownQueryParameters: true },
      validateResponses: false,
      validateSecurity: false,
      ignoreUndocumented: false,
      formats: pydanticFormats,
      // laxRequest may rewrite the URL to canonical path ids.
      useRequestUrl: true,
    }),
  );
  return (req, res, next) => {
    const found = match(req.method, req.path);
    const context = found && laxRequest(req, found);
    validate(req, res, (error?: unknown) => {
      if (!(error instanceof OpenApiValidator.error.BadRequest)) return next(error);
      // app.ts makes Express, the validator and `match` match paths identically, so a 400 without context
      // is one for an operation that does not exist: the validator failed to decode the path (`PUT /suppressions/%FF`).
      next(context ? unprocessable(openApiViolations(error.errors, context)) : noOperation(req.path, match));
    });
  };
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** What a path without this method answers: 405 with the methods it has, or 404 when it names no operation. */
function noOperation(path: string, match: (method: string, path: string) => MatchedOperation | undefined): HttpError {
  const allowed = METHODS.filter((method) => match(method, path) !== undefined);
  return allowed.length > 0 ? new HttpError(405, 'Method Not Allowed', { Allow: allowed.join(', ') }) : notFound();
}

/**
 * Ajv formats: Pydantic's notion of a UUID, an e-mail address and a
 * `datetime` (an ISO date or date-time), and the campaign rules the model
 * would check with field validators (the campaign service checks them again),
 * so they are reported with every other failing field. A query over the
 * length limit is left to maxLength: it is not parsed. Templates are not
 * compiled here: the campaign service checks them in a worker thread with
 * limits, once the caller is known to be one of the workspace's editors.
 */
const pydanticFormats = {
  uuid: (value: string) => 'uuid' in parseUuid(value),
  email: (value: string) => 'email' in parseEmail(value),
  'date-or-datetime': (value: string) => !('error' in parseDateOrDateTime(value)),
  cron: (value: string) => cronProblem(value) === undefined,
  'tsql-select': (value: string) => [...value].length > MSSQL_QUERY_MAX_LENGTH || readOnlySelectProblem(value) === undefined,
  'provider-category': (value: string) => providerCategoryProblem(value) === undefined,
};

/**
 * The validator's copy of the document, adjusted where the validator is
 * stricter than FastAPI: reserved characters in query values are accepted
 * unencoded, and a nullable enum accepts null (Ajv checks `enum` even then).
 */
function validatorDocument(document: OpenApiDocument): OpenApiDocument {
  const copy = structuredClone(document);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!isRecord(node)) return;
    if (node.in === 'query' && typeof node.name === 'string') node.allowReserved = true;
    if (node.nullable === true && Array.isArray(node.enum) && !node.enum.includes(null)) node.enum = [...(node.enum as unknown[]), null];
    Object.values(node).forEach(visit);
  };
  visit(copy);
  return copy;
}
