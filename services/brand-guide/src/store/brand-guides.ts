import type { Knex } from 'knex';
import {
  NotFoundError,
  OPEN_WORKSPACE,
  recordColumns,
  closeWorkspace,
  containsNul,
  containsPattern,
  insertIntoOpenWorkspace,
} from '@mail/common';
import type { BrandGuide, BrandGuidePatch, NewBrandGuide, Page } from '../domain/model';
import { isUuid, type PageWindow } from '../domain/validation';

const COLUMN_OF: Record<keyof NewBrandGuide, string> = {
  workspaceId: 'workspace_id',
  name: 'name',
  description: 'description',
  promptContent: 'prompt_content',
  isActive: 'is_active',
};

const COLUMNS = recordColumns<NewBrandGuide>(COLUMN_OF);

const notFound = (): NotFoundError => new NotFoundError('Brand guide');

/** Inserted only while the workspace is open (workspace-states of @mail/common). */
const CREATE_BRAND_GUIDE = `WITH workspace AS (${OPEN_WORKSPACE})
  INSERT INTO brand_guides (workspace_id, name, description, prompt_content, is_active)
  SELECT workspace.workspace_id, :name, :description, :promptContent, :isActive FROM workspace
  RETURNING ${COLUMNS.returning}`;

export function createBrandGuide(db: Knex, guide: NewBrandGuide): Promise<BrandGuide> {
  return insertIntoOpenWorkspace(db, guide.workspaceId, async () => {
    const { rows } = await db.raw<{ rows: BrandGuide[] }>(CREATE_BRAND_GUIDE, { ...guide });
    return rows[0];
  });
}

export async function getBrandGuide(db: Knex, workspaceId: string, id: string): Promise<BrandGuide> {
  const guide = isUuid(id)
    ? await db('brand_guides').where({ id, workspace_id: workspaceId }).first<BrandGuide | undefined>(COLUMNS.select)
    : undefined;
  if (!guide) throw notFound();
  return guide;
}

export interface BrandGuideFilter {
  isActive?: boolean;
  /** Case-insensitive substring of the name. */
  nameQuery?: string;
}

/** Newest first; the id breaks ties so pages never overlap. */
export async function listBrandGuides(
  db: Knex,
  workspaceId: string,
  filter: BrandGuideFilter,
  window: PageWindow,
): Promise<Page<BrandGuide>> {
  // Postgres refuses NUL in a pattern, and no stored name can hold one.
  if (containsNul(filter.nameQuery)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const base = db('brand_guides').where({ workspace_id: workspaceId });
  if (filter.isActive !== undefined) base.where({ is_active: filter.isActive });
  if (filter.nameQuery) base.whereILike('name', containsPattern(filter.nameQuery));
  const [counted, items] = await Promise.all([
    base.clone().count({ total: '*' }),
    base
      .clone()
      .select<BrandGuide[]>(COLUMNS.select)
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .limit(window.pageSize)
      .offset(window.offset),
  ]);
  return { items, total: Number(counted[0].total), page: window.page, pageSize: window.pageSize };
}

export async function updateBrandGuide(db: Knex, workspaceId: string, id: string, patch: BrandGuidePatch): Promise<BrandGuide> {
  if (!isUuid(id)) throw notFound();
  const [updated] = await db('brand_guides')
    .where({ id, workspace_id: workspaceId })
    .update({ ...COLUMNS.toColumns(patch), updated_at: db.raw('clock_timestamp()') })
    .returning<(BrandGuide | undefined)[]>(COLUMNS.select);
  if (!updated) throw notFound();
  return updated;
}

export async function deleteBrandGuide(db: Knex, workspaceId: string, id: string): Promise<void> {
  const deleted = isUuid(id) ? await db('brand_guides').where({ id, workspace_id: workspaceId }).delete() : 0;
  if (deleted === 0) throw notFound();
}

/** Deletes every brand guide of a workspace being deleted, and takes no new ones there; resolves to how many it deleted. */
export function closeWorkspaceBrandGuides(db: Knex, workspaceId: string): Promise<number> {
  return closeWorkspace(db, workspaceId, async (connection) => {
    const { rowCount } = await connection.query('DELETE FROM brand_guides WHERE workspace_id = $1', [workspaceId]);
    return rowCount ?? 0;
  });
}
