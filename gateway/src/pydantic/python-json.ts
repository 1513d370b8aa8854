/**
 * Where and why Python's `json.loads` (the C decoder of CPython 3.12) rejects
 * a text, so a malformed body gets the same `json_invalid` entry FastAPI
 * gives. Positions count code points, as Python's do. Only runs after
 * JSON.parse failed, so speed does not matter here.
 *
 * One deliberate difference: Python accepts the non-JSON literals NaN,
 * Infinity and -Infinity; here they are "Expecting value" like any other
 * stray word, because nothing behind the gateway can store them.
 */
export interface PythonJsonError {
  msg: string;
  pos: number;
}

/** Python's JSONDecodeError: `msg` at code point `pos`. */
class DecodeError extends Error {
  constructor(
    readonly msg: string,
    readonly pos: number,
  ) {
    super(`${msg}: char ${pos}`);
  }
}

/** The decoder's StopIteration, which json.loads reports as this: no value starts at `pos`. */
const noValue = (pos: number): DecodeError => new DecodeError('Expecting value', pos);

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
const isHex = (c: string | undefined): boolean => c !== undefined && /^[0-9a-fA-F]$/.test(c);
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);

/** Python's error for `text`, or undefined when Python would decode it. */
export function pythonJsonError(text: string): PythonJsonError | undefined {
  const s = Array.from(text);
  const skipSpace = (i: number): number => {
    while (i < s.length && (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r')) i++;
    return i;
  };
  const literalAt = (i: number, word: string): boolean => s.slice(i, i + word.length).join('') === word;
  const hexCode = (i: number): number | undefined =>
    [0, 1, 2, 3].every((k) => isHex(s[i + k])) ? parseInt(s.slice(i, i + 4).join(''), 16) : undefined;

  /** `start` is just after the opening quote; returns the index after the closing one. */
  const scanString = (start: number): number => {
    const begin = start - 1;
    let i = start;
    for (;;) {
      while (i < s.length && s[i] !== '"' && s[i] !== '\\') {
        if (s[i] <= '\x1f') throw new DecodeError('Invalid control character at', i);
        i++;
      }
      if (i >= s.length) throw new DecodeError('Unterminated string starting at', begin);
      if (s[i] === '"') return i + 1;
      i++;
      if (i === s.length) throw new DecodeError('Unterminated string starting at', begin);
      if (s[i] !== 'u') {
        if (!ESCAPES.has(s[i])) throw new DecodeError('Invalid \\escape', i - 1);
        i++;
        continue;
      }
      const end = i + 5;
      if (end >= s.length) throw new DecodeError('Invalid \\uXXXX escape', i);
      const code = hexCode(i + 1);
      if (code === undefined) throw new DecodeError('Invalid \\uXXXX escape', i);
      i = end;
      // A high surrogate may pair with a following \uXXXX; an unpaired one is kept as is.
      if (code >= 0xd800 && code <= 0xdbff && end + 6 < s.length && s[end] === '\\' && s[end + 1] === 'u') {
        const low = hexCode(end + 2);
        if (low === undefined) throw new DecodeError('Invalid \\uXXXX escape', end + 1);
        if (low >= 0xdc00 && low <= 0xdfff) i = end + 6;
      }
    }
  };

  const scanNumber = (start: number): number => {
    let i = start;
    if (s[i] === '-' && ++i >= s.length) throw noValue(start);
    if (s[i] >= '1' && s[i] <= '9') {
      i++;
      while (isDigit(s[i])) i++;
    } else if (s[i] === '0') {
      i++;
    } else {
      throw noValue(start);
    }
    if (s[i] === '.' && isDigit(s[i + 1])) {
      i += 2;
      while (isDigit(s[i])) i++;
    }
    if ((s[i] === 'e' || s[i] === 'E') && i < s.length - 1) {
      const exponentStart = i++;
      if ((s[i] === '-' || s[i] === '+') && i < s.length - 1) i++;
      while (isDigit(s[i])) i++;
      if (!isDigit(s[i - 1])) i = exponentStart;
    }
    return i;
  };

  const scanObject = (start: number): number => {
    let i = skipSpace(start);
    if (s[i] === '}') return i + 1;
    for (;;) {
      if (s[i] !== '"') throw new DecodeError('Expecting property name enclosed in double quotes', i);
      i = skipSpace(scanString(i + 1));
      if (s[i] !== ':') throw new DecodeError("Expecting ':' delimiter", i);
      i = skipSpace(scanValue(skipSpace(i + 1)));
      if (s[i] === '}') return i + 1;
      if (s[i] !== ',') throw new DecodeError("Expecting ',' delimiter", i);
      i = skipSpace(i + 1);
    }
  };

  const scanArray = (start: number): number => {
    let i = skipSpace(start);
    if (s[i] === ']') return i + 1;
    for (;;) {
      i = skipSpace(scanValue(i));
      if (s[i] === ']') return i + 1;
      if (s[i] !== ',') throw new DecodeError("Expecting ',' delimiter", i);
      i = skipSpace(i + 1);
    }
  };

  const scanValue = (i: number): number => {
    if (i >= s.length) throw noValue(i);
    if (s[i] === '"') return scanString(i + 1);
    if (s[i] === '{') return scanObject(i + 1);
    if (s[i] === '[') return scanArray(i + 1);
    for (const word of ['null', 'true', 'false']) if (literalAt(i, word)) return i + word.length;
    return scanNumber(i);
  };

  try {
    const end = skipSpace(scanValue(skipSpace(0)));
    return end === s.length ? undefined : { msg: 'Extra data', pos: end };
  } catch (error) {
    if (error instanceof DecodeError) return { msg: error.msg, pos: error.pos };
    throw error;
  }
}
