import { prometheus, registry } from '@mail/common';
import type { ResultSet } from '@clickhouse/client';
import { StoreLayout, createClickHouse, ensureEventSchema, type EventStoreConfig, type chsql } from '@mail/event-store';
import { FairReads, type Admission, type ReadCall, type ReadLimits } from '../domain/fair-reads';

/** The ClickHouse access one call's queries need: typed rows, JSON inserts. */
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
}

/** The event database: each gRPC call uses it as one call of one workspace, whose reads take turns (FairReads). */
export interface EventDatabase {
  call<T>(workspaceId: string, work: (store: EventStore) => Promise<T>): Promise<T>;
  /** The same for a streaming call: the call lasts until the stream ends. */
  stream<T>(workspaceId: string, work: (store: EventStore) => AsyncIterable<T>): AsyncIterable<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

const readWait = new prometheus.Histogram({
  name: 'analytics_read_wait_seconds',
  help: 'Time a ClickHouse read waited for its turn (fair queue across workspaces)',
  buckets: [0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});
const readsRefused = new prometheus.Counter({
  name: 'analytics_reads_refused_total',
  help: 'ClickHouse reads refused UNAVAILABLE: they waited past ANALYTICS_READ_WAIT_MS, or their call had failed',
  registers: [registry],
});
/** The queues of the open event databases (one in a running service). */
const queues = new Set<FairReads>();
new prometheus.Gauge({
  name: 'analytics_reads_waiting',
  help: 'ClickHouse reads waiting for their turn now',
  registers: [registry],
  collect() {
    this.set([...queues].reduce((sum, queue) => sum + queue.waitingReads, 0));
  },
});

/**
 * Connects to the event database and creates the shared tables if ingestion
 * has not yet, so reads work on an empty system. A request timeout surfaces as
 * "Timeout error.", which the gRPC layer reports as UNAVAILABLE.
 */
export async function openEventStore({ urls, database, cluster }: EventStoreConfig, limits: ReadLimits): Promise<EventDatabase> {
  await ensureEventSchema(urls, database, cluster);
  // Short reads of the same recent blocks, over and over: ClickHouse keeps them decompressed (reads of
  // more than a million rows bypass that cache); bench/README.md, "Analytics: the uncompressed cache".
  // Every read the queue lets run has its connection, and writes and health checks a few more: no request
  // waits in the client's own queue, which is first come first served.
  const client = createClickHouse(urls, database, {
    settings: { use_uncompressed_cache: 1 },
    cluster,
    maxOpenConnections: 2 * limits.slots + 4,
  });
  const layout = new StoreLayout(database, cluster);
  const reads = new FairReads(limits);
  queues.add(reads);

  /** Waits for the read's turn. */
  const turnOf = async (call: ReadCall): Promise<Admission> => {
    const started = process.hrtime.bigint();
    const admission = await call.admit().catch((error: unknown) => {
      readsRefused.inc();
      throw error;
    });
    readWait.observe(Number(process.hrtime.bigint() - started) / 1e9);
    return admission;
  };

  /** Runs the query in its turn, at the priority of its turn, with the response it asks for. */
  const query = async <F extends 'JSONEachRow' | 'JSON', T>(
    call: ReadCall,
    sql: chsql.SqlFragment,
    format: F,
    read: (result: ResultSet<F>) => Promise<T>,
  ): Promise<T> => {
    const { priority, release } = await turnOf(call);
    try {
      return await read(await client.query({ query: sql.text, format, clickhouse_settings: { priority: String(priority) } }));
    } finally {
      release();
    }
  };

  const storeOf = (call: ReadCall): EventStore => ({
    layout,
    rows: <T>(sql: chsql.SqlFragment) => query(call, sql, 'JSONEachRow', (result) => result.json<T>()),
    // The read keeps its place until the whole stream is read.
    rowBatches: async function* <T>(sql: chsql.SqlFragment) {
      const { priority, release } = await turnOf(call);
      try {
        const result = await client.query({ query: sql.text, format: 'JSONEachRow', clickhouse_settings: { priority: String(priority) } });
        for await (const rows of result.stream<T>()) yield rows.map((row) => row.json());
      } finally {
        release();
      }
    },
    rowsWithTotals: <T>(sql: chsql.SqlFragment) =>
      query(call, sql, 'JSON', async (result) => {
        const { data, totals } = await result.json<T>();
        return { rows: data, totals: data.length > 0 ? totals : undefined };
      }),
    insert: async (table, rows) => {
      await client.insert({ table, values: rows, format: 'JSONEachRow' });
    },
    command: async (statement) => {
      await client.command({ query: statement.text });
    },
  });

  return {
    call: async (workspaceId, work) => {
      const call = reads.startCall(workspaceId);
      try {
        return await work(storeOf(call));
      } finally {
        call.end();
      }
    },
    stream: (workspaceId, work) => ({
      [Symbol.asyncIterator]: async function* () {
        const call = reads.startCall(workspaceId);
        try {
          yield* work(storeOf(call));
        } finally {
          call.end();
        }
      },
    }),
    ping: async () => {
      const result = await client.ping();
      if (!result.success) throw result.error;
    },
    close: () => {
      queues.delete(reads);
      return client.close();
    },
  };
}
