import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

/** The OpenAPI document: openapi.yaml plus one fragment per area, merged once at start-up. */
export type OpenApiDocument = {
  paths: Record<string, Record<string, OperationObject>>;
  components: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
};

/** The parts of an operation the gateway itself reads (access control). */
export interface OperationObject {
  operationId?: string;
  /** Who may call: `public`, `authenticated`, or the lowest role (viewer, editor, admin, platform_admin). */
  'x-required-role'?: AccessLevel;
  /** Where the workspace an operation acts in comes from: the workspace_id header (default) or the `id` path parameter. */
  'x-workspace-from'?: 'header' | 'path' | 'none';
  [key: string]: unknown;
}

export type Role = 'viewer' | 'editor' | 'admin' | 'platform_admin';
export type AccessLevel = 'public' | 'authenticated' | Role;

const OPENAPI_DIR = path.join(__dirname, '..', '..', 'openapi');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

export function loadOpenApiDocument(dir = OPENAPI_DIR): OpenApiDocument {
  const base = YAML.parse(fs.readFileSync(path.join(dir, 'openapi.yaml'), 'utf8')) as OpenApiDocument;
  const fragments = fs
    .readdirSync(dir)
    .filter((file) => file.endsWith('.yaml') && file !== 'openapi.yaml')
    .sort();
  for (const file of fragments) {
    const fragment = YAML.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Partial<OpenApiDocument>;
    for (const [route, item] of Object.entries(fragment.paths ?? {})) {
      if (base.paths[route]) throw new Error(`${file}: path ${route} is defined twice`);
      base.paths[route] = item;
    }
    for (const [section, entries] of Object.entries(fragment.components ?? {})) {
      base.components[section] ??= {};
      for (const [name, value] of Object.entries(entries)) {
        if (name in base.components[section]) throw new Error(`${file}: components.${section}.${name} is defined twice`);
        base.components[section][name] = value;
      }
    }
  }
  return base;
}

/** Every operation of the document with its method and path, e.g. for access-control checks. */
export function operationsOf(document: OpenApiDocument): { method: string; path: string; operation: OperationObject }[] {
  return Object.entries(document.paths).flatMap(([route, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, operation]) => ({ method, path: route, operation })),
  );
}

export interface MatchedOperation {
  path: string;
  operation: OperationObject;
}

/**
 * Finds the documented operation for a request, so access control can run
 * before body validation (a caller without a valid token learns nothing about
 * the body's shape). Literal paths win over templated ones.
 */
export function operationMatcher(document: OpenApiDocument): (method: string, urlPath: string) => MatchedOperation | undefined {
  const compiled = operationsOf(document)
    .map(({ method, path: route, operation }) => ({
      method,
      route,
      operation,
      pattern: new RegExp(`^${route.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+')}$`),
      literal: !route.includes('{'),
    }))
    .sort((a, b) => Number(b.literal) - Number(a.literal));
  return (method, urlPath) => {
    const found = compiled.find((entry) => entry.method === method.toLowerCase() && entry.pattern.test(urlPath));
    return found && { path: found.route, operation: found.operation };
  };
}
