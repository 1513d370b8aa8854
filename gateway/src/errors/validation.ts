import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler } from 'express';
import {
  MSSQL_QUERY_MAX_LENGTH,
  containsNul,
  cronProblem,
  cronViolation,
  invalidEmail,
  nulViolation,
  parseEmail,
  readOnlySelectProblem,
  selectStatementViolation,
  type Violation,
} from '@mail/common';
import type { MatchedOperation, OpenApiDocument } from '../openapi/document';
import { readableJsonText } from './json-body';
import { pythonJsonError } from './python-json';
import { boolFromString, floatFromString, intFromString, parseDateOrDateTime, parseUuid } from './pydantic-types';

/**
 * Validation that answers exactly like FastAPI with Pydantic v2: the
 * OpenAPI document is the model, express-openapi-validator checks it, and
 * this module (1) feeds the validator what Pydantic's lax mode would accept
 * and (2) turns the validator's errors into Pydantic's `detail` entries.
 */

interface Schema {
  $ref?: string;
  type?: string;
  format?: string;
  enum?: unknown[];
  nullable?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean | number;
  exclusiveMaximum?: boolean | number;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
}

type ParameterLocation = 'path' | 'query' | 'header' | 'cookie';

interface Parameter {
  name: string;
  in: ParameterLocation;
  schema?: Schema;
}

interface OperationSchemas {
  parameters: Parameter[];
  body?: Schema;
  bodyRequired: boolean;
}

/** What one request was validated against, and its values as the caller sent them (Pydantic reports those). */
interface RequestContext extends OperationSchemas {
  document: OpenApiDocument;
  rawParameters: Record<ParameterLocation, Record<string, unknown>>;
  rawBody: unknown;
}

const contexts = new WeakMap<Request, RequestContext>();
const emptyBodies = new WeakSet<IncomingMessage>();

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function lookup(document: OpenApiDocument, ref: string): unknown {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), document);
}

/** Resolved schemas per document: the documents never change, and requests resolve the same schemas again and again. */
const resolvedSchemas = new WeakMap<OpenApiDocument, WeakMap<Schema, Schema>>();

/** Follows `$ref`s and flattens `allOf`, so callers see one plain schema. */
function resolve(document: OpenApiDocument, schema: Schema | undefined): Schema {
  if (!schema) return {};
  let resolved = resolvedSchemas.get(document);
  if (!resolved) resolvedSchemas.set(document, (resolved = new WeakMap()));
  let plain = resolved.get(schema);
  if (!plain) resolved.set(schema, (plain = resolveUncached(document, schema)));
  return plain;
}

function resolveUncached(document: OpenApiDocument, schema: Schema): Schema {
  let current: Schema = schema;
  while (current.$ref) current = (lookup(document, current.$ref) as Schema | undefined) ?? {};
  if (!current.allOf) return current;
  return current.allOf
    .map((part) => resolve(document, part))
    .reduce<Schema>(
      (merged, part) => ({
        ...merged,
        ...part,
        properties: { ...merged.properties, ...part.properties },
        required: [...(merged.required ?? []), ...(part.required ?? [])],
      }),
      { ...current, allOf: undefined },
    );
}

function childSchema(document: OpenApiDocument, schema: Schema, key: string): Schema | undefined {
  const resolved = resolve(document, schema);
  const direct =
    resolved.properties?.[key] ??
    resolved.items ??
    (typeof resolved.additionalProperties === 'object' ? resolved.additionalProperties : undefined);
  if (direct) return direct;
  for (const branch of [...(resolved.oneOf ?? []), ...(resolved.anyOf ?? [])]) {
    const found = childSchema(document, branch, key);
    if (found) return found;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Before validation: Pydantic's lax mode, so what FastAPI accepts passes.
// ---------------------------------------------------------------------------

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

/** A copy of `value` with lax conversions applied; the caller's value stays untouched for error reports. */
function lax(document: OpenApiDocument, schema: Schema | undefined, value: unknown): unknown {
  if (schema === undefined || value === null || value === undefined) return value;
  const resolved = resolve(document, schema);
  if (Array.isArray(value)) return resolved.items ? value.map((item) => lax(document, resolved.items, item)) : value;
  if (isRecord(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, lax(document, childSchema(document, resolved, key), item)]),
    );
  }
  return laxScalar(resolved, value);
}

