import { ENGAGED_EVENTS, chsql, engagedAddressesOfRun, type RunEngagementType } from '@mail/event-store';
import type { EventStore } from './connection';

const { dateTime, sql, stringSet, uuid } = chsql;

/**
 * A run's human engagement as it was known at `until`: its events (run_id)
 * stored up to then. A run's A/B test is judged by what was stored before its
 * decision (its other recipients' events come after), a follow-up's audience
 * by what was stored when the follow-up was created.
 */
function runEventsUntil(workspaceId: string, runId: string, until: Date): chsql.SqlFragment {
  const stored = dateTime(new Date(Math.floor(until.getTime() / 1000) * 1000));
  return sql`workspace_id = ${uuid(workspaceId)} AND run_id = ${uuid(runId)} AND ingested_at <= ${stored} AND ${ENGAGED_EVENTS}`;
}

export interface VariantEngagement {
  variantId: string;
  opens: number;
  clicks: number;
}

/** Per variant, exact distinct addresses with a human open and with a human click. */
export async function runEngagement(store: EventStore, workspaceId: string, runId: string, until: Date): Promise<VariantEngagement[]> {
  const rows = await store.rows<{ variant_id: string; opens: string; clicks: string }>(
    sql`SELECT toString(variant_id) AS variant_id,
        uniqExactIf(email, event_type = 'open') AS opens, uniqExactIf(email, event_type = 'click') AS clicks
      FROM events WHERE ${runEventsUntil(workspaceId, runId, until)}
      GROUP BY variant_id`,
  );
  return rows.map((row) => ({ variantId: row.variant_id, opens: Number(row.opens), clicks: Number(row.clicks) }));
}

/** Of the addresses (normalized, at least one), those with a human event of `type` of the run. */
export async function filterEngaged(
  store: EventStore,
  workspaceId: string,
  runId: string,
  type: RunEngagementType,
  emails: string[],
  until: Date,
): Promise<string[]> {
  const rows = await store.rows<{ email: string }>(
    sql`${engagedAddressesOfRun({ workspaceId, runId, until }, type)} AND email IN ${stringSet(emails)}`,
  );
  return rows.map((row) => row.email);
}
