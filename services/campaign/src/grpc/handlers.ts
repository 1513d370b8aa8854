import type { Knex } from 'knex';
import {
  CAMPAIGN_FIELD_LIST,
  InvalidArgumentError,
  NotFoundError,
  campaignFieldsFromProto,
  campaignFieldsToProto,
  unary,
  valueError,
  watchChanges,
  type CampaignFieldName,
  type ChangeFeed,
  type Logger,
} from '@mail/common';
import { campaignV1 } from '@mail/proto';
import type { Campaign, Page } from '../domain/model';
import { nextRunAt } from '../domain/schedule';
import { campaignPatch, isUuid, newCampaign, pageWindow, type CampaignWrite, type VariantWrite } from '../domain/validation';
import {
  closeWorkspaceCampaigns,
  createCampaign,
  deleteCampaign,
  getCampaign,
  listCampaigns,
  releaseCategory,
  listScheduledCampaigns,
  resolveCategories,
  updateCampaign,
} from '../store/campaigns';

/** update_mask paths (write-shape names) and the write fields they name. */
const FIELD_OF_PATH: Record<string, keyof CampaignWrite> = {
  ...Object.fromEntries(CAMPAIGN_FIELD_LIST.map(([name, { json }]) => [json, name])),
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

/** The values a CampaignInput carries; unset fields are absent. */
function writeFromProto(input: campaignV1.CampaignInput | undefined): CampaignWrite {
  if (!input) return {};
  const write: CampaignWrite = { ...campaignFieldsFromProto(input), variants: input.variants?.variants.map(variantFromProto) };
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
    // A stored campaign has every field that cannot be null, so Campaign's plain fields are all set.
    ...(campaignFieldsToProto(campaign) as Pick<campaignV1.Campaign, CampaignFieldName>),
    id: campaign.id,
    variants: campaign.variants
      ? { variants: campaign.variants.map((variant) => ({ ...variant, label: orUndefined(variant.label) })) }
      : undefined,
    createdAt: campaign.createdAt,
    updatedAt: campaign.updatedAt,
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
      const filter = { isActive: request.isActive, nameQuery: request.nameQuery, ids: request.ids };
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
    listScheduledCampaigns: unary(logger, 'ListScheduledCampaigns', async () => ({ campaigns: await listScheduledCampaigns(db) })),

    watchCategoryChanges: watchChanges(feed, (providerCategoryId) => ({ providerCategoryIds: [providerCategoryId] })),
    releaseProviderCategory: unary(logger, 'ReleaseProviderCategory', async (request) => {
      if (!isUuid(request.releasedByUserId) || request.releasedByEmail === '') {
        throw new InvalidArgumentError([valueError(['released_by_user_id'], request.releasedByUserId, 'the releasing user is required')]);
      }
      const release = await releaseCategory(db, request.providerCategoryId, {
        userId: request.releasedByUserId.toLowerCase(),
        email: request.releasedByEmail,
      });
      // The audit trail in the logs too, beside category_releases.
      logger.info(
        {
          providerCategoryId: release.providerCategoryId,
          workspaceId: release.workspaceId,
          releasedByUserId: release.releasedByUserId,
          releasedByEmail: release.releasedByEmail,
          releasedAt: release.releasedAt.toISOString(),
        },
        'provider category released',
      );
      return { release };
    }),
  };
}