function operationSchemas(document: OpenApiDocument, route: string, method: string): OperationSchemas {
  const item = document.paths[route] as Record<string, unknown>;
  const operation = item[method.toLowerCase()] as { parameters?: unknown[]; requestBody?: unknown };
  const declared = [...((item.parameters as unknown[] | undefined) ?? []), ...(operation.parameters ?? [])].map((entry) => {
    const parameter = isRecord(entry) && typeof entry.$ref === 'string' ? lookup(document, entry.$ref) : entry;
    return parameter as Parameter;
  });
  // Operation-level parameters override path-level ones of the same name and location.
  const parameters = declared.filter(
    (parameter, index) => !declared.slice(index + 1).some((later) => later.name === parameter.name && later.in === parameter.in),
  );
  let requestBody = operation.requestBody as
    | { $ref?: string; required?: boolean; content?: Record<string, { schema?: Schema }> }
    | undefined;
  if (requestBody?.$ref) requestBody = lookup(document, requestBody.$ref) as typeof requestBody;
  return { parameters, body: requestBody?.content?.['application/json']?.schema, bodyRequired: requestBody?.required === true };
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

/** For express.json's `type`: FastAPI reads a body without Content-Type as JSON too. */
export function isJsonBody(req: IncomingMessage): boolean {
  return !req.headers['content-type'] || Boolean((req as Request).is(['application/json', 'application/*+json']));
}

/**
 * For express.json's `verify`, before parsing: remembers an empty body (body-parser turns it into {},
 * FastAPI into "no body") and refuses, with FastAPI's 400, a body Python could not decode at all.
 */
export function verifyJsonBody(req: IncomingMessage, _res: unknown, buffer: Buffer, charset: string): void {
  if (buffer.length === 0) emptyBodies.add(req);
  // For its 400 only: body-parser decodes and parses the body itself.
  readableJsonText(buffer, charset);
}

/**
 * Runs just before the validator: applies Pydantic's lax conversions to the
 * parameters and the body (numeric strings for integers, "yes"/"off" for
 * booleans, any UUID spelling to its canonical form, ...), and remembers
 * what the caller sent so errors can quote it.
 */
export function pydanticRequests(
  document: OpenApiDocument,
  match: (method: string, path: string) => MatchedOperation | undefined,
): RequestHandler {
  const cache = new Map<string, OperationSchemas>();
  return (req, _res, next) => {
    const found = match(req.method, req.path);
    if (!found) return next();
    const key = `${req.method} ${found.path}`;
    const schemas = cache.get(key) ?? operationSchemas(document, found.path, req.method);
    cache.set(key, schemas);
    const context: RequestContext = { ...schemas, document, rawParameters: { path: {}, query: {}, header: {}, cookie: {} }, rawBody: undefined };
    contexts.set(req, context);
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
      if (emptyBodies.has(req) || req.body === '') req.body = undefined;
      // The validator requires a body only when its schema lists required fields (it ignores
      // requestBody.required); null is reported as FastAPI's missing body.
      if (req.body === undefined && schemas.bodyRequired) req.body = null;
      context.rawBody = req.body;
      req.body = lax(document, schemas.body, req.body);
    }
    next();
  };
}

/**
 * Ajv formats: Pydantic's notion of a UUID, an e-mail address and a
 * `datetime` (an ISO date or date-time), and the campaign rules the model
 * would check with field validators (the campaign service checks them
 * again), so they are reported with every other failing field. A query over
 * the length limit is left to maxLength: it is not parsed.
 */
