import { MAX_JSON_DEPTH, nestingExceeds, readableJsonText } from '../src/pydantic/json-body';
import { HttpError } from '../src/errors/http-error';

/** The definition: one character at a time, a backslash in a string taking the next one with it. */
function referenceNestingExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') {
      if (++depth > limit) return true;
    } else if (c === ']' || c === '}') depth--;
  }
  return false;
}

const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

describe('nestingExceeds', () => {
  it.each<[string, string, boolean]>([
    ['brackets inside a string', `{"a":"${'['.repeat(5_000)}"}`, false],
    ['brackets after an escaped quote, still inside the string', `{"a":"\\"${'['.repeat(5_000)}"}`, false],
    ['nesting after a string ending in an escaped backslash', `["\\\\",${deep(MAX_JSON_DEPTH + 1)}]`, true],
    ['nesting after a string ending in three backslashes and a quote', `["\\\\\\"",${deep(MAX_JSON_DEPTH)}]`, true],
    ['exactly the limit', deep(MAX_JSON_DEPTH), false],
    ['one level more', deep(MAX_JSON_DEPTH + 1), true],
    ['an unterminated string', `[${'"['.repeat(3)}`, false],
  ])('%s', (_name, text, exceeds) => {
    expect(nestingExceeds(text, MAX_JSON_DEPTH)).toBe(exceeds);
    expect(referenceNestingExceeds(text, MAX_JSON_DEPTH)).toBe(exceeds);
  });

  it('agrees with the character-by-character definition on random texts', () => {
    const alphabet = ['[', ']', '{', '}', '"', '\\', 'a', ',', ':'];
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 20_000; round++) {
      const text = Array.from({ length: 1 + Math.floor(random() * 40) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const limit = Math.floor(random() * 6);
      expect([text, limit, nestingExceeds(text, limit)]).toEqual([text, limit, referenceNestingExceeds(text, limit)]);
    }
  });
});

describe('readableJsonText', () => {
  it('returns the decoded text, and the 400 for bytes that are not UTF-8 or nest too deep', () => {
    expect(readableJsonText(Buffer.from('{"name":"café"}'))).toBe('{"name":"café"}');
    expect(readableJsonText(Buffer.from('{"name":"utf16"}', 'utf16le'), 'utf-16le')).toBe('{"name":"utf16"}');
    for (const raw of [Buffer.from([0x5b, 0xff, 0x5d]), Buffer.from(deep(MAX_JSON_DEPTH + 1))]) {
      expect(() => readableJsonText(raw)).toThrow(HttpError);
    }
  });
});
