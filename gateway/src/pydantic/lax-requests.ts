import type { Request } from 'express';
import { parseEmail } from '@mail/common';
import type { MatchedOperation, OpenApiDocument } from '../openapi/document';
import { boolFromString, floatFromString, intFromString, parseUuid } from './scalars';
import { MAX_DETAIL_ENTRIES } from './violations';
import {
  childSchema,
  isRecord,
  operationSchemas,
  resolve,
  type OperationSchemas,
  type ParameterLocation,
  type RequestContext,
  type Schema,
} from './request-schemas';

/**
 * Before validation, Pydantic's lax mode, so that what FastAPI accepts
 * passes: express-openapi-validator checks the OpenAPI document as the
 * model, and this module feeds it what Pydantic would have converted
 * (violations.ts turns its errors into Pydantic's `detail` entries).
 */

/**
 * Stands in for a string Pydantic cannot read as a number: the validator
 * coerces any string JavaScript reads as one ("1e3", "0x10"), and cannot
 * coerce an object. Errors quote the caller's value, not this.
 */
const notANumber = (text: string): object => ({ notANumber: text });

/** A scalar as Pydantic's lax mode would convert it; anything it would reject is returned unchanged for the validator (or as notANumber). */
function laxScalar(schema: Schema, value: unknown): unknown {
  switch (schema.type) {
    case 'integer':
      if (typeof value === 'boolean') return Number(value);
      return typeof value === 'string' ? (intFromString(value) ?? notANumber(value)) : value;
    case 'number':
      if (typeof value === 'boolean') return Number(value);
      return typeof value === 'string' ? (floatFromString(value) ?? notANumber(value)) : value;
    case 'boolean':
      if (typeof value === 'string') return boolFromString(value) ?? value;
      return value === 0 || value === 1 ? value === 1 : value;
    case 'string': {
      if (typeof value !== 'string') return value;
      if (schema.format === 'uuid') {
        const parsed = parseUuid(value);
        return 'uuid' in parsed ? parsed.uuid : value;
      }
      if (schema.format === 'email') {
        const parsed = parseEmail(value);
        return 'email' in parsed ? parsed.email : value;
      }
      return value;
    }
    default:
      return value;
  }
}

/** The JSON types a schema's `type` takes. */
const JSON_TYPE: Record<string, (value: unknown) => boolean> = {
  string: (value) => typeof value === 'string',
  integer: (value) => Number.isInteger(value),
  number: (value) => typeof value === 'number',
  boolean: (value) => typeof value === 'boolean',
  array: Array.isArray,
  object: isRecord,
};

/** Whether a value (lax conversions applied) is of another JSON type than its (resolved) schema's: a failure whatever else the schema says. */
function failsItsType(schema: Schema, value: unknown): boolean {
  const isOfType = schema.type === undefined ? undefined : JSON_TYPE[schema.type];
  if (!isOfType) return false;
  return value === null ? schema.nullable !== true : !isOfType(value);
}

/**
 * The items of a list (lax conversions applied) that the validator is given.
 * It makes an error object for every failure, and a 422 reports
 * MAX_DETAIL_ENTRIES, so a list failing in more places is given up to the
 * item past that many type failures: the first failures, the ones reported,
 * stay the same. A list past its maxItems is reported as too long alone
 * (with the caller's length), so it is given one item past the bound.
 */
function laxItems(document: OpenApiDocument, list: Schema, itemSchema: Schema, items: unknown[]): unknown[] {
  const limit = list.maxItems === undefined ? items.length : list.maxItems + 1;
  const resolvedItem = resolve(document, itemSchema);
  const given: unknown[] = [];
  let failures = 0;
  for (const item of items) {
    if (given.length === limit || failures > MAX_DETAIL_ENTRIES) break;
    const laxed = lax(document, itemSchema, item);
    given.push(laxed);
    if (failsItsType(resolvedItem, laxed)) failures += 1;
  }
  return given;
}

/** A copy of `value` with lax conversions applied; the caller's value stays untouched for error reports. */
function lax(document: OpenApiDocument, schema: Schema | undefined, value: unknown): unknown {
  if (schema === undefined || value === null || value === undefined) return value;
  const resolved = resolve(document, schema);
  if (Array.isArray(value)) return resolved.items ? laxItems(document, resolved, resolved.items, value) : value;
  if (isRecord(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, lax(document, childSchema(document, resolved, key), item)]));
  }
  return laxScalar(resolved, value);
}

