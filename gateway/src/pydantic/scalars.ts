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

/**
 * The time of day and zone after the date, or undefined where speedate reads
 * none. Digits of a fraction beyond microseconds are dropped, as Pydantic does.
 */
function timeOfDay(text: string): { ms: number; offsetMs: number } | undefined {
  const match = DATE_TIME_TAIL.exec(text);
  if (!match) return undefined;
  const [, hour, minute, second = '0', fraction = '', zulu, sign, zoneHour = '0', zoneMinute = '0'] = match;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  const offsetMinutes = zulu || !sign ? 0 : (sign === '-' ? -1 : 1) * (Number(zoneHour) * 60 + Number(zoneMinute));
  if (Math.abs(offsetMinutes) >= 24 * 60) return undefined;
  const ms = ((Number(hour) * 60 + Number(minute)) * 60 + Number(second)) * 1000 + Number(fraction.slice(0, 3).padEnd(3, '0'));
  return { ms, offsetMs: offsetMinutes * 60_000 };
}

/** Date.UTC, but years 0-99 are those years, not 1900-1999. */
function utcDate(year: number, monthIndex: number, day: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, monthIndex, day);
  return date.getTime();
}

/** speedate's unix time: a plain decimal number (its whole part an i64) of seconds, or of milliseconds beyond 2e10. */
const UNIX_TIME = /^[+-]?(\d+)(?:\.\d*)?$/;
const I64_MAX = 2n ** 63n - 1n;
const MILLISECONDS_ABOVE = 2e10;
const UNIX_SECONDS = { min: -62_135_596_800, max: 253_402_300_799 };

function unixTime(text: string): DateOrDateTime | undefined {
  const match = UNIX_TIME.exec(text);
  if (!match || BigInt(match[1]) > I64_MAX) return undefined;
  const value = Number(text);
  const ms = Math.abs(value) > MILLISECONDS_ABOVE ? value : value * 1000;
  if (ms > UNIX_SECONDS.max * 1000 + 999) return { error: 'dates after 9999 are not supported as unix timestamps' };
  if (ms < UNIX_SECONDS.min * 1000) return { error: 'dates before 0000 are not supported as unix timestamps' };
  return { time: Math.floor(ms), bareDate: false };
}

/**
 * An ISO date or date-time, or a unix time, read as Pydantic's `datetime`
 * (speedate) reads it, a date-time without a zone as UTC; or the error text
 * Pydantic reports for what it cannot read: that of reading it as a date.
 */
export function parseDateOrDateTime(text: string): DateOrDateTime {
  const unix = unixTime(text);
  if (unix) return unix;
  if (text.length < 10) return { error: 'input is too short' };
  if (!/^\d{4}$/.test(text.slice(0, 4))) return { error: 'invalid character in year' };
  if (text[4] !== '-' || text[7] !== '-') return { error: 'invalid date separator, expected `-`' };
  const [year, month, day] = [Number(text.slice(0, 4)), twoDigits(text, 5), twoDigits(text, 8)];
  if (month === undefined) return { error: 'invalid character in month' };
  if (day === undefined) return { error: 'invalid character in day' };
  if (month < 1 || month > 12) return { error: 'month value is outside expected range of 1-12' };
  if (day < 1 || day > new Date(utcDate(year, month, 0)).getUTCDate()) return { error: 'day value is outside expected range' };
  const date = utcDate(year, month - 1, day);
  if (text.length === 10) return { time: date, bareDate: true };
  const time = 'Tt_ '.includes(text[10]) ? timeOfDay(text.slice(11)) : undefined;
  return time
    ? { time: date + time.ms - time.offsetMs, bareDate: false }
    : { error: 'unexpected extra characters at the end of the input' };
}
