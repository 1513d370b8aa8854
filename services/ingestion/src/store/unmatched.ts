import type { ClickHouseClient } from '@clickhouse/client';
import { chsql } from '@mail/event-store';

const { dateTime, identifier, int, join, list, sql, str, stringSet } = chsql;

/** Events sent back before are not sent again: each is re-matched once. */
const NOT_REMATCHED = sql`provider_event_id NOT IN (SELECT provider_event_id FROM ${identifier('rematched_events')})`;

/** An event of unmatched_events, as re-matching reads it. Times are unix seconds. */
export interface UnmatchedEvent {
  provider: string;
  provider_event_id: string;
  occurred_at: number;
  received_at: number;
  raw: string;
  /** '' in rows stored before unmatched events kept their encoded event. */
  encoded_event: string;
}

/** What re-matching reads of the events that named no campaign when they arrived, and what it records. unmatched_events itself is never changed. */
export class UnmatchedEvents {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  /**
   * The categories the unmatched events name: only those `among` when given,
   * of the events stored since `since` when given. Without `among`, only
   * those of events not re-matched yet, so a sweep of every category does not
   * go through the events re-matched before (naming leaves them out anyway;
   * for a few categories, that costs less than reading every re-matched id).
   */
  async categories(filter: { among?: string[]; since?: Date }): Promise<string[]> {
    if (filter.among?.length === 0) return [];
    const conditions = [
      filter.among ? sql`category IN ${stringSet(filter.among)}` : NOT_REMATCHED,
      ...(filter.since ? [sql`ingested_at >= ${dateTime(filter.since)}`] : []),
    ];
    const rows = await this.rows<{ category: string }>(
      sql`SELECT DISTINCT category FROM ${identifier('unmatched_events')} ARRAY JOIN categories AS category WHERE ${join(conditions, ' AND ')}`,
    );
    return rows.map((row) => row.category);
  }

  /**
   * Up to `limit` unmatched events not re-matched yet that name one of
   * `categories`, in provider_event_id order after `after`, each once
   * (FINAL: a redelivered unmatched event has several rows until they merge).
   */
  async naming(categories: string[], options: { since?: Date; after: string; limit: number }): Promise<UnmatchedEvent[]> {
    if (categories.length === 0) return [];
    const recent = options.since ? sql`AND ingested_at >= ${dateTime(options.since)}` : sql``;
    const query = sql`SELECT provider, provider_event_id, toUnixTimestamp(occurred_at) AS occurred_at,
        toUnixTimestamp(received_at) AS received_at, raw, encoded_event
      FROM ${identifier('unmatched_events')} FINAL
      WHERE hasAny(categories, [${list(categories.map(str))}]) AND provider_event_id > ${str(options.after)} AND ${NOT_REMATCHED} ${recent}
      ORDER BY provider_event_id
      LIMIT ${int(options.limit)}`;
    return this.rows<UnmatchedEvent>(query);
  }

  /**
   * Of these provider event ids, those of events some campaign took already
   * (a redelivery that arrived after the campaign took the category): stored
   * in events, or (the suppression signal is written first) in
   * suppression_signals, in any workspace, between `from` and `to` (unix seconds).
   */
  async matchedIds(providerEventIds: string[], from: number, to: number): Promise<Set<string>> {
    if (providerEventIds.length === 0) return new Set();
    const ids = stringSet(providerEventIds);
    const during = sql`occurred_at >= ${dateTime(new Date(from * 1000))} AND occurred_at <= ${dateTime(new Date(to * 1000))}`;
    const rows = await this.rows<{ provider_event_id: string }>(sql`
      SELECT provider_event_id FROM ${identifier('events')} PREWHERE provider_event_id IN ${ids} WHERE ${during}
      UNION ALL
      SELECT provider_event_id FROM ${identifier('suppression_signals')} PREWHERE provider_event_id IN ${ids} WHERE ${during}`);
    return new Set(rows.map((row) => row.provider_event_id));
  }

  /** Records events as re-matched, once Kafka has them. */
  async markRematched(providerEventIds: string[]): Promise<void> {
    if (providerEventIds.length === 0) return;
    const rematchedAt = Math.floor(Date.now() / 1000);
    await this.clickhouse.insert({
      table: 'rematched_events',
      values: providerEventIds.map((id) => ({ provider_event_id: id, rematched_at: rematchedAt })),
      format: 'JSONEachRow',
    });
  }

  private async rows<T>(query: chsql.SqlFragment): Promise<T[]> {
    const text = query.text;
    // Lists of categories and ids can pass the default 256 KiB query limit (a limit in bytes).
    const result = await this.clickhouse.query({
      query: text,
      format: 'JSONEachRow',
      clickhouse_settings: { max_query_size: String(Buffer.byteLength(text) + 1024) },
    });
    return result.json<T>();
  }
}
