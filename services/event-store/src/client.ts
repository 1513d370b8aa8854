import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client';
import { layoutOf, type EventDatabase } from './layout';
import { list, sql, str, type SqlFragment } from './sql';

/** Where the event store is (readEventStoreConfig reads it from the environment). */
export interface EventStoreConfig {
  /** The servers, in the order they are tried. */
  urls: string[];
  database: string;
  /** The cluster the tables are spread over (layout.ts); undefined: one server's tables. */
  cluster?: string;
}

/** What readEventStoreConfig reads the environment with: @mail/common's EnvReader, which this package does not depend on. */
interface EnvironmentReader {
  list(name: string, fallback: string[]): string[];
  string(name: string, fallback: string): string;
  optionalString(name: string): string | undefined;
}

/** The event store's place from the environment, with the local servers' defaults. */
export function readEventStoreConfig(env: EnvironmentReader): EventStoreConfig {
  return {
    urls: env.list('CLICKHOUSE_URL', ['http://127.0.0.1:28123']),
    database: env.string('CLICKHOUSE_DATABASE', 'mail'),
    cluster: env.optionalString('CLICKHOUSE_CLUSTER'),
  };
}

export interface ClickHouseOptions {
  /** 30 s unless said otherwise. */
  requestTimeoutMs?: number;
  /** Added to every request. */
  settings?: ClickHouseSettings;
  /** The servers form this cluster: the settings of cluster mode are added (clusterSettings). */
  cluster?: string;
  /** Requests in flight per server (10 unless said otherwise); more wait, first come first served. */
  maxOpenConnections?: number;
}

/**
 * What every request to a cluster runs with:
 * - insert_distributed_sync: an insert through a Distributed table returns
 *   once each shard's replica holds its rows. Ingestion writes through the
 *   Distributed tables (the sharding key stays in the tables' definition),
 *   and without it an accepted batch could sit in one server's send queue,
 *   lost with that server, while its offsets are committed;
 * - load_balancing in_order: every read and write of a shard goes to its
 *   first healthy replica (and the server's own replica of its own shard),
 *   so a read right after a write sees it: suppression state is computed
 *   from the signals just inserted, the stored-event check sees the batch
 *   before;
 * - distributed_product_mode local: an IN or JOIN subquery over a
 *   Distributed table inside a query over one reads the shard's local table,
 *   which is exact because one workspace lives on one shard;
 * - insert_deduplicate off: a Replicated table drops an inserted block
 *   identical to one of its last inserts, which would lose a rebuild's rows
 *   (the same block the view once wrote) or a day marked unsettled again in
 *   the same second; no write relies on it (ingestion deduplicates events
 *   itself), as on one server, which never drops a block;
 * - distributed_ddl_task_timeout below the request timeout: an ON CLUSTER
 *   statement that waits for a server that is down fails as ClickHouse's
 *   error, not as a timeout of the request, which would count as this
 *   server failing.
 */
function clusterSettings(requestTimeoutMs: number): ClickHouseSettings {
  return {
    insert_distributed_sync: 1,
    load_balancing: 'in_order',
    distributed_product_mode: 'local',
    insert_deduplicate: 0,
    distributed_ddl_task_timeout: String(Math.max(1, Math.floor(requestTimeoutMs / 1000) - 5)),
  };
}

/**
 * A ClickHouse client with the settings every request runs with: best-effort
 * ISO timestamps on insert; selects that report a late error as an error
 * rather than a half-written JSON body; 64-bit integers as JSON strings, exact
 * past 2^53 and of one shape on every release (18.16 quotes them by default,
 * current releases do not). Requests time out
 * after 30 s unless `requestTimeoutMs` says otherwise, and `settings` adds
 * ClickHouse settings to every request. The client's own
 * logger stays off: it prints every failed request in its own plain-text
 * format, expected ones too (a concurrent CREATE that lost), while callers get
 * the error and log it as JSON where it matters.
 *
 * `urls`: one URL, or several (an array or a comma list): then the client
 * uses one server and moves to the next when it fails (failover).
 */
export function createClickHouse(urls: string | readonly string[], database: string, options: ClickHouseOptions = {}): ClickHouseClient {
  const servers = (typeof urls === 'string' ? urls.split(',') : urls).map((url) => url.trim()).filter((url) => url !== '');
  if (servers.length === 0) throw new Error('no ClickHouse URL');
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const clients = servers.map((url) =>
    createClient({
      url,
      database,
      request_timeout: requestTimeoutMs,
      log: { level: ClickHouseLogLevel.OFF },
      max_open_connections: options.maxOpenConnections ?? 10,
      compression: { request: false, response: true },
      clickhouse_settings: {
        date_time_input_format: 'best_effort',
        wait_end_of_query: 1,
        output_format_json_quote_64bit_integers: 1,
        ...(options.cluster === undefined ? {} : clusterSettings(requestTimeoutMs)),
        ...options.settings,
      },
    }),
  );
  return clients.length === 1 ? clients[0] : failover(clients);
}

/** The request never reached the server: repeating it elsewhere cannot do anything twice. */
const UNREACHED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** The connection broke or timed out: the server may have done some of the request. */
const BROKEN = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED']);
/**
 * ClickHouse's own errors (their code, a number) that say this server cannot
 * serve now: its replica lost ZooKeeper (read-only table, no ZooKeeper, a
 * ZooKeeper error).
 */
