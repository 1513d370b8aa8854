import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createClickHouse, refreshSuppressionState } from '@mail/event-store';
import { createTestClickHouse, createTestPostgres, startStack, type Stack, type TestClickHouse, type TestPostgres } from '@mail/local';
import { loadOpenApiDocument, type OperationObject } from '../src/openapi/document';
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
 * The role matrix of the "Identity and tenancy" acceptance: every operation of
 * the OpenAPI document x every caller (platform admin, viewer/editor/admin of
 * workspace A, an admin of workspace B only) gets exactly the 2xx, 403 or 404
 * the rules give, and no data of another workspace ever appears.
 *
 * Real processes: the built gateway (JWT auth against a JWKS served over HTTP
 * here), identity, campaign, brand-guide and analytics over a private Postgres
 * and ClickHouse database.
 */
jest.setTimeout(180_000);

type Caller = 'platform' | 'viewer' | 'editor' | 'admin' | 'outsider';
const CALLERS: readonly Caller[] = ['platform', 'viewer', 'editor', 'admin', 'outsider'];
const RANK = { viewer: 1, editor: 2, admin: 3 } as const;
const ROOT_EMAIL = 'root@matrix.example';

// ---- the operations, from the same merge the gateway serves at /openapi.json (checked below) ----
interface Operation {
  method: string;
  path: string;
  operationId: string;
  level: NonNullable<OperationObject['x-required-role']>;
  scope: 'header' | 'path' | 'none';
  success: number;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function operationsOf(document: { paths: Record<string, Record<string, unknown>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [route, item] of Object.entries(document.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method] as (OperationObject & { responses: Record<string, unknown> }) | undefined;
      if (!operation) continue;
      const level = operation['x-required-role'];
      if (level === undefined) throw new Error(`${method.toUpperCase()} ${route} has no x-required-role`);
      if (level === 'public') continue; // the provider webhook: not a user-facing operation
      const successes = Object.keys(operation.responses).filter((code) => /^2\d\d$/.test(code));
      if (successes.length !== 1) throw new Error(`${operation.operationId} documents ${successes.length} 2xx responses`);
      operations.push({
        method: method.toUpperCase(),
        path: route,
        operationId: String(operation.operationId),
        level,
        scope: operation['x-workspace-from'] ?? 'header',
        success: Number(successes[0]),
      });
    }
  }
  return operations.sort((a, b) => a.operationId.localeCompare(b.operationId));
}

const OPERATIONS = operationsOf(loadOpenApiDocument());

/** What the rules say a caller gets (all requests target workspace A with header A). */
function expectedStatus(op: Operation, caller: Caller): number {
  if (op.level === 'authenticated' || op.level === 'public') return op.success;
  if (caller === 'platform') return op.success;
  if (op.level === 'platform_admin') return 403;
  if (op.scope === 'none') throw new Error(`${op.operationId}: a member-level operation without a workspace scope`);
  if (caller === 'outsider') return 403; // not a member of A
  return RANK[caller] >= RANK[op.level] ? op.success : 403;
}

// ---- the stack and the fixtures ----
const key = signingKey('matrix-rsa', 'RS256');
const run = crypto.randomBytes(4).toString('hex');
const ANY_WORKSPACE = crypto.randomUUID();
let postgres: TestPostgres;
let database: TestClickHouse;
let clickhouse: ReturnType<typeof createClickHouse>;
let stack: Stack;
let idp: IdentityProvider;
let gateway: GatewayProcess;
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'role-matrix-'));

const EMAILS: Record<Caller, string> = {
  platform: ROOT_EMAIL,
  viewer: 'viewer@matrix.example',
  editor: 'editor@matrix.example',
  admin: 'admin@matrix.example',
  outsider: 'outsider@matrix.example',
};
const token = (caller: Caller) => idp.token(key, { sub: `${caller}-subject`, email: EMAILS[caller], name: `Matrix ${caller}` });

interface Fixtures {
  workspace: string;
  campaign: string;
  brandGuide: string;
  template: string;
  suppressed: string;
  event: string;
}
const A: Fixtures = {
  workspace: '',
  campaign: '',
  brandGuide: '',
  template: '',
  suppressed: `a-${run}@suppressed.example`,
  event: crypto.randomUUID(),
};
const B: Fixtures = {
  workspace: '',
  campaign: '',
  brandGuide: '',
  template: '',
  suppressed: `b-${run}@suppressed.example`,
  event: crypto.randomUUID(),
};
const userIds: Partial<Record<Caller, string>> = {};

