import {
  AUDIENCE,
  freePort,
  signingKey,
  startGateway,
  startIdentityProvider,
  startSignedInGateway,
  type GatewayProcess,
  type IdentityProvider,
  type SignedInGateway,
} from './identity-harness';

/**
 * The built gateway without AUTH_JWKS_URL: it finds the provider's keys
 * through AUTH_ISSUER's OpenID Connect discovery document, and signs in
 * whoever the token's e-mail claim names, if it is an address at all.
 */

const key = signingKey('disc-1', 'ES256');

let auth: SignedInGateway;

beforeAll(async () => {
  auth = await startSignedInGateway('gateway_discovery', [key], { discovery: true });
});

afterAll(async () => {
  await auth?.stop();
});

async function me(token: string, url = auth.gateway.url) {
  const response = await fetch(`${url}/auth/me`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, authenticate: response.headers.get('www-authenticate'), body: await response.json() };
}

async function readiness(url: string): Promise<Record<string, string>> {
  const response = await fetch(`${url}/readyz`);
  return ((await response.json()) as { dependencies: Record<string, string> }).dependencies;
}

describe('keys from the discovery document', () => {
  it('verifies tokens with the keys its jwks_uri names, and reports the provider up', async () => {
    const answer = await me(auth.idp.token(key, { sub: 'disc-ann', email: 'ann@example.com', name: 'Ann' }));
    expect(answer).toMatchObject({ status: 200, body: { email: 'ann@example.com', display_name: 'Ann' } });
    expect(auth.idp.discoveryRequests()).toBe(1);
    expect(await readiness(auth.gateway.url)).toMatchObject({ 'identity-provider': 'up' });
  });

  it('picks up a key rotated in at the provider on its unknown kid, without reading the document again', async () => {
    const fetches = auth.idp.jwksRequests();
    const rotated = signingKey('disc-2', 'RS256');
    auth.idp.publish(rotated);
    expect((await me(auth.idp.token(rotated, { sub: 'disc-rotated', email: 'rotated@example.com' }))).status).toBe(200);
    expect(auth.idp.jwksRequests()).toBe(fetches + 1);
    expect(auth.idp.discoveryRequests()).toBe(1);
  });
});

describe('the e-mail claim', () => {
  it.each(['alice@corp.local', 'qa@acceptance.test'])('%s signs in, shown as given', async (email) => {
    const answer = await me(auth.idp.token(key, { sub: `sub-${email}`, email }));
    expect(answer).toMatchObject({ status: 200, body: { email, display_name: email.split('@')[0] } });
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['not a string', 42],
    ['without an @-sign', 'alice'],
    ['with two @-signs', 'a@b@corp.local'],
    ['with nothing before the @-sign', '@corp.local'],
    ['with nothing after the @-sign', 'alice@'],
    ['with a space', 'al ice@corp.local'],
    ['with a control character', 'alice@corp\u0007.local'],
  ])('%s: 401', async (_name, email) => {
    expect(await me(auth.idp.token(key, { sub: 'no-address', email }))).toEqual({
      status: 401,
      authenticate: 'Bearer',
      body: { detail: 'Invalid token: a valid email claim is required to sign in' },
    });
  });
});

describe('a provider that cannot be reached at start-up', () => {
  let port: number;
  let cut: GatewayProcess;
  let late: IdentityProvider | undefined;

  beforeAll(async () => {
    port = await freePort();
    cut = await startGateway({
      AUTH_ISSUER: `http://127.0.0.1:${port}`,
      AUTH_AUDIENCE: AUDIENCE,
      IDENTITY_GRPC_ADDR: auth.identity.address,
    });
  });

  afterAll(async () => {
    await cut?.stop();
    await late?.close();
  });

  it('answers 503 and reports the provider down, then, once it is up, finds it on a retry', async () => {
    const offline = await me(auth.idp.token(key, { sub: 'early', email: 'early@example.com' }), cut.url);
    expect(offline).toMatchObject({ status: 503, body: { detail: 'Identity provider keys are unavailable, retry later' } });
    expect(await readiness(cut.url)).toMatchObject({ 'identity-provider': 'down' });

    late = await startIdentityProvider([key], { discovery: true, port });
    const token = late.token(key, { sub: 'late', email: 'late@example.com' });
    let answer = await me(token, cut.url);
    for (const deadline = Date.now() + 20_000; answer.status !== 200 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      answer = await me(token, cut.url);
    }
    expect(answer).toMatchObject({ status: 200, body: { email: 'late@example.com' } });
    expect(await readiness(cut.url)).toMatchObject({ 'identity-provider': 'up' });
  });
});
