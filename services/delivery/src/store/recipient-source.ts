import type { RunPlan } from '../domain/plan';
import type { RecipientRow } from '../domain/recipient';

/**
 * What every recipient database adapter shares: the batches it yields, the
 * limits it keeps and the two kinds of failure. A run's source is read on a
 * connection of its own, opened for that run and closed after it, so nothing
 * one workspace's query leaves behind (a temporary table, a setting, an open
 * transaction) reaches another run.
 */

/** What the recipient database is asked: a follow-up run's audience is read from the delivery service's own ledger. */
export type RecipientSource = Exclude<RunPlan['source'], { kind: 'audience' }>;

/** A batch of the source's rows and the position after it, from which a later load resumes. */
export interface SourceBatch {
  rows: RecipientRow[];
  position: number;
}

export interface SourceLimits {
  /** The whole read of a run's source, all of its fetches together (RECIPIENTS_QUERY_TIMEOUT_MS). */
  timeoutMs: number;
  /** One row, as JSON (RECIPIENT_ROW_MAX_BYTES). */
  rowMaxBytes: number;
  /** Rows a run may have (RUN_MAX_RECIPIENTS). */
  maxRows: number;
}

/** How many account ids one lookup asks for. */
export const ACCOUNT_CHUNK = 1_000;

/** What the source itself answers (a query that fails, rows without an email column, a limit): the run fails with it at once. */
export class SourceError extends Error {}

/** The source could not be reached (a refused or lost connection): the load is tried again later. */
export class SourceUnreachableError extends Error {}

/** The account ids of a list from `position`, in chunks of ACCOUNT_CHUNK. */
export function* idChunks(ids: string[], position: number): Generator<{ ids: string[]; position: number }> {
  for (let start = position; start < ids.length; start += ACCOUNT_CHUNK) {
    const chunk = ids.slice(start, start + ACCOUNT_CHUNK);
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

/** Rows a fetch asks for: as many as fit a fetch's byte budget at the widest row allowed, at most 1,000. */
export function fetchRows(limits: SourceLimits): number {
  return Math.max(1, Math.min(1_000, Math.floor(FETCH_BYTES / limits.rowMaxBytes)));
}

/** What one fetch may bring into memory, rows at their widest. */
const FETCH_BYTES = 16 * 1024 * 1024;

/** The bytes a fetch of `rows` rows may take on the wire before it is known to hold a row over the limit. */
export function fetchByteBudget(rows: number, limits: SourceLimits): number {
  return rows * (limits.rowMaxBytes + 1024) + 64 * 1024;
}

/**
 * Checks a fetched batch against the limits: each row's size, and the run's
 * row count (`before` rows were read earlier). Resolves to the rows to keep;
 * throws past a limit once the rows up to it are kept by the caller.
 */
export function checkRows(rows: RecipientRow[], before: number, limits: SourceLimits): RecipientRow[] {
  for (const row of rows) {
    const bytes = Buffer.byteLength(JSON.stringify(row, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)));
    if (bytes > limits.rowMaxBytes) throw rowTooLarge(limits);
  }
  return rows.slice(0, Math.max(0, limits.maxRows - before));
}

/**
 * A query's rows as they come, against where a resumed load stands (rows
 * before `position` were stored by an earlier load and are skipped) and the
 * run's row cap.
 */
export class QueryRows {
  private consumed = 0;
  private kept = 0;

  constructor(
    private readonly position: number,
    private readonly limits: SourceLimits,
  ) {}

  /** The fetch's rows to store, if any, and whether the cap cut them (the caller stores them, then fails the run). */
  accept(rows: RecipientRow[]): { batch?: SourceBatch; capped: boolean } {
    const fresh = rows.slice(Math.max(0, Math.min(rows.length, this.position - this.consumed)));
    this.consumed += rows.length;
    if (fresh.length === 0) return { capped: false };
    const accepted = checkRows(fresh, this.position + this.kept, this.limits).map(withEmailColumn);
    this.kept += accepted.length;
    const capped = accepted.length < fresh.length;
    return { batch: { rows: accepted, position: this.consumed - (fresh.length - accepted.length) }, capped };
  }
}

export function rowTooLarge(limits: SourceLimits): SourceError {
  return new SourceError(`A recipient row is larger than ${limits.rowMaxBytes} bytes (RECIPIENT_ROW_MAX_BYTES)`);
}

export function tooManyRows(limits: SourceLimits): SourceError {
  return new SourceError(`The recipient source has more than ${limits.maxRows} rows (RUN_MAX_RECIPIENTS); loading stopped there`);
}

export function pastTimeLimit(limits: SourceLimits): SourceError {
  return new SourceError(`Reading the recipients took longer than ${limits.timeoutMs} ms (RECIPIENTS_QUERY_TIMEOUT_MS)`);
}

/** How long a cancelled read may take to give up before its connection is dropped. */
const CANCEL_GRACE_MS = 5_000;

/** Reads against the source that ran past their deadline and have not ended: a stuck load, which readiness shows. */
const overdueReads = new Set<symbol>();

export function stuckReads(): number {
  return overdueReads.size;
}

/**
 * The time limit of a run's read: every read against the source spends from
 * one budget. Past it the read is cancelled (`cancel`: the database's own
 * cancel, which no setting of the query can undo) and fails with the time
 * limit; a read that does not end CANCEL_GRACE_MS after that has its
 * connection dropped (`drop`).
 */
export class ReadBudget {
  private spentMs = 0;

  constructor(
    private readonly limits: SourceLimits,
    private readonly cancel: () => void,
    private readonly drop: () => void,
  ) {}

  async spend<T>(read: () => Promise<T>): Promise<T> {
    const remaining = this.limits.timeoutMs - this.spentMs;
    if (remaining <= 0) throw pastTimeLimit(this.limits);
    const started = performance.now();
    const key = Symbol('read');
    let expired = false;
    let grace: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      expired = true;
      overdueReads.add(key);
      this.cancel();
      grace = setTimeout(() => this.drop(), CANCEL_GRACE_MS);
    }, remaining);
    try {
      const result = await read();
      if (expired) throw pastTimeLimit(this.limits);
      return result;
    } catch (error) {
      throw expired ? pastTimeLimit(this.limits) : error;
    } finally {
      clearTimeout(deadline);
      clearTimeout(grace);
      overdueReads.delete(key);
      this.spentMs += performance.now() - started;
    }
  }
}
