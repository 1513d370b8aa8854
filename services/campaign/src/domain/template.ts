import { InvalidArgumentError, nulViolation, valueError, type Violation } from '@mail/common';

/** A message template: Handlebars in subject, html and text, filled from the recipient's row when sent. */
export interface TemplateFields {
  name: string;
  subject: string;
  html: string | null;
  text: string | null;
}

export interface NewTemplate extends TemplateFields {
  workspaceId: string;
}

/** Columns to write on update; absent ones are unchanged. */
export type TemplatePatch = Partial<TemplateFields>;

export interface Template extends NewTemplate {
  id: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A write as the caller sent it: an absent key was omitted, null was sent as null. */
export type TemplateWrite = { [K in keyof TemplateFields]?: TemplateFields[K] | null };

export const TEMPLATE_NAME_MAX_LENGTH = 200;
/** RFC 5322's limit of a header line. */
export const TEMPLATE_SUBJECT_MAX_LENGTH = 998;
/** 512 KB of html or text: a message is rendered from it for each recipient. */
export const TEMPLATE_BODY_MAX_LENGTH = 524_288;

/** Fields whose null on update means "unchanged" (they cannot be cleared). */
const NOT_NULLABLE: ReadonlySet<string> = new Set(['name', 'subject']);

/** The fields in the order of the write shape, as Pydantic reports them. */
const FIELD_ORDER = ['name', 'subject', 'html', 'text'];
/** The fields that are Handlebars sources. */
const TEMPLATE_TEXTS = ['subject', 'html', 'text'] as const;
export type TemplateText = (typeof TEMPLATE_TEXTS)[number];

const MAX_LENGTHS: Record<TemplateText | 'name', number> = {
  name: TEMPLATE_NAME_MAX_LENGTH,
  subject: TEMPLATE_SUBJECT_MAX_LENGTH,
  html: TEMPLATE_BODY_MAX_LENGTH,
  text: TEMPLATE_BODY_MAX_LENGTH,
};

/** What the compile check (templateProblem, run in a worker) found wrong with each template text of a write. */
export type TemplateProblems = Partial<Record<TemplateText, string>>;

/** Lengths count characters as Pydantic does, not UTF-16 code units (never fewer, so most texts need no count). */
function lengthViolation(field: TemplateText | 'name', input: string): Violation | undefined {
  if (field === 'name' && input.length < 1)
    return { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input, ctx: { min_length: 1 } };
  const max = MAX_LENGTHS[field];
  if (input.length > max && [...input].length > max) {
    return { loc: [field], type: 'string_too_long', msg: `String should have at most ${max} characters`, input, ctx: { max_length: max } };
  }
  return undefined;
}

/** The template texts of a write that the compile check must see: those given and within their length. */
export function textsToCheck(write: TemplateWrite): [TemplateText, string][] {
  return TEMPLATE_TEXTS.flatMap((field) => {
    const source = write[field];
    return source == null || lengthViolation(field, source) ? [] : [[field, source] as [TemplateText, string]];
  });
}

/** As the gateway orders them: the field's own rule first (its length, then the compile check), NUL (PostgreSQL's rule) last. */
function fieldViolations(write: TemplateWrite, problems: TemplateProblems): Violation[] {
  const name = write.name == null ? undefined : (lengthViolation('name', write.name) ?? nulViolation(['name'], write.name));
  const texts = TEMPLATE_TEXTS.map((field) => {
    const source = write[field];
    if (source == null) return undefined;
    const problem = problems[field];
    return lengthViolation(field, source) ?? (problem ? valueError([field], source, problem) : nulViolation([field], source));
  });
  return [name, ...texts].filter((v): v is Violation => v !== undefined);
}

const missing = (field: string): Violation => ({ loc: [field], type: 'missing', msg: 'Field required', input: null });

/** A template must have a body: html, text or both; an empty one is none. */
function bodyViolation(fields: Pick<TemplateFields, 'html' | 'text'>): Violation | undefined {
  return !fields.html && !fields.text ? valueError([], fields, 'at least one of html and text is required') : undefined;
}

function throwIfAny(violations: (Violation | undefined)[]): void {
  const found = violations.filter((v): v is Violation => v !== undefined);
  if (found.length > 0) throw new InvalidArgumentError(found);
}

/** The fields a write sets: omitted ones and nulls on fields that cannot be null are left out. */
function present(write: TemplateWrite): TemplatePatch {
  return Object.fromEntries(
    Object.entries(write).filter(([key, value]) => value !== undefined && !(value === null && NOT_NULLABLE.has(key))),
  );
}

export function newTemplate(workspaceId: string, write: TemplateWrite, problems: TemplateProblems): NewTemplate {
  const required = (['name', 'subject'] as const).filter((field) => write[field] == null).map(missing);
  const violations = [...required, ...fieldViolations(write, problems)].sort(
    (a, b) => FIELD_ORDER.indexOf(String(a.loc[0])) - FIELD_ORDER.indexOf(String(b.loc[0])),
  );
  throwIfAny(violations.length > 0 ? violations : [bodyViolation({ html: write.html ?? null, text: write.text ?? null })]);
  return { html: null, text: null, ...(present(write) as Pick<TemplateFields, 'name' | 'subject'>), workspaceId };
}

/** The PUT rules of docs/api.md: omitted is unchanged; null clears html or text, and leaves name and subject. */
export function templatePatch(write: TemplateWrite, problems: TemplateProblems): TemplatePatch {
  throwIfAny(fieldViolations(write, problems));
  return present(write);
}

/** A patch must not leave the template without a body; checked against the stored row it applies to. */
export function checkPatchedBody(stored: Pick<TemplateFields, 'html' | 'text'>, patch: TemplatePatch): void {
  throwIfAny([
    bodyViolation({ html: patch.html === undefined ? stored.html : patch.html, text: patch.text === undefined ? stored.text : patch.text }),
  ]);
}
