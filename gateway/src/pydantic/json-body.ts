import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import { HttpError } from '../errors/http-error';

declare module 'http' {
  interface IncomingMessage {
    /** Set by verifyJsonBody when a JSON body has no bytes: body-parser reads it as {}, FastAPI as no body. */
    emptyJsonBody?: true;
  }
}

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
const unreadableBody = (): HttpError => new HttpError(400, 'There was an error parsing the body');

/** Whether the JSON text nests arrays and objects deeper than `limit` (brackets inside strings do not count). */
export function nestingExceeds(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Jump over the string to its closing quote (a webhook body is mostly strings): indexOf is native.
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && isEscaped(text, end)) end = text.indexOf('"', end + 1);
      if (end === -1) return false;
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** A quote preceded by an odd run of backslashes is part of its string. */
function isEscaped(text: string, quote: number): boolean {
  let backslashes = 0;
  for (let j = quote - 1; text.charCodeAt(j) === 0x5c; j--) backslashes++;
  return backslashes % 2 === 1;
}

/**
 * The text of a raw JSON body, or the 400 of `unreadableBody` for one Python
 * could not decode: not valid in its charset (UTF-8 unless the caller named
 * another one), or nested deeper than MAX_JSON_DEPTH. Syntax errors are left
 * to the parser, which reports them as 422 json_invalid.
 */
export function readableJsonText(raw: Buffer, charset = 'utf-8'): string {
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
  return text;
}

/** For express.json's `type`: FastAPI reads a body without Content-Type as JSON too. */
export function isJsonBody(req: IncomingMessage): boolean {
  return !req.headers['content-type'] || Boolean((req as Request).is(['application/json', 'application/*+json']));
}

/**
 * For express.json's `verify`, before parsing: marks an empty body (see
 * `emptyJsonBody`) and refuses, with FastAPI's 400, a body Python could not
 * decode at all.
 */
export function verifyJsonBody(req: IncomingMessage, _res: unknown, buffer: Buffer, charset: string): void {
  if (buffer.length === 0) req.emptyJsonBody = true;
  // For its 400 only: body-parser decodes and parses the body itself.
  readableJsonText(buffer, charset);
}