interface Answer {
  status: number;
  body: Json;
}

async function api(
  caller: Caller,
  method: string,
  urlPath: string,
  body?: unknown,
  workspace: string | null = A.workspace,
): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token(caller)}`, 'content-type': 'application/json' };
  // Every operation but GET /auth/me needs the header; where the workspace does not come from it, any UUID does.
  headers.workspace_id = workspace ?? ANY_WORKSPACE;
  const response = await fetch(gateway.url + urlPath, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* keep the text */
  }
  return { status: response.status, body: parsed };
}

/** Setup call by the platform admin that must succeed. */
async function root(method: string, urlPath: string, body?: unknown, workspace: string | null = A.workspace): Promise<Json> {
  const answer = await api('platform', method, urlPath, body, workspace);
  if (answer.status < 200 || answer.status > 299)
    throw new Error(`setup ${method} ${urlPath}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

let sequence = 0;
const fresh = (label: string) => `${label}-${run}-${++sequence}`;

async function suppress(workspace: string, email: string): Promise<void> {
  const now = new Date().toISOString();
  const row = { workspace_id: workspace, email, reason: 'hard_bounce', occurred_at: now, provider_event_id: fresh('sg'), ingested_at: now };
  await clickhouse.insert({ table: 'suppression_signals', values: [row], format: 'JSONEachRow' });
  // As ingestion does after storing signals.
  await refreshSuppressionState(clickhouse, [{ workspaceId: workspace, email }]);
}

async function seedWorkspace(fixtures: Fixtures, name: string): Promise<void> {
  fixtures.workspace = (await root('POST', '/workspaces/', { name }, null)).id;
  fixtures.campaign = (
    await root('POST', '/email-campaigns/', { workspace_id: fixtures.workspace, name: `${name} campaign` }, fixtures.workspace)
  ).id;
  fixtures.brandGuide = (await root('POST', '/brand-guides/', { name: `${name} guide` }, fixtures.workspace)).id;
  fixtures.template = (await root('POST', '/templates/', { ...TEMPLATE, name: `${name} template` }, fixtures.workspace)).id;
  await suppress(fixtures.workspace, fixtures.suppressed);
  // One engagement event per workspace, as ingestion stores it (the webhook path is not under test here).
  const now = new Date().toISOString();
  const event = {
    id: fixtures.event,
    workspace_id: fixtures.workspace,
    campaign_id: fixtures.campaign,
    event_type: 'open',
    bounce_type: 'none',
    email: `event-${fixtures.suppressed}`,
    occurred_at: now,
    received_at: now,
    url: null,
    reason: null,
    user_agent: null,
    ip: null,
    provider: 'sendgrid',
    provider_event_id: fresh('sg-event'),
    provider_message_id: null,
    raw: '{}',
    ingested_at: now,
  };
  await clickhouse.insert({ table: 'events', values: [event], format: 'JSONEachRow' });
}

beforeAll(async () => {
  [postgres, database] = await Promise.all([createTestPostgres('role_matrix'), createTestClickHouse('role_matrix')]);
  stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['identity', 'campaign', 'brand-guide', 'analytics', 'delivery'],
    env: {
      DATABASE_URL: postgres.url,
      // Runs and test sends are under access test only: no recipient database or SMTP server listens there, so
      // every run stays sending or paused (its recipients wait for the database, longer than the test lasts)
      // and nothing leaves.
      SMTP_URL: 'smtp://127.0.0.1:9?tls=off',
      RECIPIENTS_DATABASE_URL: 'postgres://mail_recipients:mail_recipients@127.0.0.1:9/recipients',
      RECIPIENTS_QUERY_TIMEOUT_MS: '3600000',
      CLICKHOUSE_URL: database.url,
      CLICKHOUSE_DATABASE: database.database,
      BOOTSTRAP_PLATFORM_ADMINS: ROOT_EMAIL,
      LOG_LEVEL: 'warn',
    },
  });
  idp = await startIdentityProvider([key]);
  gateway = await startGateway({
    AUTH_JWKS_URL: idp.jwksUrl,
    AUTH_ISSUER: ISSUER,
    AUTH_AUDIENCE: AUDIENCE,
    IDENTITY_GRPC_ADDR: stack.urls.grpc.identity,
    CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
    BRAND_GUIDE_GRPC_ADDR: stack.urls.grpc['brand-guide'],
    ANALYTICS_GRPC_ADDR: stack.urls.grpc.analytics,
    DELIVERY_GRPC_ADDR: stack.urls.grpc.delivery,
  });
  clickhouse = createClickHouse(database.url, database.database);
  userIds.platform = (await root('GET', '/auth/me', undefined, null)).id;
  await seedWorkspace(A, `Matrix A ${run}`);
  await seedWorkspace(B, `Matrix B ${run}`);
  for (const role of ['viewer', 'editor', 'admin'] as const) {
    userIds[role] = (await root('POST', `/workspaces/${A.workspace}/members`, { email: EMAILS[role], role })).user_id;
  }
  userIds.outsider = (await root('POST', `/workspaces/${B.workspace}/members`, { email: EMAILS.outsider, role: 'admin' })).user_id;
  // First sign-in of each member: the token's e-mail claim links it to the member added by e-mail.
  for (const caller of ['viewer', 'editor', 'admin', 'outsider'] as const) {
    const me = await api(caller, 'GET', '/auth/me', undefined, null);
    if (me.status !== 200 || me.body.id !== userIds[caller])
      throw new Error(`sign-in of ${caller}: ${me.status} ${JSON.stringify(me.body)}`);
  }
});

