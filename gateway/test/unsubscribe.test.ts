import crypto from 'node:crypto';
import type { Browser } from 'playwright-core';
import { signUnsubscribeToken, type UnsubscribeClaims } from '@mail/common';
import type { Stack } from '@mail/local';
import { launchChromium } from './support/chromium';
import type { Json } from './support/json';
import { startPrivateStack, type PrivateStack } from './support/private-stack';

/**
 * One-click unsubscribe (RFC 8058) end to end, every process real: the signed link's POST -> gateway ->
 * Kafka -> ingestion -> ClickHouse, until the address is suppressed in the link's workspace. The
 * confirmation page is driven in Chromium.
 */
jest.setTimeout(240_000);

const SIGNING_KEY = crypto.randomBytes(32).toString('base64url');
let target: PrivateStack;
let stack: Stack;
let browser: Browser | undefined;

beforeAll(async () => {
  target = await startPrivateStack('unsubscribe', { env: { UNSUBSCRIBE_SIGNING_KEY: SIGNING_KEY } });
  stack = target.stack;
});

afterAll(async () => {
  await browser?.close();
  await target?.close();
});

async function json(method: string, path: string, workspaceId: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${stack.urls.gateway}${path}`, {
    method,
    headers: { workspace_id: workspaceId, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

/** A fresh workspace with one campaign, made through the public API as the dev user. */
async function campaignInFreshWorkspace(): Promise<{ workspaceId: string; campaignId: string }> {
  const workspace = await json('POST', '/workspaces/', crypto.randomUUID(), { name: `Unsubscribe ${crypto.randomUUID()}` });
  expect(workspace.status).toBe(201);
  const workspaceId = workspace.body.id as string;
  const campaign = await json('POST', '/email-campaigns/', workspaceId, { workspace_id: workspaceId, name: 'Newsletter' });
  expect(campaign.status).toBe(201);
  return { workspaceId, campaignId: campaign.body.id as string };
}

const linkOf = (claims: UnsubscribeClaims, key = SIGNING_KEY) => `${stack.urls.gateway}/unsubscribe/${signUnsubscribeToken(key, claims)}`;

const oneClick = (url: string, body: string | undefined = 'List-Unsubscribe=One-Click') =>
  fetch(url, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' },
    body,
  });

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read();
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

const suppressionsOf = async (workspaceId: string) =>
  (await json('GET', '/suppressions/?page_size=500', workspaceId)).body.items as { email: string; reason: string }[];

it('suppresses the address in the link’s workspace with reason unsubscribe, and stores the event once however often it is posted', async () => {
  const { workspaceId, campaignId } = await campaignInFreshWorkspace();
  const other = await campaignInFreshWorkspace();
  const email = `reader-${crypto.randomUUID()}@example.com`;
  const url = linkOf({ workspaceId, campaignId, runId: crypto.randomUUID(), email });

  const first = await oneClick(url);
  expect(first.status).toBe(200);
  expect(await first.json()).toEqual({ unsubscribed: true });
  // A client that sends no body is answered alike; the second POST of the link is the same event.
  expect((await oneClick(url, undefined)).status).toBe(200);

  const suppressed = await waitFor(
    'the suppression',
    () => suppressionsOf(workspaceId),
    (items) => items.some((item) => item.email === email),
  );
  expect(suppressed).toEqual([expect.objectContaining({ email, reason: 'unsubscribe' })]);
  // Ingestion stores the suppression signal before the event: the event may show a moment later.
  const events = await waitFor(
    'the event',
    () => json('GET', `/campaign-events/?event_type=unsubscribe&email=${encodeURIComponent(email)}`, workspaceId),
    (answer) => answer.body.total !== 0,
  );
  expect(events.body).toMatchObject({
    total: 1,
    items: [{ workspace_id: workspaceId, campaign_id: campaignId, event_type: 'unsubscribe', email, provider: 'smtp' }],
  });
  expect(await suppressionsOf(other.workspaceId)).toEqual([]);
});

it('answers 404 {"detail"} to a token that does not verify, GET and POST, and suppresses nothing', async () => {
  const { workspaceId, campaignId } = await campaignInFreshWorkspace();
  const email = `forged-${crypto.randomUUID()}@example.com`;
  const claims = { workspaceId, campaignId, runId: crypto.randomUUID(), email };
  const genuine = linkOf(claims);
  const forged = [
    linkOf(claims, 'another-key'),
    genuine.slice(0, -2),
    `${stack.urls.gateway}/unsubscribe/not-a-token`,
    `${genuine.slice(0, genuine.lastIndexOf('.'))}.${Buffer.alloc(32).toString('base64url')}`,
  ];
  for (const url of forged) {
    for (const answer of [await fetch(url), await oneClick(url)]) {
      expect([url, answer.status, answer.headers.get('content-type')]).toEqual([url, 404, expect.stringContaining('application/json')]);
      expect(await answer.json()).toEqual({ detail: expect.any(String) });
    }
  }
  // The genuine link goes through after all of them, and is the only suppression.
  expect((await oneClick(genuine)).status).toBe(200);
  const items = await waitFor(
    'the suppression',
    () => suppressionsOf(workspaceId),
    (found) => found.length > 0,
  );
  expect(items.map((item) => item.email)).toEqual([email]);
});

it('answers 404 {"detail"} to a token that is not valid percent-encoding, GET and POST, never 500', async () => {
  const genuine = linkOf({
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    runId: crypto.randomUUID(),
    email: 'a@b.com',
  });
  const malformed = ['%', '%zz', 'a%', '%E0%A4%A', '%C0%AF', `${genuine.slice(genuine.lastIndexOf('/') + 1)}%`];
  for (const token of malformed) {
    const url = `${stack.urls.gateway}/unsubscribe/${token}`;
    for (const answer of [await fetch(url), await oneClick(url)]) {
      expect([token, answer.status, answer.headers.get('content-type')]).toEqual([token, 404, expect.stringContaining('application/json')]);
      expect(await answer.json()).toEqual({ detail: 'Unsubscribe link not found' });
    }
  }
});

it('shows a confirmation page that changes nothing until its button is pressed, in a browser', async () => {
  const { workspaceId, campaignId } = await campaignInFreshWorkspace();
  const email = `browser-${crypto.randomUUID()}@example.com`;
  const url = linkOf({ workspaceId, campaignId, runId: crypto.randomUUID(), email });

  const plain = await fetch(url);
  expect(plain.status).toBe(200);
  expect(plain.headers.get('content-type')).toContain('text/html');
  expect(plain.headers.get('content-security-policy')).toContain("form-action 'self'");

  browser = await launchChromium();
  const page = await browser.newPage();
  await page.goto(url);
  expect(await page.textContent('[data-testid="email"]')).toBe(email);
  // Opening the page (as link scanners do) unsubscribes nobody.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(await suppressionsOf(workspaceId)).toEqual([]);

  await Promise.all([page.waitForURL(url), page.click('[data-testid="unsubscribe"]')]);
  expect(await page.textContent('[data-testid="done"]')).toContain('You will not receive');
  await waitFor(
    'the suppression',
    () => suppressionsOf(workspaceId),
    (items) => items.some((item) => item.email === email && item.reason === 'unsubscribe'),
  );
});
