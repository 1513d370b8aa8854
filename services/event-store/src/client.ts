import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client';
import { list, sql, str } from './sql';

/**
 * A ClickHouse client with the settings the old server on these machines
 * needs: best-effort ISO timestamps on insert, and selects that report a late
 * error as an error rather than a half-written JSON body; requests time out
 * after 30 s unless `requestTimeoutMs` says otherwise, and `settings` adds
 * ClickHouse settings to every request. The client's own
 * logger stays off: it prints every failed request in its own plain-text
 * format, expected ones too (a concurrent CREATE that lost), while callers get
 * the error and log it as JSON where it matters.
 */
export function createClickHouse(
  url: string,
  database: string,
  options: { requestTimeoutMs?: number; settings?: ClickHouseSettings } = {},
): ClickHouseClient {
  return createClient({
    url,
    database,
    request_timeout: options.requestTimeoutMs ?? 30_000,
    log: { level: ClickHouseLogLevel.OFF },
    max_open_connections: 10,
    compression: { request: false, response: true },
    clickhouse_settings: {
      date_time_input_format: 'best_effort',
      wait_end_of_query: 1,
      ...options.settings,
    },
  });
}

/** How many mutations (ALTER ... DELETE) of these tables ClickHouse has not finished. */
export async function pendingMutations(
  client: ClickHouseClient,
  database: string,
  tables: readonly string[],
  signal?: AbortSignal,
): Promise<number> {
  const result = await client.query({
    query: sql`SELECT count() AS n FROM system.mutations
      WHERE database = ${str(database)} AND table IN (${list(tables.map(str))}) AND is_done = 0`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
  });
  return Number((await result.json<{ n: string }>())[0].n);
}
