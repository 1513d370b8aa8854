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
const ANY_WORKSPACE = crypto.randomUUID();

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
