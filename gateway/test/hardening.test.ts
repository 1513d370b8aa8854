import crypto from 'node:crypto';
import http from 'node:http';
import {
  AUDIENCE,
  ISSUER,
  signingKey,
  startGateway,
  startIdentityProvider,
  startIdentityService,
  type GatewayProcess,
  type IdentityProvider,
  type IdentityService,
} from './identity-harness';

/**
 * What an independent attack pass found, closed: the built gateway (JWT auth)
 * in front of the real identity, campaign, brand-guide and analytics
 * processes on private databases.
 */
jest.setTimeout(120_000);

const key = signingKey('rsa-hardening', 'RS256');
const ANY_WORKSPACE: string = crypto.randomUUID();

let services: IdentityService;
let idp: IdentityProvider;
let gateway: GatewayProcess;

beforeAll(async () => {
  services = await startIdentityService('gateway_hardening', ['root@example.com'], { withWorkspaceContent: true });
  idp = await startIdentityProvider([key]);
  gateway = await startGateway({ AUTH_JWKS_URL: idp.jwksUrl, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, ...services.gatewayEnv });
});

afterAll(async () => {
  await gateway?.stop();
  await idp?.close();
  await services?.stop();
});

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** A request with a token carrying `claims` (issued by the test provider). */
async function call(
  claims: Record<string, unknown>,
  method: string,
  path: string,
  body?: unknown,
  workspaceId = ANY_WORKSPACE,
): Promise<Answer> {
  const response = await fetch(gateway.url + path, {
    method,
    redirect: 'manual',
    headers: { authorization: `Bearer ${idp.token(key, claims)}`, 'content-type': 'application/json', workspace_id: workspaceId },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

const root = { sub: 'root-subject', email: 'root@example.com' };

/** A workspace created by the bootstrap platform admin; resolves to its id. */
async function createWorkspace(name: string): Promise<string> {
  const created = await call(root, 'POST', '/workspaces/', { name });
  expect(created.status).toBe(201);
  return (created.body as { id: string }).id;
}

/** One request on a fresh connection with the given headers, which fetch would not let through (Host). */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${gateway.url}${path}`, { headers }, (response) => {
      response.resume();
      response.once('end', () => resolve({ status: response.statusCode!, headers: response.headers }));
    });
    request.once('error', reject);
  });
}

describe('the trailing-slash redirect', () => {
  it('answers with a relative Location, whatever Host and X-Forwarded-* say', async () => {
    const forged = await rawGet('/email-campaigns?page=2', {
      host: 'evil.example.com',
      'x-forwarded-proto': 'https://evil.example.com/#',
      'x-forwarded-host': 'evil.example.com',
      workspace_id: ANY_WORKSPACE,
    });
    expect([forged.status, forged.headers.location]).toEqual([307, '/email-campaigns/?page=2']);
    const plain = await rawGet('/users', { workspace_id: ANY_WORKSPACE });
    expect([plain.status, plain.headers.location]).toEqual([307, '/users/']);
  });
});

describe('email_verified', () => {
  it('links a membership added by e-mail only for true or "true"; any other value links nothing', async () => {
    const workspace = await createWorkspace('Verified B');
    for (const email of ['x@example.com', 'y@example.com', 'z@example.com']) {
      expect((await call(root, 'POST', `/workspaces/${workspace}/members`, { email, role: 'admin' }, workspace)).status).toBe(201);
    }
    const unverified: unknown[] = ['false', 'False', '0', 'no', '', ' true', 0, 1, null, [], [true], {}, false];
    for (const [i, value] of unverified.entries()) {
      const me = await call({ sub: `attacker-${i}`, email: 'x@example.com', email_verified: value }, 'GET', '/auth/me');
      expect(`${JSON.stringify(value)}: ${me.status}`).toBe(`${JSON.stringify(value)}: 401`);
    }
    // Nobody took the membership: the member is still waiting for its first verified sign-in.
    const owner = await call({ sub: 'x-owner', email: 'x@example.com', email_verified: 'TRUE' }, 'GET', '/auth/me');
    expect(owner.status).toBe(200);
    expect(owner.body).toMatchObject({ email: 'x@example.com', memberships: [{ workspace_id: workspace, role: 'admin' }] });
    const verified = await call({ sub: 'y-owner', email: 'y@example.com', email_verified: true }, 'GET', '/auth/me');
    expect(verified.body).toMatchObject({ email: 'y@example.com', memberships: [{ workspace_id: workspace, role: 'admin' }] });
    // Without the claim the provider vouches for the address, as before.
    const unclaimed = await call({ sub: 'z-owner', email: 'z@example.com' }, 'GET', '/auth/me');
    expect(unclaimed.body).toMatchObject({ email: 'z@example.com', memberships: [{ workspace_id: workspace, role: 'admin' }] });
  });

  it('grants no bootstrap platform admin on an unverified e-mail, and leaves a known user signed in', async () => {
    expect((await call({ sub: 'fake-root', email: 'root@example.com', email_verified: 'false' }, 'GET', '/auth/me')).status).toBe(401);
    const known = await call({ ...root, email_verified: 'false' }, 'GET', '/auth/me');
    expect(known.status).toBe(200);
    expect(known.body).toMatchObject({ email: 'root@example.com' });
  });
});

describe('the ops port', () => {
  it('serves /metrics and the detailed /readyz; the public port has no /metrics and says only ready or not', async () => {
    expect((await fetch(`${gateway.url}/metrics`)).status).toBe(404);
    // This gateway has no Kafka (the harness gives it none): not ready, and the public port does not say why.
    const ready = await fetch(`${gateway.url}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'not ready' }]);
    const metrics = await fetch(`${gateway.opsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('http_request_duration_seconds');
    const detailed = await fetch(`${gateway.opsUrl}/readyz`);
    expect(detailed.status).toBe(503);
    expect(((await detailed.json()) as { dependencies: Record<string, string> }).dependencies).toMatchObject({
      identity: 'up',
      campaign: 'up',
      analytics: 'up',
      postgres: 'up',
      kafka: 'down',
    });
  });
});
