import type { Knex } from 'knex';
import { InvalidArgumentError, NotFoundError, unary, valueError, type Logger } from '@mail/common';
import type { campaignV1 } from '@mail/proto';
import { newTemplate, templatePatch, type Template, type TemplateWrite } from '../domain/template';
import type { TemplateChecker } from '../domain/template-checker';
import { isUuid, pageWindow } from '../domain/validation';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, updateTemplate } from '../store/templates';

const WRITE_FIELDS: ReadonlySet<string> = new Set(['name', 'subject', 'html', 'text']);

/** The values a TemplateInput carries; unset fields are absent. */
function writeFromProto(input: campaignV1.TemplateInput | undefined): TemplateWrite {
  return Object.fromEntries(Object.entries(input ?? {}).filter(([, value]) => value !== undefined));
}

/** Only the named fields; a named field without a value is null (which clears it when it is nullable). */
function writeFromMask(paths: string[], input: campaignV1.TemplateInput | undefined): TemplateWrite {
  const unknown = paths.filter((path) => !WRITE_FIELDS.has(path));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(unknown.map((path) => valueError(['update_mask'], path, `'${path}' is not a template field`)));
  }
  const values = writeFromProto(input);
  return Object.fromEntries(paths.map((path) => [path, values[path as keyof TemplateWrite] ?? null]));
}

function toProto(template: Template): campaignV1.Template {
  return { ...template, html: template.html ?? undefined, text: template.text ?? undefined };
}

/** The workspace a call acts in; one that is not even a UUID does not exist. */
function scope(workspaceId: string): string {
  if (!isUuid(workspaceId)) throw new NotFoundError('Workspace');
  return workspaceId.toLowerCase();
}

export function templateHandlers(logger: Logger, db: Knex, checker: TemplateChecker): campaignV1.TemplateServiceServer {
  return {
    createTemplate: unary(logger, 'CreateTemplate', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const write = writeFromProto(request.template);
      return toProto(await createTemplate(db, newTemplate(workspaceId, write, await checker.check(write))));
    }),
    getTemplate: unary(logger, 'GetTemplate', async (request) => toProto(await getTemplate(db, scope(request.workspaceId), request.id))),
    listTemplates: unary(logger, 'ListTemplates', async (request) => {
      const page = await listTemplates(db, scope(request.workspaceId), request.nameQuery, pageWindow(request.page));
      return { templates: page.items.map(toProto), page: { total: page.total, page: page.page, pageSize: page.pageSize } };
    }),
    updateTemplate: unary(logger, 'UpdateTemplate', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const write = writeFromMask(request.updateMask ?? [], request.template);
      const patch = templatePatch(write, await checker.check(write));
      return toProto(await updateTemplate(db, workspaceId, request.id, patch));
    }),
    deleteTemplate: unary(logger, 'DeleteTemplate', async (request) => {
      await deleteTemplate(db, scope(request.workspaceId), request.id);
      return {};
    }),
  };
}
