/** The shapes the domain validates, the store persists and the handlers map to proto messages. */
export interface BrandGuideFields {
  name: string;
  description: string | null;
  /** The prompt text handed to content generation; long. */
  promptContent: string | null;
  isActive: boolean;
}

export interface NewBrandGuide extends BrandGuideFields {
  workspaceId: string;
}

/** Columns to write on update; absent ones are unchanged. */
export type BrandGuidePatch = Partial<BrandGuideFields>;

export interface BrandGuide extends NewBrandGuide {
  id: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}
