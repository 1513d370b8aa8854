import crypto from 'node:crypto';
import { Client } from 'pg';
import { signTrackingToken, type TrackingClaims } from '@mail/common';
import { ACCOUNTS_TABLE, createTestPostgres, ensureRecipientDatabase, startMailpit, type Mailpit, type TestPostgres } from '@mail/local';
import { isMachineClick, isMachineOpen } from '../src/tracking/machines';
import type { Json } from './support/json';
import { startPrivateStack, type PrivateStack } from './support/private-stack';

/**
 * First-party tracking end to end, every process real: a run's message as Mailpit received it (links through
 * /t/c/, the pixel from /t/o/), the gateway's answers, and each request's event through Kafka and ingestion in
 * ClickHouse under its run, machine opens and clicks flagged and left out of the unique figures.
 */
jest.setTimeout(300_000);

const SIGNING_KEY = crypto.randomBytes(32).toString('base64url');
const BASE = 'http://track.example.com';
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36';
let target: PrivateStack;
let mailpit: Mailpit;
let recipients: TestPostgres;
let gateway: string;

beforeAll(async () => {
  [mailpit, recipients] = await Promise.all([startMailpit('tracking'), createTestPostgres('tracking_recipients')]);
  const db = new Client({ connectionString: recipients.url });
  await db.connect();
  try {
    await db.query(ACCOUNTS_TABLE);
    await db.query(`INSERT INTO accounts VALUES ('t-1', 'reader@tracking.example.com', 'Ada', 'L')`);
  } finally {
    await db.end();
  }
  target = await startPrivateStack('tracking', {
    env: {
      TRACKING_SIGNING_KEY: SIGNING_KEY,
      TRUSTED_PROXIES: 'loopback',
      PUBLIC_BASE_URL: BASE,
      SMTP_URL: mailpit.smtpUrl,
      RECIPIENTS_DATABASE_URL: await ensureRecipientDatabase(recipients.url),
    },
  });
  gateway = target.stack.urls.gateway;
});

afterAll(async () => {
  await target?.close();
  await mailpit?.close();
  await recipients?.drop();
});

