import { UnavailableError, createClickHouse, ensureEventSchema, type chsql } from '@mail/common';

/** The ClickHouse access the queries need: typed rows, JSON inserts, health, close. */
export interface EventStore {
  rows<T>(query: chsql.SqlFragment): Promise<T[]>;
  /** The rows of a GROUP BY ... WITH TOTALS query and its totals row (absent when no row matched). */
  rowsWithTotals<T>(query: chsql.SqlFragment): Promise<{ rows: T[]; totals?: T }>;
  insert(table: string, rows: object[]): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The client reports a request that outlived its timeout as a plain "Timeout error.": ClickHouse is not answering. */
function unavailableOnTimeout(error: unknown): never {
  if (error instanceof Error && error.message.startsWith('Timeout error')) throw new UnavailableError('ClickHouse did not answer in time');
  throw error;
}

/**
 * Connects to the event database and creates the shared tables if ingestion
 * has not yet, so reads work on an empty system. The schema is created
 * through a client bound to `default`: a client bound to a database that does
 * not exist yet cannot run CREATE DATABASE.
 */
export async function openEventStore(url: string, database: string): Promise<EventStore> {
  const bootstrap = createClickHouse(url, 'default');
  try {
    await ensureEventSchema(bootstrap, database);
  } finally {
    await bootstrap.close();
  }
  const client = createClickHouse(url, database);
  return {
    rows: async <T>(query: chsql.SqlFragment) => {
      const result = await client.query({ query: query.text, format: 'JSONEachRow' }).catch(unavailableOnTimeout);
      return result.json<T>();
    },
    rowsWithTotals: async <T>(query: chsql.SqlFragment) => {
      const result = await client.query({ query: query.text, format: 'JSON' }).catch(unavailableOnTimeout);
      const { data, totals } = await result.json<T>();
      return { rows: data, totals: data.length > 0 ? totals : undefined };
    },
    insert: async (table, rows) => {
      await client.insert({ table, values: rows, format: 'JSONEachRow' });
    },
    ping: async () => {
      const result = await client.ping();
      if (!result.success) throw result.error;
    },
    close: () => client.close(),
  };
}
