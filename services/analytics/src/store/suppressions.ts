import { NotFoundError } from '@mail/common';
import { chsql, manualSuppressions, suppressionStateRefresh } from '@mail/event-store';
import type { PageWindow } from '../domain/filter';
import type { Actor, SuppressionFilter, SuppressionReason } from '../domain/suppression';
import type { EventStore } from './connection';
import { timeConditions } from './conditions';

const { int, join, raw, sql, str, stringSet, uuid } = chsql;

export interface SuppressionRow {
  email: string;
  reason: SuppressionReason;
  /** Unix seconds. */
  suppressed_ts: number;
  /** The note of the address's standing manual suppression ('' without one). */
  note: string;
}

interface Scope extends SuppressionFilter {
  /** Bounds on suppressed_at: inclusive, exclusive. */
  from?: Date;
  before?: Date;
}

/**
 * The addresses suppressed now, as a subquery (email, reason, suppressed_at):
 * the state the signal rules keep (@mail/event-store suppression.ts) beside
 * the manual suppressions not lifted since. An address with both is
 * suppressed since the earlier, which names the reason. FINAL keeps each
 * address's newest state row; the WHERE applies after that (ClickHouse does
 * not move it to PREWHERE under FINAL), so an address whose newest row is
 * 'none' (lifted) stays out.
 */
export function suppressedAddresses(workspaceId: string, scope: Scope = {}): chsql.SqlFragment {
  const stateConditions = [
    sql`workspace_id = ${uuid(workspaceId)}`,
    ...(scope.email === undefined
      ? []
      : [typeof scope.email === 'string' ? sql`email = ${str(scope.email)}` : sql`email IN ${stringSet(scope.email)}`]),
    raw.trusted("reason != 'none'"),
  ];
  const conditions = [
    ...(scope.reason === undefined ? [] : [sql`reason = ${str(scope.reason)}`]),
    // Stored addresses are lower case, as the part is.
    ...(scope.query === undefined || scope.query === '' ? [] : [sql`position(email, ${str(scope.query)}) > 0`]),
    ...timeConditions(raw.trusted('suppressed_at'), scope.from, scope.before),
  ];
  return sql`
    SELECT email, reason, suppressed_at FROM (
      SELECT email, argMin(signal_reason, signal_at) AS reason, min(signal_at) AS suppressed_at FROM (
        SELECT email, CAST(reason AS String) AS signal_reason, suppressed_at AS signal_at
        FROM suppression_state FINAL WHERE ${join(stateConditions, ' AND ')}
        UNION ALL
        SELECT email, 'manual' AS signal_reason, suppressed_at AS signal_at FROM (${manualSuppressions(workspaceId, scope.email)})
      )
      GROUP BY email
    )
    WHERE ${conditions.length === 0 ? raw.trusted('1') : join(conditions, ' AND ')}`;
}

/** The list's rows in its order: newest first, then by address; with each manual suppression's latest note. */
function suppressionRows(workspaceId: string, filter: SuppressionFilter): chsql.SqlFragment {
  return sql`
    SELECT email, reason, toUInt32(suppressed_at) AS suppressed_ts, note FROM (${suppressedAddresses(workspaceId, filter)}) AS suppressed
    ANY LEFT JOIN (
      SELECT email, argMax(note, added_at_ms) AS note FROM suppression_manual WHERE workspace_id = ${uuid(workspaceId)} GROUP BY email
    ) AS notes USING (email)
    ORDER BY suppressed_at DESC, email`;
}

export async function listSuppressions(
  store: EventStore,
  workspaceId: string,
  window: PageWindow,
  filter: SuppressionFilter,
): Promise<{ suppressions: SuppressionRow[]; total: number }> {
  const [suppressions, [count]] = await Promise.all([
    store.rows<SuppressionRow>(sql`${suppressionRows(workspaceId, filter)} LIMIT ${int(window.offset)}, ${int(window.pageSize)}`),
    store.rows<{ total: string }>(sql`SELECT count() AS total FROM (${suppressedAddresses(workspaceId, filter)})`),
  ]);
  return { suppressions, total: Number(count.total) };
}

/** Every row the list would show, in its order, in batches as ClickHouse sends them. */
export function exportSuppressions(store: EventStore, workspaceId: string, filter: SuppressionFilter): AsyncIterable<SuppressionRow[]> {
  return store.rowBatches<SuppressionRow>(suppressionRows(workspaceId, filter));
}

/**
 * Of the addresses (normalized, at least one), those suppressed in the workspace now. Most addresses of a send
 * have no suppression row at all: a plain lookup sets them aside, and only those with a row (a signal's state,
 * an addition) are decided by suppressedAddresses, whose merges cost more than the lookup for any list.
 */
export async function filterSuppressed(store: EventStore, workspaceId: string, emails: string[]): Promise<string[]> {
  const scope = sql`workspace_id = ${uuid(workspaceId)} AND email IN ${stringSet(emails)}`;
  const withRows = await store.rows<{ email: string }>(sql`
    SELECT DISTINCT email FROM (
      SELECT email FROM suppression_state WHERE ${scope}
      UNION ALL
      SELECT email FROM suppression_manual WHERE ${scope}
    )`);
  if (withRows.length === 0) return [];
  const candidates = withRows.map((row) => row.email);
  const rows = await store.rows<{ email: string }>(sql`SELECT email FROM (${suppressedAddresses(workspaceId, { email: candidates })})`);
  return rows.map((row) => row.email);
}

