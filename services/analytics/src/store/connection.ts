import { StoreLayout, createClickHouse, ensureEventSchema, type EventStoreConfig, type chsql } from '@mail/event-store';

/** The ClickHouse access the queries need: typed rows, JSON inserts, health, close. */
export interface EventStore {
  /** The ClickHouse database the store reads, and how its tables lie. */
  layout: StoreLayout;
  rows<T>(query: chsql.SqlFragment): Promise<T[]>;
  /** The rows as they arrive, in batches, for results too large to hold at once. */
  rowBatches<T>(query: chsql.SqlFragment): AsyncIterable<T[]>;
  /** The rows of a GROUP BY ... WITH TOTALS query and its totals row (absent when no row matched). */
  rowsWithTotals<T>(query: chsql.SqlFragment): Promise<{ rows: T[]; totals?: T }>;
  insert(table: string, rows: object[]): Promise<void>;
  /** A statement without result rows, e.g. INSERT ... SELECT. */
  command(query: chsql.SqlFragment): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Connects to the event database and creates the shared tables if ingestion
 * has not yet, so reads work on an empty system. A request timeout surfaces as
 * "Timeout error.", which the gRPC layer reports as UNAVAILABLE.
 */
export async function openEventStore({ urls, database, cluster }: EventStoreConfig): Promise<EventStore> {
  await ensureEventSchema(urls, database, cluster);
  // Short reads of the same recent blocks, over and over: ClickHouse keeps them decompressed (reads of
  // more than a million rows bypass that cache); bench/README.md, "Analytics: the uncompressed cache".
  const client = createClickHouse(urls, database, { settings: { use_uncompressed_cache: 1 }, cluster });
  return {
    layout: new StoreLayout(database, cluster),
    rows: async <T>(query: chsql.SqlFragment) => {
      const result = await client.query({ query: query.text, format: 'JSONEachRow' });
      return result.json<T>();
    },
    rowBatches: async function* <T>(query: chsql.SqlFragment) {
      const result = await client.query({ query: query.text, format: 'JSONEachRow' });
      for await (const rows of result.stream<T>()) yield rows.map((row) => row.json());
    },
    rowsWithTotals: async <T>(query: chsql.SqlFragment) => {
      const result = await client.query({ query: query.text, format: 'JSON' });
      const { data, totals } = await result.json<T>();
      return { rows: data, totals: data.length > 0 ? totals : undefined };
    },
    insert: async (table, rows) => {
      await client.insert({ table, values: rows, format: 'JSONEachRow' });
    },
    command: async (query) => {
      await client.command({ query: query.text });
    },
    ping: async () => {
      const result = await client.ping();
      if (!result.success) throw result.error;
    },
    close: () => client.close(),
  };
}
