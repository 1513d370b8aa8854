import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createTestPostgres, startStack, uniqueSuffix, type Stack, type TestPostgres } from '@mail/local';
import {
  AUDIENCE,
  ISSUER,
  signingKey,
  startGateway,
  startIdentityProvider,
  type GatewayProcess,
  type IdentityProvider,
} from './identity-harness';
import type { Json } from './support/json';

/**
 * A workspace's own recipient database through the API ("Recipient databases
 * and recipient queries (isolation)"): PUT tries the URL and stores it
 * encrypted, GET shows it without the password, DELETE goes back to the shared
 * one; the roles; and the password in no answer, no error and no log line.
 *
 * Real processes: the built gateway (JWT auth, debug request log), identity,
 * campaign and delivery over a private Postgres database; the recipient
 * database a workspace names is another private database on the same server.
 */
jest.setTimeout(120_000);

type Caller = 'platform' | 'viewer' | 'editor' | 'admin' | 'outsider';
const ROOT_EMAIL = 'root@recipient-db.example';
const EMAILS: Record<Caller, string> = {
  platform: ROOT_EMAIL,
  viewer: 'viewer@recipient-db.example',
  editor: 'editor@recipient-db.example',
  admin: 'admin@recipient-db.example',
  outsider: 'outsider@recipient-db.example',
};
const WRONG_PASSWORD = `Wrong@Secret/${uniqueSuffix()}`;
const MSSQL_PASSWORD = `Mssql-Secret-${uniqueSuffix()}`;

const key = signingKey('recipient-db-rsa', 'RS256');
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'recipient-db-'));
let services: TestPostgres;
let recipients: TestPostgres;
let stack: Stack;
let idp: IdentityProvider;
let gateway: GatewayProcess;
// Any UUID in the header until the workspaces exist: POST /workspaces/ takes the header too.
let workspace: string = crypto.randomUUID();
let other = '';
/** The private recipient database's URL: the test server's user and password. */
let goodUrl = '';
let password = '';

interface Answer {
  status: number;
  body: Json;
  text: string;
}

async function api(caller: Caller, method: string, route: string, body?: unknown, header = workspace): Promise<Answer> {
  const token = idp.token(key, { sub: `${caller}-subject`, email: EMAILS[caller], name: `Recipient db ${caller}` });
  const response = await fetch(gateway.url + route, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', workspace_id: header },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {}, text };
}

async function root(method: string, route: string, body?: unknown): Promise<Json> {
  const answer = await api('platform', method, route, body);
  if (answer.status >= 300) throw new Error(`setup ${method} ${route}: ${answer.status} ${answer.text}`);
  return answer.body;
}

const database = (id = workspace) => `/workspaces/${id}/recipient-database`;
const urlWithPassword = (secret: string): string => {
  const url = new URL(goodUrl);
  url.password = encodeURIComponent(secret);
  return url.toString();
};

beforeAll(async () => {
  [services, recipients] = await Promise.all([createTestPostgres('gateway_recipient_db'), createTestPostgres('recipient_db_own')]);
  goodUrl = recipients.url;
  password = new URL(goodUrl).password;
  stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['identity', 'campaign', 'delivery'],
    env: {
      DATABASE_URL: services.url,
      SMTP_URL: 'smtp://127.0.0.1:9?tls=off',
      RECIPIENTS_DATABASE_URL: 'postgres://shared:shared@127.0.0.1:9/recipients',
      RECIPIENTS_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      BOOTSTRAP_PLATFORM_ADMINS: ROOT_EMAIL,
      LOG_LEVEL: 'debug',
    },
  });
  idp = await startIdentityProvider([key]);
  gateway = await startGateway({
    AUTH_JWKS_URL: idp.jwksUrl,
    AUTH_ISSUER: ISSUER,
    AUTH_AUDIENCE: AUDIENCE,
    IDENTITY_GRPC_ADDR: stack.urls.grpc.identity,
    CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
    DELIVERY_GRPC_ADDR: stack.urls.grpc.delivery,
    LOG_LEVEL: 'debug',
  });
  workspace = (await root('POST', '/workspaces/', { name: `Recipient db A ${uniqueSuffix()}` })).id as string;
  other = (await root('POST', '/workspaces/', { name: `Recipient db B ${uniqueSuffix()}` })).id as string;
  for (const role of ['viewer', 'editor', 'admin'] as const) {
    await root('POST', `/workspaces/${workspace}/members`, { email: EMAILS[role], role });
  }
  await root('POST', `/workspaces/${other}/members`, { email: EMAILS.outsider, role: 'admin' });
});

afterAll(async () => {
  await gateway?.stop();
  await idp?.close();
  await stack?.stopAll();
  await Promise.all([services?.drop(), recipients?.drop()]);
  fs.rmSync(stateDir, { recursive: true, force: true });
});

function expectNoSecret(text: string): void {
  for (const secret of [password, encodeURIComponent(password), WRONG_PASSWORD, encodeURIComponent(WRONG_PASSWORD), MSSQL_PASSWORD]) {
    expect(text).not.toContain(`:${secret}@`);
  }
  for (const secret of [WRONG_PASSWORD, encodeURIComponent(WRONG_PASSWORD), MSSQL_PASSWORD]) expect(text).not.toContain(secret);
}