/** Suppresses the address by hand as of `now`, and answers its suppression after that. */
export async function addSuppression(
  store: EventStore,
  workspaceId: string,
  email: string,
  note: string,
  actor: Actor,
  now: Date,
): Promise<SuppressionRow> {
  await store.insert('suppression_manual', [
    {
      workspace_id: workspaceId,
      email,
      added_at: now.toISOString(),
      added_at_ms: now.getTime(),
      note,
      added_by_user_id: actor.userId,
      added_by_email: actor.email,
    },
  ]);
  const [row] = await store.rows<SuppressionRow>(suppressionRows(workspaceId, { email }));
  if (!row) throw new Error('a manual suppression did not read back');
  return row;
}

/**
 * Records a lift now (for the signal rules, and with who lifted it for the
 * audit), then recomputes the address's state (as ingestion does after new
 * signals); NotFoundError when the address is not suppressed. Should the
 * refresh fail, the address reads as suppressed until a retried lift or its
 * next signal refreshes it.
 */
export async function liftSuppression(store: EventStore, workspaceId: string, email: string, actor: Actor, now: Date): Promise<void> {
  const [found] = await store.rows<{ email: string }>(sql`SELECT email FROM (${suppressedAddresses(workspaceId, { email })}) LIMIT 1`);
  if (!found) throw new NotFoundError('Suppression');
  await store.insert('suppression_lift_audit', [
    { workspace_id: workspaceId, email, lifted_at_ms: now.getTime(), lifted_by_user_id: actor.userId, lifted_by_email: actor.email },
  ]);
  await store.insert('suppression_lifts', [{ workspace_id: workspaceId, email, lifted_at: now.toISOString() }]);
  await store.command(suppressionStateRefresh([{ workspaceId, email }]));
}

export interface SuppressionHistory {
  current?: SuppressionRow;
  signals: { reason: string; occurred_ts: number; provider_event_id: string }[];
  additions: { added_at_ms: string; note: string; added_by_user_id: string; added_by_email: string }[];
  lifts: { lifted_at_ms: number; lifted_by_user_id?: string; lifted_by_email?: string }[];
}

/** One address: its suppression now, the signals and additions behind it, its lifts; NotFoundError when it was never suppressed. */
export async function suppressionHistory(store: EventStore, workspaceId: string, email: string): Promise<SuppressionHistory> {
  const address = sql`workspace_id = ${uuid(workspaceId)} AND email = ${str(email)}`;
  const [[current], states, signals, additions, audited, lifts] = await Promise.all([
    store.rows<SuppressionRow>(suppressionRows(workspaceId, { email })),
    store.rows<{ reason: string }>(sql`SELECT reason FROM suppression_state FINAL WHERE ${address} LIMIT 1`),
    store.rows<SuppressionHistory['signals'][number]>(sql`
      SELECT DISTINCT reason, toUInt32(occurred_at) AS occurred_ts, provider_event_id FROM suppression_signals WHERE ${address}
      ORDER BY occurred_ts DESC, provider_event_id`),
    store.rows<SuppressionHistory['additions'][number]>(sql`
      SELECT DISTINCT added_at_ms, note, added_by_user_id, added_by_email FROM suppression_manual WHERE ${address}
      ORDER BY added_at_ms DESC`),
    store.rows<{ lifted_at_ms: string; lifted_by_user_id: string; lifted_by_email: string }>(sql`
      SELECT DISTINCT lifted_at_ms, lifted_by_user_id, lifted_by_email FROM suppression_lift_audit WHERE ${address}`),
    store.rows<{ lifted_ts: number }>(sql`SELECT DISTINCT toUInt32(lifted_at) AS lifted_ts FROM suppression_lifts WHERE ${address}`),
  ]);
  if (states.length === 0 && additions.length === 0) throw new NotFoundError('Suppression');
  return { current, signals, additions, lifts: auditedLifts(audited, lifts) };
}

/** The audited lifts, and those recorded before lifts were audited (without who), newest first. */
function auditedLifts(
  audited: { lifted_at_ms: string; lifted_by_user_id: string; lifted_by_email: string }[],
  lifts: { lifted_ts: number }[],
): SuppressionHistory['lifts'] {
  const auditedSeconds = new Set(audited.map((lift) => Math.floor(Number(lift.lifted_at_ms) / 1000)));
  return [
    ...audited.map((lift) => ({ ...lift, lifted_at_ms: Number(lift.lifted_at_ms) })),
    ...lifts.filter((lift) => !auditedSeconds.has(Number(lift.lifted_ts))).map((lift) => ({ lifted_at_ms: Number(lift.lifted_ts) * 1000 })),
  ].sort((a, b) => b.lifted_at_ms - a.lifted_at_ms);
}
