import type { OpenApiDocument } from '../openapi/document';

/**
 * The OpenAPI schemas of one operation, resolved as Pydantic's model would
 * see them, and what each request was validated against: shared by the lax
 * conversions before validation (lax-requests.ts) and the translation of the
 * validator's errors after it (violations.ts).
 */

export interface Schema {
  $ref?: string;
  type?: string;
  format?: string;
  enum?: unknown[];
  nullable?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean | number;
  exclusiveMaximum?: boolean | number;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
}

export type ParameterLocation = 'path' | 'query' | 'header' | 'cookie';

export interface Parameter {
  name: string;
  in: ParameterLocation;
  schema?: Schema;
}

export interface OperationSchemas {
  parameters: Parameter[];
  body?: Schema;
  bodyRequired: boolean;
}

/**
 * What one request was validated against, and its values as the caller sent
 * them (Pydantic reports those): made by lax-requests.ts, handed by
 * validation.ts to violations.ts.
 */
export interface RequestContext extends OperationSchemas {
  document: OpenApiDocument;
  rawParameters: Record<ParameterLocation, Record<string, unknown>>;
  rawBody: unknown;
}

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function lookup(document: OpenApiDocument, ref: string): unknown {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), document);
}

/** Resolved schemas per document: the documents never change, and requests resolve the same schemas again and again. */
const resolvedSchemas = new WeakMap<OpenApiDocument, WeakMap<Schema, Schema>>();

/** Follows `$ref`s and flattens `allOf`, so callers see one plain schema. */
export function resolve(document: OpenApiDocument, schema: Schema | undefined): Schema {
  if (!schema) return {};
  let resolved = resolvedSchemas.get(document);
  if (!resolved) resolvedSchemas.set(document, (resolved = new WeakMap()));
  let plain = resolved.get(schema);
  if (!plain) resolved.set(schema, (plain = resolveUncached(document, schema)));
  return plain;
}

function resolveUncached(document: OpenApiDocument, schema: Schema): Schema {
  let current: Schema = schema;
  while (current.$ref) current = (lookup(document, current.$ref) as Schema | undefined) ?? {};
  if (!current.allOf) return current;
  return current.allOf
    .map((part) => resolve(document, part))
    .reduce<Schema>(
      (merged, part) => ({
        ...merged,
        ...part,
        properties: { ...merged.properties, ...part.properties },
        required: [...(merged.required ?? []), ...(part.required ?? [])],
      }),
      { ...current, allOf: undefined },
    );
}

export function childSchema(document: OpenApiDocument, schema: Schema, key: string): Schema | undefined {
  const resolved = resolve(document, schema);
  const direct =
    resolved.properties?.[key] ??
    resolved.items ??
    (typeof resolved.additionalProperties === 'object' ? resolved.additionalProperties : undefined);
  if (direct) return direct;
  for (const branch of [...(resolved.oneOf ?? []), ...(resolved.anyOf ?? [])]) {
    const found = childSchema(document, branch, key);
    if (found) return found;
  }
  return undefined;
}

export function operationSchemas(document: OpenApiDocument, route: string, method: string): OperationSchemas {
  const item = document.paths[route] as Record<string, unknown>;
  const operation = item[method.toLowerCase()] as { parameters?: unknown[]; requestBody?: unknown };
  const declared = [...((item.parameters as unknown[] | undefined) ?? []), ...(operation.parameters ?? [])].map((entry) => {
    const parameter = isRecord(entry) && typeof entry.$ref === 'string' ? lookup(document, entry.$ref) : entry;
    return parameter as Parameter;
  });
  // Operation-level parameters override path-level ones of the same name and location.
  const parameters = declared.filter(
    (parameter, index) => !declared.slice(index + 1).some((later) => later.name === parameter.name && later.in === parameter.in),
  );
  let requestBody = operation.requestBody as
    { $ref?: string; required?: boolean; content?: Record<string, { schema?: Schema }> } | undefined;
  if (requestBody?.$ref) requestBody = lookup(document, requestBody.$ref) as typeof requestBody;
  return { parameters, body: requestBody?.content?.['application/json']?.schema, bodyRequired: requestBody?.required === true };
}
