import {
  containsNul,
  cronViolation,
  invalidEmail,
  nulViolation,
  parseEmail,
  providerCategoryViolation,
  selectStatementViolation,
  type Violation,
} from '@mail/common';
import { pythonJsonError } from './python-json';
import { parseDateOrDateTime, parseUuid } from './scalars';
import { childSchema, isRecord, resolve, type ParameterLocation, type RequestContext, type Schema } from './request-schemas';

/**
 * After validation: express-openapi-validator's errors as the `detail`
 * entries FastAPI with Pydantic v2 would answer, in its order and wording,
 * quoting the values as the caller sent them (lax-requests.ts converted
 * them before validation).
 */

/** The formats a field validator would check after the field's type and constraints. */
const FIELD_VALIDATOR_FORMATS: Record<string, (loc: string[], value: string) => Violation | undefined> = {
  cron: cronViolation,
  'tsql-select': selectStatementViolation,
  'provider-category': providerCategoryViolation,
};

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
  if (typeof value === 'number') return String(value);
  return value === null ? 'None' : JSON.stringify(value);
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
      if (typeof value === 'number')
        return { type: 'int_from_float', msg: 'Input should be a valid integer, got a number with a fractional part' };
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
    return {
      where,
      loc: [where],
      order: [LOCATION_ORDER.indexOf(where)],
      schema: context.body,
      value: context.rawBody,
      parent: undefined,
      depth: 0,
    };
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

const keywordOf = (error: ValidatorError): string => error.errorCode?.replace(/\.openapi\.validation$/, '') ?? '';

/**
 * Pydantic stops reading a list at the first item past its maximum and reports
 * that alone (`too_long`): none of its items' errors.
 */
function withoutItemsOfTooLongLists(errors: ValidatorError[]): ValidatorError[] {
  const tooLong = errors.filter((error) => keywordOf(error) === 'maxItems').map((error) => `${error.path}/`);
  return errors.filter((error) => !tooLong.some((list) => error.path.startsWith(list)));
}

/** One Pydantic entry for all the validator's errors at one location (Pydantic reports one per field). */
function violationAt(context: RequestContext, { where, loc, schema, value, parent, depth }: Location, errors: ValidatorError[]): Violation {
  const resolved = resolve(context.document, schema);
  // What a field validator checks comes after the type and constraints, and NUL (PostgreSQL's rule) last.
  const rank = (error: ValidatorError) => {
    const keyword = keywordOf(error);
    if (keyword === NUL_KEYWORD) return KEYWORD_PRIORITY.length + 2;
    if (keyword === 'format' && resolved.format !== undefined && resolved.format in FIELD_VALIDATOR_FORMATS)
      return KEYWORD_PRIORITY.length + 1;
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
 * The `detail` entries FastAPI would give for the errors of an
 * express-openapi-validator 400 (validated with allErrors) on the request of
 * `context`: one per failing field, ordered like FastAPI's, the first
 * MAX_DETAIL_ENTRIES of them. One pass over the validator's errors keeps the
 * first ones in order (a pointer after the last one kept costs one
 * comparison), and only those are turned into entries.
 */
export function openApiViolations(errors: ValidatorError[], context: RequestContext): Violation[] {
  const candidateFor = candidates(context);
  const kept: Candidate[] = [];
  for (const item of withoutItemsOfTooLongLists([...errors, ...nulErrors(context)])) {
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