test('a workspace without its own reads the shared recipient database', async () => {
  const answer = await api('platform', 'GET', database());
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual({
    workspace_id: workspace,
    shared: true,
    kind: null,
    host: null,
    port: null,
    database: null,
    user: null,
    verified_at: null,
  });
});

test('PUT with a working URL stores it; GET shows it without the password, to admins and platform admins', async () => {
  const before = Date.now();
  const put = await api('platform', 'PUT', database(), { url: goodUrl });
  expect(put.status).toBe(200);
  const parsed = new URL(goodUrl);
  const shown = {
    workspace_id: workspace,
    shared: false,
    kind: 'postgres',
    host: parsed.hostname,
    port: Number(parsed.port),
    database: parsed.pathname.slice(1),
    user: decodeURIComponent(parsed.username),
    verified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
  };
  expect(put.body).toEqual(shown);
  expect(Date.parse(put.body.verified_at as string)).toBeGreaterThanOrEqual(before - 1000);
  expectNoSecret(put.text);
  expect(put.text).not.toContain('password');

  for (const caller of ['platform', 'admin'] as const) {
    const get = await api(caller, 'GET', database());
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ ...shown, verified_at: put.body.verified_at });
    expectNoSecret(get.text);
  }
  // Another workspace is untouched.
  expect((await api('platform', 'GET', database(other))).body.shared).toBe(true);
});

test('the stored URL is encrypted: its row in Postgres holds neither the URL nor the password', async () => {
  await root('PUT', database(), { url: goodUrl });
  const client = new Client({ connectionString: services.url });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, unknown>>('SELECT * FROM delivery.recipient_databases WHERE workspace_id = $1', [
      workspace,
    ]);
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows[0])).not.toContain(goodUrl);
    const ciphertext = String(rows[0].url_ciphertext);
    expect(ciphertext).toMatch(/^v1:/);
    expect(ciphertext).not.toContain(password);
    expect(Buffer.from(ciphertext.slice(3), 'base64').toString('latin1')).not.toContain(`:${password}@`);
  } finally {
    await client.end();
  }
});

test.each([
  ['a wrong password', () => urlWithPassword(WRONG_PASSWORD), /^Value error, authentication failed for user /],
  ['an unreachable host', () => `postgres://reader:${encodeURIComponent(WRONG_PASSWORD)}@127.0.0.1:1/crm`, /connection refused/],
  [
    'SQL Server on an unreachable host',
    () => `mssql://sa:${MSSQL_PASSWORD}@127.0.0.1:1/crm`,
    /^Value error, could not connect to 127\.0\.0\.1:1/,
  ],
  [
    'another kind of database',
    () => `mysql://root:${MSSQL_PASSWORD}@127.0.0.1/crm`,
    /postgres:\/\/, postgresql:\/\/, mssql:\/\/ or sqlserver:\/\//,
  ],
  ['a URL that does not parse', () => `postgres://reader:${MSSQL_PASSWORD}@127.0.0.1:99999/crm`, /not a URL/],
])('PUT with %s is 422 value_error at body.url saying what failed, without the password', async (_case, url, message) => {
  const stored = await api('platform', 'GET', database());
  const answer = await api('platform', 'PUT', database(), { url: url() });
  expect(answer.status).toBe(422);
  expect(answer.body.detail).toEqual([
    expect.objectContaining({ type: 'value_error', loc: ['body', 'url'], msg: expect.stringMatching(message) }),
  ]);
  expectNoSecret(answer.text);
  // What was stored stays.
  expect((await api('platform', 'GET', database())).body).toEqual(stored.body);
});

test('roles: editors, viewers and non-members get 403 everywhere; admins may only GET', async () => {
  for (const caller of ['viewer', 'editor', 'outsider'] as const) {
    expect((await api(caller, 'PUT', database(), { url: goodUrl })).status).toBe(403);
    expect((await api(caller, 'GET', database())).status).toBe(403);
    expect((await api(caller, 'DELETE', database())).status).toBe(403);
  }
  expect((await api('admin', 'PUT', database(), { url: goodUrl })).status).toBe(403);
  expect((await api('admin', 'DELETE', database())).status).toBe(403);
  expect((await api('admin', 'GET', database())).status).toBe(200);
  // The outsider is an admin of the other workspace: there, GET is theirs.
  expect((await api('outsider', 'GET', database(other), undefined, other)).status).toBe(200);
});

test('a workspace that does not exist is 404', async () => {
  const missing = crypto.randomUUID();
  expect((await api('platform', 'PUT', database(missing), { url: goodUrl }, missing)).status).toBe(404);
  expect((await api('platform', 'GET', database(missing), undefined, missing)).status).toBe(404);
  expect((await api('platform', 'DELETE', database(missing), undefined, missing)).status).toBe(404);
});

test('DELETE goes back to the shared database, and is idempotent', async () => {
  await root('PUT', database(), { url: goodUrl });
  expect((await api('platform', 'DELETE', database())).status).toBe(204);
  expect((await api('admin', 'GET', database())).body).toMatchObject({ shared: true, host: null, verified_at: null });
  expect((await api('platform', 'DELETE', database())).status).toBe(204);
});

test('no log line of the gateway or of delivery carries a password', () => {
  // The debug request log is on in both: the PUTs above went through it.
  const logs = gateway.output() + fs.readFileSync(stack.logFile('delivery'), 'utf8');
  expect(logs).toContain('request answered');
  expectNoSecret(logs);
});