/** Python's urllib.parse.unquote, as uvicorn decodes the path: an invalid escape stays as sent, bytes that are not UTF-8 become U+FFFD. */
const pythonUnquote = (segment: string): string =>
  segment.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));

const decodesStrictly = (segment: string): boolean => {
  try {
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
};

/**
 * Runs just before the validator, on a request for the documented operation
 * `found`: applies Pydantic's lax conversions to the parameters and the body
 * (numeric strings for integers, "yes"/"off" for booleans, any UUID spelling
 * to its canonical form, ...), and returns the context errors need, which
 * quotes what the caller sent.
 */
export function laxRequests(document: OpenApiDocument): (req: Request, found: MatchedOperation) => RequestContext {
  const cache = new Map<string, OperationSchemas>();
  return (req, found) => {
    const key = `${req.method} ${found.path}`;
    const schemas = cache.get(key) ?? operationSchemas(document, found.path, req.method);
    cache.set(key, schemas);
    const context: RequestContext = {
      ...schemas,
      document,
      rawParameters: { path: {}, query: {}, header: {}, cookie: {} },
      rawBody: undefined,
    };
    const schemaOf = (where: ParameterLocation, name: string) =>
      schemas.parameters.find((parameter) => parameter.in === where && parameter.name === name)?.schema;

    // Path: rewrite the URL with canonical values, so the validator, access control and handlers agree;
    // a segment with an invalid percent-encoding is rewritten too, so it is validated as Python reads it.
    const segments = req.path.split('/');
    let pathChanged = false;
    found.path.split('/').forEach((templateSegment, index) => {
      const name = /^\{(.+)\}$/.exec(templateSegment)?.[1];
      if (!name) return;
      const raw = pythonUnquote(segments[index]);
      context.rawParameters.path[name] = raw;
      const value = String(lax(document, schemaOf('path', name), raw));
      if (value !== raw || !decodesStrictly(segments[index])) [segments[index], pathChanged] = [encodeURIComponent(value), true];
    });
    if (pathChanged) req.url = segments.join('/') + req.url.slice(req.path.length);

    // Query: Starlette takes the last of repeated values; Express 5 recomputes req.query, so pin a copy.
    // Names with brackets are other parameters to FastAPI (ignored, as every unknown one), not the
    // arrays and objects the validator would make of them.
    const query: Record<string, unknown> = { ...(req.query as Record<string, unknown>) };
    for (const name of Object.keys(query)) if (name.includes('[')) delete query[name];
    for (const parameter of schemas.parameters.filter((p) => p.in === 'query' && query[p.name] !== undefined)) {
      let value = query[parameter.name];
      if (Array.isArray(value) && resolve(document, parameter.schema).type !== 'array') value = value[value.length - 1];
      context.rawParameters.query[parameter.name] = value;
      query[parameter.name] = lax(document, parameter.schema, value);
    }
    Object.defineProperty(req, 'query', { value: query, writable: true, configurable: true, enumerable: true });

    // Headers: Starlette reads the first of repeated ones, where Node joins them with ", ".
    for (const parameter of schemas.parameters.filter((p) => p.in === 'header')) {
      const name = parameter.name.toLowerCase();
      const value = req.headersDistinct[name]?.[0];
      if (value === undefined) continue;
      context.rawParameters.header[parameter.name] = value;
      req.headers[name] = String(lax(document, parameter.schema, value));
    }

    if (schemas.body) {
      // No type is read as JSON, as FastAPI does; so is application/*+json, which the document does not list.
      // A body of another type came as text (express.text): validated as it is, it fails the model's type
      // check quoting the text, as FastAPI reports the bytes it could not read as JSON.
      const text = typeof req.body === 'string';
      if (text || !req.headers['content-type'] || req.is('application/*+json')) req.headers['content-type'] = 'application/json';
      if (req.emptyJsonBody || req.body === '') req.body = undefined;
      // The validator requires a body only when its schema lists required fields (it ignores
      // requestBody.required); null is reported as FastAPI's missing body.
      if (req.body === undefined && schemas.bodyRequired) req.body = null;
      context.rawBody = req.body;
      req.body = lax(document, schemas.body, req.body);
    }
    return context;
  };
}