export const pydanticFormats = {
  uuid: (value: string) => 'uuid' in parseUuid(value),
  email: (value: string) => 'email' in parseEmail(value),
  'date-or-datetime': (value: string) => !('error' in parseDateOrDateTime(value)),
  cron: (value: string) => cronProblem(value) === undefined,
  'tsql-select': (value: string) => [...value].length > MSSQL_QUERY_MAX_LENGTH || readOnlySelectProblem(value) === undefined,
};

/** The formats a field validator would check after the field's type and constraints. */
const FIELD_VALIDATOR_FORMATS: Record<string, (loc: string[], value: string) => Violation | undefined> = {
  cron: cronViolation,
  'tsql-select': selectStatementViolation,
};

/**
 * The validator's copy of the document, adjusted where the validator is
 * stricter than FastAPI: reserved characters in query values are accepted
 * unencoded, and a nullable enum accepts null (Ajv checks `enum` even then).
 */
export function validatorDocument(document: OpenApiDocument): OpenApiDocument {
  const copy = structuredClone(document);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!isRecord(node)) return;
    if (node.in === 'query' && typeof node.name === 'string') node.allowReserved = true;
    if (node.nullable === true && Array.isArray(node.enum) && !node.enum.includes(null)) node.enum = [...node.enum, null];
    Object.values(node).forEach(visit);
  };
  visit(copy);
  return copy;
}

// ---------------------------------------------------------------------------
// After validation: the validator's errors as Pydantic entries.
// ---------------------------------------------------------------------------

interface ValidatorError {
  path: string;
  message: string;
  errorCode?: string;
}

type Detail = Pick<Violation, 'type' | 'msg' | 'ctx'>;

const KEYWORD_PRIORITY = [
  'required',
  'additionalProperties',
  'enum',
  'type',
  'format',
  'multipleOf',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
];
const LOCATION_NAMES: Record<string, ParameterLocation | 'body'> = {
  params: 'path',
  query: 'query',
  headers: 'header',
  cookies: 'cookie',
  body: 'body',
};
const LOCATION_ORDER = ['path', 'query', 'header', 'cookie', 'body'];

/** Python's repr of a JSON scalar, as Pydantic quotes enum members. */
function pythonRepr(value: unknown): string {
  if (typeof value === 'string') return value.includes("'") && !value.includes('"') ? `"${value}"` : `'${value.replace(/'/g, "\\'")}'`;
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return value === null ? 'None' : String(value);
}

function oneOfText(values: unknown[]): string {
  const shown = values.filter((value) => value !== null).map(pythonRepr);
  return shown.length < 2 ? shown.join('') : `${shown.slice(0, -1).join(', ')} or ${shown[shown.length - 1]}`;
}

const plural = (count: number, word: string): string => `${count} ${word}${count === 1 ? '' : 's'}`;

function typeDetail(schema: Schema, value: unknown): Detail {
  switch (schema.type) {
    case 'string':
      return schema.format === 'uuid'
        ? { type: 'uuid_type', msg: 'UUID input should be a string, bytes or UUID object' }
        : { type: 'string_type', msg: 'Input should be a valid string' };
    case 'integer':
      if (typeof value === 'number') return { type: 'int_from_float', msg: 'Input should be a valid integer, got a number with a fractional part' };
      return typeof value === 'string'
        ? { type: 'int_parsing', msg: 'Input should be a valid integer, unable to parse string as an integer' }
        : { type: 'int_type', msg: 'Input should be a valid integer' };
    case 'number':
      return typeof value === 'string'
        ? { type: 'float_parsing', msg: 'Input should be a valid number, unable to parse string as a number' }
        : { type: 'float_type', msg: 'Input should be a valid number' };
    case 'boolean':
      return typeof value === 'string' || Number.isInteger(value)
        ? { type: 'bool_parsing', msg: 'Input should be a valid boolean, unable to interpret input' }
        : { type: 'bool_type', msg: 'Input should be a valid boolean' };
    case 'array':
      return { type: 'list_type', msg: 'Input should be a valid list' };
    default:
      // An object with declared fields is a Pydantic model; FastAPI validates with from_attributes=True.
      return schema.properties
        ? { type: 'model_attributes_type', msg: 'Input should be a valid dictionary or object to extract fields from' }
        : { type: 'dict_type', msg: 'Input should be a valid dictionary' };
  }
}