afterAll(async () => {
  printTable();
  await gateway?.stop();
  await idp?.close();
  await stack?.stopAll();
  await clickhouse?.close();
  await Promise.all([postgres?.drop(), database?.drop()]);
  fs.rmSync(stateDir, { recursive: true, force: true });
});

// ---- one valid request per operation, keyed by operationId ----
interface Request {
  method?: string;
  path: string;
  body?: unknown;
}
type Builder = (caller: Caller) => Promise<Request> | Request;

const freshCampaign = async () =>
  (await root('POST', '/email-campaigns/', { workspace_id: A.workspace, name: fresh('doomed campaign') })).id;
const TEMPLATE = { subject: 'Hello {{first_name}}', text: 'Hi {{first_name}}' };
const freshTemplate = async () => (await root('POST', '/templates/', { ...TEMPLATE, name: fresh('doomed template') })).id;
/** A campaign of A that can be sent (its recipients are never read: the matrix checks access only). */
const freshSendable = async () =>
  (
    await root('POST', '/email-campaigns/', {
      workspace_id: A.workspace,
      name: fresh('sendable campaign'),
      recipient_source: 'csv_account_ids',
      csv_account_ids: ['nobody'],
      from_email: 'news@matrix.example.com',
      template_id: A.template,
    })
  ).id;
const freshRun = async () => (await root('POST', `/email-campaigns/${await freshSendable()}/runs`, {})).id;
const freshPausedRun = async () => {
  const id = await freshRun();
  await root('POST', `/campaign-runs/${id}/pause`, {});
  return id;
};
/** A run of an A/B campaign of A moved to its wait for the decision (runs never load here: no recipient database). */
const freshWaitingRun = async (): Promise<{ id: string; variantId: string }> => {
  const campaign = await root('POST', '/email-campaigns/', {
    workspace_id: A.workspace,
    name: fresh('ab campaign'),
    recipient_source: 'csv_account_ids',
    csv_account_ids: ['nobody'],
    from_email: 'news@matrix.example.com',
    delivery_mode: 'variants',
    variants: [
      { template_id: A.template, weight: 1 },
      { template_id: A.template, weight: 1 },
    ],
    ab_test: {},
  });
  const id = String((await root('POST', `/email-campaigns/${String(campaign.id)}/runs`, {})).id);
  const db = new Client({ connectionString: postgres.url });
  await db.connect();
  try {
    await db.query(`UPDATE delivery.runs SET status = 'sending', loaded = true, ab_phase = 'waiting' WHERE id = $1`, [id]);
  } finally {
    await db.end();
  }
  return { id, variantId: String((campaign.variants as Json[])[0].id) };
};
const freshGuide = async () => (await root('POST', '/brand-guides/', { name: fresh('doomed guide') })).id;
const freshWorkspace = async () => (await root('POST', '/workspaces/', { name: fresh('doomed workspace') }, null)).id;
const freshUser = async () => (await root('POST', '/users/', { email: `${fresh('user')}@matrix.example` }, null)).id;
const freshMember = async () =>
  (await root('POST', `/workspaces/${A.workspace}/members`, { email: `${fresh('member')}@matrix.example`, role: 'viewer' })).user_id;
