import type { Knex } from 'knex';
import { NotFoundError, OPEN_WORKSPACE, recordColumns, containsNul, containsPattern, insertIntoOpenWorkspace } from '@mail/common';
import type { Page } from '../domain/model';
import { checkPatchedBody, type NewTemplate, type Template, type TemplatePatch } from '../domain/template';
import { isUuid, type PageWindow } from '../domain/validation';

const COLUMN_OF: Record<keyof NewTemplate, string> = {
  workspaceId: 'workspace_id',
  name: 'name',
  subject: 'subject',
  html: 'html',
  text: 'text',
};

const COLUMNS = recordColumns<NewTemplate>(COLUMN_OF);

const notFound = (): NotFoundError => new NotFoundError('Template');

/** Inserted only while the workspace is open (workspace-states of @mail/common). */
const CREATE_TEMPLATE = `WITH workspace AS (${OPEN_WORKSPACE})
  INSERT INTO templates (workspace_id, name, subject, html, text)
  SELECT workspace.workspace_id, :name, :subject, :html, :text FROM workspace
  RETURNING ${COLUMNS.returning}`;

export function createTemplate(db: Knex, template: NewTemplate): Promise<Template> {
  return insertIntoOpenWorkspace(db, template.workspaceId, async () => {
    const { rows } = await db.raw<{ rows: Template[] }>(CREATE_TEMPLATE, { ...template });
    return rows[0];
  });
}

export async function getTemplate(db: Knex, workspaceId: string, id: string): Promise<Template> {
  const template = isUuid(id)
    ? await db('templates').where({ id, workspace_id: workspaceId }).first<Template | undefined>(COLUMNS.select)
    : undefined;
  if (!template) throw notFound();
  return template;
}

/** Newest first; the id breaks ties so pages never overlap. `nameQuery` is a case-insensitive substring of the name. */
export async function listTemplates(
  db: Knex,
  workspaceId: string,
  nameQuery: string | undefined,
  window: PageWindow,
): Promise<Page<Template>> {
  // Postgres refuses NUL in a pattern, and no stored name can hold one.
  if (containsNul(nameQuery)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const base = db('templates').where({ workspace_id: workspaceId });
  if (nameQuery) base.whereILike('name', containsPattern(nameQuery));
  const [counted, items] = await Promise.all([
    base.clone().count({ total: '*' }),
    base
      .clone()
      .select<Template[]>(COLUMNS.select)
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .limit(window.pageSize)
      .offset(window.offset),
  ]);
  return { items, total: Number(counted[0].total), page: window.page, pageSize: window.pageSize };
}

/** The row is locked while the patch is checked against it: a template never loses both html and text. */
export async function updateTemplate(db: Knex, workspaceId: string, id: string, patch: TemplatePatch): Promise<Template> {
  if (!isUuid(id)) throw notFound();
  return db.transaction(async (trx) => {
    const stored = await trx('templates').where({ id, workspace_id: workspaceId }).forUpdate().first<Template | undefined>(COLUMNS.select);
    if (!stored) throw notFound();
    checkPatchedBody(stored, patch);
    const [updated] = await trx('templates')
      .where({ id })
      .update({ ...COLUMNS.toColumns(patch), updated_at: trx.raw('clock_timestamp()') })
      .returning<Template[]>(COLUMNS.select);
    return updated;
  });
}

export async function deleteTemplate(db: Knex, workspaceId: string, id: string): Promise<void> {
  const deleted = isUuid(id) ? await db('templates').where({ id, workspace_id: workspaceId }).delete() : 0;
  if (deleted === 0) throw notFound();
}
