import type { Knex } from 'knex';
import sql from 'mssql';
import pg from 'pg';
import { withoutPassword, type RecipientDatabaseTarget } from '../domain/recipient-database-url';
import { seal, unseal } from '../domain/sealed-secret';
import { mssqlConfig } from './mssql-recipients';

/** The wait for a recipient database being tried, to connect and then to answer SELECT 1. */
const VERIFY_TIMEOUT_MS = 5_000;

/** A workspace's own recipient database as stored, without its URL. */
export interface StoredRecipientDatabase extends RecipientDatabaseTarget {
  workspaceId: string;
  verifiedAt: Date;
}

interface Row {
  workspace_id: string;
  kind: RecipientDatabaseTarget['kind'];
  host: string;
  port: number;
  database: string;
  user_name: string;
  verified_at: Date;
}

const SHOWN_COLUMNS = ['workspace_id', 'kind', 'host', 'port', 'database', 'user_name', 'verified_at'];

const fromRow = (row: Row): StoredRecipientDatabase => ({
  workspaceId: row.workspace_id,
  kind: row.kind,
  host: row.host,
  port: row.port,
  database: row.database,
  user: row.user_name,
  verifiedAt: row.verified_at,
});

/** Stores (or replaces) the workspace's URL, sealed with `key`, once it was verified at `verifiedAt`. */
export async function putRecipientDatabase(
  db: Knex,
  key: Buffer,
  workspaceId: string,
  url: string,
  target: RecipientDatabaseTarget,
  verifiedAt: Date,
): Promise<StoredRecipientDatabase> {
  const row = {
    workspace_id: workspaceId,
    kind: target.kind,
    url_ciphertext: seal(key, url, workspaceId),
    host: target.host,
    port: target.port,
    database: target.database,
    user_name: target.user,
    verified_at: verifiedAt,
    updated_at: db.fn.now(),
  };
  const [stored] = await db('recipient_databases').insert(row).onConflict('workspace_id').merge().returning<Row[]>(SHOWN_COLUMNS);
  return fromRow(stored);
}

export async function getRecipientDatabase(db: Knex, workspaceId: string): Promise<StoredRecipientDatabase | undefined> {
  const row = await db('recipient_databases').where({ workspace_id: workspaceId }).first<Row | undefined>(SHOWN_COLUMNS);
  return row && fromRow(row);
}

/** False when the workspace had none of its own. */
export async function deleteRecipientDatabase(db: Knex, workspaceId: string): Promise<boolean> {
  return (await db('recipient_databases').where({ workspace_id: workspaceId }).delete()) > 0;
}

/**
 * The URL the loader reads the workspace's recipients from; undefined: the
 * shared recipient database (RECIPIENTS_DATABASE_URL). Throws when the stored
 * value does not open with `key` (RECIPIENTS_ENCRYPTION_KEY was changed).
 */
export async function recipientDatabaseUrl(db: Knex, key: Buffer, workspaceId: string): Promise<string | undefined> {
  const row = await db('recipient_databases')
    .where({ workspace_id: workspaceId.toLowerCase() })
    .first<{ url_ciphertext: string } | undefined>('url_ciphertext');
  if (!row) return undefined;
  try {
    return unseal(key, row.url_ciphertext, workspaceId.toLowerCase());
  } catch (error) {
    throw new Error(
      `The recipient database URL of workspace ${workspaceId} does not open with RECIPIENTS_ENCRYPTION_KEY (was the key changed?): ${(error as Error).message}`,
    );
  }
}

/** Why a recipient database could not be used; the message never contains the URL's password. */
export class RecipientDatabaseRefused extends Error {}

/**
 * Tries the URL as the loader would use it: connects, runs one trivial query,
 * disconnects. Rejects with a RecipientDatabaseRefused saying what failed.
 */
export async function verifyRecipientDatabase(url: string, target: RecipientDatabaseTarget): Promise<void> {
  try {
    await (target.kind === 'postgres' ? tryPostgres(url) : tryMssql(url));
  } catch (error) {
    throw new RecipientDatabaseRefused(withoutPassword(failureOf(error, target), url));
  }
}

async function tryPostgres(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: VERIFY_TIMEOUT_MS, query_timeout: VERIFY_TIMEOUT_MS });
  // A connection lost after connecting is reported by the query; without a listener it would be thrown at the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function tryMssql(url: string): Promise<void> {
  const pool = new sql.ConnectionPool({ ...mssqlConfig(url, VERIFY_TIMEOUT_MS), connectionTimeout: VERIFY_TIMEOUT_MS });
  pool.on('error', () => undefined);
  try {
    await pool.connect();
    await pool.request().query('SELECT 1');
  } finally {
    await pool.close().catch(() => undefined);
  }
}

/** What failed, in words an admin can act on (the caller removes the password). */
function failureOf(error: unknown, { host, port, user, database }: RecipientDatabaseTarget): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' ? message : String(error);
  const where = `${host}:${port}`;
  switch (code) {
    case 'ECONNREFUSED':
      return `could not connect to ${where}: connection refused`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `could not connect to ${where}: the host name ${host} does not resolve`;
    case 'ETIMEDOUT':
    case 'ETIMEOUT':
      return `could not connect to ${where}: no answer within ${VERIFY_TIMEOUT_MS / 1000} s`;
    case 'ESOCKET':
      return `could not connect to ${where}: ${text}`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `could not connect to ${where}: host unreachable`;
    // PostgreSQL: invalid_password, invalid_authorization_specification; SQL Server: ELOGIN.
    case '28P01':
    case '28000':
    case 'ELOGIN':
      return `authentication failed for user ${user}: ${text}`;
    case '3D000':
      return `database ${database} does not exist on ${where}`;
    default:
      if (/timeout/i.test(text)) return `could not connect to ${where}: no answer within ${VERIFY_TIMEOUT_MS / 1000} s`;
      // A PostgreSQL error (SQLSTATE) comes from the server, which was reached; anything else is the connection's.
      if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return `the database at ${where} refused: ${text}`;
      return `could not connect to ${where}: ${text}`;
  }
}
