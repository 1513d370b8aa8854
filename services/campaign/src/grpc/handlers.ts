import type { Knex } from 'knex';
import { InvalidArgumentError, NotFoundError, unary, valueError, watchChanges, type ChangeFeed, type Logger } from '@mail/common';
import { campaignV1 } from '@mail/proto';
import type { Campaign, DeliveryMode, Page, RecipientSource } from '../domain/model';
import { nextRunAt } from '../domain/schedule';
import { campaignPatch, isUuid, newCampaign, pageWindow, type CampaignWrite, type VariantWrite } from '../domain/validation';
import {
  closeWorkspaceCampaigns,
  createCampaign,
  deleteCampaign,
  getCampaign,
  listCampaigns,
  resolveCategories,
  updateCampaign,
} from '../store/campaigns';

const { RecipientSource: ProtoSource, DeliveryMode: ProtoMode } = campaignV1;

const SOURCE_FROM_PROTO: Partial<Record<campaignV1.RecipientSource, RecipientSource>> = {
  [ProtoSource.RECIPIENT_SOURCE_MSSQL_QUERY]: 'mssql_query',
  [ProtoSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS]: 'csv_account_ids',
};
const SOURCE_TO_PROTO: Record<RecipientSource, campaignV1.RecipientSource> = {
  mssql_query: ProtoSource.RECIPIENT_SOURCE_MSSQL_QUERY,
  csv_account_ids: ProtoSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
};
const MODE_FROM_PROTO: Partial<Record<campaignV1.DeliveryMode, DeliveryMode>> = {
  [ProtoMode.DELIVERY_MODE_SINGLE_TEMPLATE]: 'single_template',
  [ProtoMode.DELIVERY_MODE_VARIANTS]: 'variants',
};
const MODE_TO_PROTO: Record<DeliveryMode, campaignV1.DeliveryMode> = {
  single_template: ProtoMode.DELIVERY_MODE_SINGLE_TEMPLATE,
  variants: ProtoMode.DELIVERY_MODE_VARIANTS,
};

/** update_mask paths (write-shape names) and the write fields they name. */
const FIELD_OF_PATH: Record<string, keyof CampaignWrite> = {
  workspace_id: 'workspaceId',
  name: 'name',
  description: 'description',
  is_active: 'isActive',
  send_priority: 'sendPriority',
  schedule_cron: 'scheduleCron',
  recipient_source: 'recipientSource',
  mssql_query: 'mssqlQuery',
  csv_account_ids: 'csvAccountIds',
  provider_category_id: 'providerCategoryId',
  from_email: 'fromEmail',
  from_name: 'fromName',
  reply_to: 'replyTo',
  delivery_mode: 'deliveryMode',
  template_id: 'templateId',
  variants: 'variants',
};

const VARIANT_FIELD_OF_PATH: Record<string, keyof VariantWrite> = {
  template_id: 'templateId',
  weight: 'weight',
  label: 'label',
  is_active: 'isActive',
};

/**
 * A variant item as sent: with an update mask only the named fields, a named
 * one without a value as null; without a mask, the fields that are set.
 */
function variantFromProto({ updateMask, id, ...values }: campaignV1.VariantInput, index: number): VariantWrite {
  const write: VariantWrite = id === undefined ? {} : { id };
  if (!updateMask?.length) return { ...write, ...Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) };
  const unknown = updateMask.filter((path) => !(path in VARIANT_FIELD_OF_PATH));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(
      unknown.map((path) => valueError(['variants', index, 'update_mask'], path, `'${path}' is not a variant field`)),
    );
  }
  for (const path of updateMask) {
    const field = VARIANT_FIELD_OF_PATH[path];
    Object.assign(write, { [field]: values[field as keyof typeof values] ?? null });
  }
  return write;
}

/** The values a CampaignInput carries; unset optional fields (and enum 0, empty workspace_id) are absent. */
function writeFromProto(input: campaignV1.CampaignInput | undefined): CampaignWrite {
  if (!input) return {};
  const { workspaceId, recipientSource, deliveryMode, csvAccountIds, variants, ...scalars } = input;
  const write: CampaignWrite = {
    ...scalars,
    workspaceId: workspaceId || undefined,
    recipientSource: SOURCE_FROM_PROTO[recipientSource],
    deliveryMode: MODE_FROM_PROTO[deliveryMode],
    csvAccountIds: csvAccountIds?.ids,
    variants: variants?.variants.map(variantFromProto),
  };
  return Object.fromEntries(Object.entries(write).filter(([, value]) => value !== undefined));
}

