import {
  CAMPAIGN_FIELD_LIST,
  CAMPAIGN_WRITE_FIELDS,
  campaignFieldsFromProto,
  campaignFieldsToProto,
  type CampaignValues,
} from '@mail/common';
import { campaignV1 } from '@mail/proto';
import { principalOf, workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, updateMaskOf, type Json } from './http';

const VARIANT_FIELDS = ['template_id', 'weight', 'label', 'is_active'];

/** A variant item; on update with its mask, so the service tells an omitted field from a null one. */
function variantInput(item: Json, update: boolean): campaignV1.VariantInput {
  return {
    id: given(item.id),
    templateId: given(item.template_id),
    weight: given(item.weight),
    label: given(item.label),
    isActive: given(item.is_active),
    updateMask: update ? updateMaskOf(item, VARIANT_FIELDS) : undefined,
  };
}

/** The write shape's values; the validator checked their types against the OpenAPI document. */
function campaignInput(body: Json, update = false): campaignV1.CampaignInput {
  const values = Object.fromEntries(CAMPAIGN_FIELD_LIST.map(([name, { json }]) => [name, body[json]])) as Partial<CampaignValues>;
  return {
    ...campaignFieldsToProto(values),
    variants: Array.isArray(body.variants) ? { variants: (body.variants as Json[]).map((item) => variantInput(item, update)) } : undefined,
  };
}

function campaignJson(c: campaignV1.Campaign | undefined): Json {
  if (!c) throw new Error('campaign service answered without a campaign');
  const values = campaignFieldsFromProto(c);
  return {
    id: c.id,
    ...Object.fromEntries(CAMPAIGN_FIELD_LIST.map(([name, { json }]) => [json, values[name] ?? null])),
    variants:
      c.variants?.variants.map((v) => ({
        id: v.id,
        template_id: v.templateId,
        weight: v.weight,
        label: v.label ?? null,
        is_active: v.isActive,
      })) ?? null,
    created_at: c.createdAt?.toISOString(),
    updated_at: c.updatedAt?.toISOString(),
    next_run_at: c.nextRunAt?.toISOString() ?? null,
  };
}

/** /email-campaigns/ and /provider-categories/: HTTP JSON <-> campaign.v1, one call per request. */
export const campaignRoutes: RouteModule = (router, { clients }) => {
  const service = clients.campaign;

  router.get('/email-campaigns/', async (req, res) => {
    const query = req.query as { is_active?: boolean; q?: string };
    const answer = await callService(service.listCampaigns.bind(service), {
      workspaceId: workspaceIdOf(res),
      page: pageRequest(req),
      isActive: query.is_active,
      nameQuery: query.q,
      ids: [],
    });
    res.json(page(answer.campaigns.map(campaignJson), answer.page));
  });

  router.post('/email-campaigns/', async (req, res) => {
    const answer = await callService(service.createCampaign.bind(service), {
      workspaceId: workspaceIdOf(res),
      campaign: campaignInput(req.body as Json),
    });
    res.status(201).json(campaignJson(answer.campaign));
  });

  router.get('/email-campaigns/:id', async (req, res) => {
    const answer = await callService(service.getCampaign.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(campaignJson(answer.campaign));
  });

  router.put('/email-campaigns/:id', async (req, res) => {
    const body = req.body as Json;
    const answer = await callService(service.updateCampaign.bind(service), {
      workspaceId: workspaceIdOf(res),
      id: pathParam(req),
      updateMask: updateMaskOf(body, CAMPAIGN_WRITE_FIELDS),
      campaign: campaignInput(body, true),
    });
    res.json(campaignJson(answer.campaign));
  });

  router.delete('/email-campaigns/:id', async (req, res) => {
    await callService(service.deleteCampaign.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.status(204).end();
  });

  router.delete('/provider-categories/:provider_category_id', async (req, res) => {
    const { user } = principalOf(res);
    const { release } = await callService(service.releaseProviderCategory.bind(service), {
      providerCategoryId: pathParam(req, 'provider_category_id'),
      releasedByUserId: user.id,
      releasedByEmail: user.email,
    });
    if (!release) throw new Error('campaign service answered without the release');
    res.json({
      provider_category_id: release.providerCategoryId,
      workspace_id: release.workspaceId,
      released_by: { user_id: release.releasedByUserId, email: release.releasedByEmail },
      released_at: release.releasedAt?.toISOString(),
    });
  });
};
