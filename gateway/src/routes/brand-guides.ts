import type { Request } from 'express';
import type { brandguideV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';

type Json = Record<string, unknown>;

/** name and is_active cannot be null: a null there leaves them unchanged. */
const WRITE_FIELDS = ['name', 'description', 'prompt_content', 'is_active'];
const NOT_NULLABLE = new Set(['name', 'is_active']);

/** A JSON null or absent value as an unset proto field. */
const given = <T>(value: unknown): T | undefined => (value ?? undefined) as T | undefined;

function brandGuideInput(body: Json): brandguideV1.BrandGuideInput {
  return {
    name: given(body.name),
    description: given(body.description),
    promptContent: given(body.prompt_content),
    isActive: given(body.is_active),
  };
}

/** The fields a PUT writes: present with a value, or present as null where null clears. */
function updateMask(body: Json): string[] {
  return WRITE_FIELDS.filter((field) => field in body && (body[field] !== null || !NOT_NULLABLE.has(field)));
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

const pathId = (req: Request): string => req.params.id as string;

/** /brand-guides/: HTTP JSON <-> brandguide.v1, one call per request. */
export const brandGuideRoutes: RouteModule = (router, { clients }) => {
  const service = clients.brandGuide;

  router.get('/brand-guides/', async (req, res) => {
    const query = req.query as { page?: number; page_size?: number; is_active?: boolean; q?: string };
    const answer = await callService(service.listBrandGuides.bind(service), {
      workspaceId: workspaceIdOf(res),
      page: { page: query.page ?? 1, pageSize: query.page_size ?? 50 },
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
    const answer = await callService(service.getBrandGuide.bind(service), { workspaceId: workspaceIdOf(res), id: pathId(req) });
    res.json(brandGuideJson(answer.brandGuide));
  });

  router.put('/brand-guides/:id', async (req, res) => {
    const body = req.body as Json;
    const answer = await callService(service.updateBrandGuide.bind(service), {
      workspaceId: workspaceIdOf(res),
      id: pathId(req),
      updateMask: updateMask(body),
      brandGuide: brandGuideInput(body),
    });
    res.json(brandGuideJson(answer.brandGuide));
  });

  router.delete('/brand-guides/:id', async (req, res) => {
    await callService(service.deleteBrandGuide.bind(service), { workspaceId: workspaceIdOf(res), id: pathId(req) });
    res.status(204).end();
  });
};