/** A category its deleted campaign left bound to workspace A: releasable. */
const freshRetiredCategory = async () => {
  const category = fresh('retired-category');
  const campaign = await root('POST', '/email-campaigns/', {
    workspace_id: A.workspace,
    name: fresh('categorized'),
    provider_category_id: category,
  });
  await root('DELETE', `/email-campaigns/${campaign.id}`);
  return category;
};

const REQUESTS: Record<string, Builder> = {
  getCurrentUser: () => ({ path: '/auth/me' }),
  // campaigns
  listCampaigns: () => ({ path: '/email-campaigns/' }),
  createCampaign: () => ({ path: '/email-campaigns/', body: { workspace_id: A.workspace, name: fresh('created campaign') } }),
  getCampaign: () => ({ path: `/email-campaigns/${A.campaign}` }),
  updateCampaign: () => ({ path: `/email-campaigns/${A.campaign}`, body: { description: fresh('described') } }),
  deleteCampaign: async () => ({ path: `/email-campaigns/${await freshCampaign()}` }),
  releaseProviderCategory: async () => ({ path: `/provider-categories/${encodeURIComponent(await freshRetiredCategory())}` }),
  // brand guides
  listBrandGuides: () => ({ path: '/brand-guides/' }),
  createBrandGuide: () => ({ path: '/brand-guides/', body: { name: fresh('created guide') } }),
  getBrandGuide: () => ({ path: `/brand-guides/${A.brandGuide}` }),
  updateBrandGuide: () => ({ path: `/brand-guides/${A.brandGuide}`, body: { description: fresh('described') } }),
  deleteBrandGuide: async () => ({ path: `/brand-guides/${await freshGuide()}` }),
  // templates
  listTemplates: () => ({ path: '/templates/' }),
  createTemplate: () => ({ path: '/templates/', body: { ...TEMPLATE, name: fresh('created template') } }),
  getTemplate: () => ({ path: `/templates/${A.template}` }),
  updateTemplate: () => ({ path: `/templates/${A.template}`, body: { subject: fresh('subject') } }),
  deleteTemplate: async () => ({ path: `/templates/${await freshTemplate()}` }),
  // campaign runs
  createCampaignRun: async () => ({ path: `/email-campaigns/${await freshSendable()}/runs`, body: {} }),
  listCampaignRuns: () => ({ path: `/email-campaigns/${A.campaign}/runs` }),
  getCampaignRun: async () => ({ path: `/campaign-runs/${await freshRun()}` }),
  listCampaignRunRecipients: async () => ({ path: `/campaign-runs/${await freshRun()}/recipients` }),
  pauseCampaignRun: async () => ({ path: `/campaign-runs/${await freshRun()}/pause`, body: {} }),
  resumeCampaignRun: async () => ({ path: `/campaign-runs/${await freshPausedRun()}/resume`, body: {} }),
  cancelCampaignRun: async () => ({ path: `/campaign-runs/${await freshRun()}/cancel`, body: {} }),
  pickCampaignRunWinner: async () => {
    const run = await freshWaitingRun();
    return { path: `/campaign-runs/${run.id}/winner`, body: { variant_id: run.variantId } };
  },
  testSendCampaign: async () => ({
    path: `/email-campaigns/${await freshSendable()}/test-send`,
    body: { emails: ['me@matrix.example.com'] },
  }),
  // engagement and suppressions
  listEngagementEvents: () => ({ path: '/campaign-events/' }),
  getEngagementStats: () => ({ path: '/campaign-events/stats' }),
  listSuppressions: () => ({ path: '/suppressions/' }),
  addSuppression: () => ({ path: '/suppressions/', body: { email: `${fresh('manual')}@suppressed.example`, note: 'by hand' } }),
  getSuppression: () => ({ path: `/suppressions/${encodeURIComponent(A.suppressed)}` }),
  liftSuppression: async () => {
    // A suppression of its own per case, so an authorized caller gets the documented 204.
    const email = `${fresh('lift')}@suppressed.example`;
    await suppress(A.workspace, email);
    return { path: `/suppressions/${encodeURIComponent(email)}` };
  },
  // workspaces
  listWorkspaces: () => ({ path: '/workspaces/' }),
  createWorkspace: () => ({ path: '/workspaces/', body: { name: fresh('created workspace') } }),
  getWorkspace: () => ({ path: `/workspaces/${A.workspace}` }),
  updateWorkspace: async () => ({ path: `/workspaces/${await freshWorkspace()}`, body: { name: fresh('renamed workspace') } }),
  deleteWorkspace: async () => ({ path: `/workspaces/${await freshWorkspace()}` }),
  // memberships of A
  listMembers: () => ({ path: `/workspaces/${A.workspace}/members` }),
  addMember: () => ({ path: `/workspaces/${A.workspace}/members`, body: { email: `${fresh('added')}@matrix.example`, role: 'viewer' } }),
  updateMember: async () => ({ path: `/workspaces/${A.workspace}/members/${await freshMember()}`, body: { role: 'editor' } }),
  removeMember: async () => ({ path: `/workspaces/${A.workspace}/members/${await freshMember()}` }),
  // A's own recipient database: the matrix's private database, which the PUT's check reaches
  putRecipientDatabase: () => ({ path: `/workspaces/${A.workspace}/recipient-database`, body: { url: postgres.url } }),
  getRecipientDatabase: () => ({ path: `/workspaces/${A.workspace}/recipient-database` }),
  deleteRecipientDatabase: () => ({ path: `/workspaces/${A.workspace}/recipient-database` }),
  // users
  listUsers: () => ({ path: '/users/' }),
  createUser: () => ({ path: '/users/', body: { email: `${fresh('created')}@matrix.example` } }),
  getUser: () => ({ path: `/users/${userIds.viewer}` }),
  updateUser: async () => ({ path: `/users/${await freshUser()}`, body: { display_name: fresh('renamed') } }),
  deleteUser: async () => ({ path: `/users/${await freshUser()}` }),
};