function keywordDetail(keyword: string, schema: Schema, value: unknown, message: string): Detail {
  const limit = (key: 'ge' | 'gt' | 'le' | 'lt', bound: number | undefined): Detail => {
    const words = { ge: 'greater than or equal to', gt: 'greater than', le: 'less than or equal to', lt: 'less than' }[key];
    const type = { ge: 'greater_than_equal', gt: 'greater_than', le: 'less_than_equal', lt: 'less_than' }[key];
    return { type, msg: `Input should be ${words} ${bound}`, ctx: { [key]: bound } };
  };
  const length = Array.isArray(value) ? value.length : 0;
  switch (keyword) {
    case 'enum': {
      const expected = oneOfText(schema.enum ?? []);
      return { type: 'enum', msg: `Input should be ${expected}`, ctx: { expected } };
    }
    case 'type':
      return typeDetail(schema, value);
    case 'format':
      if (schema.format === 'uuid' && typeof value === 'string') {
        const parsed = parseUuid(value);
        const error = 'error' in parsed ? parsed.error : '';
        return { type: 'uuid_parsing', msg: `Input should be a valid UUID, ${error}`, ctx: { error } };
      }
      if (schema.format === 'date-or-datetime' && typeof value === 'string') {
        const parsed = parseDateOrDateTime(value);
        const error = 'error' in parsed ? parsed.error : '';
        return { type: 'datetime_from_date_parsing', msg: `Input should be a valid datetime or date, ${error}`, ctx: { error } };
      }
      if (schema.format === 'email' && typeof value === 'string') {
        const parsed = parseEmail(value);
        const { type, msg, ctx } = invalidEmail([], value, 'reason' in parsed ? parsed.reason : '');
        return { type, msg, ctx };
      }
      if (schema.format !== undefined && schema.format in FIELD_VALIDATOR_FORMATS && typeof value === 'string') {
        const found = FIELD_VALIDATOR_FORMATS[schema.format]([], value);
        if (found) return { type: found.type, msg: found.msg, ctx: found.ctx };
      }
      break;
    case NUL_KEYWORD:
      if (typeof value === 'string') {
        const { type, msg, ctx } = nulViolation([], value)!;
        return { type, msg, ctx };
      }
      break;
    case 'multipleOf':
      return { type: 'multiple_of', msg: `Input should be a multiple of ${schema.multipleOf}`, ctx: { multiple_of: schema.multipleOf } };
    case 'maximum':
      return schema.exclusiveMaximum === true ? limit('lt', schema.maximum) : limit('le', schema.maximum);
    case 'exclusiveMaximum':
      return limit('lt', typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum : schema.maximum);
    case 'minimum':
      return schema.exclusiveMinimum === true ? limit('gt', schema.minimum) : limit('ge', schema.minimum);
    case 'exclusiveMinimum':
      return limit('gt', typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum : schema.minimum);
    case 'minLength':
      return {
        type: 'string_too_short',
        msg: `String should have at least ${plural(schema.minLength ?? 0, 'character')}`,
        ctx: { min_length: schema.minLength },
      };
    case 'maxLength':
      return {
        type: 'string_too_long',
        msg: `String should have at most ${plural(schema.maxLength ?? 0, 'character')}`,
        ctx: { max_length: schema.maxLength },
      };
    case 'pattern':
      return { type: 'string_pattern_mismatch', msg: `String should match pattern '${schema.pattern}'`, ctx: { pattern: schema.pattern } };
    case 'minItems':
      return {
        type: 'too_short',
        msg: `List should have at least ${plural(schema.minItems ?? 0, 'item')} after validation, not ${length}`,
        ctx: { field_type: 'List', min_length: schema.minItems, actual_length: length },
      };
    case 'maxItems':
      return {
        type: 'too_long',
        msg: `List should have at most ${plural(schema.maxItems ?? 0, 'item')} after validation, not ${length}`,
        ctx: { field_type: 'List', max_length: schema.maxItems, actual_length: length },
      };
  }
  // A rule Pydantic has no built-in type for reads like a field validator's ValueError.
  return { type: 'value_error', msg: `Value error, ${message}`, ctx: { error: {} } };
}