const SERVER_UNFIT_CODES = new Set(['242', '225', '999']);

type Failure = 'unreached' | 'broken' | 'other';

/**
 * ClickHouse's error code of a failed call, if ClickHouse answered it. The
 * client parses it only from messages that end with the error's name, which
 * ClickHouse 18.16 does not write ("Code: 60, e.displayText() = ..."), so the
 * message is read too.
 */
export function clickHouseErrorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && /^\d+$/.test(code)) return code;
  return typeof message === 'string' ? /^Code: (\d+)[,.]/.exec(message)?.[1] : undefined;
}

/**
 * Read from the error's fields rather than its class: Node's network errors
 * may come from another realm (a test runner's sandbox), where instanceof fails.
 */
function failureOf(error: unknown): Failure {
  if (typeof error !== 'object' || error === null) return 'other';
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && UNREACHED.has(code)) return 'unreached';
  if (typeof code === 'string' && BROKEN.has(code)) return 'broken';
  if (SERVER_UNFIT_CODES.has(clickHouseErrorCode(error) ?? '')) return 'broken';
  return message === 'Timeout error.' || message === 'socket hang up' ? 'broken' : 'other';
}

/**
 * One client over several servers: calls go to the current server; on a
 * connection failure (refused, reset, timed out, or ClickHouse saying it
 * cannot serve) the client moves to the next server, and the call is
 * repeated there when that is safe:
 * - reads (query, ping): always, each server tried at most once per call;
 * - commands (DDL, INSERT ... SELECT, ALTER): only when the request never
 *   reached the server; otherwise it may have half run (a backfill counted
 *   twice if repeated), and the caller decides;
 * - inserts: never, and they throw: their values may be a stream the failed
 *   request consumed, and the caller knows what a failed insert owes
 *   (ingestion marks the batch's days unsettled before its retry, since the
 *   server may have stored the rows without all of their views' rows).
 * It has ClickHouseClient's shape (a Proxy: the class's private members
 * keep anything else from standing in for it).
 */
function failover(clients: ClickHouseClient[]): ClickHouseClient {
  let current = 0;
  const moveOn = (from: number): void => {
    // Concurrent calls that failed on the same server move once.
    if (current === from) current = (from + 1) % clients.length;
  };
  const call = async <T>(run: (client: ClickHouseClient) => Promise<T>, repeat: (failure: Failure) => boolean): Promise<T> => {
    for (let attempt = 1; ; attempt += 1) {
      const index = current;
      try {
        return await run(clients[index]);
      } catch (error) {
        const failure = failureOf(error);
        if (failure === 'other') throw error;
        moveOn(index);
        if (attempt >= clients.length || !repeat(failure)) throw error;
      }
    }
  };
  const always = (): boolean => true;
  const ifUnreached = (failure: Failure): boolean => failure === 'unreached';
  const never = (): boolean => false;
  const methods: Partial<ClickHouseClient> = {
    query: (params) => call((client) => client.query(params), always),
    command: (params) => call((client) => client.command(params), ifUnreached),
    exec: (params) => call((client) => client.exec(params), ifUnreached),
    insert: (params) => call((client) => client.insert(params), never),
    ping: async (params) => {
      let result = await clients[current].ping(params);
      for (let attempt = 1; !result.success && attempt < clients.length; attempt += 1) {
        if (failureOf(result.error) === 'other') break;
        moveOn(current);
        result = await clients[current].ping(params);
      }
      return result;
    },
    close: async () => {
      await Promise.all(clients.map((client) => client.close()));
    },
  };
  return new Proxy(clients[0], {
    get: (_target, property): unknown =>
      property in methods ? methods[property as keyof ClickHouseClient] : Reflect.get(clients[current], property, clients[current]),
  });
}

/**
 * How many mutations (ALTER ... DELETE) of these tables ClickHouse has not
 * finished: in a cluster, on the replica of each shard that reads go to.
 */
export async function pendingMutations(
  client: ClickHouseClient,
  database: EventDatabase,
  tables: readonly string[],
  signal?: AbortSignal,
): Promise<number> {
  const layout = layoutOf(database);
  const result = await client.query({
    query: sql`SELECT count() AS n FROM ${layout.everyShard('mutations')}
      WHERE database = ${str(layout.database)} AND table IN (${list(tables.map((table) => str(layout.localName(table))))}) AND is_done = 0`
      .text,
    format: 'JSONEachRow',
    abort_signal: signal,
    clickhouse_settings: { skip_unavailable_shards: 1 },
  });
  return Number((await result.json<{ n: string }>())[0].n);
}

/** ClickHouse's UNKNOWN_TABLE. */
const UNKNOWN_TABLE = '60';

/**
 * The rows of a query over system.tables or system.columns. ClickHouse 18.16
 * fails such a query with UNKNOWN_TABLE when a table it lists is dropped or
 * renamed while it reads, as when processes set up the same store at once:
 * the read is then repeated.
 */
export async function readSystemTables<T>(client: ClickHouseClient, query: SqlFragment): Promise<T[]> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await (await client.query({ query: query.text, format: 'JSONEachRow' })).json<T>();
    } catch (error) {
      if (attempt === 5 || clickHouseErrorCode(error) !== UNKNOWN_TABLE) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    }
  }
}
