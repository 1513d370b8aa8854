import { randomBytes } from 'node:crypto';

export interface MimeMessage {
  from: { name: string | null; address: string };
  replyTo: string | null;
  to: string;
  subject: string;
  html?: string;
  text?: string;
  /** Without angle brackets. */
  messageId: string;
  /** Written as given (already-prepared values, e.g. JSON for X-SMTPAPI); names and values are trusted single-line ASCII produced by our code. */
  headers: Record<string, string>;
  /** Now if not given. */
  date?: Date;
}

const TAB = 9;
const LF = 10;
const CR = 13;
const SPACE = 32;
const EQUALS = 61;
const HEX = Buffer.from('0123456789ABCDEF');
/** RFC 2045 §6.7 rule 2: printable ASCII but `=`, and space and tab, are written as themselves; the rest as `=XX`. */
const LITERAL = new Uint8Array(256).map((_, byte) => ((byte >= SPACE && byte < 127 && byte !== EQUALS) || byte === TAB ? 1 : 0));
/** Room for the characters of a line before a soft break's `=`, which makes it 76. */
const LINE = 75;
/** RFC 5322's limit on a line, without its CRLF. */
const MAX_LINE = 998;

/** A quoted-printable part always contains `=` only before two hex digits or a line break, so no line of it can hold `=_`. */
const boundaryPrefix = `=_${randomBytes(8).toString('hex')}_`;
let boundaries = 0;

/** The message as it goes to SMTP: CRLF lines, 7-bit, the body in quoted-printable (text first, then HTML, when both). */
export function composeMime(message: MimeMessage): Buffer {
  const { from } = message;
  // Empty is absent, as with nodemailer: an empty alternative could be all that a reader shows.
  const html = message.html || undefined;
  const text = message.text || undefined;
  let head =
    (from.name ? phraseHeader('From', from.name, true, ` <${from.address}>`) : `From: ${from.address}\r\n`) +
    `To: ${message.to}\r\n` +
    (message.replyTo === null ? '' : `Reply-To: ${message.replyTo}\r\n`) +
    phraseHeader('Subject', message.subject, false) +
    `Message-ID: <${message.messageId}>\r\n` +
    // RFC 5322 writes UTC as +0000; GMT is its obsolete form.
    `Date: ${(message.date ?? new Date()).toUTCString().replace('GMT', '+0000')}\r\n` +
    'MIME-Version: 1.0\r\n';
  for (const [header, value] of Object.entries(message.headers)) head += fold(header, value, MAX_LINE);
  if (html === undefined || text === undefined) {
    return Buffer.concat([Buffer.from(head + partHeaders(html === undefined ? 'plain' : 'html')), quotedPrintable(html ?? text ?? '')]);
  }
  const boundary = `${boundaryPrefix}${(boundaries++).toString(36)}`;
  return Buffer.concat([
    Buffer.from(`${head}Content-Type: multipart/alternative; boundary="${boundary}"\r\n\r\n--${boundary}\r\n${partHeaders('plain')}`),
    quotedPrintable(text),
    Buffer.from(`\r\n--${boundary}\r\n${partHeaders('html')}`),
    quotedPrintable(html),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
}

const partHeaders = (type: 'plain' | 'html'): string =>
  `Content-Type: text/${type}; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n`;

/**
 * Whether a phrase may be written as is: printable ASCII, words single-spaced (so that no folded line is only
 * whitespace) and short enough to fold within 998, and nothing a reader would decode as an encoded word.
 */
const plain = (value: string): boolean => /^(?:[\x21-\x7e]{1,900}(?: [\x21-\x7e]{1,900})*)?$/.test(value) && !value.includes('=?');

/** A header holding a phrase (and what follows it): as is, quoted if asked, and folded when plain; else encoded words. */
function phraseHeader(name: string, phrase: string, quote: boolean, rest = ''): string {
  if (plain(phrase)) return fold(name, `${quote ? `"${phrase.replace(/["\\]/g, '\\$&')}"` : phrase}${rest}`, 78);
  const encoded = `${name}: ${encodedWords(phrase)}`;
  const lastLine = encoded.length - encoded.lastIndexOf('\n') - 1;
  return `${encoded}${lastLine + rest.length > 78 ? '\r\n' : ''}${rest}\r\n`;
}

