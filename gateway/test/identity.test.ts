import crypto from 'node:crypto';
import { eventually } from '@mail/local';
import { freePort, runGatewayToExit, signingKey, startGateway, startSignedInGateway, type SignedInGateway } from './identity-harness';
import type { Json } from './support/json';

/**
 * Identity and tenancy end to end: the built gateway (JWT auth) in front of
 * the real identity service and a private Postgres database.
 */

// Each test starts gateways of its own; on a busy host one start can take much of jest's default 60 s.
jest.setTimeout(240_000);

const key = signingKey('rsa-1', 'RS256');
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Any UUID satisfies the workspace_id header where the workspace comes from the path or does not matter. */
const ANY_WORKSPACE = crypto.randomUUID();

let auth: SignedInGateway;

beforeAll(async () => {
  auth = await startSignedInGateway('gateway_identity', [key], {
    bootstrapPlatformAdmins: ['root@example.com'],
    withWorkspaceContent: true,
  });
});

afterAll(async () => {
  await auth?.stop();
});

const tokens = {
  root: () => auth.idp.token(key, { sub: 'root-subject', email: 'root@example.com', name: 'Root Admin' }),
  ana: () => auth.idp.token(key, { sub: 'ana-subject', email: 'ana@example.com', name: 'Ana Lopez' }),
  bob: () => auth.idp.token(key, { sub: 'bob-subject', email: 'bob@example.com' }),
};
type Caller = keyof typeof tokens;

interface Answer {
  status: number;
  /** Parsed JSON, checked with toEqual/toMatchObject. */
  body: Json;
}