async function json(method: string, path: string, workspaceId: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${gateway}${path}`, {
    method,
    headers: { workspace_id: workspaceId, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read();
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

async function workspace(): Promise<string> {
  const created = await json('POST', '/workspaces/', crypto.randomUUID(), { name: `Tracking ${crypto.randomUUID()}` });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

const track = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
  fetch(`${gateway}${path}`, { method, headers: { 'user-agent': BROWSER, ...headers }, redirect: 'manual' });

const eventsOf = async (workspaceId: string, query: string) =>
  (await json('GET', `/campaign-events/?page_size=500&${query}`, workspaceId, undefined)).body as { total: number; items: Json[] };

describe('a run with tracking', () => {
  let workspaceId: string;
  let runId: string;
  let html: string;

  beforeAll(async () => {
    workspaceId = await workspace();
    const template = await json('POST', '/templates/', workspaceId, {
      name: 'Tracked',
      subject: 'Hello {{first_name}}',
      html:
        '<html><body><p>Hi {{first_name}}</p><a href="https://shop.example.com/a?x=1&amp;y=2">shop</a> ' +
        "<A class='b' HREF='http://blog.example.com/b'>blog</A> <a href=\"mailto:help@example.com\">mail</a> " +
        '<a href="{{unsubscribe_url}}">unsubscribe</a></body></html>',
      text: 'Hi {{first_name}} https://shop.example.com/a',
    });
    expect(template.status).toBe(201);
    const campaign = await json('POST', '/email-campaigns/', workspaceId, {
      workspace_id: workspaceId,
      name: 'Tracked',
      recipient_source: 'csv_account_ids',
      csv_account_ids: ['t-1'],
      from_email: 'news@sender.example.com',
      template_id: template.body.id,
    });
    expect(campaign.body).toMatchObject({ track_opens: true, track_clicks: true });
    const run = await json('POST', `/email-campaigns/${campaign.body.id as string}/runs`, workspaceId, {});
    expect(run.status).toBe(201);
    runId = run.body.id as string;
    const message = await waitFor(
      'the message',
      async () => (await mailpit.messages()).find((item) => item.MessageID.startsWith(`${runId}.`)),
      (found) => found !== undefined,
    );
    const detail = await mailpit.message(message!.ID);
    html = detail.HTML;
    expect(detail.Text).toBe('Hi Ada https://shop.example.com/a');
  });

  const clickPaths = () =>
    [...html.matchAll(/href="http:\/\/track\.example\.com(\/t\/c\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)"/gi)].map((m) => m[1]);
  const openPath = () =>
    /<img src="http:\/\/track\.example\.com(\/t\/o\/[A-Za-z0-9_.-]+)" width="1" height="1" alt=""><\/body>/.exec(html)?.[1];

  it('rewrites the http and https links but unsubscribe, and adds the pixel before </body>', async () => {
    expect(clickPaths()).toHaveLength(2);
    expect(html).toContain('href="mailto:help@example.com"');
    expect(html).toMatch(/<a href="http:\/\/track\.example\.com\/unsubscribe\/[^"]+">unsubscribe<\/a>/);
    expect(html).toContain("<A class='b' HREF=\"http://track.example.com/t/c/");
    expect(openPath()).toBeDefined();
    const [shop, blog] = await Promise.all(clickPaths().map((path) => track(path, {}, 'HEAD')));
    expect([shop.status, shop.headers.get('location')]).toEqual([302, 'https://shop.example.com/a?x=1&y=2']);
    expect([blog.status, blog.headers.get('location')]).toEqual([302, 'http://blog.example.com/b']);
  });

  it('answers the pixel and the redirect, stores each request once under its run, and HEAD nothing', async () => {
    const pixel = await track(openPath()!);
    expect([pixel.status, pixel.headers.get('content-type'), pixel.headers.get('cache-control')]).toEqual([200, 'image/gif', 'no-store']);
    const gif = Buffer.from(await pixel.arrayBuffer());
    expect([gif.subarray(0, 6).toString('latin1'), gif.readUInt16LE(6), gif.readUInt16LE(8)]).toEqual(['GIF89a', 1, 1]);
    expect((await track(openPath()!, {}, 'HEAD')).status).toBe(200);
    const click = await track(clickPaths()[0], { 'x-forwarded-for': '198.51.100.7' });
    expect([click.status, click.headers.get('location')]).toEqual([302, 'https://shop.example.com/a?x=1&y=2']);

    const events = await waitFor(
      'the open and the click',
      () => eventsOf(workspaceId, `run_id=${runId}`),
      (found) => found.total >= 2,
    );
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect((await eventsOf(workspaceId, `run_id=${runId}`)).total).toBe(2);
    const byType = Object.fromEntries(events.items.map((item) => [item.event_type as string, item]));
    expect(byType.open).toMatchObject({ provider: 'tracking', run_id: runId, email: 'reader@tracking.example.com', user_agent: BROWSER });
    expect(byType.open).toMatchObject({ machine_open: false, machine_click: false });
    // The trusted proxy (loopback here) names the client.
    expect(byType.click).toMatchObject({ url: 'https://shop.example.com/a?x=1&y=2', ip: '198.51.100.7', machine_click: false });
    const stats = await json('GET', `/campaign-events/stats?run_id=${runId}`, workspaceId);
    expect(stats.body.totals).toMatchObject({ sent: 1, opens: 1, unique_opens: 1, clicks: 1, unique_clicks: 1 });
  });

  it('flags a privacy proxy’s open and a scanner’s click, and leaves them out of the unique figures', async () => {
    await track(openPath()!, { 'user-agent': 'Mozilla/5.0' });
    await track(openPath()!, { 'x-forwarded-for': '17.58.100.2' });
    await track(clickPaths()[1], { 'user-agent': 'Mozilla/5.0 (compatible; Barracuda Sentinel link scanner)' });
    // Waits for these three events themselves: on a busy host they are stored in any order, and with others of the run.
    const events = await waitFor(
      'the machine events',
      () => eventsOf(workspaceId, `run_id=${runId}`),
      (found) =>
        found.items.filter((item) => item.machine_open === true).length >= 2 && found.items.some((item) => item.machine_click === true),
    );
    expect(events.items.filter((item) => item.machine_open === true)).toHaveLength(2);
    expect(events.items.filter((item) => item.machine_click === true)).toEqual([
      expect.objectContaining({ url: 'http://blog.example.com/b' }),
    ]);
    const stats = await json('GET', `/campaign-events/stats?run_id=${runId}`, workspaceId);
    expect(stats.body.totals).toMatchObject({
      opens: 3,
      machine_opens: 2,
      unique_opens: 1,
      clicks: 2,
      machine_clicks: 1,
      unique_clicks: 1,
    });
  });
});

it('answers 404 to a forged, tampered or cross-kind token and redirects nowhere', async () => {
  const claims: TrackingClaims = {
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    variantId: null,
    runId: crypto.randomUUID(),
    email: 'x@example.com',
  };
  const click = signTrackingToken(SIGNING_KEY, 'c', { ...claims, url: 'https://example.com/' });
  const [payload, signature] = click.split('.');
  const otherPayload = signTrackingToken(SIGNING_KEY, 'c', { ...claims, url: 'https://evil.example.net/' }).split('.')[0];
  const forged = [
    `/t/c/${signTrackingToken('another-key', 'c', { ...claims, url: 'https://evil.example.net/' })}`,
    `/t/c/${otherPayload}.${signature}`,
    `/t/c/${payload}.${signature.slice(0, -1)}${signature.endsWith('A') ? 'Q' : 'A'}`,
    `/t/c/${click.slice(0, -2)}`,
    `/t/c/${signTrackingToken(SIGNING_KEY, 'o', claims)}`,
    `/t/o/${click}`,
    '/t/c/not-a-token',
    '/t/c/%zz',
  ];
  for (const path of forged) {
    for (const method of ['GET', 'HEAD']) {
      const answer = await track(path, {}, method);
      expect([path, method, answer.status, answer.headers.get('location')]).toEqual([path, method, 404, null]);
    }
  }
});

describe('machine rules', () => {
  it('takes Apple’s privacy proxy (its bare user agent, its network) for a machine open', () => {
    expect(isMachineOpen({ userAgent: 'Mozilla/5.0', ip: '203.0.113.9' })).toBe(true);
    expect(isMachineOpen({ userAgent: BROWSER, ip: '17.58.100.2' })).toBe(true);
    expect(isMachineOpen({ userAgent: BROWSER, ip: '::ffff:17.1.2.3' })).toBe(true);
    expect(isMachineOpen({ userAgent: BROWSER, ip: '18.0.0.1' })).toBe(false);
    expect(
      isMachineOpen({ userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15', ip: '198.51.100.1' }),
    ).toBe(false);
  });

  it('takes link scanners, previews and HTTP libraries for machines, browsers and mail clients for people', () => {
    for (const agent of [
      'Mozilla/5.0 (compatible; Barracuda Sentinel link scanner)',
      'Proofpoint URL Defense',
      'Mimecast',
      'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)',
      'python-requests/2.32.3',
      'Python-urllib/3.12',
      'curl/8.5.0',
      'Wget/1.21.4',
      'Go-http-client/1.1',
      'okhttp/4.12.0',
      'Java/21.0.5',
      'libwww-perl/6.77',
      'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36',
      'Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1',
      'Mozilla/5.0 (compatible; SomeCrawler/1.0)',
      'Mozilla/5.0 (compatible; Yahoo! Slurp; spider)',
      'Mozilla/5.0 (compatible; LinkPreview/1.0)',
      'Microsoft Office SafeLinks',
      'Mozilla/5.0 (compatible; urldefense)',
      'Mozilla/5.0 (compatible; virus scanner)',
    ]) {
      expect([agent, isMachineClick({ userAgent: agent }), isMachineOpen({ userAgent: agent })]).toEqual([agent, true, true]);
    }
    for (const agent of [BROWSER, 'Microsoft Outlook 16.0.17928', 'Thunderbird/128.5.0', undefined]) {
      expect([agent, isMachineClick({ userAgent: agent })]).toEqual([agent, false]);
    }
  });
});
