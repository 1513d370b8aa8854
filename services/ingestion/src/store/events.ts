import type { ClickHouseClient } from '@clickhouse/client';
import { chsql, type SignalReason, type StoredBounceType, type StoredEventType } from '@mail/common';
import { providerEventKey } from '../domain/events';

const { dateTime, identifier, list, sql, str, uuid } = chsql;

/**
 * Rows exactly as the tables of @mail/common's schema hold them. Every column
 * is always sent: the old ClickHouse fills an omitted column with its type's
 * zero value, not its DEFAULT. Times are unix seconds.
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

/** What the ingestion pipeline reads and writes in ClickHouse. */
export class EventStore {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  insertSignals(rows: SuppressionSignalRow[]): Promise<void> {
    return this.insert('suppression_signals', rows);
  }

  insertEvents(rows: EngagementEventRow[]): Promise<void> {
    return this.insert('engagement_events', rows);
  }

  insertUnmatched(rows: UnmatchedEventRow[]): Promise<void> {
    return this.insert('unmatched_events', rows);
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

  private async insert(table: string, values: object[]): Promise<void> {
    if (values.length > 0) await this.clickhouse.insert({ table, values, format: 'JSONEachRow' });
  }
}