async function api(
  caller: Caller,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { workspace_id: ANY_WORKSPACE },
  baseUrl = auth.gateway.url,
): Promise<Answer> {
  const response = await fetch(baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${tokens[caller]()}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

const workspaces: Record<'marketing' | 'sales', string> = { marketing: '', sales: '' };
const users: Record<'root' | 'ana' | 'bob', string> = { root: '', ana: '', bob: '' };

describe('identity and tenancy (sequential scenario)', () => {
  it('GET /auth/me provisions the caller; a bootstrap e-mail makes a platform admin', async () => {
    const answer = await api('root', 'GET', '/auth/me', undefined, {});
    expect(answer).toEqual({
      status: 200,
      body: { id: expect.stringMatching(UUID), email: 'root@example.com', display_name: 'Root Admin', memberships: [] },
    });
    users.root = answer.body.id;
    expect((await api('root', 'GET', '/users/')).status).toBe(200);
  });

  it('a platform admin creates, lists and reads workspaces', async () => {
    const created = await api('root', 'POST', '/workspaces/', { name: 'Marketing' });
    expect(created).toEqual({
      status: 201,
      body: {
        id: expect.stringMatching(UUID),
        name: 'Marketing',
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
      },
    });
    workspaces.marketing = created.body.id;
    workspaces.sales = (await api('root', 'POST', '/workspaces/', { name: 'Sales' })).body.id;

    const firstPage = await api('root', 'GET', '/workspaces/?page=1&page_size=1');
    expect(firstPage).toEqual({ status: 200, body: { items: [created.body], total: 2, page: 1, page_size: 1 } });
    const search = await api('root', 'GET', '/workspaces/?q=SAL');
    expect(search.body).toMatchObject({ items: [{ id: workspaces.sales, name: 'Sales' }], total: 1, page: 1, page_size: 50 });
    expect(await api('root', 'GET', `/workspaces/${workspaces.marketing}`)).toEqual({ status: 200, body: created.body });
  });

  it('PUT /workspaces/{id}: omitted or null name is unchanged', async () => {
    expect((await api('root', 'PUT', `/workspaces/${workspaces.marketing}`, { name: null })).body.name).toBe('Marketing');
    expect((await api('root', 'PUT', `/workspaces/${workspaces.marketing}`, {})).body.name).toBe('Marketing');
    const renamed = await api('root', 'PUT', `/workspaces/${workspaces.marketing}`, { name: 'Marketing EU' });
    expect(renamed).toMatchObject({ status: 200, body: { id: workspaces.marketing, name: 'Marketing EU' } });
  });

  it('an admin adds members by e-mail, creating unknown users', async () => {
    const added = await api('root', 'POST', `/workspaces/${workspaces.marketing}/members`, { email: 'Ana@Example.com', role: 'editor' });
    expect(added).toEqual({
      status: 201,
      body: {
        user_id: expect.stringMatching(UUID),
        email: 'ana@example.com',
        display_name: 'ana',
        role: 'editor',
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
      },
    });
    users.ana = added.body.user_id;
    const again = await api('root', 'POST', `/workspaces/${workspaces.marketing}/members`, { email: 'ana@example.com', role: 'viewer' });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: expect.any(String) });
  });

  it('validates member input like FastAPI', async () => {
    const answer = await api('root', 'POST', `/workspaces/${workspaces.marketing}/members`, { email: 'ana', role: 'owner' });
    expect(answer).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'value_error',
            loc: ['body', 'email'],
            msg: 'value is not a valid email address: An email address must have an @-sign.',
            input: 'ana',
            ctx: { reason: 'An email address must have an @-sign.' },
          },
          {
            type: 'enum',
            loc: ['body', 'role'],
            msg: "Input should be 'viewer', 'editor' or 'admin'",
            input: 'owner',
            ctx: { expected: "'viewer', 'editor' or 'admin'" },
          },
        ],
      },
    });
  });

  it("the member's first sign-in links the account and shows the membership", async () => {
    const answer = await api('ana', 'GET', '/auth/me', undefined, {});
    expect(answer).toEqual({
      status: 200,
      body: {
        id: users.ana,
        email: 'ana@example.com',
        display_name: 'Ana Lopez',
        memberships: [{ workspace_id: workspaces.marketing, workspace_name: 'Marketing EU', role: 'editor' }],
      },
    });
  });

  it('roles decide: members read their workspace, nothing else', async () => {
    expect((await api('ana', 'GET', `/workspaces/${workspaces.marketing}`)).status).toBe(200);
    // Any spelling Pydantic accepts for a UUID reaches the same workspace (and the same access check).
    expect((await api('ana', 'GET', `/workspaces/${workspaces.marketing.toUpperCase()}`)).body.id).toBe(workspaces.marketing);
    expect((await api('ana', 'GET', `/workspaces/%7B${workspaces.marketing}%7D`)).body.id).toBe(workspaces.marketing);
    expect((await api('ana', 'GET', `/workspaces/${workspaces.marketing.replace(/-/g, '')}`)).status).toBe(200);
    for (const [method, path] of [
      ['GET', `/workspaces/${workspaces.sales}`],
      ['GET', '/workspaces/'],
      ['POST', '/workspaces/'],
      ['PUT', `/workspaces/${workspaces.marketing}`],
      ['DELETE', `/workspaces/${workspaces.marketing}`],
      ['GET', `/workspaces/${workspaces.marketing}/members`],
      ['GET', '/users/'],
      ['GET', `/users/${users.ana}`],
    ]) {
      const answer = await api('ana', method, path, method === 'GET' || method === 'DELETE' ? undefined : { name: 'x' });
      expect([method, path, answer.status, typeof answer.body.detail]).toEqual([method, path, 403, 'string']);
    }
  });

  it('an admin changes roles; omitted or null role leaves the member as is', async () => {
    const path = `/workspaces/${workspaces.marketing}/members/${users.ana}`;
    expect(await api('root', 'PUT', path, { role: 'admin' })).toMatchObject({ status: 200, body: { user_id: users.ana, role: 'admin' } });
    expect(await api('root', 'PUT', path, {})).toMatchObject({ status: 200, body: { user_id: users.ana, role: 'admin' } });
    expect(await api('root', 'PUT', path, { role: null })).toMatchObject({ status: 200, body: { role: 'admin' } });
    expect((await api('root', 'PUT', path, { role: 'platform_admin' })).status).toBe(422);
    expect((await api('root', 'PUT', `/workspaces/${workspaces.marketing}/members/${crypto.randomUUID()}`, {})).status).toBe(404);
    expect(
      (await api('root', 'PUT', `/workspaces/${workspaces.marketing}/members/${crypto.randomUUID()}`, { role: 'viewer' })).status,
    ).toBe(404);
  });

  it('a workspace admin manages its members, and only its own', async () => {
    const members = `/workspaces/${workspaces.marketing}/members`;
    const bob = await api('ana', 'POST', members, { email: 'bob@example.com', role: 'viewer', display_name: 'Bobby' });
    expect(bob).toMatchObject({ status: 201, body: { email: 'bob@example.com', display_name: 'Bobby', role: 'viewer' } });
    users.bob = bob.body.user_id;
    const list = await api('ana', 'GET', `${members}?page_size=1&page=2`);
    expect(list).toMatchObject({ status: 200, body: { items: [{ user_id: users.bob }], total: 2, page: 2, page_size: 1 } });
    expect((await api('ana', 'GET', `/workspaces/${workspaces.sales}/members`)).status).toBe(403);
    expect((await api('bob', 'GET', members)).status).toBe(403);
    expect((await api('ana', 'DELETE', `${members}/${users.bob}`)).status).toBe(204);
    expect((await api('ana', 'DELETE', `${members}/${users.bob}`)).status).toBe(404);
    expect((await api('bob', 'GET', '/auth/me', undefined, {})).body).toMatchObject({
      id: users.bob,
      display_name: 'Bobby',
      memberships: [],
    });
  });

  it('a change made through another gateway reaches the access this one has cached, well before its TTL', async () => {
    const other = await startGateway(auth.env);
    try {
      const members = `/workspaces/${workspaces.marketing}/members`;
      const ana = `${members}/${users.ana}`;
      expect((await api('ana', 'GET', members)).status).toBe(200);
      expect((await api('root', 'PUT', ana, { role: 'viewer' }, undefined, other.url)).status).toBe(200);
      await eventually(async () => expect((await api('ana', 'GET', members)).status).toBe(403), 3_000);
      expect((await api('root', 'PUT', ana, { role: 'admin' }, undefined, other.url)).status).toBe(200);
      await eventually(async () => expect((await api('ana', 'GET', members)).status).toBe(200), 3_000);
    } finally {
      await other.stop();
    }
  });

  it('a platform admin manages users', async () => {
    expect(await api('root', 'GET', '/users/?q=ANA')).toMatchObject({ status: 200, body: { items: [{ id: users.ana }], total: 1 } });
    const carol = await api('root', 'POST', '/users/', { email: 'carol@example.com' });
    expect(carol).toEqual({
      status: 201,
      body: {
        id: expect.stringMatching(UUID),
        email: 'carol@example.com',
        display_name: 'carol',
        is_platform_admin: false,
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
      },
    });
    expect((await api('root', 'POST', '/users/', { email: 'carol@example.com' })).status).toBe(409);
    const path = `/users/${carol.body.id}`;
    const updated = await api('root', 'PUT', path, { display_name: 'Carol C', is_platform_admin: true });
    expect(updated).toMatchObject({ status: 200, body: { display_name: 'Carol C', is_platform_admin: true, email: 'carol@example.com' } });
    expect(await api('root', 'PUT', path, { email: null, display_name: null, is_platform_admin: null })).toEqual({
      status: 200,
      body: updated.body,
    });
    expect((await api('root', 'PUT', path, { email: 'ana@example.com' })).status).toBe(409);
    expect(await api('root', 'GET', path)).toEqual({ status: 200, body: updated.body });
    expect((await api('root', 'DELETE', path)).status).toBe(204);
    expect(await api('root', 'GET', path)).toEqual({ status: 404, body: { detail: expect.any(String) } });
  });

  it('a deleted workspace is gone: 404 for a platform admin, 403 for everyone else', async () => {
    expect((await api('root', 'DELETE', `/workspaces/${workspaces.sales}`)).status).toBe(204);
    expect((await api('root', 'DELETE', `/workspaces/${workspaces.sales}`)).status).toBe(404);
    expect((await api('root', 'GET', `/workspaces/${workspaces.sales}`)).status).toBe(404);
    expect((await api('root', 'GET', `/workspaces/${workspaces.sales}/members`)).status).toBe(404);
    expect((await api('ana', 'GET', `/workspaces/${workspaces.sales}`)).status).toBe(403);
  });
});

