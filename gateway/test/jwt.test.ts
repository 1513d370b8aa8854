import {
  AUDIENCE,
  ISSUER,
  freePort,
  signToken,
  signingKey,
  startGateway,
  startSignedInGateway,
  type GatewayProcess,
  type SignedInGateway,
} from './identity-harness';

/**
 * Token verification of the built gateway (createJwtAuthenticator) against a
 * real JWKS endpoint, with the real identity service behind it.
 */

const rsa = signingKey('rsa-1', 'RS256');
const ec = signingKey('ec-1', 'ES256');
const ps = signingKey('ps-1', 'PS256');
const ed = signingKey('ed-1', 'EdDSA');
const unpublished = signingKey('rsa-unpublished', 'RS256');

let auth: SignedInGateway;

const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  auth = await startSignedInGateway('gateway_jwt', [rsa, ec, ps, ed]);
});

afterAll(async () => {
  await auth?.stop();
});

async function me(authorization?: string, url = auth.gateway.url) {
  const response = await fetch(`${url}/auth/me`, { headers: authorization === undefined ? {} : { authorization } });
  return { status: response.status, authenticate: response.headers.get('www-authenticate'), body: await response.json() };
}

const user = (name: string) => ({ sub: `${name}-subject`, email: `${name}@example.com`, name: `${name} user` });

describe('accepted tokens', () => {
  it.each([
    ['RS256', rsa],
    ['ES256', ec],
    ['PS256', ps],
    ['EdDSA', ed],
  ])('%s', async (alg, key) => {
    const answer = await me(`Bearer ${auth.idp.token(key, user(alg.toLowerCase()))}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      email: `${alg.toLowerCase()}@example.com`,
      display_name: `${alg.toLowerCase()} user`,
      memberships: [],
    });
  });

  it('whose aud lists the API among other audiences', async () => {
    expect((await me(`Bearer ${auth.idp.token(rsa, { ...user('audiences'), aud: ['another-api', AUDIENCE] })}`)).status).toBe(200);
  });

  it('within the 30 s clock tolerance, and with a lower-case scheme', async () => {
    const token = auth.idp.token(rsa, { ...user('skew'), exp: now() - 20, nbf: now() + 20 });
    expect((await me(`bearer ${token}`)).status).toBe(200);
  });

  it('signed with a key the provider published after the gateway fetched its JWKS', async () => {
    expect((await me(`Bearer ${auth.idp.token(rsa, user('before'))}`)).status).toBe(200);
    const fetches = auth.idp.jwksRequests();
    const rotated = signingKey('rsa-2', 'RS256');
    auth.idp.publish(rotated);
    expect((await me(`Bearer ${auth.idp.token(rotated, user('rotated'))}`)).status).toBe(200);
    expect(auth.idp.jwksRequests()).toBe(fetches + 1);
  });
});

describe('rejected tokens: 401 with WWW-Authenticate: Bearer', () => {
  const base = () => ({ iss: ISSUER, aud: AUDIENCE, sub: 'mallory', email: 'mallory@example.com', iat: now(), exp: now() + 300 });
  const tamper = (token: string) => {
    const [header, , signature] = token.split('.');
    return [header, Buffer.from(JSON.stringify({ ...base(), sub: 'root' })).toString('base64url'), signature].join('.');
  };
  const cases: [string, () => string | undefined, string][] = [
    ['no Authorization header', () => undefined, 'Not authenticated'],
    ['an empty bearer', () => 'Bearer ', 'Not authenticated'],
    ['another scheme', () => 'Basic dXNlcjpwYXNz', 'Invalid authentication credentials'],
    ['expired beyond the tolerance', () => `Bearer ${signToken(rsa, { ...base(), exp: now() - 60 })}`, 'Token expired'],
    ['not valid before a time beyond the tolerance', () => `Bearer ${signToken(rsa, { ...base(), nbf: now() + 120 })}`, 'Invalid token'],
    ['issued by someone else', () => `Bearer ${signToken(rsa, { ...base(), iss: 'https://evil.example' })}`, 'Invalid token'],
    ['for another audience', () => `Bearer ${signToken(rsa, { ...base(), aud: 'another-api' })}`, 'Invalid token'],
    ['for other audiences only', () => `Bearer ${signToken(rsa, { ...base(), aud: ['another-api', 'a-third-api'] })}`, 'Invalid token'],
    ['signed with an unknown key', () => `Bearer ${signToken(unpublished, base())}`, 'Invalid token'],
    ['with alg none', () => `Bearer ${signToken(rsa, base(), { alg: 'none' })}`, 'Invalid token'],
    ['HS256 signed with the public key', () => `Bearer ${signToken(rsa, base(), { alg: 'HS256' })}`, 'Invalid token'],
    ['with a tampered payload', () => `Bearer ${tamper(signToken(rsa, base()))}`, 'Invalid token'],
    ['without sub', () => `Bearer ${signToken(rsa, { ...base(), sub: undefined })}`, 'Invalid token'],
    ['without exp', () => `Bearer ${signToken(rsa, { ...base(), exp: undefined })}`, 'Invalid token'],
    ['that is no JWT at all', () => 'Bearer not.a.token', 'Invalid token'],
    ['with a garbage header segment', () => `Bearer ${['%%%', ...signToken(rsa, base()).split('.').slice(1)].join('.')}`, 'Invalid token'],
  ];

  it.each(cases)('%s', async (_name, authorization, detail) => {
    expect(await me(authorization())).toEqual({ status: 401, authenticate: 'Bearer', body: { detail } });
  });

  it('checks the token before validating the request (401, not 422), but after parsing JSON as FastAPI does', async () => {
    const post = (body: string) =>
      fetch(`${auth.gateway.url}/workspaces/`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect((await post('{}')).status).toBe(401);
    expect((await post('not json')).status).toBe(422);
  });
});

describe('an unreachable JWKS endpoint', () => {
  let cut: GatewayProcess;

  beforeAll(async () => {
    cut = await startGateway({
      AUTH_JWKS_URL: `http://127.0.0.1:${await freePort()}/.well-known/jwks.json`,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      IDENTITY_GRPC_ADDR: auth.identity.address,
    });
  });

  afterAll(async () => {
    await cut?.stop();
  });

  it('answers 503, since the token may be fine', async () => {
    const answer = await me(`Bearer ${auth.idp.token(rsa, user('offline'))}`, cut.url);
    expect(answer).toMatchObject({ status: 503, body: { detail: 'Identity provider keys are unavailable, retry later' } });
  });

  it('still answers 401 for a request without a token', async () => {
    expect((await me(undefined, cut.url)).status).toBe(401);
  });
});
