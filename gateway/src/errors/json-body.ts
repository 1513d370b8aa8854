import { isUtf8 } from 'node:buffer';
import { HttpError } from './http-error';

/**
 * Nesting deeper than this is refused, about where CPython's json decoder
 * raises RecursionError. It also keeps hostile nesting (100k levels of `[`)
 * away from the recursive code after parsing: lax conversion, the validator,
 * error positions, serializing the echoed input.
 */
export const MAX_JSON_DEPTH = 1000;

/**
 * FastAPI answers any failure to read a JSON body other than a JSON syntax
 * error (bytes that are not UTF-8, a RecursionError) with this 400.
 */
export const unreadableBody = (): HttpError => new HttpError(400, 'There was an error parsing the body');

function nestingExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * Throws the 400 of `unreadableBody` for a raw JSON body Python could not
 * decode: not valid in its charset (UTF-8 unless the caller named another
 * one), or nested deeper than MAX_JSON_DEPTH. Syntax errors are left to the
 * parser, which reports them as 422 json_invalid.
 */
export function assertReadableJson(raw: Buffer, charset = 'utf-8'): void {
  let text: string;
  if (/^utf-?8$/i.test(charset)) {
    if (!isUtf8(raw)) throw unreadableBody();
    text = raw.toString('utf8');
  } else {
    try {
      text = new TextDecoder(charset, { fatal: true }).decode(raw);
    } catch {
      throw unreadableBody();
    }
  }
  if (nestingExceeds(text, MAX_JSON_DEPTH)) throw unreadableBody();
}
