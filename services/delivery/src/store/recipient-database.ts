import pg from 'pg';
import type { RecipientRow } from '../domain/recipient';
import type { RunPlan } from '../domain/plan';
import { MssqlRecipientDatabase } from './mssql-recipients';

/** How many source rows one batch holds: what is in memory at a time per loading run. */
export const SOURCE_BATCH_SIZE = 1_000;

export type RecipientSource = RunPlan['source'];

/** A batch of the source's rows and the position after it, from which a later load resumes. */
export interface SourceBatch {
  rows: RecipientRow[];
  position: number;
}

/**
 * The recipient database (RECIPIENTS_DATABASE_URL): a campaign's `mssql_query`
 * read-only with a time limit on each statement, or its `csv_account_ids` looked
 * up in `accounts`, streamed in batches from `position` on (rows for a query,
 * account ids for a list).
 */
export interface RecipientDatabase {
  stream(source: RecipientSource, position: number): AsyncIterable<SourceBatch>;
  close(): Promise<void>;
}

/** Thrown for what the source itself gets wrong (a query that fails, rows without an email column): the run fails with it. */
export class SourceError extends Error {}

export function openRecipientDatabase(url: string, timeoutMs: number): RecipientDatabase {
  const protocol = url.slice(0, url.indexOf(':')).toLowerCase();
  if (protocol === 'mssql' || protocol === 'sqlserver') return new MssqlRecipientDatabase(url, timeoutMs);
  return new PostgresRecipientDatabase(url, timeoutMs);
}

/** The account ids of a list from `position`, in chunks of SOURCE_BATCH_SIZE. */
export function* idChunks(ids: string[], position: number): Generator<{ ids: string[]; position: number }> {
  for (let start = position; start < ids.length; start += SOURCE_BATCH_SIZE) {
    const chunk = ids.slice(start, start + SOURCE_BATCH_SIZE);
    yield { ids: chunk, position: start + chunk.length };
  }
}

/** Each row must carry an `email` column, whatever its case. */
export function withEmailColumn(row: RecipientRow): RecipientRow {
  if ('email' in row) return row;
  const key = Object.keys(row).find((name) => name.toLowerCase() === 'email');
  if (key === undefined) throw new SourceError('The recipient query returns no email column');
  const { [key]: email, ...rest } = row;
  return { ...rest, email };
}

/**
 * PostgreSQL: a read-only transaction with statement_timeout, the query behind
 * a server-side cursor fetched SOURCE_BATCH_SIZE rows at a time.
 */
class PostgresRecipientDatabase implements RecipientDatabase {
  private readonly pool: pg.Pool;

  constructor(
    url: string,
    private readonly timeoutMs: number,
  ) {
    this.pool = new pg.Pool({ connectionString: url, max: 4 });
  }

  async *stream(source: RecipientSource, position: number): AsyncIterable<SourceBatch> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN TRANSACTION READ ONLY');
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(this.timeoutMs))}`);
      if (source.kind === 'accounts') {
        for (const chunk of idChunks(source.ids, position)) {
          const { rows } = await client
            .query<RecipientRow>(
              `SELECT a.* FROM unnest($1::text[]) WITH ORDINALITY AS wanted(account_id, n)
               JOIN accounts a ON a.account_id = wanted.account_id ORDER BY wanted.n`,
              [chunk.ids],
            )
            .catch((error: unknown) => Promise.reject(sourceError(error)));
          yield { rows, position: chunk.position };
        }
      } else {
        await this.declare(client, source.sql);
        if (position > 0) await client.query(`MOVE FORWARD ${position} IN recipients`);
        let read = position;
        for (;;) {
          const { rows } = await this.fetch(client);
          if (rows.length === 0) break;
          read += rows.length;
          yield { rows: rows.map(withEmailColumn), position: read };
        }
      }
      await client.query('COMMIT');
    } catch (error) {
      broken = true;
      throw error;
    } finally {
      if (broken) await client.query('ROLLBACK').catch(() => undefined);
      client.release(broken);
    }
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  private async declare(client: pg.PoolClient, sql: string): Promise<void> {
    try {
      await client.query(`DECLARE recipients NO SCROLL CURSOR FOR ${sql.trim().replace(/;\s*$/, '')}`);
    } catch (error) {
      throw sourceError(error);
    }
  }

  private async fetch(client: pg.PoolClient): Promise<pg.QueryResult<RecipientRow>> {
    try {
      return await client.query<RecipientRow>(`FETCH ${SOURCE_BATCH_SIZE} FROM recipients`);
    } catch (error) {
      throw sourceError(error);
    }
  }
}

/** A query the database refuses (syntax, a missing table, the time limit) is the campaign's problem; a lost connection is not. */
function sourceError(error: unknown): Error {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(42|22|57014|25006|0A)/.test(code)) {
    return new SourceError(`The recipient database refused the query: ${(error as Error).message}`);
  }
  return error as Error;
}
