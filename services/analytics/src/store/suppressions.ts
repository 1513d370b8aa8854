import { NotFoundError, chsql } from '@mail/common';
import type { PageWindow } from '../domain/filter';
import { IMMEDIATE_REASONS, SOFT_BOUNCES_TO_SUPPRESS, SOFT_BOUNCE_WINDOW_DAYS, type SuppressionReason } from '../domain/suppression';
import type { EventStore } from './connection';
import { timeConditions } from './conditions';

const { int, join, list, raw, sql, str, uuid } = chsql;

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
 * derived from the signals: per address, signals at or before its latest lift
 * are ignored; the earliest hard bounce, unsubscribe or spam report suppresses
 * at once, and so does the third soft bounce within the window.
 * - The earliest immediate signal is one minimum over time * 4 + rank (rank
 *   1-3 in IMMEDIATE_REASONS order), which keeps its reason and breaks ties
 *   in one cheap number per address.
 * - Soft bounces are collected as distinct (time, provider event id) pairs, so
 *   a stored duplicate counts once; of their sorted times t, the first t[i]
 *   with t[i] - t[i - 2] within the window is the suppression time (index 0,
 *   which arrayFirst gives when none qualifies, reads as 0 = "never").
 */
export function suppressedAddresses(workspaceId: string, scope: Scope = {}): chsql.SqlFragment {
  const scoped = join(
    [sql`workspace_id = ${uuid(workspaceId)}`, ...(scope.email === undefined ? [] : [sql`email = ${str(scope.email)}`])],
    ' AND ',
  );
  const lag = int(SOFT_BOUNCES_TO_SUPPRESS - 1);
  const reasons = sql`[${list(IMMEDIATE_REASONS.map((reason) => str(reason)))}]`;
  const rank = sql`multiIf(${join(
    IMMEDIATE_REASONS.map((reason, index) => sql`reason = ${str(reason)}, ${int(index + 1)}`),
    ', ',
  )}, 0)`;
  const range = timeConditions(raw.trusted('suppressed_at'), scope.from, scope.before);
  return sql`
    SELECT email, reason, suppressed_at FROM (
      SELECT email,
        immediate_at > 0 AND (soft_at = 0 OR immediate_at <= soft_at) AS immediate_first,
        if(immediate_first, immediate_reason, 'soft_bounces') AS reason,
        toDateTime(if(immediate_first, immediate_at, soft_at), 'UTC') AS suppressed_at
      FROM (
        SELECT email,
          toUInt32(intDiv(first_immediate, 4)) AS immediate_at,
          ${reasons}[first_immediate % 4] AS immediate_reason,
          arrayMap(soft -> soft.1, arraySort(arrayDistinct(soft_bounces))) AS soft_times,
          soft_times[arrayFirst(
            i -> i > ${lag} AND soft_times[i] - soft_times[i - ${lag}] <= ${int(SOFT_BOUNCE_WINDOW_DAYS * 86_400)},
            arrayEnumerate(soft_times))] AS soft_at
        FROM (
          SELECT email,
            minIf(toUInt64(occurred_at) * 4 + ${rank}, ${rank} > 0) AS first_immediate,
            groupArrayIf((toUInt32(occurred_at), provider_event_id), reason = 'soft_bounce') AS soft_bounces
          FROM (SELECT email, reason, occurred_at, provider_event_id FROM suppression_signals WHERE ${scoped})
          ANY LEFT JOIN (
            SELECT email, max(lifted_at) AS lifted_at FROM suppression_lifts WHERE ${scoped} GROUP BY email
          ) USING email
          WHERE occurred_at > lifted_at
          GROUP BY email
        )
      )
      WHERE immediate_at > 0 OR soft_at > 0
    )
    ${range.length > 0 ? sql`WHERE ${join(range, ' AND ')}` : raw.trusted('')}`;
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

/** Records a lift now; NotFoundError when the address is not suppressed. */
export async function liftSuppression(store: EventStore, workspaceId: string, email: string, now: Date): Promise<void> {
  const [found] = await store.rows<{ email: string }>(
    sql`SELECT email FROM (${suppressedAddresses(workspaceId, { email })}) LIMIT 1`,
  );
  if (!found) throw new NotFoundError('Suppression');
  await store.insert('suppression_lifts', [{ workspace_id: workspaceId, email, lifted_at: now.toISOString() }]);
}
