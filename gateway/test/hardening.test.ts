import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { signingKey, startGateway, startSignedInGateway, type GatewayProcess, type SignedInGateway } from './identity-harness';

/**
 * What an independent attack pass found, closed: the built gateway (JWT auth)
 * in front of the real identity, campaign, brand-guide and analytics
 * processes on private databases.
 */
jest.setTimeout(120_000);

const key = signingKey('rsa-hardening', 'RS256');
const ANY_WORKSPACE: string = crypto.randomUUID();

let auth: SignedInGateway;

beforeAll(async () => {
  auth = await startSignedInGateway('gateway_hardening', [key], {
    bootstrapPlatformAdmins: ['root@example.com'],
    withWorkspaceContent: true,
  });
});

afterAll(async () => {
  await auth?.stop();
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
  const response = await fetch(auth.gateway.url + path, {
    method,
    redirect: 'manual',
    headers: { authorization: `Bearer ${auth.idp.token(key, claims)}`, 'content-type': 'application/json', workspace_id: workspaceId },
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
    const request = http.get(`${auth.gateway.url}${path}`, { headers }, (response) => {
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

describe('the email claim', () => {
  it('is not trimmed into an address: surrounding whitespace is an invalid claim (401), and links nothing', async () => {
    const workspace = await createWorkspace('Untrimmed');
    const email = 'padded@example.com';
    expect((await call(root, 'POST', `/workspaces/${workspace}/members`, { email, role: 'admin' }, workspace)).status).toBe(201);
    for (const [i, padded] of [` ${email}`, `${email} `, `${email}\t`, `\n${email}`, `\u00a0${email}`].entries()) {
      const me = await call({ sub: `padded-${i}`, email: padded }, 'GET', '/auth/me');
      expect([padded, me.status, me.body]).toEqual([padded, 401, { detail: 'Invalid token: a valid email claim is required to sign in' }]);
    }
    // The membership still waits for its owner's first sign-in with the address as it is.
    const owner = await call({ sub: 'padded-owner', email }, 'GET', '/auth/me');
    expect(owner.body).toMatchObject({ email, memberships: [{ workspace_id: workspace, role: 'admin' }] });
  });
});

describe('the ops port', () => {
  it('serves /metrics and /readyz; the public port has no /metrics', async () => {
    expect((await fetch(`${auth.gateway.url}/metrics`)).status).toBe(404);
    // This gateway has no Kafka (the harness gives it none): not ready, on both ports.
    const ready = await fetch(`${auth.gateway.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { dependencies: Record<string, string> }).dependencies).toMatchObject({ kafka: 'down' });
    const metrics = await fetch(`${auth.gateway.opsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('http_request_duration_seconds');
    const detailed = await fetch(`${auth.gateway.opsUrl}/readyz`);
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

/**
 * Sends `head`, then `body` a byte every `everyMs`, on a fresh connection; resolves with what came back
 * and when (ms after the start), once the gateway closed the connection or the body was all sent and answered.
 */
function trickle(url: string, head: string, body: string, everyMs: number): Promise<{ answer: string; ms: number; unsent: number }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const socket = net.connect(Number(port), hostname);
    const started = Date.now();
    let answer = '';
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < body.length && !socket.destroyed) socket.write(body[sent++]);
    }, everyMs);
    const done = () => {
      clearInterval(timer);
      socket.destroy();
      resolve({ answer, ms: Date.now() - started, unsent: body.length - sent });
    };
    socket.setTimeout(40_000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (/\r\n\r\n[\s\S]*\}$/.test(answer)) done();
    });
    socket.once('close', done);
    socket.once('error', (error) => {
      clearInterval(timer);
      reject(error);
    });
    socket.write(head);
  });
}

describe('request timeouts', () => {
  let slow: GatewayProcess;

  beforeAll(async () => {
    slow = await startGateway({
      ...auth.env,
      REQUEST_TIMEOUT_MS: '1000',
      // Far beyond the webhook body's 2 s below, so a slow host's late timers cannot make it 408.
      WEBHOOK_REQUEST_TIMEOUT_MS: '15000',
      WEBHOOK_BASIC_AUTH: 'sendgrid:slow',
    });
  });

  afterAll(async () => {
    await slow?.stop();
  });

  const token = () => auth.idp.token(key, root);

  it('cuts off a trickled body with 408 and closes the connection', async () => {
    const body = JSON.stringify({ name: 'x'.repeat(100) });
    const head = [
      'POST /workspaces/ HTTP/1.1',
      'Host: gateway',
      `Authorization: Bearer ${token()}`,
      `workspace_id: ${ANY_WORKSPACE}`,
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      '',
      '',
    ].join('\r\n');
    // The whole body would take 28 s: cut off long before, and not before REQUEST_TIMEOUT_MS.
    const { answer, ms, unsent } = await trickle(slow.url, head, body, 250);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe('{"detail":"Request timeout"}');
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(unsent).toBeGreaterThan(0);
  });

  it('cuts off a trickled head with 408', async () => {
    // The whole head would take 27 s.
    const { answer, unsent } = await trickle(slow.url, 'GET /auth/me HTTP/1.1\r\n', 'X-Slow: ' + 'a'.repeat(100), 250);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('{"detail":"Request timeout"}');
    expect(unsent).toBeGreaterThan(0);
  });

  it('gives the webhook its longer time', async () => {
    const body = '[{"email":"a@example.com","event":"open","timestamp":1,"sg_event_id":"x","category":"c"},';
    const head = [
      'POST /campaign-events/webhook HTTP/1.1',
      'Host: gateway',
      `Authorization: Basic ${Buffer.from('sendgrid:slow').toString('base64')}`,
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      '',
      '',
    ].join('\r\n');
    // About 2 s for the body: past REQUEST_TIMEOUT_MS, within WEBHOOK_REQUEST_TIMEOUT_MS. It is not JSON: 422, not 408.
    const { answer, ms } = await trickle(slow.url, head, body, 2_000 / body.length);
    expect(answer).toMatch(/^HTTP\/1\.1 422 /);
    expect(ms).toBeGreaterThanOrEqual(1_500);
  });

  it('answers a request that arrived in time as usual', async () => {
    const me = await fetch(`${slow.url}/auth/me`, { headers: { authorization: `Bearer ${token()}` } });
    expect(me.status).toBe(200);
  });
});

describe('fair use', () => {
  const WEBHOOK_CREDENTIALS = 'sendgrid:hardening';
  let limited: GatewayProcess;
  let workspaceA: string;
  let workspaceB: string;
  const viewerA = { sub: 'fair-a', email: 'fair-a@example.com' };
  const viewerB = { sub: 'fair-b', email: 'fair-b@example.com' };

  beforeAll(async () => {
    limited = await startGateway({
      ...auth.env,
      WORKSPACE_ANALYTICS_CONCURRENCY: '2',
      // The lowest rate: a flood of calls outruns it even on a slow host (one call a second would keep up).
      USER_RATE_LIMIT_PER_SECOND: '1',
      USER_RATE_LIMIT_BURST: '60',
      WEBHOOK_PUBLISH_TIMEOUT_MS: '300',
      // Without DEV_AUTH_ENABLED=1 a provider is served only with its credential.
      WEBHOOK_BASIC_AUTH: WEBHOOK_CREDENTIALS,
    });
    [workspaceA, workspaceB] = [await createWorkspace('Fair A'), await createWorkspace('Fair B')];
    for (const [workspace, viewer] of [
      [workspaceA, viewerA],
      [workspaceB, viewerB],
    ] as const) {
      expect(
        (await call(root, 'POST', `/workspaces/${workspace}/members`, { email: viewer.email, role: 'viewer' }, workspace)).status,
      ).toBe(201);
    }
  });

  afterAll(async () => {
    await limited?.stop();
  });

  /** Like call(), on the gateway with low limits. */
  async function callLimited(claims: Record<string, unknown>, path: string, workspaceId: string): Promise<Answer> {
    const response = await fetch(limited.url + path, {
      headers: { authorization: `Bearer ${auth.idp.token(key, claims)}`, workspace_id: workspaceId },
    });
    return { status: response.status, headers: response.headers, body: await response.json() };
  }

  it("answers a workspace's burst of analytics reads with 429 and Retry-After, while another workspace reads on", async () => {
    const burst = Array.from({ length: 40 }, () =>
      callLimited(viewerA, '/campaign-events/stats?interval=hour&date_from=2020-01-01', workspaceA),
    );
    const others: Answer[] = [];
    for (let i = 0; i < 5; i++) others.push(await callLimited(viewerB, '/campaign-events/', workspaceB));
    const answers = await Promise.all(burst);

    expect(others.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.filter((answer) => answer.status !== 429).map((answer) => answer.status)).toEqual(
      Array(answers.length - refused.length).fill(200),
    );
    for (const answer of refused) {
      expect(answer.body).toEqual({ detail: 'Too many analytics reads running for this workspace, retry later' });
      expect(answer.headers.get('retry-after')).toBe('1');
    }
    // The slots come back once the reads are answered.
    expect((await callLimited(viewerA, '/campaign-events/', workspaceA)).status).toBe(200);
  });

  it('answers a user past their rate with 429 and Retry-After; other users are not slowed', async () => {
    const flooder = { sub: 'fair-flooder', email: 'fair-flooder@example.com' };
    const statuses: number[] = [];
    let last: Answer | undefined;
    while (last?.status !== 429 && statuses.length < 1_000) {
      last = await callLimited(flooder, '/auth/me', workspaceA);
      statuses.push(last.status);
    }
    expect(statuses.length).toBeGreaterThan(60);
    expect(statuses.slice(0, -1)).toEqual(Array(statuses.length - 1).fill(200));
    expect(statuses.at(-1)).toBe(429);
    expect(last!.body).toEqual({ detail: 'Too many requests from this user, retry later' });
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await callLimited(viewerB, '/campaign-events/', workspaceB)).status).toBe(200);
  });

  it('counts calls that fail validation: a flood of 422s gets 429', async () => {
    const flooder = { sub: 'fair-invalid', email: 'fair-invalid@example.com' };
    // A member, so that its calls pass the access check and fail validation.
    expect(
      (await call(root, 'POST', `/workspaces/${workspaceA}/members`, { email: flooder.email, role: 'viewer' }, workspaceA)).status,
    ).toBe(201);
    const statuses: number[] = [];
    while (statuses.at(-1) !== 429 && statuses.length < 1_000) {
      statuses.push((await callLimited(flooder, '/campaign-events/?page=0', workspaceA)).status);
    }
    expect(statuses.length).toBeGreaterThan(60);
    expect(statuses.slice(0, -1)).toEqual(Array(statuses.length - 1).fill(422));
    expect(statuses.at(-1)).toBe(429);
    expect((await callLimited(viewerB, '/campaign-events/', workspaceB)).status).toBe(200);
  });

  it('answers 503 for a dependency that is down with Retry-After', async () => {
    const event = { email: 'a@example.com', event: 'open', timestamp: 1, sg_event_id: 'retry-after-1', category: 'none' };
    const response = await fetch(`${limited.url}/campaign-events/webhook`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(WEBHOOK_CREDENTIALS).toString('base64')}` },
      body: JSON.stringify([event]),
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
  });
});

describe('provider categories', () => {
  it('keeps a renamed or deleted campaign’s category with its workspace: another workspace gets 409 and no data', async () => {
    const [a, b] = [await createWorkspace('Categories A'), await createWorkspace('Categories B')];
    const taken = { status: 409, body: { detail: 'Another campaign already uses this provider_category_id' } };
    const create = async (workspace: string, category: string) => {
      const answer = await call(
        root,
        'POST',
        '/email-campaigns/',
        { workspace_id: workspace, name: 'C', provider_category_id: category },
        workspace,
      );
      return { status: answer.status, body: answer.body as { id: string; detail?: string } };
    };
    const campaign = await create(b, 'released-old');
    expect(campaign.status).toBe(201);
    expect(await create(a, 'released-old')).toEqual(taken);
    expect((await call(root, 'PUT', `/email-campaigns/${campaign.body.id}`, { provider_category_id: 'released-new' }, b)).status).toBe(200);
    expect(await create(a, 'released-old')).toEqual(taken);
    expect((await call(root, 'DELETE', `/email-campaigns/${campaign.body.id}`, undefined, b)).status).toBe(204);
    expect(await create(a, 'released-new')).toEqual(taken);
    const events = await call(root, 'GET', '/campaign-events/', undefined, a);
    expect(events.body).toMatchObject({ items: [], total: 0 });
    // Deleting the workspace retires them: still taken, until a platform admin releases one.
    expect((await call(root, 'DELETE', `/workspaces/${b}`)).status).toBe(204);
    expect(await create(a, 'released-old')).toEqual(taken);
    const rootId = ((await call(root, 'GET', '/auth/me')).body as { id: string }).id;
    const released = await call(root, 'DELETE', '/provider-categories/released-old');
    expect(released).toMatchObject({
      status: 200,
      body: {
        provider_category_id: 'released-old',
        workspace_id: b,
        released_by: { user_id: rootId, email: 'root@example.com' },
        released_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      },
    });
    expect((await create(a, 'released-old')).status).toBe(201);
    expect(await create(a, 'released-new')).toEqual(taken);
    expect(await call(root, 'DELETE', '/provider-categories/released-old')).toMatchObject({ status: 409 });
    expect(await call(root, 'DELETE', `/provider-categories/${encodeURIComponent('never used / here')}`)).toMatchObject({
      status: 404,
      body: { detail: 'Provider category not found' },
    });
    // A workspace admin is no platform admin.
    const admin = { sub: 'categories-admin', email: 'categories-admin@example.com' };
    expect((await call(root, 'POST', `/workspaces/${a}/members`, { email: admin.email, role: 'admin' }, a)).status).toBe(201);
    expect((await call(admin, 'DELETE', '/provider-categories/released-new', undefined, a)).status).toBe(403);
  });

  it('refuses look-alike categories with 422 value_error, with the other failures of the body', async () => {
    const workspace = await createWorkspace('Categories look-alike');
    for (const category of [' f3-x', 'f3-x\t', 'f3\u200bx']) {
      const answer = await call(
        root,
        'POST',
        '/email-campaigns/',
        { workspace_id: workspace, name: '', provider_category_id: category },
        workspace,
      );
      expect([category, answer.status, answer.body]).toEqual([
        category,
        422,
        {
          detail: [
            expect.objectContaining({ type: 'string_too_short', loc: ['body', 'name'] }),
            {
              type: 'value_error',
              loc: ['body', 'provider_category_id'],
              msg: expect.stringMatching(/^Value error, provider_category_id must not /),
              input: category,
              ctx: { error: {} },
            },
          ],
        },
      ]);
    }
  });
});
