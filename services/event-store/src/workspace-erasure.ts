import type { ClickHouseClient } from '@clickhouse/client';
import { pendingMutations } from './client';
import { layoutOf, type EventDatabase, type StoreLayout, type TableSpec } from './layout';
import { dateTime, join, list, raw, sql, uuid, type SqlFragment } from './sql';

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

export const closedWorkspacesTable: TableSpec = {
  name: 'closed_workspaces',
  structure: sql`(
    workspace_id UUID,
    closed_at DateTime('UTC')
  )`,
  family: 'ReplacingMergeTree',
  engineArguments: raw.trusted('closed_at'),
  keys: sql`ORDER BY workspace_id`,
};

/**
 * ClickHouse deletes asynchronously (a mutation per table, which rewrites the
 * table's parts in the background); it has taken the deletion once these
 * statements have run, and carries it through a restart. In a cluster each
 * runs ON CLUSTER on the local tables: one replica of each shard takes the
 * mutation, and replication carries it to the others.
 */
function deleteWorkspaceRows(layout: StoreLayout, workspaceIds: string[]): SqlFragment[] {
  return WORKSPACE_TABLES.map(
    (table) => sql`ALTER TABLE ${layout.local(table)}${layout.onCluster} DELETE WHERE workspace_id IN (${list(workspaceIds.map(uuid))})`,
  );
}

/** The statements, in order, that record the workspace as closed, then delete its rows from every table. Idempotent. */
export function workspaceErasure(database: EventDatabase, workspaceId: string, now = new Date()): SqlFragment[] {
  const layout = layoutOf(database);
  return [
    sql`INSERT INTO ${layout.table('closed_workspaces')} SELECT ${uuid(workspaceId)}, ${dateTime(now)}`,
    ...deleteWorkspaceRows(layout, [workspaceId]),
  ];
}

/**
 * Deletes the rows of closed workspaces that were written after their
 * deletion, and returns those workspaces. Skipped while a mutation of these
 * tables is still running: the rows it is deleting would still show. Each
 * table is sorted by workspace first, so looking costs little.
 */
export async function eraseClosedWorkspaceLeftovers(
  client: ClickHouseClient,
  database: EventDatabase,
  signal?: AbortSignal,
): Promise<string[]> {
  const layout = layoutOf(database);
  if ((await pendingMutations(client, layout, WORKSPACE_TABLES, signal)) > 0) return [];
  const closed = sql`SELECT workspace_id FROM ${layout.table('closed_workspaces')}`;
  const found = WORKSPACE_TABLES.map(
    (table) => sql`SELECT DISTINCT workspace_id FROM ${layout.table(table)} WHERE workspace_id IN (${closed})`,
  );
  const result = await client.query({
    query: sql`SELECT DISTINCT toString(workspace_id) AS workspace_id FROM (${join(found, ' UNION ALL ')})`.text,
    format: 'JSONEachRow',
    abort_signal: signal,
  });
  const workspaceIds = (await result.json<{ workspace_id: string }>()).map((row) => row.workspace_id);
  if (workspaceIds.length > 0) {
    for (const statement of deleteWorkspaceRows(layout, workspaceIds))
      await client.command({ query: statement.text, abort_signal: signal });
  }
  return workspaceIds;
}