/**
 * At most this many `detail` entries, the first ones in FastAPI's order. A
 * body can fail in far more places (a 1 MB list of wrong items) than any
 * client reads, and answering each would make the 422 far larger and slower
 * than the request; FastAPI users never see this many.
 */
export const MAX_DETAIL_ENTRIES = 1_000;

/** Where one JSON pointer of the validator's errors leads: its `loc`, its sort key, and the schema and value found there. */
interface Location {
  where: ParameterLocation | 'body';
  loc: (string | number)[];
  order: number[];
  schema: Schema | undefined;
  value: unknown;
  parent: unknown;
  /** How deep below the body or the parameter; 0 for the body or parameter itself. */
  depth: number;
}

/** A location with failing children, worked out once for all of them (a body can fail at 100,000s of items of one list). */
interface Parent {
  location: Location;
  schema: Schema | undefined;
  /** Rank among the children: declared properties in schema order, list items by index, other keys after them as met. */
  ranks: Map<string, number>;
}

/** A failing pointer while the entries to report are picked: its place in the order, its Location not built yet. */
interface Candidate {
  pointer: string;
  /** Below a parent: the parent's order and the rank under it. The body or a parameter itself: its order, no rank. */
  parent: Parent | undefined;
  prefix: number[];
  rank: number;
  key: string;
  errors: ValidatorError[];
}

const unescapePointer = (part: string): string => (part.includes('~') ? part.replace(/~1/g, '/').replace(/~0/g, '~') : part);

/** The body or a parameter itself: `/body`, `/query/page`, `/headers/workspace_id`, `/params/id`. */
function rootLocation(context: RequestContext, pointer: string): Location {
  const [area = 'body', name = ''] = pointer.split('/').slice(1).map(unescapePointer);
  const where = LOCATION_NAMES[area] ?? 'body';
  if (where === 'body') {
    return { where, loc: [where], order: [LOCATION_ORDER.indexOf(where)], schema: context.body, value: context.rawBody, parent: undefined, depth: 0 };
  }
  const index = context.parameters.findIndex((p) => p.in === where && p.name.toLowerCase() === name.toLowerCase());
  const parameter = context.parameters[index];
  return {
    where,
    loc: [where, parameter?.name ?? name],
    order: [LOCATION_ORDER.indexOf(where), index],
    schema: parameter?.schema,
    value: context.rawParameters[where][parameter?.name ?? name],
    parent: undefined,
    depth: 0,
  };
}

function isRootPointer(pointer: string): boolean {
  const afterArea = pointer.indexOf('/', 1);
  const area = afterArea < 0 ? pointer.slice(1) : pointer.slice(1, afterArea);
  return (LOCATION_NAMES[area] ?? 'body') === 'body' ? afterArea < 0 : pointer.indexOf('/', afterArea + 1) < 0;
}

function rankUnder({ location, ranks }: Parent, key: string): number {
  let rank = ranks.get(key);
  if (rank === undefined && Array.isArray(location.value)) return Number(key);
  if (rank === undefined) ranks.set(key, (rank = ranks.size));
  return rank;
}

