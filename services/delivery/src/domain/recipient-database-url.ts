/** The kinds of recipient database a workspace may name, and the URL schemes of each. */
export type RecipientDatabaseKind = 'postgres' | 'mssql';

const KINDS: Record<string, RecipientDatabaseKind> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
  'mssql:': 'mssql',
  'sqlserver:': 'mssql',
};

const DEFAULT_PORTS: Record<RecipientDatabaseKind, number> = { postgres: 5432, mssql: 1433 };

/** Longer is not a database URL anyone types; it would only be a larger secret to store. */
export const MAX_URL_LENGTH = 2048;

/** What is shown of a recipient database: the URL's parts without the password. */
export interface RecipientDatabaseTarget {
  kind: RecipientDatabaseKind;
  host: string;
  port: number;
  database: string;
  user: string;
}

/** The URL's parts, or what is wrong with it (a message that never contains the password). */
export function parseRecipientDatabaseUrl(url: string): RecipientDatabaseTarget | { problem: string } {
  if (url.length > MAX_URL_LENGTH) return { problem: `the URL is longer than ${MAX_URL_LENGTH} characters` };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { problem: 'not a URL: expected postgres://user:password@host:port/database or mssql://user:password@host:port/database' };
  }
  const kind = KINDS[parsed.protocol.toLowerCase()];
  if (kind === undefined) return { problem: 'the URL must start with postgres://, postgresql://, mssql:// or sqlserver://' };
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') return { problem: 'the URL names no host' };
  const user = safeDecode(parsed.username);
  if (user === '') return { problem: 'the URL names no user' };
  const database = safeDecode(parsed.pathname.replace(/^\//, ''));
  if (database === '' || database.includes('/')) return { problem: 'the URL must name one database as its path (/database)' };
  if (`${host}${user}${database}`.includes('\u0000')) return { problem: 'the URL may not contain a NUL character' };
  return { kind, host, port: parsed.port === '' ? DEFAULT_PORTS[kind] : Number(parsed.port), database, user };
}

/**
 * `text` without the URL's password, in any spelling a driver might echo (as
 * written, percent-decoded, or inside the whole URL): each becomes `***`.
 */
export function withoutPassword(text: string, url: string): string {
  let password = '';
  try {
    password = new URL(url).password;
  } catch {
    password = passwordOfUnparsable(url);
  }
  const spellings = [...new Set([url, password, safeDecode(password)])].filter((spelling) => spelling.length > 0);
  // Longest first: the URL contains the password, and a decoded spelling may be part of the written one.
  spellings.sort((a, b) => b.length - a.length);
  let redacted = text;
  for (const spelling of spellings) redacted = redacted.split(spelling).join(spelling === url ? redactedUrl(url) : '***');
  return redacted;
}

/** The URL as it may be shown: its password replaced by `***`. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    const password = passwordOfUnparsable(url);
    return password === '' ? url : url.split(password).join('***');
  }
}

/** What sits between the first `:` after `//` and the last `@` of text that is not a URL (it may still hold a password). */
function passwordOfUnparsable(text: string): string {
  const start = text.indexOf('//');
  const at = text.lastIndexOf('@');
  if (start < 0 || at < start) return '';
  const colon = text.indexOf(':', start + 2);
  return colon < 0 || colon > at ? '' : text.slice(colon + 1, at);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