describe('deleting a workspace with content', () => {
  it('deletes its campaigns and brand guides first: their category stays retired until released, nothing new gets in', async () => {
    const doomed = (await api('root', 'POST', '/workspaces/', { name: 'Doomed' })).body.id as string;
    const other = (await api('root', 'POST', '/workspaces/', { name: 'Other' })).body.id as string;
    const inWorkspace = (workspaceId: string) => ({ workspace_id: workspaceId });
    const campaign = (workspaceId: string) => ({ workspace_id: workspaceId, name: 'Launch', provider_category_id: 'cat-doomed' });
    expect((await api('root', 'POST', '/email-campaigns/', campaign(doomed), inWorkspace(doomed))).status).toBe(201);
    expect((await api('root', 'POST', '/brand-guides/', { name: 'Voice' }, inWorkspace(doomed))).status).toBe(201);
    expect(await api('root', 'POST', '/email-campaigns/', campaign(other), inWorkspace(other))).toMatchObject({ status: 409 });

    expect((await api('root', 'DELETE', `/workspaces/${doomed}`)).status).toBe(204);

    expect(await api('root', 'POST', '/email-campaigns/', campaign(other), inWorkspace(other))).toMatchObject({ status: 409 });
    expect(await api('root', 'DELETE', '/provider-categories/cat-doomed', undefined, inWorkspace(other))).toMatchObject({
      status: 200,
      body: { provider_category_id: 'cat-doomed', workspace_id: doomed },
    });
    expect(await api('root', 'POST', '/email-campaigns/', campaign(other), inWorkspace(other))).toMatchObject({
      status: 201,
      body: { provider_category_id: 'cat-doomed' },
    });
    expect((await api('root', 'GET', '/email-campaigns/', undefined, inWorkspace(doomed))).status).toBe(404);
    expect((await api('root', 'POST', '/brand-guides/', { name: 'Late' }, inWorkspace(doomed))).status).toBe(404);
  });

  it('answers 503 when a step fails, leaves the workspace emptied and closed, and a repeated DELETE finishes it', async () => {
    const doomed = (await api('root', 'POST', '/workspaces/', { name: 'Half-deleted' })).body.id as string;
    const inDoomed = { workspace_id: doomed };
    expect((await api('root', 'POST', '/email-campaigns/', { workspace_id: doomed, name: 'Launch' }, inDoomed)).status).toBe(201);
    const noEventStore = await startGateway({ ...auth.env, ANALYTICS_GRPC_ADDR: `127.0.0.1:${await freePort()}` });
    try {
      expect(await api('root', 'DELETE', `/workspaces/${doomed}`, undefined, undefined, noEventStore.url)).toEqual({
        status: 503,
        body: { detail: expect.any(String) },
      });
    } finally {
      await noEventStore.stop();
    }
    expect((await api('root', 'GET', `/workspaces/${doomed}`)).status).toBe(200);
    expect((await api('root', 'POST', '/email-campaigns/', { workspace_id: doomed, name: 'Late' }, inDoomed)).status).toBe(404);
    expect((await api('root', 'DELETE', `/workspaces/${doomed}`)).status).toBe(204);
    expect((await api('root', 'GET', `/workspaces/${doomed}`)).status).toBe(404);
  });
});

