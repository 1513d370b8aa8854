import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPostgres, startStack, type Stack, type TestPostgres } from '@mail/local';
import {
  AUDIENCE,
  ISSUER,
  signingKey,
  startGateway,
  startIdentityProvider,
  type GatewayProcess,
  type IdentityProvider,
} from './identity-harness';

/**
 * "Templates: limits": no template, however written, holds the gateway. The gateway compiles no template;
 * a caller who may not write templates in the workspace gets 401/403 whatever the body; the campaign
 * service checks the rest in a worker thread. The built gateway with JWT sign-in, in front of the real
 * identity and campaign processes over a private database.
 */
jest.setTimeout(180_000);

const key = signingKey('template-limits-rsa', 'RS256');
const EMAILS = {
  root: 'root@limits.example',
  editor: 'editor@limits.example',
  viewer: 'viewer@limits.example',
  outsider: 'outsider@limits.example',
};
type Caller = keyof typeof EMAILS;
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'template-limits-'));
let postgres: TestPostgres;
let stack: Stack;
let idp: IdentityProvider;
let gateway: GatewayProcess;
let workspace: string = crypto.randomUUID();

interface Answer {
  status: number;
  body: { detail: unknown };
}

/** A request as `caller`; a bounded wait, so that a frozen gateway fails the test instead of holding it. */
async function api(caller: Caller, method: string, route: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${gateway.url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${idp.token(key, { sub: `${caller}-subject`, email: EMAILS[caller] })}`,
      'content-type': 'application/json',
      workspace_id: workspace,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

beforeAll(async () => {
  postgres = await createTestPostgres('gateway_template_limits');
  stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['identity', 'campaign'],
    env: { DATABASE_URL: postgres.url, BOOTSTRAP_PLATFORM_ADMINS: EMAILS.root, LOG_LEVEL: 'warn' },
  });
  idp = await startIdentityProvider([key]);
  gateway = await startGateway({
    AUTH_JWKS_URL: idp.jwksUrl,
    AUTH_ISSUER: ISSUER,
    AUTH_AUDIENCE: AUDIENCE,
    IDENTITY_GRPC_ADDR: stack.urls.grpc.identity,
    CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
  });
  const created = await api('root', 'POST', '/workspaces/', { name: 'Template limits' });
  expect(created.status).toBe(201);
  workspace = (created.body as unknown as { id: string }).id;
  for (const role of ['editor', 'viewer'] as const) {
    expect((await api('root', 'POST', `/workspaces/${workspace}/members`, { email: EMAILS[role], role })).status).toBe(201);
  }
});

afterAll(async () => {
  await gateway?.stop();
  await idp?.close();
  await stack?.stopAll();
  await postgres?.drop();
  fs.rmSync(stateDir, { recursive: true, force: true });
});

const nested = (depth: number): string => '{{#if a}}'.repeat(depth) + 'x' + '{{/if}}'.repeat(depth);
const valueError = (field: string, msg: RegExp) => ({ type: 'value_error', loc: ['body', field], msg: expect.stringMatching(msg) });

it('answers 403 at once to a user of no workspace posting 20,000 nested blocks, and /healthz meanwhile', async () => {
  const template = { name: 'Freeze', subject: 'S', html: nested(20_000) };
  const post = api('outsider', 'POST', '/templates/', template);
  const health = await fetch(`${gateway.url}/healthz`, { signal: AbortSignal.timeout(30_000) });
  expect(health.status).toBe(200);
  expect(await post).toEqual({ status: 403, body: { detail: 'Not a member of this workspace' } });
  // Whatever else the body holds: a name too long, a subject too long.
  expect((await api('outsider', 'POST', '/templates/', { ...template, name: 'n'.repeat(201), subject: 's'.repeat(999) })).status).toBe(403);
});

it('answers 403 to a viewer whatever the body, on create and on update', async () => {
  expect(await api('viewer', 'POST', '/templates/', { name: 'Deep', subject: 'S', html: nested(20_000) })).toMatchObject({
    status: 403,
    body: { detail: 'The editor role is required' },
  });
  expect((await api('viewer', 'POST', '/templates/', { subject: 's'.repeat(999), html: '{{log "x"}}' })).status).toBe(403);
  const stored = await api('editor', 'POST', '/templates/', { name: 'Kept', subject: 'S', text: 'T' });
  expect(stored.status).toBe(201);
  const id = (stored.body as unknown as { id: string }).id;
  expect((await api('viewer', 'PUT', `/templates/${id}`, { html: nested(20_000), name: 'n'.repeat(201) })).status).toBe(403);
});

it('answers an editor 422 value_error for blocks nested deeper than 64, for log, partials and other block helpers', async () => {
  expect((await api('editor', 'POST', '/templates/', { name: 'Deep 64', subject: 'S', html: nested(64) })).status).toBe(201);
  const refused: [Record<string, string>, string, RegExp][] = [
    [{ html: nested(65) }, 'html', /^Value error, template nests blocks deeper than 64 levels$/],
    [{ html: nested(20_000) }, 'html', /^Value error, template nests blocks deeper than 64 levels$/],
    [{ text: '{{log "x"}}' }, 'text', /^Value error, template uses the log helper/],
    [{ html: '{{> footer}}' }, 'html', /^Value error, template uses a partial/],
    [{ html: '{{#*inline "footer"}}x{{/inline}}' }, 'html', /^Value error, template uses a decorator/],
    [{ html: '{{#items}}x{{/items}}' }, 'html', /^Value error, template uses block 'items'/],
    [{ subject: '{{log "x"}}', text: 'T' }, 'subject', /^Value error, template uses the log helper/],
  ];
  for (const [fields, field, msg] of refused) {
    const answer = await api('editor', 'POST', '/templates/', { name: 'Refused', subject: 'S', ...fields });
    expect(answer).toMatchObject({ status: 422, body: { detail: [valueError(field, msg)] } });
  }
});

it('answers string_too_long for a subject over 998 characters and html or text over 512 KB, stores nothing', async () => {
  const tooLong = (field: string, max: number, input: string) => ({
    type: 'string_too_long',
    loc: ['body', field],
    msg: `String should have at most ${max} characters`,
    input,
    ctx: { max_length: max },
  });
  // The body's own limit is 1 MB: one long body field per request.
  const subject = 's'.repeat(999);
  const html = 'h'.repeat(524_289);
  const text = 't'.repeat(524_289);
  expect(await api('editor', 'POST', '/templates/', { name: 'Too long', subject, html })).toEqual({
    status: 422,
    body: { detail: [tooLong('subject', 998, subject), tooLong('html', 524_288, html)] },
  });
  expect(await api('editor', 'POST', '/templates/', { name: 'Too long', subject: 'S', text })).toEqual({
    status: 422,
    body: { detail: [tooLong('text', 524_288, text)] },
  });
  const atLimit = await api('editor', 'POST', '/templates/', { name: 'At the limit', subject: 's'.repeat(998), html: 'h'.repeat(524_288) });
  expect(atLimit.status).toBe(201);
  const id = (atLimit.body as unknown as { id: string }).id;
  expect(await api('editor', 'PUT', `/templates/${id}`, { text })).toEqual({
    status: 422,
    body: { detail: [tooLong('text', 524_288, text)] },
  });
  expect((await api('editor', 'GET', '/templates/?q=Too%20long')).body).toMatchObject({ total: 0 });
});

it('goes on answering while the campaign service checks a template that takes too long, then answers 422', async () => {
  const order: string[] = [];
  const post = api('editor', 'POST', '/templates/', { name: 'Slow', subject: 'S', html: '{{a}}'.repeat(80_000) }).then((answer) => {
    order.push('post');
    return answer;
  });
  // Issued while the template is being checked: answered first.
  const health = await fetch(`${gateway.url}/healthz`, { signal: AbortSignal.timeout(30_000) });
  const read = await api('editor', 'GET', '/templates/');
  order.push('others');
  expect([health.status, read.status]).toEqual([200, 200]);
  expect(await post).toMatchObject({
    status: 422,
    body: { detail: [valueError('html', /^Value error, template is too complex to check/)] },
  });
  expect(order).toEqual(['others', 'post']);
});
