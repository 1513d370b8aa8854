import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { call, createClient } from '@mail/common';
import { NO_VARIANT, createClickHouse, refreshSuppressionState } from '@mail/event-store';
import type { Stack, TestClickHouse } from '@mail/local';
import { identityV1 } from '@mail/proto';
import { freePort, startGateway, type GatewayProcess } from './identity-harness';
import { launchChromium } from './support/chromium';
import { startPrivateStack, type PrivateStack } from './support/private-stack';

/**
 * Signing in to the dashboard in a real browser (Debian's chromium driven by
 * playwright-core) through a real OpenID Connect provider (`oidc-provider`,
 * started here on loopback with a public client and test accounts): its own
 * login and consent pages, the user's workspaces and data, token renewal
 * before expiry, sign-out through its end-session endpoint; then the
 * Suppressions and Address lookup pages as an editor (add, lift, export) and
 * as a viewer (no buttons). The built gateway runs without AUTH_JWKS_URL, so
 * it finds the provider's keys through discovery.
 */

jest.setTimeout(240_000);

const PROVIDER_SCRIPT = path.join(__dirname, 'support', 'oidc-provider.mjs');
const CLIENT_ID = 'mail-dashboard';
/** The API as a resource indicator (an absolute URI), which the provider puts in the access token's aud. */
const AUDIENCE = 'https://api.mail.test/';
/** Short enough that the page renews within the test. */
const ACCESS_TOKEN_TTL_S = 45;
const ACCOUNTS = {
  editor: { email: 'editor@example.com', name: 'Edna Editor' },
  viewer: { email: 'viewer@example.com', name: 'Vic Viewer' },
  admin: { email: 'admin@example.com', name: 'Ada Admin' },
};
const WORKSPACE = `Signin ${randomUUID().slice(0, 8)}`;
const READER = 'reader@example.com';

let target: PrivateStack;
let clickhouse: TestClickHouse;
let stack: Stack;
let provider: ChildProcess;
let gateway: GatewayProcess;
let browser: Browser;
let workspaceId: string;

async function startProvider(port: number, redirectUri: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [PROVIDER_SCRIPT], {
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      CLIENT_ID,
      REDIRECT_URI: redirectUri,
      AUDIENCE,
      ACCESS_TOKEN_TTL: String(ACCESS_TOKEN_TTL_S),
      ACCOUNTS: JSON.stringify(ACCOUNTS),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the provider did not start:\n${output}`)), 20_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ready ')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', () => reject(new Error(`the provider exited:\n${output}`)));
  });
  return child;
}

async function seed(): Promise<void> {
  const identity = createClient(identityV1.IdentityServiceClient, stack.urls.grpc.identity);
  try {
    workspaceId = (await call(identity.createWorkspace.bind(identity), { name: WORKSPACE })).workspace!.id;
    for (const [login, role] of [
      ['editor', identityV1.Role.ROLE_EDITOR],
      ['viewer', identityV1.Role.ROLE_VIEWER],
      ['admin', identityV1.Role.ROLE_ADMIN],
    ] as const) {
      await call(identity.addMember.bind(identity), { workspaceId, email: ACCOUNTS[login].email, role });
    }
  } finally {
    identity.close();
  }
  const store = createClickHouse(clickhouse.url, clickhouse.database);
  try {
    const now = Date.now();
    const at = (hoursAgo: number) => new Date(now - hoursAgo * 3_600_000).toISOString();
    const signals = [
      ['hard@example.com', 'hard_bounce', at(30)],
      ['gone@example.com', 'unsubscribe', at(20)],
      [READER, 'spam_report', at(2)],
    ].map(([email, reason, occurred_at], i) => ({
      workspace_id: workspaceId,
      email,
      reason,
      occurred_at,
      provider_event_id: `signin-signal-${i}`,
      ingested_at: occurred_at,
    }));
    await store.insert({ table: 'suppression_signals', values: signals, format: 'JSONEachRow' });
    await refreshSuppressionState(
      store,
      signals.map((signal) => ({ workspaceId, email: signal.email })),
    );
    const campaignId = randomUUID();
    const events = (['open', 'click', 'open'] as const).map((eventType, i) => ({
      id: randomUUID(),
      workspace_id: workspaceId,
      campaign_id: campaignId,
      variant_id: NO_VARIANT,
      event_type: eventType,
      bounce_type: 'none',
      bounce_class: 'none',
      machine_open: 0,
      email: READER,
      occurred_at: at(5 - i),
      received_at: at(5 - i),
      url: eventType === 'click' ? 'https://shop.example.com/a' : null,
      reason: null,
      user_agent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      provider: 'sendgrid',
      provider_event_id: `signin-event-${i}`,
      provider_message_id: 'msg-1',
      raw: '{}',
      ingested_at: new Date().toISOString(),
    }));
    await store.insert({ table: 'events', values: events, format: 'JSONEachRow' });
  } finally {
    await store.close();
  }
}

beforeAll(async () => {
  target = await startPrivateStack('dashboard-signin', {
    processes: ['identity', 'campaign', 'analytics', 'delivery'],
    env: { LOG_LEVEL: 'warn' },
  });
  ({ stack, clickhouse } = target);
  await seed();
  // The provider must know the page's address, and the gateway the provider's: its port is chosen first.
  const providerPort = await freePort();
  const issuer = `http://127.0.0.1:${providerPort}`;
  gateway = await startGateway({
    AUTH_ISSUER: issuer,
    AUTH_AUDIENCE: AUDIENCE,
    DASHBOARD_OIDC_CLIENT_ID: CLIENT_ID,
    DASHBOARD_OIDC_EXTRA_PARAMS: `resource=${encodeURIComponent(AUDIENCE)}`,
    IDENTITY_GRPC_ADDR: stack.urls.grpc.identity,
    CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
    ANALYTICS_GRPC_ADDR: stack.urls.grpc.analytics,
    DELIVERY_GRPC_ADDR: stack.urls.grpc.delivery,
  });
  provider = await startProvider(providerPort, `${gateway.url}/dashboard/`);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  provider?.kill();
  await target?.close();
});

