import {
  AB_TEST_FRACTION_RANGE,
  AB_TEST_METRICS,
  AB_TEST_WAIT_MINUTES_RANGE,
  CAMPAIGN_FIELD_LIST,
  CAMPAIGN_WRITE_FIELDS,
  InvalidArgumentError,
  MSSQL_QUERY_MAX_LENGTH,
  cronViolation,
  headerSafeViolation,
  invalidEmail,
  nulViolations,
  parseEmail,
  providerCategoryViolation,
  selectStatementViolation,
  valueError,
  type AbTestSettings,
  type CampaignFieldName,
  type CampaignValues,
  type Violation,
} from '@mail/common';
import type { CampaignFields, CampaignPatch, NewCampaign, VariantDraft } from './model';

export const NAME_MAX_LENGTH = 200;
/** SendGrid's limit for a category name. */
export const PROVIDER_CATEGORY_ID_MAX_LENGTH = 255;
export const SEND_PRIORITY_RANGE = { min: 0, max: 1000 };
export const WEIGHT_RANGE = { min: 0, max: 10_000 };
export const MAX_VARIANTS = 20;
/** A variant without a weight gets an equal share: weights are relative among the active variants. */
export const DEFAULT_WEIGHT = 1;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** What a create stores for the fields it omits. */
const DEFAULTS: Partial<CampaignFields> = Object.fromEntries(
  CAMPAIGN_FIELD_LIST.flatMap(([name, field]) => ('default' in field ? [[name, field.default]] : [])),
);

/** The fields without a default: a create must send them. */
const REQUIRED = CAMPAIGN_FIELD_LIST.filter(([, field]) => !('default' in field));

/** Fields whose null on update means "unchanged" (they cannot be cleared). */
const NOT_NULLABLE: ReadonlySet<string> = new Set(CAMPAIGN_FIELD_LIST.flatMap(([name, field]) => (field.nullable ? [] : [name])));

/** A variant item as the caller sent it: an absent key was omitted, null was sent as null. */
export interface VariantWrite {
  id?: string;
  templateId?: string | null;
  weight?: number | null;
  label?: string | null;
  isActive?: boolean | null;
}