function childLocation(context: RequestContext, parent: Parent, key: string): Location {
  const { location, schema } = parent;
  const isList = Array.isArray(location.value);
  return {
    where: location.where,
    loc: [...location.loc, isList ? Number(key) : key],
    order: [...location.order, rankUnder(parent, key)],
    schema: schema && childSchema(context.document, schema, key),
    value: isList ? (location.value as unknown[])[Number(key)] : isRecord(location.value) ? location.value[key] : undefined,
    parent: location.value,
    depth: location.depth + 1,
  };
}

/** Candidates for pointers, each parent worked out once. */
function candidates(context: RequestContext): (pointer: string, errors: ValidatorError[]) => Candidate {
  const parents = new Map<string, Parent>();
  const parentAt = (pointer: string): Parent => {
    let parent = parents.get(pointer);
    if (!parent) {
      const location = isRootPointer(pointer) ? rootLocation(context, pointer) : locationOf(pointer);
      const schema = location.schema && resolve(context.document, location.schema);
      parent = { location, schema, ranks: new Map(Object.keys(schema?.properties ?? {}).map((key, rank) => [key, rank])) };
      parents.set(pointer, parent);
    }
    return parent;
  };
  const split = (pointer: string): [Parent, string] => {
    const cut = pointer.lastIndexOf('/');
    return [parentAt(pointer.slice(0, cut)), unescapePointer(pointer.slice(cut + 1))];
  };
  const locationOf = (pointer: string): Location => childLocation(context, ...split(pointer));
  return (pointer, errors) => {
    if (isRootPointer(pointer)) {
      return { pointer, parent: undefined, prefix: rootLocation(context, pointer).order, rank: 0, key: '', errors };
    }
    const [parent, key] = split(pointer);
    return { pointer, parent, prefix: parent.location.order, rank: rankUnder(parent, key), key, errors };
  };
}

/** FastAPI's order: path, query, header, then the body in field order; each list in index order. */
function compareCandidates(a: Candidate, b: Candidate): number {
  if (a.parent !== undefined && a.parent === b.parent) return a.rank - b.rank;
  const aLength = a.prefix.length + (a.parent ? 1 : 0);
  const bLength = b.prefix.length + (b.parent ? 1 : 0);
  for (let i = 0; i < Math.min(aLength, bLength); i++) {
    const x = i < a.prefix.length ? a.prefix[i] : a.rank;
    const y = i < b.prefix.length ? b.prefix[i] : b.rank;
    if (x !== y) return x - y;
  }
  return aLength - bLength;
}

/** One Pydantic entry for all the validator's errors at one location (Pydantic reports one per field). */
function violationAt(context: RequestContext, { where, loc, schema, value, parent, depth }: Location, errors: ValidatorError[]): Violation {
  const keywordOf = (error: ValidatorError) => error.errorCode?.replace(/\.openapi\.validation$/, '') ?? '';
  const resolved = resolve(context.document, schema);
  // What a field validator checks comes after the type and constraints, and NUL (PostgreSQL's rule) last.
  const rank = (error: ValidatorError) => {
    const keyword = keywordOf(error);
    if (keyword === NUL_KEYWORD) return KEYWORD_PRIORITY.length + 2;
    if (keyword === 'format' && resolved.format !== undefined && resolved.format in FIELD_VALIDATOR_FORMATS) return KEYWORD_PRIORITY.length + 1;
    const position = KEYWORD_PRIORITY.indexOf(keyword);
    return position < 0 ? KEYWORD_PRIORITY.length : position;
  };
  const chosen = [...errors].sort((a, b) => rank(a) - rank(b))[0];
  const keyword = keywordOf(chosen);

  // FastAPI treats a JSON null body like no body at all.
  const bodyAbsent = where === 'body' && depth === 0 && (keyword === 'required' || value === null);
  if (keyword === 'required' || bodyAbsent) {
    const input = bodyAbsent || depth === 0 ? null : parent;
    return { type: 'missing', loc, msg: 'Field required', input };
  }
  if (keyword === 'additionalProperties') {
    return { type: 'extra_forbidden', loc, msg: 'Extra inputs are not permitted', input: value };
  }
  const detail = keywordDetail(resolved.enum ? 'enum' : keyword, resolved, value, chosen.message);
  const violation: Violation = { type: detail.type, loc, msg: detail.msg, input: value };
  if (detail.ctx) violation.ctx = detail.ctx;
  return violation;
}