const testId = (id: string) => `[data-testid="${id}"]`;

/** Signs in through the provider's own pages and waits for the statistics of the user's workspace. */
async function signIn(page: Page, login: keyof typeof ACCOUNTS): Promise<void> {
  await page.goto(`${gateway.url}/dashboard/`);
  await page.click(testId('oidc-sign-in'));
  await page.waitForURL((url) => url.port !== new URL(gateway.url).port);
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', 'any password');
  await page.click('button[type="submit"]');
  await page.click('button:has-text("Continue")');
  await page.waitForURL(`${gateway.url}/dashboard/`);
  await page.waitForSelector(`${testId('dashboard')}[data-status="ready"]`);
}

async function showSuppressions(page: Page): Promise<void> {
  await page.click(testId('nav-suppressions'));
  await page.waitForSelector(`${testId('suppressions-view')}[data-status="ready"]`);
}

const listed = (page: Page) =>
  page.$$eval(`${testId('suppressions-list')} tbody tr`, (rows) =>
    rows.map((row) => [row.getAttribute('data-email'), row.getAttribute('data-reason')]),
  );

async function confirm(page: Page): Promise<void> {
  await page.waitForSelector(`${testId('confirm')}[open]`);
  await page.click(testId('confirm-yes'));
}

describe('an editor', () => {
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    context = await browser.newContext({ acceptDownloads: true });
    page = await context.newPage();
  });

  afterAll(() => context?.close());

  it('signs in through the provider and sees their workspace with its data; no token to paste', async () => {
    await signIn(page, 'editor');
    expect(await page.textContent(testId('user'))).toContain('Edna Editor (editor@example.com)');
    expect(await page.$$eval(`${testId('workspace')} option`, (options) => options.map((o) => o.textContent))).toEqual([
      `${WORKSPACE} (editor)`,
    ]);
    expect(await page.isVisible(testId('auth-form'))).toBe(false);
    expect(await page.textContent(testId('suppressions-table'))).toContain('3');
  });

  it('lists the suppressions, adds one by hand and lifts one, each after a confirmation', async () => {
    await showSuppressions(page);
    expect(await listed(page)).toEqual([
      [READER, 'spam_report'],
      ['gone@example.com', 'unsubscribe'],
      ['hard@example.com', 'hard_bounce'],
    ]);
    await page.fill(testId('add-email'), 'asked@example.com');
    await page.fill(testId('add-note'), 'phoned in');
    await page.click(testId('add-suppression'));
    await confirm(page);
    await page.waitForSelector(`${testId('suppressions-list')} tr[data-email="asked@example.com"]`);
    expect((await listed(page))[0]).toEqual(['asked@example.com', 'manual']);

    await page.click(`${testId('suppressions-list')} tr[data-email="hard@example.com"] ${testId('lift')}`);
    await confirm(page);
    await page.waitForSelector(`${testId('suppressions-list')} tr[data-email="hard@example.com"]`, { state: 'detached' });
    await page.selectOption(testId('suppression-reason'), 'manual');
    await page.waitForSelector(`${testId('suppressions-view')}[data-total="1"][data-status="ready"]`);
    expect(await listed(page)).toEqual([['asked@example.com', 'manual']]);
    await page.selectOption(testId('suppression-reason'), '');
    await page.waitForSelector(`${testId('suppressions-view')}[data-total="3"][data-status="ready"]`);
  });

  it('exports the list as the API answers it in CSV', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(testId('export-csv'))]);
    const csv = fs.readFileSync(await download.path(), 'utf8');
    const lines = csv.trim().split('\r\n');
    expect(lines[0]).toBe('email,reason,suppressed_at');
    expect(lines.slice(1).map((line) => line.split(',').slice(0, 2))).toEqual(await listed(page));
  });

  it("looks an address up: its suppression, the lift's audit and its events", async () => {
    await page.click(`${testId('suppressions-list')} tr[data-email="${READER}"] a`);
    await page.waitForSelector(`${testId('lookup-view')}[data-status="ready"]`);
    expect(await page.textContent(testId('lookup-state'))).toContain('Spam report');
    expect(await page.$$eval(`${testId('lookup-timeline')} tbody tr`, (rows) => rows.length)).toBe(3);
    await page.fill(testId('lookup-email'), 'hard@example.com');
    await page.click(testId('lookup'));
    await page.waitForSelector(`${testId('lookup-view')}[data-suppressed="false"][data-status="ready"]`);
    const history = await page.textContent(testId('lookup-history'));
    expect(history).toContain('lifted');
    expect(history).toContain('editor@example.com');
  });

  it('renews its token before it expires and calls the API with the new one', async () => {
    /** The bearer token of the page's next call to the API. */
    const bearer = async () => {
      const [request] = await Promise.all([page.waitForRequest('**/suppressions/?*'), page.click(testId('suppression-find'))]);
      await page.waitForSelector(`${testId('suppressions-view')}[data-status="ready"]`);
      return request.headers().authorization;
    };
    await showSuppressions(page);
    const expiresAt = async () => Number(await page.getAttribute('body', 'data-token-expires-at'));
    const first = { token: await bearer(), expiresAt: await expiresAt() };
    expect(first.expiresAt).toBeGreaterThan(Date.now() / 1000);
    await page.waitForSelector(`body:not([data-token-expires-at="${first.expiresAt}"])`, { timeout: ACCESS_TOKEN_TTL_S * 1000 });
    expect(await expiresAt()).toBeGreaterThan(first.expiresAt);
    expect(Date.now() / 1000).toBeLessThan(first.expiresAt);
    const renewed = await bearer();
    expect(renewed).toMatch(/^Bearer \S+$/);
    expect(renewed).not.toBe(first.token);
    expect(await page.$$eval(`${testId('suppressions-list')} tbody tr`, (rows) => rows.length)).toBe(3);
  });

  it('signs out through the provider and comes back signed out', async () => {
    await page.click(testId('oidc-sign-out'));
    await page.click('button:has-text("Yes, sign me out")');
    await page.waitForURL(`${gateway.url}/dashboard/`);
    await page.waitForSelector(testId('oidc-sign-in'), { state: 'visible' });
    expect(await page.textContent(testId('user'))).toBe('Not signed in');
  });
});