/** RFC 2047 B encoded words of at most 42 bytes (68 characters, 77 with "Subject: "), each ending at a whole UTF-8 character. */
function encodedWords(value: string): string {
  const bytes = Buffer.from(value);
  const words: string[] = [];
  for (let start = 0; start < bytes.length;) {
    let end = Math.min(start + 42, bytes.length);
    while (end < bytes.length && (bytes[end] & 0xc0) === 0x80) end--;
    words.push(`=?UTF-8?B?${bytes.toString('base64', start, end)}?=`);
    start = end;
  }
  return words.join('\r\n ');
}

/**
 * The header folded before spaces of its value to keep lines within `limit` where it can; a line that would still pass
 * 998 is broken after a comma, or else at 998, which adds a space to the value.
 */
function fold(name: string, value: string, limit: number): string {
  let rest = `${name}: ${value}`;
  let folded = '';
  // Not before the value's first word, which would leave the name alone on its line.
  let after = name.length + 1;
  while (rest.length > limit) {
    let cut = rest.lastIndexOf(' ', limit);
    if (cut <= after) cut = rest.indexOf(' ', limit);
    if (cut > after && cut <= MAX_LINE) {
      folded += `${rest.slice(0, cut)}\r\n`;
      rest = rest.slice(cut);
    } else if (rest.length > MAX_LINE) {
      cut = rest.lastIndexOf(',', MAX_LINE - 1) + 1;
      if (cut <= after + 1) cut = MAX_LINE;
      folded += `${rest.slice(0, cut)}\r\n`;
      rest = ` ${rest.slice(cut)}`;
    } else {
      break;
    }
    after = 0;
  }
  return `${folded}${rest}\r\n`;
}

/** Whether the text's line ends at `i`; a lone CR counts too, which costs at most a needless `=20` and saves looking further. */
const lineBreakAt = (bytes: Buffer, i: number): boolean => i === bytes.length || bytes[i] === LF || bytes[i] === CR;

/**
 * RFC 2045 §6.7 over the UTF-8 bytes: CRLF and LF become CRLF, a lone CR is kept as `=0D`, and the output ends
 * with a line break (a soft one if the text has none) so that nothing the SMTP client appends becomes content.
 */
function quotedPrintable(text: string): Buffer {
  const bytes = Buffer.from(text);
  // Each byte is at most 3, plus a 3-byte soft break per at least 73 written.
  const out = Buffer.allocUnsafe(bytes.length * 4 + 3);
  let o = 0;
  let lineEnd = LINE;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    // Most bytes take this way out, which is what makes the loop fast.
    if (LITERAL[byte] === 1 && o < lineEnd && (byte > SPACE || !lineBreakAt(bytes, i + 1))) {
      out[o++] = byte;
      continue;
    }
    if (byte === LF || (byte === CR && bytes[i + 1] === LF)) {
      if (byte === CR) i++;
      out[o++] = CR;
      out[o++] = LF;
      lineEnd = o + LINE;
      continue;
    }
    // Space and tab before a line break would be lost to a reader that trims lines (rule 3).
    const escaped = LITERAL[byte] === 0 || (byte <= SPACE && lineBreakAt(bytes, i + 1));
    if (o + (escaped ? 3 : 1) > lineEnd) {
      out[o++] = EQUALS;
      out[o++] = CR;
      out[o++] = LF;
      lineEnd = o + LINE;
    }
    if (escaped) {
      out[o++] = EQUALS;
      out[o++] = HEX[byte >> 4];
      out[o++] = HEX[byte & 15];
    } else {
      out[o++] = byte;
    }
  }
  if (o > 0 && out[o - 1] !== LF) {
    out[o++] = EQUALS;
    out[o++] = CR;
    out[o++] = LF;
  }
  return out.subarray(0, o);
}
