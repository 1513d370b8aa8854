import type { campaignV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, updateMaskOf, type Json } from './http';

const WRITE_FIELDS = ['name', 'subject', 'html', 'text'];

function templateInput(body: Json): campaignV1.TemplateInput {
  return { name: given(body.name), subject: given(body.subject), html: given(body.html), text: given(body.text) };
}

function templateJson(template: campaignV1.Template): Json {
  return {
    id: template.id,
    workspace_id: template.workspaceId,
    name: template.name,
    subject: template.subject,
    html: template.html ?? null,
    text: template.text ?? null,
    created_at: template.createdAt?.toISOString(),
    updated_at: template.updatedAt?.toISOString(),
  };
}

/** /templates/: HTTP JSON <-> campaign.v1 TemplateService, one call per request. */
export const templateRoutes: RouteModule = (router, { clients }) => {
  const service = clients.template;

  router.get('/templates/', async (req, res) => {
    const query = req.query as { q?: string };
    const answer = await callService(service.listTemplates.bind(service), {
      workspaceId: workspaceIdOf(res),
      page: pageRequest(req),
      nameQuery: query.q,
    });
    res.json(page(answer.templates.map(templateJson), answer.page));
  });

  router.post('/templates/', async (req, res) => {
    const template = await callService(service.createTemplate.bind(service), {
      workspaceId: workspaceIdOf(res),
      template: templateInput(req.body as Json),
    });
    res.status(201).json(templateJson(template));
  });

  router.get('/templates/:id', async (req, res) => {
    const template = await callService(service.getTemplate.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(templateJson(template));
  });

  router.put('/templates/:id', async (req, res) => {
    const body = req.body as Json;
    const template = await callService(service.updateTemplate.bind(service), {
      workspaceId: workspaceIdOf(res),
      id: pathParam(req),
      updateMask: updateMaskOf(body, WRITE_FIELDS),
      template: templateInput(body),
    });
    res.json(templateJson(template));
  });

  router.delete('/templates/:id', async (req, res) => {
    await callService(service.deleteTemplate.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.status(204).end();
  });
};
