import { CAMPAIGN_WRITE_FIELDS } from '@mail/common';
import { campaignV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, updateMaskOf, type Json } from './http';

const { RecipientSource, DeliveryMode } = campaignV1;

const SOURCES: Record<string, campaignV1.RecipientSource> = {
  mssql_query: RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
  csv_account_ids: RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
};
const MODES: Record<string, campaignV1.DeliveryMode> = {
  single_template: DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
  variants: DeliveryMode.DELIVERY_MODE_VARIANTS,
};
const nameOf = <T>(table: Record<string, T>, value: T): string | undefined => Object.keys(table).find((name) => table[name] === value);

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

function campaignInput(body: Json, update = false): campaignV1.CampaignInput {
  return {
    workspaceId: given<string>(body.workspace_id) ?? '',
    name: given(body.name),
    description: given(body.description),
    isActive: given(body.is_active),
    sendPriority: given(body.send_priority),
    scheduleCron: given(body.schedule_cron),
    recipientSource: SOURCES[body.recipient_source as string] ?? RecipientSource.RECIPIENT_SOURCE_UNSPECIFIED,
    mssqlQuery: given(body.mssql_query),
    csvAccountIds: Array.isArray(body.csv_account_ids) ? { ids: body.csv_account_ids as string[] } : undefined,
    providerCategoryId: given(body.provider_category_id),
    fromEmail: given(body.from_email),
    fromName: given(body.from_name),
    replyTo: given(body.reply_to),
    deliveryMode: MODES[body.delivery_mode as string] ?? DeliveryMode.DELIVERY_MODE_UNSPECIFIED,
    templateId: given(body.template_id),
    variants: Array.isArray(body.variants) ? { variants: (body.variants as Json[]).map((item) => variantInput(item, update)) } : undefined,
  };
}

function campaignJson(c: campaignV1.Campaign | undefined): Json {
  if (!c) throw new Error('campaign service answered without a campaign');
  return {
    id: c.id,
    workspace_id: c.workspaceId,
    name: c.name,
    description: c.description ?? null,
    is_active: c.isActive,
    send_priority: c.sendPriority,
    schedule_cron: c.scheduleCron ?? null,
    recipient_source: nameOf(SOURCES, c.recipientSource),
    mssql_query: c.mssqlQuery ?? null,
    csv_account_ids: c.csvAccountIds?.ids ?? null,
    provider_category_id: c.providerCategoryId ?? null,
    from_email: c.fromEmail ?? null,
    from_name: c.fromName ?? null,
    reply_to: c.replyTo ?? null,
    delivery_mode: nameOf(MODES, c.deliveryMode),
    template_id: c.templateId ?? null,
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

/** /email-campaigns/: HTTP JSON <-> campaign.v1, one call per request. */
export const campaignRoutes: RouteModule = (router, { clients }) => {
  const service = clients.campaign;

  router.get('/email-campaigns/', async (req, res) => {
    const query = req.query as { is_active?: boolean; q?: string };
    const answer = await callService(service.listCampaigns.bind(service), {
      workspaceId: workspaceIdOf(res),
      page: pageRequest(req),
      isActive: query.is_active,
      nameQuery: query.q,
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
};