/**
 * The `detail` entries FastAPI would give for an express-openapi-validator
 * 400 (validated with allErrors): one per failing field, ordered like
 * FastAPI's, the first MAX_DETAIL_ENTRIES of them. One pass over the
 * validator's errors keeps the first ones in order (a pointer after the last
 * one kept costs one comparison), and only those are turned into entries.
 */
export function openApiViolations(error: { errors: ValidatorError[] }, req: Request): Violation[] {
  const context = contexts.get(req);
  // app.ts makes Express, the validator and pydanticRequests match paths identically, so this cannot happen.
  if (!context) throw new Error(`no validation context for ${req.method} ${req.path}`);
  const candidateFor = candidates(context);
  const kept: Candidate[] = [];
  for (const item of [...error.errors, ...nulErrors(context)]) {
    // Distinct pointers never compare equal (ranks are unique under a parent), so equal means another error at the same pointer.
    const candidate = candidateFor(item.path, [item]);
    if (kept.length === MAX_DETAIL_ENTRIES && compareCandidates(candidate, kept[kept.length - 1]) > 0) continue;
    let low = 0;
    let high = kept.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (compareCandidates(candidate, kept[middle]) <= 0) high = middle;
      else low = middle + 1;
    }
    if (low < kept.length && compareCandidates(candidate, kept[low]) === 0) {
      kept[low].errors.push(item);
      continue;
    }
    kept.splice(low, 0, candidate);
    if (kept.length > MAX_DETAIL_ENTRIES) kept.pop();
  }
  return kept.map((candidate) => {
    const location = candidate.parent ? childLocation(context, candidate.parent, candidate.key) : rootLocation(context, candidate.pointer);
    return violationAt(context, location, candidate.errors);
  });
}

/** The keyword of the errors nulErrors adds beside the validator's. */
const NUL_KEYWORD = 'nul';

const escapePointer = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * A NUL error for each string of the body, at a field the schema declares,
 * that holds a NUL (PostgreSQL text cannot): the services refuse them too, but
 * only once every other check has passed, and a failing body reports them all
 * at once. Every JSON body the gateway validates is bound for PostgreSQL (the
 * webhook's has its own route).
 */
function nulErrors(context: RequestContext): ValidatorError[] {
  const errors: ValidatorError[] = [];
  const visit = (schema: Schema | undefined, value: unknown, pointer: string): void => {
    if (schema === undefined) return;
    if (typeof value === 'string') {
      if (containsNul(value)) errors.push({ path: pointer, message: 'contains NUL', errorCode: NUL_KEYWORD });
      return;
    }
    const resolved = resolve(context.document, schema);
    if (Array.isArray(value)) value.forEach((item, index) => visit(resolved.items, item, `${pointer}/${index}`));
    else if (isRecord(value)) {
      for (const [key, item] of Object.entries(value)) visit(resolved.properties?.[key], item, `${pointer}/${escapePointer(key)}`);
    }
  };
  visit(context.body, context.rawBody, '/body');
  return errors;
}

/** FastAPI's single entry for a body that is not JSON, positioned as Python's decoder reports it. */
export function jsonSyntaxViolations(rawBody: string): Violation[] {
  const problem = pythonJsonError(rawBody) ?? { msg: 'Expecting value', pos: 0 };
  return [{ type: 'json_invalid', loc: ['body', problem.pos], msg: 'JSON decode error', input: {}, ctx: { error: problem.msg } }];
}