/**
 * Cases that fail because of a product bug, each with the bug named. Keyed
 * `${operationId} ${caller}`; marked it.failing so the assertion stays exact.
 */
const KNOWN_BUGS: Record<string, string> = {};

// ---- results, printed as a table when anything did not match ----
interface Row {
  section: string;
  operation: string;
  caller: string;
  expected: number;
  actual: number | string;
}
const rows: Row[] = [];

function record(section: string, operation: string, caller: string, expected: number, actual: number | string): void {
  rows.push({ section, operation, caller, expected, actual });
}

function printTable(): void {
  const failed = rows.filter((row) => row.expected !== row.actual);
  if (failed.length === 0) return;
  const lines: string[] = [];
  for (const section of [...new Set(rows.map((row) => row.section))]) {
    const inSection = rows.filter((row) => row.section === section);
    const callers = [...new Set(inSection.map((row) => row.caller))];
    const operations = [...new Set(inSection.map((row) => row.operation))];
    const width = Math.max(...operations.map((op) => op.length));
    lines.push(`\n${section} (expected/actual, ! marks a mismatch)`);
    lines.push(`${''.padEnd(width)}  ${callers.map((c) => c.padEnd(12)).join('')}`);
    for (const operation of operations) {
      const cells = callers.map((caller) => {
        const row = inSection.find((r) => r.operation === operation && r.caller === caller);
        if (!row) return ''.padEnd(12);
        return `${row.expected === row.actual ? ' ' : '!'}${row.expected}/${row.actual}`.padEnd(12);
      });
      lines.push(`${operation.padEnd(width)}  ${cells.join('')}`);
    }
  }
  console.log(`role matrix: ${failed.length} of ${rows.length} cases did not match${lines.join('\n')}`);
}

