import { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';
import { chsql } from '@mail/event-store';
import {
  ENGAGEMENT_COLUMNS,
  SIGNAL_COLUMNS,
  UNMATCHED_COLUMNS,
  type ColumnKind,
  type EngagementEventRow,
  type SuppressionSignalRow,
  type UnmatchedEventRow,
} from '../domain/columns';

const { dateTime, identifier, join, sql, uuid, uuidSet } = chsql;

type Cell = string | number | null | string[];
type Columns<Column extends string> = { readonly [Name in Column]: ColumnKind };

const TSV_SPECIAL = /[\\\t\n\r\0]/g;
const HAS_TSV_SPECIAL = /[\\\t\n\r\0]/;
const QUOTED_SPECIAL = /[\\\t\n\r\0']/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0', "'": "\\'" };
const escape = (char: string): string => ESCAPES[char];

/**
 * One value in ClickHouse's TabSeparated format, as a column of `kind` takes
 * it (rowProblem has checked that it fits): strings with backslash escapes
 * for the characters that would end or corrupt the field, NULL as \N, arrays
 * of strings as quoted literals, numbers as they are but for times. A time
 * goes in as unix seconds (read with date_time_input_format=basic), always
 * ten digits: ClickHouse 18.16 reads a DateTime whose fifth character is not
 * a digit as 'YYYY-MM-DD hh:mm:ss', so a time of four digits took the next
 * fifteen characters of the row with it.
 */
export function tsvCell(value: Cell, kind: ColumnKind): string {
  // test() first: most values need no escape, and a global replace costs more even when it finds nothing
  // (bench/README.md, "Ingestion: building TabSeparated rows").
  if (typeof value === 'string') return HAS_TSV_SPECIAL.test(value) ? value.replace(TSV_SPECIAL, escape) : value;
  if (typeof value === 'number') return kind.type === 'DateTime' ? String(value).padStart(10, '0') : String(value);
  if (value === null) return '\\N';
  return `[${value.map((item) => `'${item.replace(QUOTED_SPECIAL, escape)}'`).join(',')}]`;
}

/**
 * Text is turned into bytes every this many characters: flattening one string
 * of a whole batch (megabytes, built from thousands of pieces) is slower
 * (bench/README.md, "Ingestion: building TabSeparated rows").
 */
const CHUNK_CHARS = 65_536;

/** Rows as TabSeparated text, their cells in the order of `columns`. */
export function toTabSeparated<Row extends Record<Column, Cell>, Column extends string>(rows: Row[], columns: Columns<Column>): Buffer {
  const names = Object.keys(columns) as Column[];
  const kinds = names.map((name) => columns[name]);
  const chunks: Buffer[] = [];
  let text = '';
  for (const row of rows) {
    let line = tsvCell(row[names[0]], kinds[0]);
    for (let i = 1; i < names.length; i++) line += `\t${tsvCell(row[names[i]], kinds[i])}`;
    text += `${line}\n`;
    if (text.length >= CHUNK_CHARS) {
      chunks.push(Buffer.from(text, 'utf8'));
      text = '';
    }
  }
  chunks.push(Buffer.from(text, 'utf8'));
  return Buffer.concat(chunks);
}

/**
 * What the pipeline writes to ClickHouse (suppression signals, events,
 * unmatched events), and the check for events stored already. Rows go in as
 * TabSeparated: the server parses it at a fraction of JSONEachRow's cost,
 * and this side builds it without a JSON document per row.
 */
export class EventWriter {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  insertSignals(rows: SuppressionSignalRow[]): Promise<void> {
    return this.insert('suppression_signals', rows, SIGNAL_COLUMNS);
  }

  insertEvents(rows: EngagementEventRow[]): Promise<void> {
    return this.insert('events', rows, ENGAGEMENT_COLUMNS);
  }

  insertUnmatched(rows: UnmatchedEventRow[]): Promise<void> {
    return this.insert('unmatched_events', rows, UNMATCHED_COLUMNS);
  }

  /**
   * The ids of these events that the events table already holds. One query,
   * narrowed by the sort key (workspace_id, occurred_at, ...) to the time
   * ranges the batch covers in each workspace (lookupRanges), so its cost
   * follows the stored events near the batch's, not everything between its
   * oldest and newest event. It matches on `id`, the UUID derived from
   * provider + provider_event_id: one fixed-width column to read instead of two strings
   * (bench/README.md, "Ingestion: the stored-event lookup").
   */
  async storedEventIds(rows: EngagementEventRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const ranges = lookupRanges(rows).map(({ workspaceIds, from, to }) => {
      // One literal for many workspaces: a long IN list would exceed ClickHouse's 50,000 AST elements.
      const workspaces =
        workspaceIds.length === 1 ? sql`workspace_id = ${uuid(workspaceIds[0])}` : sql`workspace_id IN ${uuidSet(workspaceIds)}`;
      return sql`(${workspaces} AND occurred_at >= ${dateTime(new Date(from * 1000))} AND occurred_at <= ${dateTime(new Date(to * 1000))})`;
    });
    // The ranges pick the granules to read; PREWHERE then reads and matches `id` alone, and only its few matches are
    // checked against the ranges (in WHERE, every row would be, at twice the cost).
    const query = sql`SELECT id FROM ${identifier('events')}
      PREWHERE id IN ${uuidSet(rows.map((row) => row.id))}
      WHERE ${join(ranges, ' OR ')}`.text;
    const result = await this.clickhouse.query({
      query,
      format: 'JSONEachRow',
      // A batch's id list is longer than the default 256 KiB query limit (a limit in bytes).
      clickhouse_settings: { max_query_size: String(Buffer.byteLength(query) + 1024) },
    });
    return new Set((await result.json<{ id: string }>()).map((row) => row.id));
  }

  private async insert<Row extends Record<Column, Cell>, Column extends string>(
    table: string,
    rows: Row[],
    columns: Columns<Column>,
  ): Promise<void> {
    if (rows.length === 0) return;
    await this.clickhouse.insert({
      table,
      values: Readable.from([toTabSeparated(rows, columns)], { objectMode: false }),
      format: 'TabSeparated',
      columns: Object.keys(columns) as [Column, ...Column[]],
      clickhouse_settings: { date_time_input_format: 'basic' },
    });
  }
}

/** Where a batch's events are looked up: these workspaces, from..to (unix seconds, inclusive). */
export interface LookupRange {
  workspaceIds: string[];
  from: number;
  to: number;
}

/** Events of one workspace further apart than this are looked up in separate ranges. */
const RANGE_GAP_SECONDS = 600;
/** Bounds the query's length and its key analysis, which ClickHouse runs for each range on each part. */
const MAX_RANGES = 64;

/**
 * The ranges of the sort key that hold a batch's events if they are stored:
 * per workspace, its event times split where they are more than
 * RANGE_GAP_SECONDS apart (a provider's retry of an old batch arrives among
 * new events). Beyond MAX_RANGES, one range per workspace; beyond that
 * again, all workspaces over the batch's whole span.
 */
export function lookupRanges(rows: readonly Pick<EngagementEventRow, 'workspace_id' | 'occurred_at'>[]): LookupRange[] {
  const timesByWorkspace = new Map<string, number[]>();
  for (const row of rows) {
    const times = timesByWorkspace.get(row.workspace_id);
    if (times) times.push(row.occurred_at);
    else timesByWorkspace.set(row.workspace_id, [row.occurred_at]);
  }
  const split: LookupRange[] = [];
  const spans: LookupRange[] = [];
  for (const [workspaceId, times] of timesByWorkspace) {
    times.sort((a, b) => a - b);
    let from = times[0];
    for (let i = 1; i < times.length; i++) {
      if (times[i] - times[i - 1] > RANGE_GAP_SECONDS) {
        split.push({ workspaceIds: [workspaceId], from, to: times[i - 1] });
        from = times[i];
      }
    }
    split.push({ workspaceIds: [workspaceId], from, to: times[times.length - 1] });
    spans.push({ workspaceIds: [workspaceId], from: times[0], to: times[times.length - 1] });
  }
  if (split.length <= MAX_RANGES) return split;
  if (spans.length <= MAX_RANGES) return spans;
  return [
    {
      workspaceIds: spans.map((span) => span.workspaceIds[0]),
      from: spans.reduce((earliest, span) => Math.min(earliest, span.from), Infinity),
      to: spans.reduce((latest, span) => Math.max(latest, span.to), -Infinity),
    },
  ];
}