describe('requests the gateway turns away', () => {
  it('requires the workspace_id header everywhere but GET /auth/me', async () => {
    expect(await api('root', 'GET', '/users/', undefined, {})).toEqual({
      status: 422,
      body: { detail: [{ type: 'missing', loc: ['header', 'workspace_id'], msg: 'Field required', input: null }] },
    });
    expect((await api('root', 'GET', '/users/', undefined, { workspace_id: 'nope' })).body.detail[0]).toMatchObject({
      type: 'uuid_parsing',
      loc: ['header', 'workspace_id'],
    });
  });

  it('validates workspace bodies like FastAPI', async () => {
    expect(await api('root', 'POST', '/workspaces/', {})).toEqual({
      status: 422,
      body: { detail: [{ type: 'missing', loc: ['body', 'name'], msg: 'Field required', input: {} }] },
    });
    expect((await api('root', 'POST', '/workspaces/', { name: '' })).body.detail[0]).toMatchObject({ type: 'string_too_short' });
    expect((await api('root', 'GET', '/workspaces/not-a-uuid')).body.detail[0]).toMatchObject({
      type: 'uuid_parsing',
      loc: ['path', 'id'],
    });
  });

  it('refuses a first sign-in without a usable e-mail claim', async () => {
    const noEmail = auth.idp.token(key, { sub: 'no-email' });
    const unverified = auth.idp.token(key, { sub: 'unverified', email: 'root2@example.com', email_verified: false });
    for (const token of [noEmail, unverified]) {
      const response = await fetch(`${auth.gateway.url}/auth/me`, { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
  });

  it("refuses, with 409, a first sign-in with the e-mail of another identity's user", async () => {
    // ana signed in above; another account of the provider (another sub) claims her e-mail.
    const impostor = auth.idp.token(key, { sub: 'other-ana-subject', email: 'Ana@Example.com' });
    for (const path of ['/auth/me', '/email-campaigns/']) {
      const response = await fetch(auth.gateway.url + path, {
        headers: { authorization: `Bearer ${impostor}`, workspace_id: ANY_WORKSPACE },
      });
      expect(response.status).toBe(409);
      expect(await response.json()).toEqual({ detail: 'This e-mail address belongs to another sign-in identity' });
    }
    expect((await api('ana', 'GET', '/auth/me')).status).toBe(200);
  });

  it('matches paths exactly: other spellings redirect or are not found, never skip the access check', async () => {
    const noToken = (path: string) => fetch(auth.gateway.url + path, { redirect: 'manual', headers: { workspace_id: ANY_WORKSPACE } });
    const redirected = await noToken('/users?page=2');
    expect([redirected.status, redirected.headers.get('location')]).toEqual([307, '/users/?page=2']);
    expect((await noToken(`/users/${users.ana}/`)).headers.get('location')).toBe(`/users/${users.ana}`);
    expect((await noToken('/USERS/')).status).toBe(404);
    expect((await noToken(`/Users/${users.ana}`)).status).toBe(404);
    expect((await noToken('/users/')).status).toBe(401);
  });
});

describe('/readyz', () => {
  it('names, on both ports, the service that is down, and not Postgres, which the other services still reach', async () => {
    const unreachable = `127.0.0.1:${await freePort()}`;
    const partial = await startGateway({ ...auth.env, CAMPAIGN_GRPC_ADDR: unreachable });
    try {
      for (const url of [partial.url, partial.opsUrl]) {
        const response = await fetch(`${url}/readyz`);
        expect(response.status).toBe(503);
        expect(((await response.json()) as { dependencies: Record<string, string> }).dependencies).toMatchObject({
          identity: 'up',
          'brand-guide': 'up',
          campaign: 'down',
          postgres: 'up',
        });
      }
    } finally {
      await partial.stop();
    }
  });
});

describe('DEV_AUTH_ENABLED', () => {
  it('acts as the platform-admin mock user in development', async () => {
    const dev = await startGateway({ DEV_AUTH_ENABLED: '1', ...auth.identity.gatewayEnv });
    try {
      const me = await fetch(`${dev.url}/auth/me`);
      const body = (await me.json()) as { memberships: unknown[] };
      expect(body).toMatchObject({ email: 'dev@example.com', display_name: 'Dev User' });
      expect(body.memberships).toContainEqual({
        workspace_id: workspaces.marketing,
        workspace_name: 'Marketing EU',
        role: 'platform_admin',
      });
      const usersPage = await fetch(`${dev.url}/users/`, { headers: { workspace_id: ANY_WORKSPACE } });
      expect(usersPage.status).toBe(200);
    } finally {
      await dev.stop();
    }
  });

  it('stops the gateway from starting in production, with a clear message', async () => {
    const { code, output } = await runGatewayToExit({ NODE_ENV: 'production', DEV_AUTH_ENABLED: '1', WEBHOOK_BASIC_AUTH: 'user:pass' });
    expect(code).toBe(2);
    expect(output).toContain('refusing to start: DEV_AUTH_ENABLED=1 is refused when NODE_ENV=production');
  });
});