// ---- the tests ----
describe('the operation list', () => {
  it('is what the gateway serves at /openapi.json, and every operation has a request in the matrix', async () => {
    const served = await fetch(`${gateway.url}/openapi.json`);
    expect(served.status).toBe(200);
    const fromServer = operationsOf((await served.json()) as { paths: Record<string, Record<string, unknown>> });
    expect(fromServer).toEqual(OPERATIONS);
    const missing = OPERATIONS.map((op) => op.operationId).filter((id) => !(id in REQUESTS));
    expect(missing).toEqual([]);
    const stale = Object.keys(REQUESTS).filter((id) => !OPERATIONS.some((op) => op.operationId === id));
    expect(stale).toEqual([]);
  });

  it('requires the role docs/api.md gives each operation, so the matrix below tests that decision and not only the document', () => {
    const viewer = [
      'GET /brand-guides/',
      'GET /brand-guides/{id}',
      'GET /email-campaigns/',
      'GET /email-campaigns/{id}',
      'GET /campaign-events/',
      'GET /campaign-events/stats',
      'GET /suppressions/',
      'GET /suppressions/{email}',
      'GET /templates/',
      'GET /templates/{id}',
      'GET /email-campaigns/{id}/runs',
      'GET /campaign-runs/{id}',
      'GET /campaign-runs/{id}/recipients',
    ];
    const editor = [
      'POST /brand-guides/',
      'PUT /brand-guides/{id}',
      'DELETE /brand-guides/{id}',
      'POST /email-campaigns/',
      'PUT /email-campaigns/{id}',
      'DELETE /email-campaigns/{id}',
      'POST /suppressions/',
      'DELETE /suppressions/{email}',
      'POST /templates/',
      'PUT /templates/{id}',
      'DELETE /templates/{id}',
      'POST /email-campaigns/{id}/runs',
      'POST /email-campaigns/{id}/test-send',
      'POST /campaign-runs/{id}/pause',
      'POST /campaign-runs/{id}/resume',
      'POST /campaign-runs/{id}/cancel',
      'POST /campaign-runs/{id}/winner',
    ];
    const admin = [
      'GET /workspaces/{id}/members',
      'POST /workspaces/{id}/members',
      'PUT /workspaces/{id}/members/{user_id}',
      'DELETE /workspaces/{id}/members/{user_id}',
      'GET /workspaces/{id}/recipient-database',
    ];
    const platformAdmin = [
      'GET /workspaces/',
      'POST /workspaces/',
      'PUT /workspaces/{id}',
      'DELETE /workspaces/{id}',
      'GET /users/',
      'POST /users/',
      'GET /users/{id}',
      'PUT /users/{id}',
      'DELETE /users/{id}',
      'DELETE /provider-categories/{provider_category_id}',
      'PUT /workspaces/{id}/recipient-database',
      'DELETE /workspaces/{id}/recipient-database',
    ];
    const decided = new Map<string, string>([
      ['GET /auth/me', 'authenticated'],
      // Members may read their own workspace; everything else about workspaces is the platform admin's.
      ['GET /workspaces/{id}', 'viewer'],
      ...viewer.map((operation): [string, string] => [operation, 'viewer']),
      ...editor.map((operation): [string, string] => [operation, 'editor']),
      ...admin.map((operation): [string, string] => [operation, 'admin']),
      ...platformAdmin.map((operation): [string, string] => [operation, 'platform_admin']),
    ]);
    const documented = new Map(OPERATIONS.map((op) => [`${op.method} ${op.path}`, op.level]));
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(decided));
  });
});

describe('role matrix: every operation x every caller, acting on workspace A', () => {
  // DELETE last, so destructive cases run after every read and update of the shared fixtures; before them, setting
  // A's recipient database, which points A's runs at a database without their accounts (they would fail as they load).
  const late = (op: Operation): number => (op.method === 'DELETE' ? 2 : op.operationId === 'putRecipientDatabase' ? 1 : 0);
  const ordered = [...OPERATIONS].sort((a, b) => late(a) - late(b));
  for (const op of ordered) {
    for (const caller of CALLERS) {
      const expected = expectedStatus(op, caller);
      const name = `${op.method} ${op.path} (${op.operationId}, needs ${op.level}) as ${caller} -> ${expected}`;
      const bug = KNOWN_BUGS[`${op.operationId} ${caller}`];
      (bug ? it.failing : it)(bug ? `${name} [BUG: ${bug}]` : name, async () => {
        const build = REQUESTS[op.operationId];
        if (!build) throw new Error(`no request for ${op.operationId}: add one to REQUESTS`);
        const request = await build(caller);
        const answer = await api(caller, op.method, request.path, request.body);
        record('matrix', op.operationId, caller, expected, answer.status);
        expect({ status: answer.status, body: answer.body }).toMatchObject({ status: expected });
        if (expected === 403) expect(answer.body).toEqual({ detail: expect.any(String) });
      });
    }
  }
});