/** Only the named fields; a named field without a value is null (which clears it when it is nullable). */
function writeFromMask(paths: string[], input: campaignV1.CampaignInput | undefined): CampaignWrite {
  const unknown = paths.filter((path) => !(path in FIELD_OF_PATH));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(unknown.map((path) => valueError(['update_mask'], path, `'${path}' is not a campaign field`)));
  }
  const values = writeFromProto(input);
  return Object.fromEntries(paths.map((path) => [FIELD_OF_PATH[path], values[FIELD_OF_PATH[path]] ?? null]));
}

function toProto(campaign: Campaign, now: Date): campaignV1.Campaign {
  const orUndefined = <T>(value: T | null): T | undefined => value ?? undefined;
  return {
    ...campaign,
    description: orUndefined(campaign.description),
    scheduleCron: orUndefined(campaign.scheduleCron),
    recipientSource: SOURCE_TO_PROTO[campaign.recipientSource],
    mssqlQuery: orUndefined(campaign.mssqlQuery),
    csvAccountIds: campaign.csvAccountIds ? { ids: campaign.csvAccountIds } : undefined,
    providerCategoryId: orUndefined(campaign.providerCategoryId),
    fromEmail: orUndefined(campaign.fromEmail),
    fromName: orUndefined(campaign.fromName),
    replyTo: orUndefined(campaign.replyTo),
    deliveryMode: MODE_TO_PROTO[campaign.deliveryMode],
    templateId: orUndefined(campaign.templateId),
    variants: campaign.variants
      ? { variants: campaign.variants.map((variant) => ({ ...variant, label: orUndefined(variant.label) })) }
      : undefined,
    nextRunAt: orUndefined(nextRunAt(campaign.scheduleCron, now)),
  };
}

/** The workspace a call acts in; one that is not even a UUID does not exist. */
function scope(workspaceId: string): string {
  if (!isUuid(workspaceId)) throw new NotFoundError('Workspace');
  return workspaceId.toLowerCase();
}

function pageInfo<T>({ total, page, pageSize }: Page<T>): { total: number; page: number; pageSize: number } {
  return { total, page, pageSize };
}

export function campaignHandlers(logger: Logger, db: Knex, feed: ChangeFeed): campaignV1.CampaignServiceServer {
  return {
    createCampaign: unary(logger, 'CreateCampaign', async (request) => {
      const campaign = newCampaign(writeFromProto(request.campaign), scope(request.workspaceId));
      return { campaign: toProto(await createCampaign(db, campaign), new Date()) };
    }),
    getCampaign: unary(logger, 'GetCampaign', async (request) => ({
      campaign: toProto(await getCampaign(db, scope(request.workspaceId), request.id), new Date()),
    })),
    listCampaigns: unary(logger, 'ListCampaigns', async (request) => {
      const filter = { isActive: request.isActive, nameQuery: request.nameQuery };
      const page = await listCampaigns(db, scope(request.workspaceId), filter, pageWindow(request.page));
      const now = new Date();
      return { campaigns: page.items.map((campaign) => toProto(campaign, now)), page: pageInfo(page) };
    }),
    updateCampaign: unary(logger, 'UpdateCampaign', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const patch = campaignPatch(writeFromMask(request.updateMask ?? [], request.campaign), workspaceId);
      return { campaign: toProto(await updateCampaign(db, workspaceId, request.id, patch), new Date()) };
    }),
    deleteCampaign: unary(logger, 'DeleteCampaign', async (request) => {
      await deleteCampaign(db, scope(request.workspaceId), request.id);
      return {};
    }),
    closeWorkspace: unary(logger, 'CloseWorkspace', async (request) => ({
      deletedCampaigns: await closeWorkspaceCampaigns(db, scope(request.workspaceId)),
    })),
    resolveCategories: unary(logger, 'ResolveCategories', async (request) => ({
      matches: await resolveCategories(db, request.providerCategoryIds),
    })),

    watchCategoryChanges: watchChanges(feed, (providerCategoryId) => ({ providerCategoryIds: [providerCategoryId] })),
  };
}
