import { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';
import { chsql, type SignalReason, type StoredBounceType, type StoredEventType } from '@mail/common';
import { providerEventKey } from '../domain/events';

const { dateTime, identifier, list, sql, str, uuid } = chsql;

/**
 * Rows exactly as the tables of @mail/common's schema hold them. Every column
 * is always sent (the *_COLUMNS lists name them all): the old ClickHouse fills
 * an omitted column with its type's zero value, not its DEFAULT. Times are
 * unix seconds.
 */
export interface EngagementEventRow {
  id: string;
  workspace_id: string;
  campaign_id: string;
  event_type: StoredEventType;
  bounce_type: StoredBounceType;
  email: string;
  occurred_at: number;
  received_at: number;
  url: string | null;
  reason: string | null;
  user_agent: string | null;
  ip: string | null;
  provider: string;
  provider_event_id: string;
  provider_message_id: string | null;
  raw: string;
  ingested_at: number;
}

export interface UnmatchedEventRow {
  provider_event_id: string;
  provider: string;
  event_type: string;
  email: string;
  categories: string[];
  occurred_at: number;
  received_at: number;
  raw: string;
  ingested_at: number;
}

export interface SuppressionSignalRow {
  workspace_id: string;
  email: string;
  reason: SignalReason;
  occurred_at: number;
  provider_event_id: string;
  ingested_at: number;
}

type Cell = string | number | null | string[];

const ENGAGEMENT_COLUMNS = [
  'id', 'workspace_id', 'campaign_id', 'event_type', 'bounce_type', 'email', 'occurred_at', 'received_at', 'url', 'reason',
  'user_agent', 'ip', 'provider', 'provider_event_id', 'provider_message_id', 'raw', 'ingested_at',
] as const satisfies readonly (keyof EngagementEventRow)[];
const UNMATCHED_COLUMNS = [
  'provider_event_id', 'provider', 'event_type', 'email', 'categories', 'occurred_at', 'received_at', 'raw', 'ingested_at',
] as const satisfies readonly (keyof UnmatchedEventRow)[];
const SIGNAL_COLUMNS = [
  'workspace_id', 'email', 'reason', 'occurred_at', 'provider_event_id', 'ingested_at',
] as const satisfies readonly (keyof SuppressionSignalRow)[];

const TSV_SPECIAL = /[\\\t\n\r\0]/g;
const QUOTED_SPECIAL = /[\\\t\n\r\0']/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0', "'": "\\'" };
const escape = (char: string): string => ESCAPES[char];

/**
 * One value in ClickHouse's TabSeparated format: strings with backslash
 * escapes for the characters that would end or corrupt the field, NULL as
 * \N, numbers as they are (times go in as unix seconds, read with
 * date_time_input_format=basic), arrays of strings as quoted literals.
 */
export function tsvCell(value: Cell): string {
  if (typeof value === 'string') return value.replace(TSV_SPECIAL, escape);
  if (typeof value === 'number') return String(value);
  if (value === null) return '\\N';
  return `[${value.map((item) => `'${item.replace(QUOTED_SPECIAL, escape)}'`).join(',')}]`;
}

/** Rows as TabSeparated text, their cells in the order of `columns`. */
export function toTabSeparated<Row extends Record<Column, Cell>, Column extends string>(rows: Row[], columns: readonly Column[]): Buffer {
  let text = '';
  for (const row of rows) {
    let line = tsvCell(row[columns[0]]);
    for (let i = 1; i < columns.length; i++) line += `\t${tsvCell(row[columns[i]])}`;
    text += `${line}\n`;
  }
  return Buffer.from(text, 'utf8');
}

/**
 * What the ingestion pipeline reads and writes in ClickHouse. Rows go in as
 * TabSeparated: the server parses it at a fraction of JSONEachRow's cost,
 * and this side builds it without a JSON document per row.
 */
export class EventStore {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  insertSignals(rows: SuppressionSignalRow[]): Promise<void> {
    return this.insert('suppression_signals', rows, SIGNAL_COLUMNS);
  }

  insertEvents(rows: EngagementEventRow[]): Promise<void> {
    return this.insert('engagement_events', rows, ENGAGEMENT_COLUMNS);
  }

  insertUnmatched(rows: UnmatchedEventRow[]): Promise<void> {
    return this.insert('unmatched_events', rows, UNMATCHED_COLUMNS);
  }

  /**
   * Which of these events engagement_events already holds, as provider +
   * provider_event_id keys. One query, narrowed by the sort key (workspace_id,
   * occurred_at, provider_event_id) to the batch's workspaces and time span.
   */
  async storedEventKeys(rows: EngagementEventRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    let from = Infinity;
    let to = -Infinity;
    for (const row of rows) {
      from = Math.min(from, row.occurred_at);
      to = Math.max(to, row.occurred_at);
    }
    const query = sql`SELECT provider, provider_event_id FROM ${identifier('engagement_events')}
      WHERE workspace_id IN (${list([...new Set(rows.map((row) => row.workspace_id))].map(uuid))})
        AND occurred_at >= ${dateTime(new Date(from * 1000))} AND occurred_at <= ${dateTime(new Date(to * 1000))}
        AND provider_event_id IN (${list([...new Set(rows.map((row) => row.provider_event_id))].map(str))})`.text;
    const result = await this.clickhouse.query({
      query,
      format: 'JSONEachRow',
      // A batch's id list is longer than the default 256 KiB query limit.
      clickhouse_settings: { max_query_size: String(query.length + 1024) },
    });
    const stored = await result.json<{ provider: string; provider_event_id: string }>();
    return new Set(stored.map((row) => providerEventKey(row.provider, row.provider_event_id)));
  }

  private async insert<Row extends Record<Column, Cell>, Column extends string>(table: string, rows: Row[], columns: readonly Column[]): Promise<void> {
    if (rows.length === 0) return;
    await this.clickhouse.insert({
      table,
      values: Readable.from([toTabSeparated(rows, columns)], { objectMode: false }),
      format: 'TabSeparated',
      columns: [...columns] as [Column, ...Column[]],
      clickhouse_settings: { date_time_input_format: 'basic' },
    });
  }
}
