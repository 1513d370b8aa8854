import { BOUNCE_CLASSES, BOUNCE_TYPES, EVENT_TYPES, SIGNAL_REASONS, type EventRow, type SignalReason } from '@mail/event-store';

/**
 * What a column of the tables ingestion writes takes (their types in
 * @mail/event-store's schema): the check of a row before its insert
 * (rowProblem), and how its cells are written (store/events.ts).
 */
export type ColumnKind =
  | { type: 'UUID' }
  /** DateTime: whole unix seconds, 0 to 2^32 - 1. */
  | { type: 'DateTime' }
  /** UInt8 used as a flag. */
  | { type: 'UInt8 flag' }
  | { type: 'String'; nullable?: true }
  | { type: 'Array(String)' }
  | { type: 'Enum8'; members: readonly string[] };

export type TableColumns<Row> = { readonly [Column in keyof Row]-?: ColumnKind };

const UUID: ColumnKind = { type: 'UUID' };
const TIME: ColumnKind = { type: 'DateTime' };
const TEXT: ColumnKind = { type: 'String' };
const NULLABLE_TEXT: ColumnKind = { type: 'String', nullable: true };
const enumOf = (members: readonly string[]): ColumnKind => ({ type: 'Enum8', members });

/**
 * Rows exactly as the tables of @mail/event-store's schema hold them, every
 * column (the declarations below list them). Times are unix seconds.
 */
export type EngagementEventRow = EventRow;

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
  /** The event, for re-matching: see encodeUnmatched. */
  encoded_event: string;
}

export interface SuppressionSignalRow {
  workspace_id: string;
  email: string;
  reason: SignalReason;
  occurred_at: number;
  provider_event_id: string;
  ingested_at: number;
}

/** Every column is always sent, in this order: the old ClickHouse fills an omitted column with its type's zero value, not its DEFAULT. */
export const ENGAGEMENT_COLUMNS: TableColumns<EngagementEventRow> = {
  id: UUID,
  workspace_id: UUID,
  campaign_id: UUID,
  variant_id: UUID,
  event_type: enumOf(EVENT_TYPES),
  bounce_type: enumOf(BOUNCE_TYPES),
  bounce_class: enumOf(['none', ...BOUNCE_CLASSES]),
  machine_open: { type: 'UInt8 flag' },
  email: TEXT,
  occurred_at: TIME,
  received_at: TIME,
  url: NULLABLE_TEXT,
  reason: NULLABLE_TEXT,
  user_agent: NULLABLE_TEXT,
  ip: NULLABLE_TEXT,
  provider: TEXT,
  provider_event_id: TEXT,
  provider_message_id: NULLABLE_TEXT,
  raw: TEXT,
  ingested_at: TIME,
  run_id: UUID,
};

export const UNMATCHED_COLUMNS: TableColumns<UnmatchedEventRow> = {
  provider_event_id: TEXT,
  provider: TEXT,
  event_type: TEXT,
  email: TEXT,
  categories: { type: 'Array(String)' },
  occurred_at: TIME,
  received_at: TIME,
  raw: TEXT,
  ingested_at: TIME,
  encoded_event: TEXT,
};

export const SIGNAL_COLUMNS: TableColumns<SuppressionSignalRow> = {
  workspace_id: UUID,
  email: TEXT,
  reason: enumOf(SIGNAL_REASONS),
  occurred_at: TIME,
  provider_event_id: TEXT,
  ingested_at: TIME,
};

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_DATE_TIME = 4_294_967_295;

/** Why `value` does not fit `kind`, if it does not. Strings fit whatever they hold: the encoding escapes what it must. */
function cellProblem(value: unknown, kind: ColumnKind): string | undefined {
  switch (kind.type) {
    case 'UUID':
      return typeof value === 'string' && UUID_PATTERN.test(value) ? undefined : 'not a UUID';
    case 'DateTime':
      return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DATE_TIME
        ? undefined
        : 'not a time from 1970 to 2106 in whole seconds';
    case 'UInt8 flag':
      return value === 0 || value === 1 ? undefined : 'not 0 or 1';
    case 'String':
      return typeof value === 'string' || (kind.nullable && value === null) ? undefined : 'not a string';
    case 'Array(String)':
      return Array.isArray(value) && value.every((item) => typeof item === 'string') ? undefined : 'not a list of strings';
    case 'Enum8':
      return typeof value === 'string' && kind.members.includes(value) ? undefined : `not one of ${kind.members.join(', ')}`;
  }
}

/** The first column of `row` that its table would refuse, and why; undefined when ClickHouse takes the row. */
export function rowProblem<Row extends object>(table: string, row: Row, columns: TableColumns<Row>): string | undefined {
  for (const column of Object.keys(columns) as (keyof Row & string)[]) {
    const problem = cellProblem(row[column], columns[column]);
    if (problem) return `${table}.${column} is ${problem}`;
  }
  return undefined;
}
