import type { Knex } from 'knex';
import { NotFoundError, containsNul, containsPattern } from '@mail/common';
import type { Page, Workspace } from '../domain/model';
import { isUuid, type PageWindow } from '../domain/validation';
import { WORKSPACE_COLUMNS, fetchPage } from './sql';

const notFound = (): NotFoundError => new NotFoundError('Workspace');

export async function createWorkspace(db: Knex, name: string): Promise<Workspace> {
  const [workspace] = await db('workspaces').insert({ name }).returning<Workspace[]>(WORKSPACE_COLUMNS);
  return workspace;
}

export async function getWorkspace(db: Knex, id: string): Promise<Workspace> {
  const workspace = isUuid(id) ? await db('workspaces').where({ id }).first<Workspace | undefined>(WORKSPACE_COLUMNS) : undefined;
  if (!workspace) throw notFound();
  return workspace;
}

export async function listWorkspaces(db: Knex, window: PageWindow, nameContains: string | undefined): Promise<Page<Workspace>> {
  // PostgreSQL refuses NUL in a pattern, and no stored value can hold one.
  if (containsNul(nameContains)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const base = db('workspaces');
  if (nameContains) base.whereILike('name', containsPattern(nameContains));
  return fetchPage(base, window, (query) => query.select(WORKSPACE_COLUMNS).orderByRaw('lower(name), id'));
}

export async function renameWorkspace(db: Knex, id: string, name: string): Promise<Workspace> {
  if (!isUuid(id)) throw notFound();
  const [workspace] = await db('workspaces')
    .where({ id })
    .update({ name, updated_at: db.fn.now() })
    .returning<Workspace[]>(WORKSPACE_COLUMNS);
  if (!workspace) throw notFound();
  return workspace;
}

/** Memberships go with it (ON DELETE CASCADE); other services' data keyed by the id is theirs to clean. */
export async function deleteWorkspace(db: Knex, id: string): Promise<void> {
  const deleted = isUuid(id) ? await db('workspaces').where({ id }).delete() : 0;
  if (deleted === 0) throw notFound();
}
