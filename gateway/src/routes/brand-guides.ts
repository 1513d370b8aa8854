import type { brandguideV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, updateMaskOf, type Json } from './http';

const WRITE_FIELDS = ['name', 'description', 'prompt_content', 'is_active'];

function brandGuideInput(body: Json): brandguideV1.BrandGuideInput {
  return {
    name: given(body.name),
    description: given(body.description),
    promptContent: given(body.prompt_content),
    isActive: given(body.is_active),
  };
}

function brandGuideJson(guide: brandguideV1.BrandGuide | undefined): Json {
  if (!guide) throw new Error('brand-guide service answered without a brand guide');
  return {
    id: guide.id,
    workspace_id: guide.workspaceId,
    name: guide.name,
    description: guide.description ?? null,
    prompt_content: guide.promptContent ?? null,
    is_active: guide.isActive,
    created_at: guide.createdAt?.toISOString(),
    updated_at: guide.updatedAt?.toISOString(),
  };
}

/** /brand-guides/: HTTP JSON <-> brandguide.v1, one call per request. */
export const brandGuideRoutes: RouteModule = (router, { clients }) => {
  const service = clients.brandGuide;

  router.get('/brand-guides/', async (req, res) => {
    const query = req.query as { is_active?: boolean; q?: string };
    const answer = await callService(service.listBrandGuides.bind(service), {
      workspaceId: workspaceIdOf(res),
      page: pageRequest(req),
      isActive: query.is_active,
      nameQuery: query.q,
    });
    res.json(page(answer.brandGuides.map(brandGuideJson), answer.page));
  });

  router.post('/brand-guides/', async (req, res) => {
    const answer = await callService(service.createBrandGuide.bind(service), {
      workspaceId: workspaceIdOf(res),
      brandGuide: brandGuideInput(req.body as Json),
    });
    res.status(201).json(brandGuideJson(answer.brandGuide));
  });

  router.get('/brand-guides/:id', async (req, res) => {
    const answer = await callService(service.getBrandGuide.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(brandGuideJson(answer.brandGuide));
  });

  router.put('/brand-guides/:id', async (req, res) => {
    const body = req.body as Json;
    const answer = await callService(service.updateBrandGuide.bind(service), {
      workspaceId: workspaceIdOf(res),
      id: pathParam(req),
      updateMask: updateMaskOf(body, WRITE_FIELDS),
      brandGuide: brandGuideInput(body),
    });
    res.json(brandGuideJson(answer.brandGuide));
  });

  router.delete('/brand-guides/:id', async (req, res) => {
    await callService(service.deleteBrandGuide.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.status(204).end();
  });
};
