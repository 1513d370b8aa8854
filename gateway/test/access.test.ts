import { workspaceToAuthorize } from '../src/auth/access';
import { loadOpenApiDocument, operationMatcher } from '../src/openapi/document';

/** Which workspace the gateway asks ResolvePrincipal about, for the operations of the real document. */
const match = operationMatcher(loadOpenApiDocument());
const WS = '0b6b5b8e-8a55-4c0e-9d3c-000000000001';
const OTHER = '6f1c2a4e-9a1b-4c2d-8e3f-0a1b2c3d4e5f';

function workspaceFor(method: string, path: string, header?: string | string[]): string | undefined {
  const found = match(method, path);
  if (!found) throw new Error(`no operation for ${method} ${path}`);
  return workspaceToAuthorize(found, path, header);
}

describe('the workspace passed to ResolvePrincipal', () => {
  it('is the workspace_id header for header-scoped operations, in canonical form', () => {
    expect(workspaceFor('GET', '/brand-guides/', WS)).toBe(WS);
    expect(workspaceFor('POST', '/email-campaigns/', WS.toUpperCase())).toBe(WS);
    expect(workspaceFor('GET', `/brand-guides/${OTHER}`, `{${WS}}`)).toBe(WS);
    expect(workspaceFor('GET', '/brand-guides/', `urn:uuid:${WS}`)).toBe(WS);
    expect(workspaceFor('GET', '/brand-guides/', WS.replace(/-/g, ''))).toBe(WS);
  });

  it('is the {id} of the path for path-scoped operations, whatever the header says', () => {
    expect(workspaceFor('GET', `/workspaces/${WS}/members`, OTHER)).toBe(WS);
    expect(workspaceFor('PUT', `/workspaces/${WS.toUpperCase()}/members/${OTHER}`, OTHER)).toBe(WS);
    expect(workspaceFor('GET', `/workspaces/${WS}`)).toBe(WS);
  });

  it('is unset when the value is not a valid UUID (validation answers later) or is percent-encoded', () => {
    expect(workspaceFor('GET', '/brand-guides/')).toBeUndefined();
    expect(workspaceFor('GET', '/brand-guides/', 'not-a-uuid')).toBeUndefined();
    expect(workspaceFor('GET', '/brand-guides/', `${WS}x`)).toBeUndefined();
    expect(workspaceFor('GET', '/brand-guides/', [WS, WS])).toBeUndefined();
    expect(workspaceFor('GET', '/workspaces/not-a-uuid/members', WS)).toBeUndefined();
    expect(workspaceFor('GET', `/workspaces/%7B${WS}%7D/members`, WS)).toBeUndefined();
  });

  it('is unset for /auth/me, operations without a workspace scope, and the public webhook', () => {
    expect(workspaceFor('GET', '/auth/me', WS)).toBeUndefined();
    expect(workspaceFor('GET', '/workspaces/', WS)).toBeUndefined();
    expect(workspaceFor('GET', '/users/', WS)).toBeUndefined();
    expect(workspaceFor('POST', '/campaign-events/webhook', WS)).toBeUndefined();
  });
});
