import { InvalidArgumentError, nulViolation, templateViolation, valueError, type Violation } from '@mail/common';

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

/** Fields whose null on update means "unchanged" (they cannot be cleared). */
const NOT_NULLABLE: ReadonlySet<string> = new Set(['name', 'subject']);

/** The fields in the order of the write shape, as Pydantic reports them. */
const FIELD_ORDER = ['name', 'subject', 'html', 'text'];
/** The fields that are Handlebars sources. */
const TEMPLATE_TEXTS = ['subject', 'html', 'text'] as const;

/** Lengths count characters as Pydantic does, not UTF-16 code units. */
function nameLengthViolation(input: string): Violation | undefined {
  const length = [...input].length;
  if (length < 1)
    return { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input, ctx: { min_length: 1 } };
  if (length > TEMPLATE_NAME_MAX_LENGTH) {
    const msg = `String should have at most ${TEMPLATE_NAME_MAX_LENGTH} characters`;
    return { loc: ['name'], type: 'string_too_long', msg, input, ctx: { max_length: TEMPLATE_NAME_MAX_LENGTH } };
  }
  return undefined;
}

/** As the gateway orders them: the field's own rule first, NUL (PostgreSQL's rule) last. */
function fieldViolations(write: TemplateWrite): Violation[] {
  const name = write.name == null ? undefined : (nameLengthViolation(write.name) ?? nulViolation(['name'], write.name));
  const texts = TEMPLATE_TEXTS.map((field) => {
    const source = write[field];
    return source == null ? undefined : (templateViolation([field], source) ?? nulViolation([field], source));
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

export function newTemplate(workspaceId: string, write: TemplateWrite): NewTemplate {
  const required = (['name', 'subject'] as const).filter((field) => write[field] == null).map(missing);
  const violations = [...required, ...fieldViolations(write)].sort(
    (a, b) => FIELD_ORDER.indexOf(String(a.loc[0])) - FIELD_ORDER.indexOf(String(b.loc[0])),
  );
  throwIfAny(violations.length > 0 ? violations : [bodyViolation({ html: write.html ?? null, text: write.text ?? null })]);
  return { html: null, text: null, ...(present(write) as Pick<TemplateFields, 'name' | 'subject'>), workspaceId };
}

/** The PUT rules of docs/api.md: omitted is unchanged; null clears html or text, and leaves name and subject. */
export function templatePatch(write: TemplateWrite): TemplatePatch {
  throwIfAny(fieldViolations(write));
  return present(write);
}

/** A patch must not leave the template without a body; checked against the stored row it applies to. */
export function checkPatchedBody(stored: Pick<TemplateFields, 'html' | 'text'>, patch: TemplatePatch): void {
  throwIfAny([
    bodyViolation({ html: patch.html === undefined ? stored.html : patch.html, text: patch.text === undefined ? stored.text : patch.text }),
  ]);
}