describe("cross-workspace: B's resources never reach A's members", () => {
  const members: Caller[] = ['platform', 'viewer', 'editor', 'admin'];
  const targets = [
    { kind: 'campaign', base: '/email-campaigns/', id: () => B.campaign, ownId: () => A.campaign, field: 'description' },
    { kind: 'brand guide', base: '/brand-guides/', id: () => B.brandGuide, ownId: () => A.brandGuide, field: 'description' },
    { kind: 'template', base: '/templates/', id: () => B.template, ownId: () => A.template, field: 'subject' },
  ].map((target) => ({ ...target, update: { [target.field]: 'hijacked' } }));
  for (const target of targets) {
    for (const caller of members) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        // 404 once the role allows the operation; below it the role check answers 403 whatever the id
        // (a viewer's PUT/DELETE), which reveals nothing: the same 403 as for an id that exists nowhere.
        const expected = method === 'GET' || caller !== 'viewer' ? 404 : 403;
        it(`${caller}: ${method} of B's ${target.kind} with header A -> ${expected}, the same as an id that exists nowhere`, async () => {
          const body = method === 'PUT' ? target.update : undefined;
          const answer = await api(caller, method, `${target.base}${target.id()}`, body, A.workspace);
          record(`B's ids with header A`, `${method} ${target.kind}`, caller, expected, answer.status);
          expect(answer).toEqual({ status: expected, body: { detail: expect.any(String) } });
          const nowhere = await api(caller, method, `${target.base}${crypto.randomUUID()}`, body, A.workspace);
          expect(nowhere).toEqual(answer);
        });
      }
    }
    for (const caller of ['viewer', 'editor', 'admin'] as const) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        it(`${caller}: ${method} of B's ${target.kind} with header B -> 403 (not a member)`, async () => {
          const answer = await api(
            caller,
            method,
            `${target.base}${target.id()}`,
            method === 'PUT' ? target.update : undefined,
            B.workspace,
          );
          record(`B's ids with header B`, `${method} ${target.kind}`, caller, 403, answer.status);
          expect(answer).toEqual({ status: 403, body: { detail: expect.any(String) } });
        });
      }
    }
    it(`outsider: GET/PUT/DELETE of A's ${target.kind} with header B -> 404`, async () => {
      const id = target.ownId();
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const body = method === 'PUT' ? target.update : undefined;
        const answer = await api('outsider', method, `${target.base}${id}`, body, B.workspace);
        record(`A's ids with header B`, `${method} ${target.kind}`, 'outsider', 404, answer.status);
        expect([method, answer.status]).toEqual([method, 404]);
        expect(answer).toEqual(await api('outsider', method, `${target.base}${crypto.randomUUID()}`, body, B.workspace));
      }
    });
    it(`B's ${target.kind} survived, unchanged, and A's too`, async () => {
      const b = await api('outsider', 'GET', `${target.base}${target.id()}`, undefined, B.workspace);
      expect(b.status).toBe(200);
      expect(b.body).toMatchObject({ id: target.id(), workspace_id: B.workspace });
      expect(b.body[target.field]).not.toBe('hijacked');
      const a = await api('viewer', 'GET', `${target.base}${target.ownId()}`, undefined, A.workspace);
      expect(a.status).toBe(200);
      expect(a.body[target.field]).not.toBe('hijacked');
    });
  }

  it('members of B only are refused on A by path too: GET /workspaces/{B} and its members for A members -> 403', async () => {
    for (const caller of ['viewer', 'editor', 'admin'] as const) {
      expect([caller, (await api(caller, 'GET', `/workspaces/${B.workspace}`)).status]).toEqual([caller, 403]);
      expect([caller, (await api(caller, 'GET', `/workspaces/${B.workspace}/members`)).status]).toEqual([caller, 403]);
    }
  });
});

