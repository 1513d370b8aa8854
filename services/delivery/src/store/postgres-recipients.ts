import net from 'node:net';
import pg from 'pg';
import Cursor from 'pg-cursor';
import type { RecipientRow } from '../domain/recipient';
import {
  QueryRows,
  ReadBudget,
  SourceError,
  SourceUnreachableError,
  checkRows,
  fetchByteBudget,
  fetchRows,
  idChunks,
  rowTooLarge,
  tooManyRows,
  type RecipientSource,
  type SourceBatch,
  type SourceLimits,
} from './recipient-source';

const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A run's recipients from PostgreSQL, on a connection opened for this run
 * alone and closed after it. The campaign's query runs as exactly one
 * statement (the extended query protocol: Parse, Bind, Execute of a portal;
 * nothing is spliced around its text) inside a read-only transaction begun
 * before it, fetched a bounded number of rows at a time. The login the URL
 * names is what limits what it can read (docs/configuration.md, "Recipient databases").
 */
export async function* streamPostgres(
  url: string,
  source: RecipientSource,
  position: number,
  limits: SourceLimits,
): AsyncIterable<SourceBatch> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: 'mail-delivery-recipients',
  });
  client.on('error', () => undefined);
  const wire = new WireBytes();
  const budget = new ReadBudget(
    limits,
    () => cancelRequest(client),
    () => dropConnection(client),
  );
  try {
    await budget.spend(() => client.connect()).catch((error: unknown) => Promise.reject(classify(error)));
    wire.watch(client);
    await client
      .query('BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY')
      .catch((error: unknown) => Promise.reject(classify(error)));
    if (source.kind === 'accounts') {
      yield* accountRows(client, budget, source.ids, position, limits);
    } else {
      yield* queryRows(client, budget, wire, source.sql, position, limits);
    }
  } finally {
    await endConnection(client);
  }
}

async function* accountRows(
  client: pg.Client,
  budget: ReadBudget,
  ids: string[],
  position: number,
  limits: SourceLimits,
): AsyncIterable<SourceBatch> {
  let read = position;
  for (const chunk of idChunks(ids, position)) {
    const { rows } = await budget
      .spend(() =>
        client.query<RecipientRow>(
          `SELECT a.* FROM unnest($1::text[]) WITH ORDINALITY AS wanted(account_id, n)
           JOIN accounts a ON a.account_id = wanted.account_id ORDER BY wanted.n`,
          [chunk.ids],
        ),
      )
      .catch((error: unknown) => Promise.reject(classify(error)));
    const kept = checkRows(rows, read, limits);
    read += kept.length;
    yield { rows: kept, position: chunk.position };
    if (kept.length < rows.length) throw tooManyRows(limits);
  }
}

async function* queryRows(
  client: pg.Client,
  budget: ReadBudget,
  wire: WireBytes,
  sql: string,
  position: number,
  limits: SourceLimits,
): AsyncIterable<SourceBatch> {
  const cursor = client.query(new Cursor<RecipientRow>(sql));
  const size = fetchRows(limits);
  const progress = new QueryRows(position, limits);
  for (;;) {
    const rows = await fetch(cursor, size, budget, wire, limits);
    if (rows.length === 0) return;
    const { batch, capped } = progress.accept(rows);
    if (batch) yield batch;
    if (capped) throw tooManyRows(limits);
  }
}

/** One fetch, within the time budget and the fetch's byte budget: a row too wide to hold is never held whole. */
async function fetch(
  cursor: Cursor<RecipientRow>,
  size: number,
  budget: ReadBudget,
  wire: WireBytes,
  limits: SourceLimits,
): Promise<RecipientRow[]> {
  const allowed = fetchByteBudget(size, limits);
  let oversize = false;
  wire.limit(allowed, () => {
    oversize = true;
    dropConnection(wire.client);
  });
  try {
    return await budget.spend(() => cursor.read(size));
  } catch (error) {
    throw oversize ? rowTooLarge(limits) : classify(error);
  } finally {
    wire.limit(Infinity, () => undefined);
  }
}

/** Counts the bytes the server sends during a fetch, to stop one that brings more than its rows may weigh. */
class WireBytes {
  client!: pg.Client;
  private received = 0;
  private allowed = Infinity;
  private onOver: () => void = () => undefined;

  watch(client: pg.Client): void {
    this.client = client;
    connectionOf(client).stream.on('data', (chunk: Buffer) => {
      this.received += chunk.length;
      if (this.received > this.allowed) {
        this.allowed = Infinity;
        this.onOver();
      }
    });
  }

  limit(allowed: number, onOver: () => void): void {
    this.received = 0;
    this.allowed = allowed;
    this.onOver = onOver;
  }
}

/** node-postgres keeps its socket and the backend's cancel key on the client without typing them. */
function connectionOf(client: pg.Client): { stream: net.Socket } {
  return (client as unknown as { connection: { stream: net.Socket } }).connection;
}

/**
 * PostgreSQL's cancel request (a separate connection carrying the backend's
 * key): it stops the running statement whatever the session set for itself.
 */
function cancelRequest(client: pg.Client): void {
  const { processID, secretKey } = client as unknown as { processID: number | null; secretKey: number | null };
  if (processID === null || secretKey === null) return;
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80877102, 4);
  packet.writeInt32BE(processID, 8);
  packet.writeInt32BE(secretKey, 12);
  const socket = client.host.startsWith('/')
    ? net.connect(`${client.host}/.s.PGSQL.${client.port}`)
    : net.connect(client.port, client.host);
  socket.on('error', () => undefined);
  socket.end(packet);
}

function dropConnection(client: pg.Client): void {
  connectionOf(client)?.stream.destroy();
}

/** Closes the run's connection; one that does not close politely is dropped. */
async function endConnection(client: pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    client.end().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        dropConnection(client);
        resolve();
      }, 2_000);
    }),
  ]);
  clearTimeout(timer);
}

/** SQLSTATEs of a lost or refused connection: the server going away, not an answer to the query. */
const CONNECTION_STATES = /^(08|57P0[123]|53300)/;

/** Any answer of the server fails the run with it; only a lost or refused connection is tried again. */
function classify(error: unknown): Error {
  if (error instanceof SourceError || error instanceof SourceUnreachableError) return error;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  const message = error instanceof Error ? error.message : String(error);
  if (typeof code === 'string' && typeof severity === 'string' && !CONNECTION_STATES.test(code)) {
    return new SourceError(`The recipient database refused the query: ${message}`);
  }
  return new SourceUnreachableError(`The recipient database could not be reached: ${message}`);
}
