import type { ClickHouseClient } from '@clickhouse/client';
import { pendingMutations } from './client';
import { dateTime, identifier, join, list, sql, uuid, type SqlFragment } from './sql';

/**
 * Deleting a workspace deletes what the event store holds of it: events,
 * their derived tables and the suppression list (personal data, which no
 * route can reach once the workspace is gone). Ingestion may have resolved
 * events to the workspace's campaigns just before they were deleted, and
 * store them after the delete. So the workspace is recorded in
 * closed_workspaces, and ingestion's maintenance deletes whatever of a closed
 * workspace turns up later (eraseClosedWorkspaceLeftovers). Later events that
 * name a deleted campaign's category are unmatched: they name no workspace.
 */
export const WORKSPACE_TABLES = [
  'events',
  'events_by_address',
  'event_rollup_daily',
  'link_rollup_daily',
  'unsettled_days',
  'suppression_signals',
  'suppression_lifts',
  'suppression_state',
  'suppression_manual',
  'suppression_lift_audit',
] as const;

export const closedWorkspacesTable = (db: SqlFragment): SqlFragment =>
  sql`CREATE TABLE IF NOT EXISTS ${db}.closed_workspaces (
    workspace_id UUID,
    closed_at DateTime('UTC')
  ) ENGINE = ReplacingMergeTree(closed_at)
  ORDER BY workspace_id`;

/**
 * ClickHouse deletes asynchronously (a mutation per table, which rewrites the
 * table's parts in the background); it has taken the deletion once these
 * statements have run, and carries it through a restart.
 */
function deleteWorkspaceRows(database: string, workspaceIds: string[]): SqlFragment[] {
  const db = identifier(database);
  return WORKSPACE_TABLES.map(
    (table) => sql`ALTER TABLE ${db}.${identifier(table)} DELETE WHERE workspace_id IN (${list(workspaceIds.map(uuid))})`,
  );
}

/** The statements, in order, that record the workspace as closed, then delete its rows from every table. Idempotent. */
export function workspaceErasure(database: string, workspaceId: string, now = new Date()): SqlFragment[] {
  return [
    sql`INSERT INTO ${identifier(database)}.closed_workspaces SELECT ${uuid(workspaceId)}, ${dateTime(now)}`,
    ...deleteWorkspaceRows(database, [workspaceId]),
  ];
}

/**
 * Deletes the rows of closed workspaces that were written after their
 * deletion, and returns those workspaces. Skipped while a mutation of these
 * tables is still running: the rows it is deleting would still show. Each
 * table is sorted by workspace first, so looking costs little.
 */
export async function eraseClosedWorkspaceLeftovers(client: ClickHouseClient, database: string, signal?: AbortSignal): Promise<string[]> {
  if ((await pendingMutations(client, database, WORKSPACE_TABLES, signal)) > 0) return [];
  const db = identifier(database);
  const closed = sql`SELECT workspace_id FROM ${db}.closed_workspaces`;
  const found = WORKSPACE_TABLES.map(
    (table) => sql`SELECT DISTINCT workspace_id FROM ${db}.${identifier(table)} WHERE workspace_id IN (${closed})`,
  );
  const result = await client.query({
    query: sql`SELECT DISTINCT toString(workspace_id) AS workspace_id FROM (${join(found, ' UNION ALL ')})`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
  });
  const workspaceIds = (await result.json<{ workspace_id: string }>()).map((row) => row.workspace_id);
  if (workspaceIds.length > 0) {
    for (const statement of deleteWorkspaceRows(database, workspaceIds))
      await client.command({ query: statement.text, abort_signal: signal });
  }
  return workspaceIds;
}
