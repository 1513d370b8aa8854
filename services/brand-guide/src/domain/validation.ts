import { InvalidArgumentError, nulViolation, type Violation } from '@mail/common';
import type { BrandGuideFields, BrandGuidePatch, NewBrandGuide } from './model';

export const NAME_MAX_LENGTH = 200;
export const PROMPT_CONTENT_MAX_LENGTH = 100_000;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** Fields whose null on update means "unchanged" (they cannot be cleared). */
const NOT_NULLABLE: ReadonlySet<string> = new Set(['name', 'isActive']);

/** A write as the caller sent it: an absent key was omitted, null was sent as null. */
export type BrandGuideWrite = { [K in keyof BrandGuideFields]?: BrandGuideFields[K] | null };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Lengths count characters as Pydantic does, not UTF-16 code units. */
function lengthViolation(loc: string, input: string, min: number, max: number): Violation | undefined {
  const length = [...input].length;
  if (length < min) {
    const msg = `String should have at least ${min} character${min === 1 ? '' : 's'}`;
    return { loc: [loc], type: 'string_too_short', msg, input, ctx: { min_length: min } };
  }
  if (length > max) {
    return { loc: [loc], type: 'string_too_long', msg: `String should have at most ${max} characters`, input, ctx: { max_length: max } };
  }
  return undefined;
}

/** In the order of the write shape, as Pydantic reports them. */
function fieldViolations(write: BrandGuideWrite): Violation[] {
  return [
    write.name == null ? undefined : (lengthViolation('name', write.name, 1, NAME_MAX_LENGTH) ?? nulViolation(['name'], write.name)),
    nulViolation(['description'], write.description),
    write.promptContent == null
      ? undefined
      : (lengthViolation('prompt_content', write.promptContent, 0, PROMPT_CONTENT_MAX_LENGTH) ??
        nulViolation(['prompt_content'], write.promptContent)),
  ].filter((v): v is Violation => v !== undefined);
}

function throwIfAny(violations: Violation[]): void {
  if (violations.length > 0) throw new InvalidArgumentError(violations);
}

/** The fields a write sets: omitted ones and nulls on fields that cannot be null are left out. */
function present(write: BrandGuideWrite): BrandGuidePatch {
  return Object.fromEntries(
    Object.entries(write).filter(([key, value]) => value !== undefined && !(value === null && NOT_NULLABLE.has(key))),
  );
}

export function newBrandGuide(workspaceId: string, write: BrandGuideWrite): NewBrandGuide {
  const missingName: Violation[] = write.name == null ? [{ loc: ['name'], type: 'missing', msg: 'Field required', input: null }] : [];
  throwIfAny([...missingName, ...fieldViolations(write)]);
  return { description: null, promptContent: null, isActive: true, ...(present(write) as Pick<BrandGuideFields, 'name'>), workspaceId };
}

/** The PUT rules of docs/api.md: omitted is unchanged; null clears description and prompt_content, and leaves name and is_active. */
export function brandGuidePatch(write: BrandGuideWrite): BrandGuidePatch {
  throwIfAny(fieldViolations(write));
  return present(write);
}

export interface PageWindow {
  page: number;
  pageSize: number;
  offset: number;
}

/** proto3 sends 0 for an unset page or page_size, which means the default. */
export function pageWindow(request: { page: number; pageSize: number } | undefined): PageWindow {
  const page = request?.page || 1;
  const pageSize = Math.min(request?.pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  return { page, pageSize, offset: (page - 1) * pageSize };
}
