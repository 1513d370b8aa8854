/**
 * SQL text for ClickHouse built only from validated values. ClickHouse 18.16,
 * which the cluster tests run, has no server-side query parameters, so every
 * value is checked and rendered here, and the `sql` tag accepts nothing but
 * fragments made by these functions: a raw string cannot reach a query.
 */
export class SqlFragment {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export class UnsafeSqlValueError extends Error {}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const IDENTIFIER_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A string literal; backslash and quote are escaped, control characters written as escapes. */
export function str(value: string): SqlFragment {
  if (typeof value !== 'string') throw new UnsafeSqlValueError('not a string');
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this escapes
  const escaped = value.replace(/[\\'\u0000-\u001f\u007f]/g, (char) => {
    switch (char) {
      case '\\':
        return '\\\\';
      case "'":
        return "\\'";
      case '\n':
        return '\\n';
      case '\r':
        return '\\r';
      case '\t':
        return '\\t';
      default:
        return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
    }
  });
  return new SqlFragment(`'${escaped}'`);
}

export function uuid(value: string): SqlFragment {
  if (typeof value !== 'string' || !UUID_PATTERN.test(value)) throw new UnsafeSqlValueError('not a UUID');
  return new SqlFragment(`toUUID('${value.toLowerCase()}')`);
}

/**
 * A set of UUIDs for `IN`, as a subquery over one string literal that the
 * server splits: 18.16's parser is slow per literal of an IN list, and fast
 * on one long string (bench/README.md, "ClickHouse: IN lists").
 */
export function uuidSet(values: string[]): SqlFragment {
  if (values.length === 0) throw new UnsafeSqlValueError('empty list');
  for (const value of values) {
    if (typeof value !== 'string' || !UUID_PATTERN.test(value)) throw new UnsafeSqlValueError('not a UUID');
  }
  return new SqlFragment(`(SELECT toUUID(arrayJoin(splitByChar(',', '${values.join(',').toLowerCase()}'))))`);
}

/**
 * A set of strings for `IN`, as a subquery over one array literal: any
 * number of values stays one node of the query's syntax tree (an IN list
 * takes one per value, and 18.16 refuses more than 50,000), and parses faster.
 */
export function stringSet(values: string[]): SqlFragment {
  if (values.length === 0) throw new UnsafeSqlValueError('empty list');
  return new SqlFragment(`(SELECT arrayJoin([${values.map((value) => str(value).text).join(', ')}]))`);
}

export function int(value: number): SqlFragment {
  if (!Number.isSafeInteger(value)) throw new UnsafeSqlValueError('not a safe integer');
  return new SqlFragment(String(value));
}

/**
 * The times dateTime builds values from, in unix seconds. DateTime holds
 * unsigned 32-bit seconds, but ClickHouse 18.16's date functions (toDate,
 * toStartOfDay) give 0000-00-00 from 2106-02-07 on. Stored event times lie
 * before `max` (the webhook takes none later), so a time outside the range,
 * taken as its nearest end, compares with them (and its day with theirs) as
 * the time itself would.
 */
export const DATE_TIME_SECONDS = { min: 0, max: Date.UTC(2106, 1, 6) / 1000 };

/**
 * A DateTime('UTC') value with second precision (what the event tables
 * store); a time outside DATE_TIME_SECONDS as its nearest end (toDateTime
 * would wrap it around).
 */
export function dateTime(value: Date): SqlFragment {
  const ms = value instanceof Date ? value.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new UnsafeSqlValueError('not a valid date');
  const seconds = Math.min(Math.max(Math.floor(ms / 1000), DATE_TIME_SECONDS.min), DATE_TIME_SECONDS.max);
  return new SqlFragment(`toDateTime(${seconds}, 'UTC')`);
}

/** One of a fixed set of values (e.g. an Enum8 member), as a string literal. */
export function oneOf<T extends string>(value: T, allowed: readonly T[]): SqlFragment {
  if (!allowed.includes(value)) throw new UnsafeSqlValueError('value not allowed');
  return str(value);
}

export function identifier(name: string): SqlFragment {
  if (!IDENTIFIER_PATTERN.test(name)) throw new UnsafeSqlValueError('not an identifier');
  return new SqlFragment(name);
}

/** Comma-separated list, e.g. for IN (...). An empty list is refused (IN () is a syntax error). */
export function list(fragments: SqlFragment[]): SqlFragment {
  if (fragments.length === 0) throw new UnsafeSqlValueError('empty list');
  return join(fragments, ', ');
}

export function join(fragments: SqlFragment[], separator: string): SqlFragment {
  return new SqlFragment(fragments.map((fragment) => fragment.text).join(separator));
}

/** An Enum8 type of these members, numbered in order from `first`. Only for names written in the source code. */
export function enum8(names: readonly string[], first: number): SqlFragment {
  return raw.trusted(`Enum8(${names.map((name, index) => `'${name}' = ${first + index}`).join(', ')})`);
}

export const raw = {
  /** Only for SQL text written in the source code, never for data. */
  trusted: (text: string): SqlFragment => new SqlFragment(text),
};

export function sql(strings: TemplateStringsArray, ...values: SqlFragment[]): SqlFragment {
  let text = strings[0];
  values.forEach((value, index) => {
    if (!(value instanceof SqlFragment)) throw new UnsafeSqlValueError('sql`` takes only SqlFragment values');
    text += value.text + strings[index + 1];
  });
  return new SqlFragment(text);
}
