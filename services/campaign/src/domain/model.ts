import type { CampaignValues } from '@mail/common';

/** The shapes the domain validates, the store persists and the handlers map to proto messages. */

/** The campaign's own values (CAMPAIGN_FIELDS of @mail/common) but the workspace, which scopes every call. */
export type CampaignFields = Omit<CampaignValues, 'workspaceId'>;

export interface Variant {
  id: string;
  templateId: string;
  weight: number;
  label: string | null;
  isActive: boolean;
}

/**
 * A variant as a write asks for it. Without an id it is new and has every
 * field; with one it rewrites that variant, and an absent field keeps its value.
 */
export interface VariantDraft {
  id?: string;
  templateId?: string;
  weight?: number;
  label?: string | null;
  isActive?: boolean;
}

export interface NewCampaign extends CampaignFields {
  workspaceId: string;
  /** null and [] differ: null means "no variant list". */
  variants: VariantDraft[] | null;
}

/** Columns to write on update; absent ones are unchanged. */
export type CampaignPatch = Partial<CampaignFields> & { variants?: VariantDraft[] | null };

export interface Campaign extends CampaignFields {
  id: string;
  workspaceId: string;
  variants: Variant[] | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

/** A platform admin's release of a category, so that another workspace may take it: the audit record. */
export interface CategoryRelease {
  providerCategoryId: string;
  /** The workspace it was bound to (perhaps deleted). */
  workspaceId: string;
  releasedByUserId: string;
  releasedByEmail: string;
  releasedAt: Date;
}

export interface CategoryMatch {
  providerCategoryId: string;
  campaignId: string;
  workspaceId: string;
  /** Every variant of the campaign, lower-case. */
  variantIds: string[];
}

export interface ScheduledCampaign {
  campaignId: string;
  workspaceId: string;
  scheduleCron: string;
  scheduleSetAt: Date;
}
