import { NotFoundError } from '@mail/common';
import { chsql, suppressionStateRefresh } from '@mail/event-store';
import type { PageWindow } from '../domain/filter';
import type { SuppressionReason } from '../domain/suppression';
import type { EventStore } from './connection';
import { timeConditions } from './conditions';

const { int, join, raw, sql, str, uuid } = chsql;

export interface SuppressionRow {
  email: string;
  reason: SuppressionReason;
  /** Unix seconds. */
  suppressed_ts: number;
}

interface Scope {
  email?: string;
  /** Bounds on suppressed_at: inclusive, exclusive. */
  from?: Date;
  before?: Date;
}

/**
 * The addresses suppressed now, as a subquery (email, reason, suppressed_at),
 * from the stored state that the writers keep current (@mail/common
 * suppression.ts). FINAL keeps each address's newest row; the WHERE applies
 * after that (ClickHouse does not move it to PREWHERE under FINAL), so an
 * address whose newest row is 'none' (lifted) stays out.
 */
export function suppressedAddresses(workspaceId: string, scope: Scope = {}): chsql.SqlFragment {
  const conditions = [
    sql`workspace_id = ${uuid(workspaceId)}`,
    ...(scope.email === undefined ? [] : [sql`email = ${str(scope.email)}`]),
    raw.trusted("reason != 'none'"),
    ...timeConditions(raw.trusted('suppressed_at'), scope.from, scope.before),
  ];
  return sql`SELECT email, reason, suppressed_at FROM suppression_state FINAL WHERE ${join(conditions, ' AND ')}`;
}

export async function listSuppressions(
  store: EventStore,
  workspaceId: string,
  window: PageWindow,
  email?: string,
): Promise<{ suppressions: SuppressionRow[]; total: number }> {
  const suppressed = suppressedAddresses(workspaceId, { email });
  const [suppressions, [count]] = await Promise.all([
    store.rows<SuppressionRow>(sql`
      SELECT email, reason, toUInt32(suppressed_at) AS suppressed_ts FROM (${suppressed})
      ORDER BY suppressed_at DESC, email
      LIMIT ${int(window.offset)}, ${int(window.pageSize)}`),
    store.rows<{ total: string }>(sql`SELECT count() AS total FROM (${suppressed})`),
  ]);
  return { suppressions, total: Number(count.total) };
}

/**
 * Records a lift now, then recomputes the address's state (as ingestion does
 * after new signals); NotFoundError when the address is not suppressed. Should
 * the refresh fail, the address reads as suppressed until a retried lift or
 * its next signal refreshes it.
 */
export async function liftSuppression(store: EventStore, workspaceId: string, email: string, now: Date): Promise<void> {
  const [found] = await store.rows<{ email: string }>(sql`SELECT email FROM (${suppressedAddresses(workspaceId, { email })}) LIMIT 1`);
  if (!found) throw new NotFoundError('Suppression');
  await store.insert('suppression_lifts', [{ workspace_id: workspaceId, email, lifted_at: now.toISOString() }]);
  await store.command(suppressionStateRefresh([{ workspaceId, email }]));
}
