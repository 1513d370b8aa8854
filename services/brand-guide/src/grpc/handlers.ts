import type { Knex } from 'knex';
import { InvalidArgumentError, NotFoundError, unary, valueError, type Logger } from '@mail/common';
import { brandguideV1 } from '@mail/proto';
import type { BrandGuide, Page } from '../domain/model';
import { brandGuidePatch, isUuid, newBrandGuide, pageWindow, type BrandGuideWrite } from '../domain/validation';
import {
  closeWorkspaceBrandGuides,
  createBrandGuide,
  deleteBrandGuide,
  getBrandGuide,
  listBrandGuides,
  updateBrandGuide,
} from '../store/brand-guides';

/** update_mask paths (write-shape names) and the write fields they name. */
const FIELD_OF_PATH: Record<string, keyof BrandGuideWrite> = {
  name: 'name',
  description: 'description',
  prompt_content: 'promptContent',
  is_active: 'isActive',
};

/** The values a BrandGuideInput carries; unset fields are absent. */
function writeFromProto(input: brandguideV1.BrandGuideInput | undefined): BrandGuideWrite {
  return Object.fromEntries(Object.entries(input ?? {}).filter(([, value]) => value !== undefined));
}

/** Only the named fields; a named field without a value is null (which clears it when it is nullable). */
function writeFromMask(paths: string[], input: brandguideV1.BrandGuideInput | undefined): BrandGuideWrite {
  const unknown = paths.filter((path) => !(path in FIELD_OF_PATH));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(unknown.map((path) => valueError(['update_mask'], path, `'${path}' is not a brand guide field`)));
  }
  const values = writeFromProto(input);
  return Object.fromEntries(paths.map((path) => [FIELD_OF_PATH[path], values[FIELD_OF_PATH[path]] ?? null]));
}

function toProto(guide: BrandGuide): brandguideV1.BrandGuide {
  return { ...guide, description: guide.description ?? undefined, promptContent: guide.promptContent ?? undefined };
}

/** The workspace a call acts in; one that is not even a UUID does not exist. */
function scope(workspaceId: string): string {
  if (!isUuid(workspaceId)) throw new NotFoundError('Workspace');
  return workspaceId.toLowerCase();
}

function pageInfo<T>({ total, page, pageSize }: Page<T>): { total: number; page: number; pageSize: number } {
  return { total, page, pageSize };
}

export function brandGuideHandlers(logger: Logger, db: Knex): brandguideV1.BrandGuideServiceServer {
  return {
    createBrandGuide: unary(logger, 'CreateBrandGuide', async (request) => ({
      brandGuide: toProto(await createBrandGuide(db, newBrandGuide(scope(request.workspaceId), writeFromProto(request.brandGuide)))),
    })),
    getBrandGuide: unary(logger, 'GetBrandGuide', async (request) => ({
      brandGuide: toProto(await getBrandGuide(db, scope(request.workspaceId), request.id)),
    })),
    listBrandGuides: unary(logger, 'ListBrandGuides', async (request) => {
      const filter = { isActive: request.isActive, nameQuery: request.nameQuery };
      const page = await listBrandGuides(db, scope(request.workspaceId), filter, pageWindow(request.page));
      return { brandGuides: page.items.map(toProto), page: pageInfo(page) };
    }),
    updateBrandGuide: unary(logger, 'UpdateBrandGuide', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const patch = brandGuidePatch(writeFromMask(request.updateMask ?? [], request.brandGuide));
      return { brandGuide: toProto(await updateBrandGuide(db, workspaceId, request.id, patch)) };
    }),
    deleteBrandGuide: unary(logger, 'DeleteBrandGuide', async (request) => {
      await deleteBrandGuide(db, scope(request.workspaceId), request.id);
      return {};
    }),
    closeWorkspace: unary(logger, 'CloseWorkspace', async (request) => ({
      deletedBrandGuides: await closeWorkspaceBrandGuides(db, scope(request.workspaceId)),
    })),
  };
}
