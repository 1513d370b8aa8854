import sql from 'mssql';
import type { RecipientRow } from '../domain/recipient';
import {
  QueryRows,
  ReadBudget,
  SourceError,
  SourceUnreachableError,
  checkRows,
  fetchRows,
  idChunks,
  tooManyRows,
  type RecipientSource,
  type SourceBatch,
  type SourceLimits,
} from './recipient-source';

/**
 * SQL Server (`mssql://user:password@host:port/database`, optional
 * `?trustServerCertificate=true`): a thin adapter with the PostgreSQL one's
 * properties, untested here (no SQL Server can run on this platform; README,
 * "Recipient database"). A connection of its own per run, closed after it;
 * the campaign's query as one request (a campaign's query is also checked to
 * be one SELECT when it is saved); ApplicationIntent ReadOnly, and the login
 * the URL names should be allowed to read only; the time limit of the whole
 * read enforced from here by cancelling the request.
 */
export async function* streamMssql(
  url: string,
  source: RecipientSource,
  position: number,
  limits: SourceLimits,
): AsyncIterable<SourceBatch> {
  const pool = new sql.ConnectionPool({ ...mssqlConfig(url, limits.timeoutMs), pool: { min: 0, max: 1 } });
  pool.on('error', () => undefined);
  let request: sql.Request | undefined;
  const budget = new ReadBudget(
    limits,
    () => request?.cancel(),
    () => void pool.close().catch(() => undefined),
  );
  try {
    await budget.spend(() => pool.connect()).catch((error: unknown) => Promise.reject(classify(error)));
    if (source.kind === 'accounts') {
      let read = position;
      for (const chunk of idChunks(source.ids, position)) {
        request = pool.request();
        const lookup = request;
        chunk.ids.forEach((id, index) => lookup.input(`id${index}`, sql.NVarChar, id));
        const placeholders = chunk.ids.map((_id, index) => `@id${index}`).join(', ');
        const { recordset } = await budget
          .spend(() => lookup.query<RecipientRow>(`SELECT * FROM accounts WHERE account_id IN (${placeholders})`))
          .catch((error: unknown) => Promise.reject(classify(error)));
        const byId = new Map(recordset.map((row) => [String(row.account_id), row]));
        const rows = checkRows(
          chunk.ids.flatMap((id) => (byId.has(id) ? [byId.get(id) as RecipientRow] : [])),
          read,
          limits,
        );
        read += rows.length;
        yield { rows, position: chunk.position };
        if (read >= limits.maxRows && chunk.position < source.ids.length) throw tooManyRows(limits);
      }
      return;
    }
    request = pool.request();
    const progress = new QueryRows(position, limits);
    for await (const rows of streamRows(request, source.sql, fetchRows(limits), budget)) {
      const { batch, capped } = progress.accept(rows);
      if (batch) yield batch;
      if (capped) throw tooManyRows(limits);
    }
  } finally {
    await pool.close().catch(() => undefined);
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

/** A request error is the server's answer to the query; anything else is the connection. */
function classify(error: unknown): Error {
  if (error instanceof SourceError || error instanceof SourceUnreachableError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof sql.RequestError) return new SourceError(`The recipient query failed: ${message}`);
  return new SourceUnreachableError(`The recipient database could not be reached: ${message}`);
}

/** The query's rows in batches of `size`, the request paused while a batch is being stored; each wait spends from the budget. */
async function* streamRows(request: sql.Request, query: string, size: number, budget: ReadBudget): AsyncIterable<RecipientRow[]> {
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
    if (batch.length >= size) {
      ready.push(batch);
      batch = [];
      request.pause();
      notify();
    }
  });
  request.on('error', (error: Error) => {
    failure = classify(error);
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
      await budget.spend(() => new Promise<void>((resolve) => (wake = resolve)));
    }
  }
}
