import sql from 'mssql';
import type { RecipientRow } from '../domain/recipient';
import {
  SOURCE_BATCH_SIZE,
  SourceError,
  idChunks,
  withEmailColumn,
  type RecipientDatabase,
  type RecipientSource,
  type SourceBatch,
} from './recipient-database';

/**
 * SQL Server (`mssql://user:password@host:port/database`, optional
 * `?trustServerCertificate=true`): a thin adapter behind the same interface as
 * PostgreSQL, untested here (no SQL Server can run on this platform; README,
 * "Recipient database"). Read-only: the connection declares ApplicationIntent
 * ReadOnly, and a campaign's query is checked to be one SELECT when it is
 * saved; the account the URL names should be allowed to read only. Each
 * request is limited to the time limit (requestTimeout).
 */
export class MssqlRecipientDatabase implements RecipientDatabase {
  private pool?: Promise<sql.ConnectionPool>;

  constructor(
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {}

  async *stream(source: RecipientSource, position: number): AsyncIterable<SourceBatch> {
    const pool = await this.connected();
    if (source.kind === 'accounts') {
      for (const chunk of idChunks(source.ids, position)) {
        const request = pool.request();
        chunk.ids.forEach((id, index) => request.input(`id${index}`, sql.NVarChar, id));
        const placeholders = chunk.ids.map((_id, index) => `@id${index}`).join(', ');
        const { recordset } = await request.query<RecipientRow>(`SELECT * FROM accounts WHERE account_id IN (${placeholders})`);
        const byId = new Map(recordset.map((row) => [String(row.account_id), row]));
        const rows = chunk.ids.flatMap((id) => (byId.has(id) ? [byId.get(id) as RecipientRow] : []));
        yield { rows, position: chunk.position };
      }
      return;
    }
    let read = 0;
    for await (const rows of streamRows(pool.request(), source.sql)) {
      const skip = Math.max(0, Math.min(rows.length, position - read));
      read += rows.length;
      if (skip < rows.length) yield { rows: rows.slice(skip).map(withEmailColumn), position: read };
    }
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.then((connected) => connected.close()).catch(() => undefined);
  }

  private connected(): Promise<sql.ConnectionPool> {
    if (!this.pool) {
      const pool = new sql.ConnectionPool(mssqlConfig(this.url, this.timeoutMs)).connect();
      pool.catch(() => {
        if (this.pool === pool) this.pool = undefined;
      });
      this.pool = pool;
    }
    return this.pool;
  }
}

export function mssqlConfig(url: string, timeoutMs: number): sql.config {
  const parsed = new URL(url);
  return {
    server: parsed.hostname,
    port: parsed.port ? Number(parsed.port) : 1433,
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    database: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || undefined,
    requestTimeout: timeoutMs,
    options: {
      encrypt: parsed.searchParams.get('encrypt') !== 'false',
      trustServerCertificate: parsed.searchParams.get('trustServerCertificate') === 'true',
      readOnlyIntent: true,
    },
  };
}

/** The query's rows in batches, the request paused while a batch is being stored. */
async function* streamRows(request: sql.Request, query: string): AsyncIterable<RecipientRow[]> {
  request.stream = true;
  let batch: RecipientRow[] = [];
  const ready: RecipientRow[][] = [];
  let done = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    wake?.();
    wake = undefined;
  };
  request.on('row', (row: RecipientRow) => {
    batch.push(row);
    if (batch.length >= SOURCE_BATCH_SIZE) {
      ready.push(batch);
      batch = [];
      request.pause();
      notify();
    }
  });
  request.on('error', (error: Error) => {
    failure = new SourceError(`The recipient query failed: ${error.message}`);
    notify();
  });
  request.on('done', () => {
    if (batch.length > 0) ready.push(batch);
    done = true;
    notify();
  });
  void request.query(query);
  for (;;) {
    if (failure) throw failure;
    const next = ready.shift();
    if (next) {
      yield next;
      request.resume();
    } else if (done) {
      return;
    } else {
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
}
