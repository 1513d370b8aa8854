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