describe('lists never carry the other workspace', () => {
  const text = (body: unknown) => JSON.stringify(body);
  const lists = [
    '/email-campaigns/?page_size=500',
    '/brand-guides/?page_size=500',
    '/templates/?page_size=500',
    '/suppressions/?page_size=500',
    '/campaign-events/?page_size=500',
  ];

  for (const caller of ['platform', 'viewer', 'editor', 'admin'] as const) {
    it(`${caller} with header A sees A's items and none of B's`, async () => {
      for (const list of lists) {
        const answer = await api(caller, 'GET', list, undefined, A.workspace);
        expect([list, answer.status]).toEqual([list, 200]);
        const ids = (answer.body.items as { id?: string; email?: string; workspace_id?: string }[]).map((item) => item.id ?? item.email);
        for (const foreign of [B.campaign, B.brandGuide, B.template, B.suppressed, B.event])
          expect([list, ids]).not.toEqual([list, expect.arrayContaining([foreign])]);
        expect(text(answer.body)).not.toContain(B.workspace);
        for (const item of answer.body.items as { workspace_id?: string }[]) {
          if (item.workspace_id !== undefined) expect(item.workspace_id).toBe(A.workspace);
        }
      }
      const campaigns = await api(caller, 'GET', '/email-campaigns/?page_size=500');
      expect(campaigns.body.items.map((c: { id: string }) => c.id)).toContain(A.campaign);
      const guides = await api(caller, 'GET', '/brand-guides/?page_size=500');
      expect(guides.body.items.map((g: { id: string }) => g.id)).toContain(A.brandGuide);
      const suppressions = await api(caller, 'GET', '/suppressions/?page_size=500');
      expect(suppressions.body.items.map((s: { email: string }) => s.email)).toContain(A.suppressed);
      const events = await api(caller, 'GET', '/campaign-events/?page_size=500');
      expect(events.body.items.map((e: { id: string }) => e.id)).toContain(A.event);
      const stats = await api(caller, 'GET', '/campaign-events/stats');
      expect(stats.body.campaigns.map((c: { campaign_id: string }) => c.campaign_id)).toEqual([A.campaign]);
      expect(stats.status).toBe(200);
      expect(text(stats.body)).not.toContain(B.suppressed);
      expect(text(stats.body)).not.toContain(B.campaign);
    });
  }

  it("the admin of A lists A's members only", async () => {
    const answer = await api('admin', 'GET', `/workspaces/${A.workspace}/members?page_size=500`);
    expect(answer.status).toBe(200);
    const ids = answer.body.items.map((m: { user_id: string }) => m.user_id);
    expect(ids).toEqual(expect.arrayContaining([userIds.viewer, userIds.editor, userIds.admin]));
    expect(ids).not.toContain(userIds.outsider);
  });

  it("the outsider with header B sees B's items and none of A's", async () => {
    for (const list of lists) {
      const answer = await api('outsider', 'GET', list, undefined, B.workspace);
      expect([list, answer.status]).toEqual([list, 200]);
      const ids = (answer.body.items as { id?: string; email?: string }[]).map((item) => item.id ?? item.email);
      for (const foreign of [A.campaign, A.brandGuide, A.suppressed, A.event])
        expect([list, ids]).not.toEqual([list, expect.arrayContaining([foreign])]);
      expect(text(answer.body)).not.toContain(A.workspace);
    }
    const campaigns = await api('outsider', 'GET', '/email-campaigns/?page_size=500', undefined, B.workspace);
    expect(campaigns.body.items.map((c: { id: string }) => c.id)).toEqual([B.campaign]);
    const guides = await api('outsider', 'GET', '/brand-guides/?page_size=500', undefined, B.workspace);
    expect(guides.body.items.map((g: { id: string }) => g.id)).toEqual([B.brandGuide]);
    const suppressions = await api('outsider', 'GET', '/suppressions/?page_size=500', undefined, B.workspace);
    expect(suppressions.body.items.map((s: { email: string }) => s.email)).toEqual([B.suppressed]);
    const foreignSuppression = await api('outsider', 'GET', `/suppressions/${encodeURIComponent(A.suppressed)}`, undefined, B.workspace);
    expect(foreignSuppression).toMatchObject({ status: 404, body: { detail: 'Suppression not found' } });
    const members = await api('outsider', 'GET', `/workspaces/${B.workspace}/members?page_size=500`, undefined, B.workspace);
    expect(members.body.items.map((m: { user_id: string }) => m.user_id)).toEqual([userIds.outsider]);
    const events = await api('outsider', 'GET', '/campaign-events/?page_size=500', undefined, B.workspace);
    expect(events.body.items.map((e: { id: string }) => e.id)).toEqual([B.event]);
    const stats = await api('outsider', 'GET', '/campaign-events/stats', undefined, B.workspace);
    expect(stats.body.campaigns.map((c: { campaign_id: string }) => c.campaign_id)).toEqual([B.campaign]);
    expect(stats.status).toBe(200);
    expect(text(stats.body)).not.toContain(A.suppressed);
  });

  it('/auth/me shows each caller only its own memberships', async () => {
    for (const caller of ['viewer', 'editor', 'admin'] as const) {
      const me = await api(caller, 'GET', '/auth/me', undefined, null);
      expect(me.body.memberships).toEqual([{ workspace_id: A.workspace, workspace_name: expect.any(String), role: caller }]);
    }
    const outsider = await api('outsider', 'GET', '/auth/me', undefined, null);
    expect(outsider.body.memberships).toEqual([{ workspace_id: B.workspace, workspace_name: expect.any(String), role: 'admin' }]);
  });
});
