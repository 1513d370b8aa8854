/** The shapes the domain validates, the store persists and the handlers map to proto messages. */
export const RECIPIENT_SOURCES = ['mssql_query', 'csv_account_ids'] as const;
export type RecipientSource = (typeof RECIPIENT_SOURCES)[number];

export const DELIVERY_MODES = ['single_template', 'variants'] as const;
export type DeliveryMode = (typeof DELIVERY_MODES)[number];

/** The campaign's own columns: everything of the write shape except workspace_id and variants. */
export interface CampaignFields {
  name: string;
  description: string | null;
  isActive: boolean;
  sendPriority: number;
  scheduleCron: string | null;
  recipientSource: RecipientSource;
  mssqlQuery: string | null;
  csvAccountIds: string[] | null;
  providerCategoryId: string | null;
  fromEmail: string | null;
  fromName: string | null;
  replyTo: string | null;
  deliveryMode: DeliveryMode;
  templateId: string | null;
}

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

export interface CategoryMatch {
  providerCategoryId: string;
  campaignId: string;
  workspaceId: string;
  /** Every variant of the campaign, lower-case. */
  variantIds: string[];
}