/** A write as the caller sent it: an absent key was omitted, null was sent as null. */
export type CampaignWrite = { [K in CampaignFieldName]?: CampaignValues[K] | null } & {
  variants?: VariantWrite[] | null;
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Lengths count characters as Pydantic does, not UTF-16 code units. */
function lengthViolation(loc: (string | number)[], input: string, min: number, max?: number): Violation | undefined {
  const length = [...input].length;
  if (length < min) {
    const msg = `String should have at least ${min} character${min === 1 ? '' : 's'}`;
    return { loc, type: 'string_too_short', msg, input, ctx: { min_length: min } };
  }
  if (max !== undefined && length > max) {
    const msg = `String should have at most ${max} character${max === 1 ? '' : 's'}`;
    return { loc, type: 'string_too_long', msg, input, ctx: { max_length: max } };
  }
  return undefined;
}

function rangeViolation(loc: (string | number)[], input: number, { min, max }: { min: number; max: number }): Violation | undefined {
  if (input < min) {
    return { loc, type: 'greater_than_equal', msg: `Input should be greater than or equal to ${min}`, input, ctx: { ge: min } };
  }
  if (input > max) {
    return { loc, type: 'less_than_equal', msg: `Input should be less than or equal to ${max}`, input, ctx: { le: max } };
  }
  return undefined;
}

function emailViolation(loc: string[], input: string): Violation | undefined {
  const parsed = parseEmail(input);
  return 'reason' in parsed ? invalidEmail(loc, input, parsed.reason) : undefined;
}

/** The item as the API spells it, for an entry's input. */
function variantItem({ id, templateId, weight, label, isActive }: VariantWrite): Record<string, unknown> {
  const item = { id, template_id: templateId, weight, label, is_active: isActive };
  return Object.fromEntries(Object.entries(item).filter(([, value]) => value !== undefined));
}

/** A new variant needs a template_id; one that rewrites an existing variant (update, with an id) keeps its own. */
function templateIdViolation(variant: VariantWrite, i: number, isNew: boolean): Violation | undefined {
  const loc = ['variants', i, 'template_id'];
  if (typeof variant.templateId === 'string') return lengthViolation(loc, variant.templateId, 1);
  if (!isNew) return undefined;
  return variant.templateId === undefined
    ? { loc, type: 'missing', msg: 'Field required', input: variantItem(variant) }
    : { loc, type: 'string_type', msg: 'Input should be a valid string', input: null };
}

/** Pydantic stops at the item past the limit and reports the list alone, none of its items. */
function variantViolations(variants: VariantWrite[], creating: boolean): (Violation | undefined)[] {
  if (variants.length > MAX_VARIANTS) {
    const msg = `List should have at most ${MAX_VARIANTS} items after validation, not ${variants.length}`;
    const ctx = { field_type: 'List', max_length: MAX_VARIANTS, actual_length: variants.length };
    return [{ loc: ['variants'], type: 'too_long', msg, input: variants.map(variantItem), ctx }];
  }
  return variants.flatMap((variant, i) => [
    templateIdViolation(variant, i, creating || variant.id === undefined),
    variant.weight == null ? undefined : rangeViolation(['variants', i, 'weight'], variant.weight, WEIGHT_RANGE),
    variant.label == null ? undefined : headerSafeViolation(['variants', i, 'label'], variant.label),
  ]);
}

function abTestViolations(abTest: AbTestSettings): (Violation | undefined)[] {
  const metric = abTest.metric as string;
  return [
    rangeViolation(['ab_test', 'test_fraction'], abTest.test_fraction, AB_TEST_FRACTION_RANGE),
    rangeViolation(['ab_test', 'wait_minutes'], abTest.wait_minutes, AB_TEST_WAIT_MINUTES_RANGE),
    (AB_TEST_METRICS as readonly string[]).includes(metric)
      ? undefined
      : {
          loc: ['ab_test', 'metric'],
          type: 'enum',
          msg: "Input should be 'open_rate' or 'click_rate'",
          input: metric,
          ctx: { expected: "'open_rate' or 'click_rate'" },
        },
  ];
}

/**
 * An A/B test splits a run's recipients across variants: a campaign with one
 * needs delivery_mode variants, on create and as an update leaves it.
 */
export function abTestModeViolation(campaign: Pick<CampaignValues, 'abTest' | 'deliveryMode'>): Violation | undefined {
  return campaign.abTest != null && campaign.deliveryMode !== 'variants'
    ? valueError(['ab_test'], campaign.abTest, 'ab_test needs delivery_mode variants')
    : undefined;
}

/** Whether `loc` is `outer` or lies inside it. */
const within = (loc: (string | number)[], outer: (string | number)[]): boolean => outer.every((part, i) => loc[i] === part);

const snakeCase = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Every rule beyond types, on the values present; all failures at once. */
function fieldViolations(write: CampaignWrite, creating: boolean): Violation[] {
  const violations = [
    write.name == null
      ? undefined
      : (lengthViolation(['name'], write.name, 1, NAME_MAX_LENGTH) ?? headerSafeViolation(['name'], write.name)),
    write.sendPriority == null ? undefined : rangeViolation(['send_priority'], write.sendPriority, SEND_PRIORITY_RANGE),
    write.scheduleCron == null ? undefined : cronViolation(['schedule_cron'], write.scheduleCron),
    write.mssqlQuery == null
      ? undefined
      : (lengthViolation(['mssql_query'], write.mssqlQuery, 0, MSSQL_QUERY_MAX_LENGTH) ??
        selectStatementViolation(['mssql_query'], write.mssqlQuery)),
    write.providerCategoryId == null
      ? undefined
      : (lengthViolation(['provider_category_id'], write.providerCategoryId, 0, PROVIDER_CATEGORY_ID_MAX_LENGTH) ??
        providerCategoryViolation(['provider_category_id'], write.providerCategoryId)),
    write.fromEmail == null ? undefined : emailViolation(['from_email'], write.fromEmail),
    write.fromName == null ? undefined : headerSafeViolation(['from_name'], write.fromName),
    write.replyTo == null ? undefined : emailViolation(['reply_to'], write.replyTo),
    ...(write.abTest == null ? [] : abTestViolations(write.abTest)),
    ...(write.variants == null ? [] : variantViolations(write.variants, creating)),
  ].filter((v): v is Violation => v !== undefined);
  // One entry per field, as Pydantic: the NUL rule, a field validator, runs only where the constraints passed.
  const nul = nulViolations(write, [], snakeCase).filter(({ loc }) => !violations.some((v) => within(loc, v.loc)));
  return [...violations, ...nul];
}

/** A new variant with defaults for what is omitted (validated: it has a template_id). */
function newVariant(variant: VariantWrite): VariantDraft {
  return {
    templateId: variant.templateId as string,
    weight: variant.weight ?? DEFAULT_WEIGHT,
    label: variant.label ?? null,
    isActive: variant.isActive ?? true,
  };
}

/** An item of an update: an id rewrites that variant with the fields given (null on a field that cannot be null leaves it). */
function variantChange(variant: VariantWrite): VariantDraft {
  if (variant.id === undefined) return newVariant(variant);
  const change: VariantDraft = { id: variant.id };
  if (variant.templateId != null) change.templateId = variant.templateId;
  if (variant.weight != null) change.weight = variant.weight;
  if (variant.label !== undefined) change.label = variant.label;
  if (variant.isActive != null) change.isActive = variant.isActive;
  return change;
}

/** The fields a write sets: omitted ones and nulls on fields that cannot be null are left out. */
function present(write: CampaignWrite): Partial<CampaignFields> {
  const { workspaceId: _workspaceId, variants: _variants, ...fields } = write;
  return Object.fromEntries(
    Object.entries(fields).filter(([key, value]) => value !== undefined && !(value === null && NOT_NULLABLE.has(key))),
  );
}

/** Throws them all at once, in the order of the write shape as Pydantic reports them. */
function throwIfAny(violations: Violation[]): void {
  const order = (v: Violation): number => CAMPAIGN_WRITE_FIELDS.indexOf(String(v.loc[0]));
  if (violations.length > 0) throw new InvalidArgumentError([...violations].sort((a, b) => order(a) - order(b)));
}

/** A workspace_id in the body must be the workspace the request acts in. */
function workspaceViolations(write: CampaignWrite, workspaceId: string): Violation[] {
  return write.workspaceId != null && write.workspaceId.toLowerCase() !== workspaceId.toLowerCase()
    ? [valueError(['workspace_id'], write.workspaceId, 'workspace_id must match the workspace_id header')]
    : [];
}

/**
 * A create in `workspaceId`: defaults for what is omitted. Variant ids are not
 * part of the create shape and are ignored.
 */
export function newCampaign(write: CampaignWrite, workspaceId: string): NewCampaign {
  const violations: Violation[] = REQUIRED.flatMap(([name, { json }]) =>
    write[name] == null ? [{ loc: [json], type: 'missing', msg: 'Field required', input: null }] : [],
  );
  violations.push(...workspaceViolations(write, workspaceId));
  violations.push(...fieldViolations(write, true));
  const mode = abTestModeViolation({ abTest: write.abTest ?? null, deliveryMode: write.deliveryMode ?? 'single_template' });
  if (mode && !violations.some((violation) => violation.loc[0] === 'ab_test')) violations.push(mode);
  throwIfAny(violations);
  return {
    // Complete: every field without a default was present.
    ...({ ...DEFAULTS, ...present(write) } as CampaignFields),
    workspaceId: workspaceId.toLowerCase(),
    variants: write.variants?.map(newVariant) ?? null,
  };
}

/**
 * An update, with the PUT rules of docs/api.md: omitted is unchanged, null clears
 * a nullable field and leaves the others unchanged, and `variants` is the
 * whole desired list, whose items with an id follow the same rules for that
 * variant's fields. A workspace_id in the body must be the one acted in.
 */
export function campaignPatch(write: CampaignWrite, workspaceId: string): CampaignPatch {
  const violations: Violation[] = workspaceViolations(write, workspaceId);
  violations.push(...fieldViolations(write, false));
  throwIfAny(violations);
  const patch: CampaignPatch = present(write);
  if (write.variants !== undefined) patch.variants = write.variants?.map(variantChange) ?? null;
  return patch;
}

/** Variant ids of an update must name this campaign's variants (`existing`), each at most once. */
export function checkVariantIds(variants: VariantDraft[], existing: ReadonlySet<string>): void {
  const seen = new Set<string>();
  const violations: Violation[] = [];
  variants.forEach(({ id }, i) => {
    if (id === undefined) return;
    const key = id.toLowerCase();
    if (!existing.has(key)) violations.push(valueError(['variants', i, 'id'], id, `variant ${id} does not belong to this campaign`));
    else if (seen.has(key)) violations.push(valueError(['variants', i, 'id'], id, `variant ${id} is listed more than once`));
    seen.add(key);
  });
  throwIfAny(violations);
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