/** Runs `work` on a page of a browser context of its own, signed in as `login`. */
async function asSignedIn(login: keyof typeof ACCOUNTS, work: (page: Page) => Promise<void>): Promise<void> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await signIn(page, login);
    await work(page);
  } finally {
    await context.close();
  }
}

describe('a viewer', () => {
  it('sees the suppressions and can export them, but neither adds nor lifts', () =>
    asSignedIn('viewer', async (page) => {
      await showSuppressions(page);
      expect((await listed(page)).length).toBe(3);
      expect(await page.$$(testId('lift'))).toEqual([]);
      expect(await page.isVisible(testId('suppression-add'))).toBe(false);
      expect(await page.isVisible(testId('export-csv'))).toBe(true);
    }));
});

describe('an admin', () => {
  it("sees where the workspace's recipients come from, without the form that changes it (platform admins only)", () =>
    asSignedIn('admin', async (page) => {
      await page.click(testId('nav-workspace'));
      await page.waitForSelector(`${testId('workspace-view')}[data-status="ready"][data-shared="true"]`);
      expect(await page.textContent(testId('recipient-source'))).toBe('The shared recipient database of the platform.');
      expect(await page.isVisible('#recipient-form')).toBe(false);
      expect(await page.isVisible(testId('recipient-use-shared'))).toBe(false);
    }));

  it('is the member who sees the workspace page: an editor does not', () =>
    asSignedIn('editor', async (page) => {
      expect(await page.isVisible(testId('nav-workspace'))).toBe(false);
    }));
});
