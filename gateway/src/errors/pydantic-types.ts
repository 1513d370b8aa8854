/**
 * What Pydantic v2 (lax mode, as FastAPI validates) accepts for the scalar
 * types of the public API, and its exact error texts. Pure functions.
 */

/** The `uuid` crate's parser (pydantic-core): canonical lowercase hyphenated form, or the crate's error text. */
export function parseUuid(input: string): { uuid: string } | { error: string } {
  const canonical = UUID_FORMS.exec(input);
  if (canonical) {
    const hex = (canonical[1] ?? canonical[2] ?? canonical[3] ?? canonical[4]).replace(/-/g, '').toLowerCase();
    return { uuid: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` };
  }
  return { error: uuidError(input) };
}

const HYPHENATED = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const UUID_FORMS = new RegExp(`^(?:([0-9a-fA-F]{32})|(${HYPHENATED})|\\{(${HYPHENATED})\\}|urn:uuid:(${HYPHENATED}))$`);
const GROUP_STARTS = [0, 9, 14, 19, 24];

/** uuid 1.x `InvalidUuid::into_err`, including its byte-based positions. */
function uuidError(input: string): string {
  const totalBytes = Buffer.byteLength(input);
  let body = input;
  let offset = 0;
  if (input.length >= 2 && input.startsWith('{') && input.endsWith('}')) [body, offset] = [input.slice(1, -1), 1];
  else if (input.startsWith('urn:uuid:')) [body, offset] = [input.slice(9), 9];
  const simple = offset === 0;

  const hyphens: number[] = [];
  let byteIndex = 0;
  for (const char of body) {
    if (char === '-') hyphens.push(byteIndex);
    else if (!/^[0-9a-fA-F]$/.test(char)) {
      return `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${char}\` at ${byteIndex + offset + 1}`;
    }
    byteIndex += Buffer.byteLength(char);
  }
  if (hyphens.length === 0 && simple) return `invalid length: expected length 32 for simple format, found ${totalBytes}`;
  if (hyphens.length !== 4) return `invalid group count: expected 5, found ${hyphens.length + 1}`;
  const expected = [8, 4, 4, 4, 12];
  for (let group = 0; group < 4; group++) {
    if (hyphens[group] !== GROUP_STARTS[group + 1] - 1) {
      return `invalid group length in group ${group}: expected ${expected[group]}, found ${hyphens[group] - GROUP_STARTS[group]}`;
    }
  }
  return `invalid group length in group 4: expected 12, found ${totalBytes - GROUP_STARTS[4]}`;
}

const DIGITS = String.raw`\d+(?:_\d+)*`;
const INT_STRING = new RegExp(`^[+-]?${DIGITS}(?:\\.0*)?$`);
const FLOAT_STRING = new RegExp(`^[+-]?(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?$`);

/** pydantic-core `str_as_int`: trimmed, optional sign, `_` between digits, a `.000` tail allowed. */
export function intFromString(value: string): number | undefined {
  const text = value.trim();
  return INT_STRING.test(text) ? Number(text.replace(/_/g, '').replace(/\.0*$/, '')) : undefined;
}

/** pydantic-core `str_as_float` for finite numbers. */
export function floatFromString(value: string): number | undefined {
  const text = value.trim();
  return FLOAT_STRING.test(text) ? Number(text.replace(/_/g, '')) : undefined;
}

const TRUE_WORDS = new Set(['1', 't', 'y', 'on', 'yes', 'true']);
const FALSE_WORDS = new Set(['0', 'f', 'n', 'no', 'off', 'false']);

/** pydantic-core `str_as_bool`. */
export function boolFromString(value: string): boolean | undefined {
  const word = value.toLowerCase();
  return TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : undefined;
}

/** A UTC instant in ms, and whether the input was a bare date; or speedate's complaint. */
export type DateOrDateTime = { time: number; bareDate: boolean } | { error: string };

const DATE_TIME_TAIL = /^(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

function twoDigits(text: string, at: number): number | undefined {
  const part = text.slice(at, at + 2);
  return /^\d\d$/.test(part) ? Number(part) : undefined;
}

/** The time of day and zone after the date, or speedate's complaint about them. */
function timeOfDay(text: string): { ms: number; offsetMs: number } | { error: string } {
  const match = DATE_TIME_TAIL.exec(text);
  if (match) {
    const [, hour, minute, second = '0', fraction = '', zulu, sign, zoneHour = '0', zoneMinute = '0'] = match;
    if (Number(hour) > 23) return { error: 'hour value is outside expected range of 0-23' };
    if (Number(minute) > 59) return { error: 'minute value is outside expected range of 0-59' };
    if (Number(second) > 59) return { error: 'second value is outside expected range of 0-59' };
    if (fraction.length > 6) return { error: 'second fraction value is more than 6 digits long' };
    const offsetMinutes = zulu || !sign ? 0 : (sign === '-' ? -1 : 1) * (Number(zoneHour) * 60 + Number(zoneMinute));
    if (Math.abs(offsetMinutes) >= 24 * 60) return { error: 'timezone offset must be less than 24 hours' };
    const ms = ((Number(hour) * 60 + Number(minute)) * 60 + Number(second)) * 1000 + Math.floor(Number(`0.${fraction || 0}`) * 1000);
    return { ms, offsetMs: offsetMinutes * 60_000 };
  }
  if (text.length < 5) return { error: 'input is too short' };
  if (twoDigits(text, 0) === undefined) return { error: 'invalid character in hour' };
  if (text[2] !== ':') return { error: 'invalid time separator, expected `:`' };
  if (twoDigits(text, 3) === undefined) return { error: 'invalid character in minute' };
  if (text[5] === ':' && twoDigits(text, 6) === undefined) return { error: 'invalid character in second' };
  return { error: 'unexpected extra characters at the end of the input' };
}

/**
 * An ISO date or date-time, read as Pydantic's `datetime` (speedate) reads
 * it, a date-time without a zone as UTC; or speedate's error text for what
 * it cannot read.
 */
export function parseDateOrDateTime(text: string): DateOrDateTime {
  if (text.length < 10) return { error: 'input is too short' };
  if (!/^\d{4}$/.test(text.slice(0, 4))) return { error: 'invalid character in year' };
  if (text[4] !== '-' || text[7] !== '-') return { error: 'invalid date separator, expected `-`' };
  const [year, month, day] = [Number(text.slice(0, 4)), twoDigits(text, 5), twoDigits(text, 8)];
  if (month === undefined) return { error: 'invalid character in month' };
  if (day === undefined) return { error: 'invalid character in day' };
  if (month < 1 || month > 12) return { error: 'month value is outside expected range of 1-12' };
  if (day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return { error: 'day value is outside expected range' };
  const date = Date.UTC(year, month - 1, day);
  if (text.length === 10) return { time: date, bareDate: true };
  if (!'Tt_ '.includes(text[10])) return { error: 'invalid datetime separator, expected `T`, `t`, `_` or space' };
  const time = timeOfDay(text.slice(11));
  return 'error' in time ? time : { time: date + time.ms - time.offsetMs, bareDate: false };
}
