import type { Knex } from 'knex';
import { NotFoundError } from './errors';
import { withConnection, withTransaction, type Migration, type PgConnection } from './postgres';

/**
 * Workspaces belong to the identity service; a service that keeps content of
 * a workspace (campaigns, brand guides) records here, in its own schema,
 * whether it still takes new content for it. Deleting a workspace closes it
 * in each such service first: its rows are deleted, and no later write adds
 * any, including a write that raced the closing.
 *
 * Writes that add a workspace's rows read its open row FOR SHARE
 * (OPEN_WORKSPACE) in the same statement; closing updates the row (FOR NO
 * KEY UPDATE, which FOR KEY SHARE would not stop), so it waits for those
 * writes to commit, and then deletes what they wrote in a later statement of
 * its transaction. A write that waited for the closing finds the row closed
 * and adds nothing.
 */

/**
 * The migration that adds workspace_states to a service's schema: the
 * workspaces that already hold rows of `contentTable` start open.
 */
export function workspaceStatesMigration(name: string, contentTable: string): Migration {
  return {
    name,
    async up(db) {
      await db.raw('CREATE TABLE workspace_states (workspace_id uuid PRIMARY KEY, closed_at timestamptz)');
      await db.raw(`INSERT INTO workspace_states (workspace_id) SELECT DISTINCT workspace_id FROM ${contentTable}`);
    },
    async down(db) {
      await db.raw('DROP TABLE workspace_states');
    },
  };
}

/**
 * A SELECT for a CTE of a write that adds rows of the workspace (its named
 * parameter :workspaceId, knex's named bindings): the workspace id when it is
 * open, locked until commit. Nothing when it is closed, or has no row yet
 * (see insertIntoOpenWorkspace).
 */
export const OPEN_WORKSPACE = 'SELECT workspace_id FROM workspace_states WHERE workspace_id = :workspaceId AND closed_at IS NULL FOR SHARE';

/**
 * Runs `insert`, a statement that adds rows of the workspace only where
 * OPEN_WORKSPACE finds it (undefined when it added nothing). A workspace seen
 * for the first time gets its open row, and the insert runs once more; a
 * closed workspace is NotFound.
 */
export async function insertIntoOpenWorkspace<T>(db: Knex, workspaceId: string, insert: () => Promise<T | undefined>): Promise<T> {
  const inserted = await insert();
  if (inserted !== undefined) return inserted;
  await withConnection(db, (connection) =>
    connection.query('INSERT INTO workspace_states (workspace_id) VALUES ($1) ON CONFLICT (workspace_id) DO NOTHING', [workspaceId]),
  );
  const retried = await insert();
  if (retried === undefined) throw new NotFoundError('Workspace');
  return retried;
}

/**
 * Closes the workspace (idempotent): waits for the writes that hold it open,
 * then runs `deleteContent`, which sees what they committed, in the same
 * transaction. Resolves to what deleteContent does.
 */
export function closeWorkspace<T>(db: Knex, workspaceId: string, deleteContent: (connection: PgConnection) => Promise<T>): Promise<T> {
  return withTransaction(db, async (connection) => {
    await connection.query(
      `INSERT INTO workspace_states (workspace_id, closed_at) VALUES ($1, now())
       ON CONFLICT (workspace_id) DO UPDATE SET closed_at = coalesce(workspace_states.closed_at, excluded.closed_at)`,
      [workspaceId],
    );
    return deleteContent(connection);
  });
}
