import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { Client } from 'pg';
import {
  createTestPostgres,
  ensureRecipientDatabase,
  startMailpit,
  startStack,
  uniqueSuffix,
  type Mailpit,
  type Stack,
  type TestPostgres,
} from '@mail/local';
import { launchChromium } from './support/chromium';
import { startPrivateStack, type PrivateStack } from './support/private-stack';

/**
 * The analytics dashboard in a real browser (Debian's chromium driven by
 * playwright-core) against the whole stack with DEV_AUTH_ENABLED=1. Events go
 * in through the provider webhook (-> Kafka -> ingestion -> ClickHouse); the
 * page must show exactly the numbers GET /campaign-events/stats gives for the
 * same filters.
 */

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const DASHBOARD_INDEX = path.join(REPO_ROOT, 'gateway', 'dashboard', 'dist', 'index.html');
const SCREENSHOT_DIR = path.join(REPO_ROOT, 'test-output');
const DAY_SECONDS = 86_400;
// Bounds for a busy host, where a page step or a whole scenario takes several times what it does on a quiet one;
// a wait ends as soon as its condition holds.
const STEP_MS = 30_000;
jest.setTimeout(300_000);

/** The figures of the totals, in the page's order; the rates are the `_rate` ones. */
const METRICS = [
  'sent',
  'processed',
  'delivered',
  'delivery_rate',
  'deferred',
  'dropped',
  'opens',
  'machine_opens',
  'unique_opens',
  'open_rate',
  'clicks',
  'unique_clicks',
  'click_rate',
  'click_to_open_rate',
  'hard_bounces',
  'soft_bounces',
  'bounce_rate',
  'unsubscribes',
  'unsubscribe_rate',
  'spam_reports',
  'spam_report_rate',
] as const;
type Metric = (typeof METRICS)[number];
type RateMetric = Extract<Metric, `${string}_rate`>;
/** Counts are numbers; rates are null on a zero denominator. */
type Counts = Record<Exclude<Metric, RateMetric>, number> & Record<RateMetric, number | null>;
/** The columns of the per-campaign and per-bucket tables. */
const TABLE_METRICS: readonly Metric[] = [
  'sent',
  'processed',
  'delivered',
  'delivery_rate',
  'opens',
  'unique_opens',
  'open_rate',
  'unique_clicks',
  'click_rate',
  'click_to_open_rate',
  'bounce_rate',
  'unsubscribe_rate',
  'spam_report_rate',
];
/** The figure columns of the variants panel. */
const VARIANT_METRICS: readonly Metric[] = [
  'delivered',
  'opens',
  'machine_opens',
  'unique_opens',
  'open_rate',
  'unique_clicks',
  'click_rate',
  'click_to_open_rate',
];

interface CampaignStats extends Counts {
  campaign_id: string;
  leader_by_open_rate: string | null;
  leader_by_click_rate: string | null;
}

interface VariantStats extends Counts {
  campaign_id: string;
  variant_id: string;
  label: string | null;
  weight: number | null;
  is_active: boolean;
}

interface Stats {
  totals: Counts;
  campaigns: CampaignStats[];
  variants: VariantStats[];
  series: Array<Counts & { bucket_start: string }>;
  top_links: Array<{ campaign_id: string; url: string; clicks: number; unique_clicks: number }>;
  suppressions: { total: number; hard_bounce: number; soft_bounces: number; unsubscribe: number; spam_report: number };
}

let target: PrivateStack;
let stack: Stack;
/** For the campaign runs: where they send, and whom. */
let mailpit: Mailpit;
let recipients: TestPostgres;
/** Accounts acc-1 .. acc-RUN_ACCOUNTS of the recipient database, plus one malformed address ('bad') and a repeat of acc-1's ('again'). */
const RUN_ACCOUNTS = 30;
let browser: Browser;
let workspaceId: string;
const campaigns: Record<'spring' | 'news' | 'ab', { id: string; name: string; category: string }> = {
  spring: { id: '', name: 'Spring sale', category: '' },
  news: { id: '', name: 'Weekly newsletter', category: '' },
  ab: { id: '', name: 'Subject line test', category: '' },
};
/** The A/B campaign's variants, as the campaign service made them. */
let abVariants: Array<{ id: string; label: string }> = [];
/** Per variant of the A/B campaign: recipients (all delivered), human openers, machine openers, clickers. */
const AB_OUTCOMES = [
  { recipients: 60, opens: 30, machine: 4, clicks: 5 },
  { recipients: 60, opens: 8, machine: 0, clicks: 4 },
];

/** Seconds since the epoch, `days` days and `hours` hours ago. */
const ago = (days: number, hours = 0): number => Math.floor(Date.now() / 1000) - days * DAY_SECONDS - hours * 3600;
const utcDate = (daysAgo: number): string => new Date(Date.now() - daysAgo * DAY_SECONDS * 1000).toISOString().slice(0, 10);

/** Posts provider events to the webhook as a provider does: a 503 (Kafka busy or away) is posted again after a while. */
async function postEvents(events: unknown[]): Promise<{ accepted: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await api<{ accepted: number }>('POST', '/campaign-events/webhook', events);
    } catch (error) {
      if (attempt === 20 || !(error as Error).message.includes(' answered 503:')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

async function api<T>(method: string, route: string, body?: unknown, workspace?: string): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (workspace) headers.workspace_id = workspace;
  const response = await fetch(`${stack.urls.gateway}${route}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

function statsQuery(from: string, to: string, interval: 'day' | 'hour'): string {
  return new URLSearchParams({ date_from: from, date_to: to, interval }).toString();
}

const stats = (from: string, to: string, interval: 'day' | 'hour' = 'day', campaignId?: string): Promise<Stats> =>
  api<Stats>(
    'GET',
    `/campaign-events/stats?${statsQuery(from, to, interval)}${campaignId ? `&campaign_id=${campaignId}` : ''}`,
    undefined,
    workspaceId,
  );

/** SendGrid Event Webhook items: opens, clicks, bounces, unsubscribes and a spam report over the last two weeks. */
function seedEvents(): Array<Record<string, unknown>> {
  const events: Array<Record<string, unknown>> = [];
  let n = 0;
  const add = (campaign: keyof typeof campaigns, event: string, email: string, timestamp: number, extra: Record<string, unknown> = {}) =>
    events.push({
      email,
      timestamp,
      event,
      sg_event_id: `dash-${campaigns[campaign].category}-${++n}`,
      sg_message_id: `msg-${email}.filter0001`,
      category: [campaigns[campaign].category],
      useragent: 'Mozilla/5.0',
      ip: '203.0.113.7',
      ...extra,
    });
  const link = (url: string) => ({ url });
  // Inside the last 7 days.
  for (const [i, email] of ['ann@example.com', 'bob@example.com', 'cat@example.com', 'dan@example.com'].entries()) {
    add('spring', 'open', email, ago(1, i));
    add('spring', 'open', email, ago(2, i));
  }
  add('spring', 'open', 'eve@example.com', ago(3));
  add('spring', 'click', 'ann@example.com', ago(1), link('https://shop.example.com/spring'));
  add('spring', 'click', 'ann@example.com', ago(1, 1), link('https://shop.example.com/spring'));
  add('spring', 'click', 'bob@example.com', ago(2), link('https://shop.example.com/spring'));
  add('spring', 'click', 'cat@example.com', ago(2), link('https://shop.example.com/terms'));
  add('spring', 'bounce', 'gone@example.com', ago(2), { type: 'bounce', reason: '550 5.1.1 no such user' });
  add('spring', 'bounce', 'full@example.com', ago(3), { type: 'blocked', reason: '452 mailbox full' });
  add('spring', 'unsubscribe', 'dan@example.com', ago(4));
  add('spring', 'spamreport', 'eve@example.com', ago(3));
  add('news', 'open', 'ann@example.com', ago(5));
  add('news', 'open', 'fay@example.com', ago(5, 2));
  add('news', 'click', 'fay@example.com', ago(5, 1), link('https://news.example.com/issue-42'));
  add('news', 'group_unsubscribe', 'fay@example.com', ago(6, -1));
  // Older: only a two-week range shows these.
  add('news', 'open', 'gus@example.com', ago(10));
  add('news', 'open', 'hal@example.com', ago(12));
  add('news', 'click', 'hal@example.com', ago(12), link('https://news.example.com/issue-41'));
  add('news', 'bounce', 'old@example.com', ago(11), { type: 'bounce', reason: '550 5.1.1 no such user' });
  add('spring', 'processed', 'ann@example.com', ago(1, 4));
  add('spring', 'delivered', 'ann@example.com', ago(1, 3));
  // The A/B test: every message processed and delivered; variant A opened far more often (significant), clicks alike.
  AB_OUTCOMES.forEach((outcome, index) => {
    const variant = { variant_id: abVariants[index].id };
    for (let i = 0; i < outcome.recipients; i++) {
      const email = `ab${index}-${i}@example.com`;
      add('ab', 'processed', email, ago(2, 2), variant);
      add('ab', 'delivered', email, ago(2, 1), variant);
      if (i < outcome.opens) add('ab', 'open', email, ago(i % 2 === 0 ? 1 : 2), variant);
      if (i >= outcome.recipients - outcome.machine) add('ab', 'open', email, ago(2), { ...variant, sg_machine_open: true });
      if (i < outcome.clicks) add('ab', 'click', email, ago(1), { ...variant, url: 'https://shop.example.com/ab' });
    }
  });
  return events;
}

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)} ${lastError instanceof Error ? lastError.message : ''}`);
}

beforeAll(async () => {
  if (!fs.existsSync(DASHBOARD_INDEX)) throw new Error(`${DASHBOARD_INDEX} is missing: run npm run build`);

  const suffix = uniqueSuffix();
  browser = await launchChromium();
  [mailpit, recipients] = await Promise.all([startMailpit('dashboard'), createTestPostgres('dashboard_recipients')]);
  const db = new Client({ connectionString: recipients.url });
  await db.connect();
  try {
    await db.query('CREATE TABLE accounts (account_id text PRIMARY KEY, email text NOT NULL, first_name text, last_name text)');
    await db.query(
      `INSERT INTO accounts SELECT 'acc-' || n, 'reader' || n || '@runs.example.com', 'Reader' || n, 'Last' FROM generate_series(1, $1::int) AS n`,
      [RUN_ACCOUNTS],
    );
    await db.query(
      `INSERT INTO accounts VALUES ('bad', 'not-an-address', 'Bad', 'Row'), ('again', 'Reader1@runs.example.com', 'Again', 'Row')`,
    );
  } finally {
    await db.end();
  }
  target = await startPrivateStack('dashboard', {
    env: {
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      KAFKA_TOPIC_PARTITIONS: '1',
      RECIPIENTS_DATABASE_URL: await ensureRecipientDatabase(recipients.url),
      SMTP_URL: mailpit.smtpUrl,
      UNSUBSCRIBE_SIGNING_KEY: `dashboard-${suffix}`,
      TRACKING_SIGNING_KEY: `dashboard-tracking-${suffix}`,
      // Slow enough that a run is still sending when its Pause button is pressed.
      SEND_RATE_PER_SECOND: '10',
    },
  });
  stack = target.stack;

  // Every endpoint but /auth/me takes a workspace_id header; creating a workspace ignores its value.
  workspaceId = (await api<{ id: string }>('POST', '/workspaces/', { name: `Dashboard ${suffix}` }, randomUUID())).id;
  for (const [key, campaign] of Object.entries(campaigns)) {
    campaign.category = `dash-${key}-${suffix}`;
    const variants =
      key === 'ab'
        ? {
            delivery_mode: 'variants',
            variants: [
              { template_id: 'tpl-a', weight: 1, label: 'Short subject' },
              { template_id: 'tpl-b', weight: 1, label: 'Long subject' },
            ],
          }
        : {};
    const created = await api<{ id: string; variants: Array<{ id: string; label: string }> | null }>(
      'POST',
      '/email-campaigns/',
      { workspace_id: workspaceId, name: campaign.name, provider_category_id: campaign.category, ...variants },
      workspaceId,
    );
    campaign.id = created.id;
    if (key === 'ab') abVariants = created.variants!;
  }

  const events = seedEvents();
  const accepted = await postEvents(events);
  expect(accepted.accepted).toBe(events.length);
  const opens = events.filter((e) => e.event === 'open').length;
  const unsubscribes = events.filter((e) => e.event === 'unsubscribe' || e.event === 'group_unsubscribe').length;
  await waitFor(
    'the seeded events in the stats',
    () => stats(utcDate(14), utcDate(0)),
    (s) => s.totals.opens === opens && s.totals.unsubscribes === unsubscribes && s.suppressions.spam_report === 1,
  );
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await target?.close();
  await mailpit?.close();
  await recipients?.drop();
});

const formatCount = (value: number): string => value.toLocaleString('en-US');
const formatRate = (ratio: number | null): string => (ratio === null ? '–' : `${(ratio * 100).toFixed(1)}%`);
const format = (metric: Metric, value: number | null): string => (metric.endsWith('_rate') ? formatRate(value) : formatCount(value ?? 0));
const cellsOf = (counts: Counts, metrics: readonly Metric[]) => Object.fromEntries(metrics.map((m) => [m, format(m, counts[m])]));

/** What the page shows, read from the DOM (the callbacks run in the page). */
async function rendered(page: Page) {
  const totals = await page
    .locator('[data-testid="totals"] .card')
    .evaluateAll((cards) => cards.map((card) => [card.getAttribute('data-testid'), card.querySelector('dd')?.textContent?.trim()]));
  const campaignRows = await page.locator('[data-testid="campaigns-table"] tbody tr[data-campaign-id]').evaluateAll((rows) =>
    rows.map((row) => ({
      id: row.getAttribute('data-campaign-id'),
      name: row.querySelector('th')?.textContent?.trim(),
      cells: Object.fromEntries(
        [...row.querySelectorAll('td[data-metric]')].map((td) => [td.getAttribute('data-metric'), td.textContent?.trim()]),
      ),
    })),
  );
  const links = await page
    .locator('[data-testid="links-table"] tbody tr')
    .evaluateAll((rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent?.trim())));
  const suppressions = await page
    .locator('[data-testid="suppressions-table"] td[data-testid]')
    .evaluateAll((cells) => cells.map((td) => [td.getAttribute('data-testid'), td.textContent?.trim()]));
  const funnel = await page
    .locator('[data-testid="funnel"] [data-testid^="funnel-"]')
    .evaluateAll((nodes) =>
      nodes.filter((node) => node.tagName !== 'LI').map((node) => [node.getAttribute('data-testid'), node.textContent?.trim()]),
    );
  const variantBlocks = await page.locator('[data-testid="variants-campaign"]').evaluateAll((blocks) =>
    blocks.map((block) => ({
      campaign: block.getAttribute('data-campaign-id'),
      openVerdict: [
        block.querySelector('[data-testid="verdict-open-rate"]')?.getAttribute('data-leader'),
        block.querySelector('[data-testid="verdict-open-rate"]')?.textContent?.trim(),
      ],
      clickVerdict: [
        block.querySelector('[data-testid="verdict-click-rate"]')?.getAttribute('data-leader'),
        block.querySelector('[data-testid="verdict-click-rate"]')?.textContent?.trim(),
      ],
      rows: [...block.querySelectorAll('tbody tr')].map((row) => ({
        id: row.getAttribute('data-variant-id'),
        name: row.querySelector('th')?.textContent?.trim(),
        leads: row.querySelector('[data-field="leads"]')?.textContent?.trim(),
        weight: row.querySelector('[data-field="weight"]')?.textContent?.trim(),
        active: row.querySelector('[data-field="is_active"]')?.textContent?.trim(),
        cells: Object.fromEntries(
          [...row.querySelectorAll('td[data-metric]')].map((td) => [td.getAttribute('data-metric'), td.textContent?.trim()]),
        ),
      })),
    })),
  );
  return {
    totals: Object.fromEntries((totals as string[][]).map(([id, value]) => [id.replace(/^total-/, '').replace(/-/g, '_'), value])),
    funnel: Object.fromEntries(funnel as string[][]),
    variants: variantBlocks,
    variantsShown: await page.isVisible('[data-testid="variants"]'),
    campaigns: campaignRows,
    links,
    suppressions: Object.fromEntries(suppressions as string[][]),
    points: Number(await page.getAttribute('[data-testid="chart"]', 'data-points')),
    seriesRows: await page.locator('[data-testid="series-table"] tbody tr').count(),
    chartDrawn: (await page.locator('[data-testid="chart"] canvas').count()) === 1,
  };
}

/** Everything on screen equals the API's answer for the same filters. */
async function expectPageShows(page: Page, api: Stats): Promise<void> {
  const names = new Map(Object.values(campaigns).map((c) => [c.id, c.name]));
  const shown = await rendered(page);
  expect(shown.totals).toEqual(cellsOf(api.totals, METRICS));
  const totals = api.totals;
  expect(shown.funnel).toEqual({
    'funnel-sent-value': formatCount(totals.sent),
    'funnel-processed-value': formatCount(totals.processed),
    'funnel-delivered-value': formatCount(totals.delivered),
    'funnel-delivery-rate': `${formatRate(totals.delivery_rate)} delivery rate`,
    'funnel-unique-opens-value': formatCount(totals.unique_opens),
    'funnel-open-rate': `${formatRate(totals.open_rate)} open rate`,
    'funnel-opens':
      totals.opens === 0 ? '0 opens' : `${formatCount(totals.opens)} opens, ${formatRate(totals.machine_opens / totals.opens)} machine`,
    'funnel-unique-clicks-value': formatCount(totals.unique_clicks),
    'funnel-click-rate': `${formatRate(totals.click_rate)} click rate`,
    'funnel-click-to-open-rate': `${formatRate(totals.click_to_open_rate)} click-to-open`,
  });
  expect(shown.campaigns).toEqual(
    api.campaigns.map((row) => ({
      id: row.campaign_id,
      name: names.get(row.campaign_id),
      cells: cellsOf(row, TABLE_METRICS),
    })),
  );
  const withVariants = api.campaigns.filter((campaign) => api.variants.some((variant) => variant.campaign_id === campaign.campaign_id));
  expect(shown.variantsShown).toBe(withVariants.length > 0);
  const variantName = (variant: VariantStats | undefined) => variant?.label ?? `Variant ${variant?.variant_id.slice(0, 8)}…`;
  expect(shown.variants).toEqual(
    withVariants.map((campaign) => {
      const own = api.variants.filter((variant) => variant.campaign_id === campaign.campaign_id);
      const verdict = (leader: string | null, rate: string) => [
        leader ?? '',
        leader
          ? `Leader by ${rate}: ${variantName(own.find((variant) => variant.variant_id === leader))} (95 % confidence)`
          : `By ${rate}: no significant difference yet`,
      ];
      return {
        campaign: campaign.campaign_id,
        openVerdict: verdict(campaign.leader_by_open_rate, 'open rate'),
        clickVerdict: verdict(campaign.leader_by_click_rate, 'click rate'),
        rows: own.map((variant) => ({
          id: variant.variant_id,
          name: variantName(variant),
          leads: [
            variant.variant_id === campaign.leader_by_open_rate ? 'open rate' : undefined,
            variant.variant_id === campaign.leader_by_click_rate ? 'click rate' : undefined,
          ]
            .filter((mark) => mark !== undefined)
            .join(', '),
          weight: variant.weight === null ? '–' : String(variant.weight),
          active: variant.is_active ? 'yes' : 'no',
          cells: cellsOf(variant, VARIANT_METRICS),
        })),
      };
    }),
  );
  expect(shown.links).toEqual(
    api.top_links.map((link) => [link.url, names.get(link.campaign_id), formatCount(link.clicks), formatCount(link.unique_clicks)]),
  );
  expect(shown.suppressions).toEqual({
    'bounces-hard': formatCount(api.totals.hard_bounces),
    'bounces-soft': formatCount(api.totals.soft_bounces),
    'suppressions-total': formatCount(api.suppressions.total),
    'suppressions-hard-bounce': formatCount(api.suppressions.hard_bounce),
    'suppressions-soft-bounces': formatCount(api.suppressions.soft_bounces),
    'suppressions-unsubscribe': formatCount(api.suppressions.unsubscribe),
    'suppressions-spam-report': formatCount(api.suppressions.spam_report),
  });
  expect(shown.points).toBe(api.series.length);
  expect(shown.seriesRows).toBe(Math.max(1, api.series.length));
  expect(shown.chartDrawn).toBe(true);
  expect(await page.isVisible('[data-testid="results"]')).toBe(true);
}

/** The page has rendered the answer for exactly these filters. */
async function waitForView(page: Page, from: string, to: string, interval: 'day' | 'hour', campaignId = ''): Promise<void> {
  const query = new URLSearchParams({ workspace_id: workspaceId, date_from: from, date_to: to, interval, campaign_id: campaignId });
  try {
    await page.waitForSelector(`main[data-status="ready"][data-query="${query.toString()}"]`, { timeout: STEP_MS });
  } catch (error) {
    // What the page shows instead says why: an error answer, or a load still running.
    const shown = await page.evaluate<string>(`(() => {
      const main = document.querySelector('main');
      return JSON.stringify({ status: main.dataset.status, query: main.dataset.query, error: document.querySelector('[data-testid="error"]').textContent });
    })()`);
    throw new Error(`${(error as Error).message}\nThe page shows ${shown}`);
  }
}

test('the dashboard shows the API numbers for the chosen workspace and dates, and redraws on a new range', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems: string[] = [];
  const foreignRequests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('request', (request) => {
    if (!request.url().startsWith(`${stack.urls.gateway}/`)) foreignRequests.push(request.url());
  });

  await page.goto(`${stack.urls.gateway}/dashboard`);
  await page.waitForSelector('main[data-status="ready"]', { timeout: STEP_MS });
  // A string: it runs in the page, whose DOM types this Node-typed file does not have.
  const timing = await page.evaluate<{ domContentLoaded: number; load: number; firstView: number }>(`(() => {
    const navigation = performance.getEntriesByType('navigation')[0];
    const firstView = performance.getEntriesByName('dashboard-first-view')[0];
    return { domContentLoaded: navigation.domContentLoadedEventEnd, load: navigation.loadEventEnd, firstView: firstView.startTime };
  })()`);
  expect(await page.textContent('[data-testid="user"]')).toContain('dev@example.com');

  // The default range is the last 7 days (UTC), per day.
  expect(await page.inputValue('[data-testid="date-from"]')).toBe(utcDate(6));
  expect(await page.inputValue('[data-testid="date-to"]')).toBe(utcDate(0));

  await page.selectOption('[data-testid="workspace"]', workspaceId);
  await page.fill('[data-testid="date-from"]', utcDate(6));
  await page.fill('[data-testid="date-to"]', utcDate(0));
  await page.click('[data-testid="apply"]');
  await waitForView(page, utcDate(6), utcDate(0), 'day');
  const week = await stats(utcDate(6), utcDate(0));
  expect(week.totals.opens).toBeGreaterThan(0);
  await expectPageShows(page, week);

  // Two weeks: older events join, the chart is redrawn with their buckets.
  await page.fill('[data-testid="date-from"]', utcDate(13));
  await page.click('[data-testid="apply"]');
  await waitForView(page, utcDate(13), utcDate(0), 'day');
  const fortnight = await stats(utcDate(13), utcDate(0));
  expect(fortnight.totals.opens).toBeGreaterThan(week.totals.opens);
  expect(fortnight.series.length).not.toBe(week.series.length);
  await expectPageShows(page, fortnight);

  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard.png'), fullPage: true });

  // Per hour over the same range.
  await page.selectOption('[data-testid="interval"]', 'hour');
  await waitForView(page, utcDate(13), utcDate(0), 'hour');
  await expectPageShows(page, await stats(utcDate(13), utcDate(0), 'hour'));

  // One campaign: its funnel, and its variants with the leader marked.
  await page.selectOption('[data-testid="interval"]', 'day');
  await waitForView(page, utcDate(13), utcDate(0), 'day');
  await page.selectOption('[data-testid="campaign"]', campaigns.ab.id);
  await waitForView(page, utcDate(13), utcDate(0), 'day', campaigns.ab.id);
  const ab = await stats(utcDate(13), utcDate(0), 'day', campaigns.ab.id);
  expect(ab.variants.map((variant) => variant.label)).toEqual(['Short subject', 'Long subject']);
  // The seed makes the first variant's open rate lead at 95 % and the click rates alike: one leader, one verdict of none.
  expect(ab.campaigns).toMatchObject([{ leader_by_open_rate: abVariants[0].id, leader_by_click_rate: null }]);
  expect(ab.totals).toMatchObject({ processed: 120, delivered: 120, machine_opens: 4, unique_opens: 38 });
  await expectPageShows(page, ab);
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-variants.png'), fullPage: true });

  expect(problems).toEqual([]);
  expect(foreignRequests).toEqual([]);
  console.log(
    `dashboard timing (ms from navigation start): DOMContentLoaded ${timing.domContentLoaded.toFixed(0)}, ` +
      `load ${timing.load.toFixed(0)}, first statistics on screen ${timing.firstView.toFixed(0)}`,
  );
  await context.close();
});

test('with token checks on, the page loads without a token and shows the API 401 for a missing or bad token', async () => {
  // A second gateway on the same services, verifying tokens (against a JWKS nobody serves: no token passes).
  const jwtStateDir = fs.mkdtempSync(path.join(target.stateDir, 'jwt-'));
  const jwtGateway = await startStack({
    stateDir: jwtStateDir,
    logDir: path.join(jwtStateDir, 'logs'),
    processes: ['gateway'],
    env: {
      DEV_AUTH_ENABLED: '0',
      AUTH_JWKS_URL: 'http://127.0.0.1:9/.well-known/jwks.json',
      AUTH_ISSUER: 'https://issuer.invalid/',
      AUTH_AUDIENCE: 'mail-platform',
      LOG_LEVEL: 'warn',
      KAFKA_EVENTS_TOPIC: target.env.KAFKA_EVENTS_TOPIC,
      IDENTITY_GRPC_ADDR: stack.urls.grpc.identity,
      CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
      BRAND_GUIDE_GRPC_ADDR: stack.urls.grpc['brand-guide'],
      ANALYTICS_GRPC_ADDR: stack.urls.grpc.analytics,
      DELIVERY_GRPC_ADDR: stack.urls.grpc.delivery,
    },
  });
  try {
    const page = await browser.newPage();
    await page.goto(`${jwtGateway.urls.gateway}/dashboard`);
    await page.waitForSelector('main[data-status="error"]', { timeout: STEP_MS });
    expect(await page.textContent('[data-testid="error"]')).toMatch(/^401 Unauthorized: \S.* Paste a valid token above and sign in\.$/);
    expect(await page.evaluate('document.activeElement.id')).toBe('token');

    await page.fill('[data-testid="token"]', 'Bearer not-a-real-token');
    const [request] = await Promise.all([page.waitForRequest('**/auth/me'), page.click('[data-testid="sign-in"]')]);
    expect(request.headers().authorization).toBe('Bearer not-a-real-token');
    await page.waitForSelector('main[data-status="error"]', { timeout: STEP_MS });
    expect(await page.textContent('[data-testid="error"]')).toMatch(/^401 Unauthorized: /);
    expect(await page.inputValue('[data-testid="token"]')).toBe('');
    expect(await page.evaluate(`sessionStorage.getItem('mail-dashboard.token')`)).toBe('not-a-real-token');

    await page.click('[data-testid="sign-out"]');
    expect(await page.evaluate(`sessionStorage.getItem('mail-dashboard.token')`)).toBeNull();
    expect(await page.getAttribute('main', 'data-status')).toBe('idle');
    await page.close();
  } finally {
    await jwtGateway.stopAll();
  }
});

interface Run {
  id: string;
  status: string;
  counts: Record<'recipients' | 'sent' | 'failed' | 'suppressed' | 'invalid' | 'duplicates' | 'pending' | 'unknown', number>;
}

/** A run with its A/B test and audience (docs/api.md, "A/B test, then the winner", "Follow-up runs"). */
interface AbRun extends Run {
  campaign_id: string;
  ab_test: {
    phase: string;
    test_recipients: number;
    winner_variant_id: string | null;
    decided_by: string | null;
    variants: Array<{ variant_id: string; sent: number; rate: number | null }>;
  } | null;
  audience: { run_id: string; engagement: string } | null;
}

/** A run's row as the page shows it. */
async function runRow(page: Page, runId: string) {
  const row = page.locator(`[data-testid="runs-list"] tr[data-run-id="${runId}"]`);
  const text = async (testId: string) => (await row.locator(`[data-testid="${testId}"]`).textContent())?.trim();
  const bar = row.locator('[data-testid="run-progress-bar"]');
  return {
    status: await text('run-status'),
    progress: await text('run-progress-text'),
    bar: [Number(await bar.getAttribute('value')), Number(await bar.getAttribute('max'))],
    counts: Object.fromEntries(
      await Promise.all(
        (['sent', 'failed', 'suppressed', 'invalid', 'duplicates', 'pending', 'unknown'] as const).map(async (key) => [
          key,
          await text(`run-${key}`),
        ]),
      ),
    ),
    actions: await row
      .locator('[data-testid="run-actions"] button')
      .evaluateAll((buttons) => buttons.map((b) => b.getAttribute('data-testid'))),
  };
}

const shownRun = (run: Run) => ({
  status: run.status,
  progress: `${formatCount(run.counts.sent)} of ${formatCount(run.counts.recipients)} sent`,
  bar: [run.counts.sent, Math.max(run.counts.recipients, 1)],
  counts: Object.fromEntries(
    (['sent', 'failed', 'suppressed', 'invalid', 'duplicates', 'pending', 'unknown'] as const).map((k) => [k, formatCount(run.counts[k])]),
  ),
});

test('campaign runs: send now, watch the progress to the end, see the recipients by status; pause, resume and cancel', async () => {
  const template = await api<{ id: string }>(
    'POST',
    '/templates/',
    { name: 'Runs', subject: 'Hello {{first_name}}', text: 'Hi {{first_name}}. Leave: {{unsubscribe_url}}' },
    workspaceId,
  );
  const accountIds = [...Array.from({ length: RUN_ACCOUNTS }, (_, i) => `acc-${i + 1}`), 'bad', 'again'];
  const campaign = await api<{ id: string }>(
    'POST',
    '/email-campaigns/',
    {
      workspace_id: workspaceId,
      name: 'A run to watch',
      recipient_source: 'csv_account_ids',
      csv_account_ids: accountIds,
      from_email: 'news@sender.example.com',
      template_id: template.id,
    },
    workspaceId,
  );
  const runOf = (id: string) => api<Run>('GET', `/campaign-runs/${id}`, undefined, workspaceId);

  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  await page.goto(`${stack.urls.gateway}/dashboard#runs`);
  await page.waitForSelector('[data-testid="runs-view"][data-status="ready"]', { timeout: STEP_MS });
  await page.selectOption('[data-testid="workspace"]', workspaceId);
  await page.waitForSelector(`[data-testid="runs-campaign"] option[value="${campaign.id}"]`, { state: 'attached', timeout: STEP_MS });
  await page.selectOption('[data-testid="runs-campaign"]', campaign.id);
  await page.waitForSelector('[data-testid="runs-view"][data-total="0"]', { timeout: STEP_MS });

  // Send now: the new run appears, its bar fills while it sends, and it ends completed with the API's figures.
  await page.click('[data-testid="send-now"]');
  const first = page.locator('[data-testid="runs-list"] tbody tr').first();
  await first.waitFor({ timeout: STEP_MS });
  const runId = (await first.getAttribute('data-run-id'))!;
  await page.waitForSelector(`tr[data-run-id="${runId}"][data-status="completed"]`, { timeout: 60_000 });
  const completed = await runOf(runId);
  expect(completed.counts).toMatchObject({ recipients: RUN_ACCOUNTS + 1, sent: RUN_ACCOUNTS, invalid: 1, duplicates: 1, pending: 0 });
  expect(await runRow(page, runId)).toEqual({ ...shownRun(completed), actions: ['run-recipients'] });
  expect((await mailpit.messages()).filter((message) => message.MessageID.startsWith(`${runId}.`))).toHaveLength(RUN_ACCOUNTS);
  // Each sent message comes back through the pipeline as a `sent` event of the campaign: the funnel's first step.
  const sentStats = await waitFor(
    'the run’s sent events in the stats',
    () => stats(utcDate(0), utcDate(0), 'day', campaign.id),
    (answer) => answer.totals.sent === RUN_ACCOUNTS,
  );
  expect(sentStats.campaigns).toEqual([expect.objectContaining({ campaign_id: campaign.id, sent: RUN_ACCOUNTS })]);
  const sentEvents = await api<{ total: number; items: Array<{ provider: string; event_type: string }> }>(
    'GET',
    `/campaign-events/?event_type=sent&campaign_id=${campaign.id}&page_size=500`,
    undefined,
    workspaceId,
  );
  expect(sentEvents.total).toBe(RUN_ACCOUNTS);
  expect(new Set(sentEvents.items.map((event) => `${event.event_type} ${event.provider}`))).toEqual(new Set(['sent smtp']));

  // Its recipients, all of them, then only the invalid one.
  await page.click(`tr[data-run-id="${runId}"] [data-testid="run-recipients"]`);
  await page.waitForSelector(`[data-testid="recipients-panel"][data-run-id="${runId}"][data-status="ready"][data-filter=""]`);
  expect(await page.getAttribute('[data-testid="recipients-panel"]', 'data-total')).toBe(String(RUN_ACCOUNTS + 1));
  await page.selectOption('[data-testid="recipients-status"]', 'invalid');
  await page.waitForSelector('[data-testid="recipients-panel"][data-status="ready"][data-filter="invalid"]');
  const invalid = await page
    .locator('[data-testid="recipients-list"] tbody tr')
    .evaluateAll((rows) => rows.map((row) => [row.getAttribute('data-email'), row.getAttribute('data-status')]));
  const fromApi = await api<{ items: Array<{ email: string; status: string }> }>(
    'GET',
    `/campaign-runs/${runId}/recipients?status=invalid`,
    undefined,
    workspaceId,
  );
  expect(invalid).toEqual(fromApi.items.map((item) => [item.email, item.status]));
  expect(invalid).toEqual([['not-an-address', 'invalid']]);

  // Two more runs, each paused while it sends (10 messages a second): one resumed to its end, one cancelled
  // after a confirmation.
  const pausedRun = async (): Promise<string> => {
    const known = await page
      .locator('[data-testid="runs-list"] tbody tr')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    await page.click('[data-testid="send-now"]');
    const row = page.locator(`[data-testid="runs-list"] tbody tr${known.map((id) => `:not([data-run-id="${id}"])`).join('')}`).first();
    await row.waitFor({ timeout: STEP_MS });
    const id = (await row.getAttribute('data-run-id'))!;
    await page.click(`tr[data-run-id="${id}"] [data-testid="run-pause"]`);
    await page.waitForSelector(`tr[data-run-id="${id}"][data-status="paused"]`, { timeout: STEP_MS });
    const paused = await runOf(id);
    expect(paused.status).toBe('paused');
    expect(paused.counts.sent).toBeLessThan(RUN_ACCOUNTS);
    expect((await runRow(page, id)).actions).toEqual(['run-recipients', 'run-resume', 'run-cancel']);
    return id;
  };
  const resumedId = await pausedRun();
  await page.click(`tr[data-run-id="${resumedId}"] [data-testid="run-resume"]`);
  await page.waitForSelector(`tr[data-run-id="${resumedId}"][data-status="completed"]`, { timeout: 60_000 });
  const resumed = await runOf(resumedId);
  expect(resumed.counts).toMatchObject({ sent: RUN_ACCOUNTS, pending: 0 });
  expect(await runRow(page, resumedId)).toEqual({ ...shownRun(resumed), actions: ['run-recipients'] });

  const cancelledId = await pausedRun();
  await page.click(`tr[data-run-id="${cancelledId}"] [data-testid="run-cancel"]`);
  await page.click('[data-testid="confirm-yes"]');
  await page.waitForSelector(`tr[data-run-id="${cancelledId}"][data-status="cancelled"]`, { timeout: STEP_MS });
  const cancelled = await runOf(cancelledId);
  expect(cancelled.status).toBe('cancelled');
  expect(cancelled.counts.sent).toBeLessThan(RUN_ACCOUNTS);
  expect(await runRow(page, cancelledId)).toEqual({ ...shownRun(cancelled), actions: ['run-recipients'] });
  expect(problems).toEqual([]);
  await page.close();
});

test('A/B test: the form saves ab_test, a waiting run shows its variants and takes a picked winner; a follow-up goes to who did not open', async () => {
  const [a, b] = await Promise.all(
    ['A', 'B'].map((label) =>
      api<{ id: string }>(
        'POST',
        '/templates/',
        { name: `AB ${label}`, subject: `${label} {{first_name}}`, text: `Variant ${label}` },
        workspaceId,
      ),
    ),
  );
  const campaign = await api<{ id: string; variants: Array<{ id: string }> }>(
    'POST',
    '/email-campaigns/',
    {
      workspace_id: workspaceId,
      name: 'An A/B run',
      recipient_source: 'csv_account_ids',
      csv_account_ids: Array.from({ length: RUN_ACCOUNTS }, (_, i) => `acc-${i + 1}`),
      from_email: 'news@sender.example.com',
      delivery_mode: 'variants',
      variants: [
        { template_id: a.id, label: 'A' },
        { template_id: b.id, label: 'B' },
      ],
    },
    workspaceId,
  );
  const [variantA, variantB] = campaign.variants.map((variant) => variant.id);
  const campaignOf = () => api<{ ab_test: unknown }>('GET', `/email-campaigns/${campaign.id}`, undefined, workspaceId);
  const runOf = (id: string) => api<AbRun>('GET', `/campaign-runs/${id}`, undefined, workspaceId);

  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  await page.goto(`${stack.urls.gateway}/dashboard#runs`);
  await page.waitForSelector('[data-testid="runs-view"][data-status="ready"]', { timeout: STEP_MS });
  await page.selectOption('[data-testid="workspace"]', workspaceId);
  await page.waitForSelector(`[data-testid="runs-campaign"] option[value="${campaign.id}"]`, { state: 'attached', timeout: STEP_MS });
  await page.selectOption('[data-testid="runs-campaign"]', campaign.id);
  await page.waitForSelector('[data-testid="ab-test-form"][data-status="ready"][data-ab-test="off"]', { timeout: STEP_MS });

  // Switched on, the fields start at the API's defaults; the saved test is the campaign's.
  await page.check('[data-testid="ab-test-on"]');
  expect(await page.inputValue('[data-testid="ab-test-fraction"]')).toBe('0.2');
  expect(await page.inputValue('[data-testid="ab-test-wait"]')).toBe('240');
  await page.fill('[data-testid="ab-test-fraction"]', '0.1');
  await page.fill('[data-testid="ab-test-wait"]', '60');
  await page.selectOption('[data-testid="ab-test-metric"]', 'click_rate');
  await page.click('[data-testid="ab-test-save"]');
  await page.waitForSelector('[data-testid="ab-test-form"][data-status="ready"][data-ab-test="on"]', { timeout: STEP_MS });
  expect((await campaignOf()).ab_test).toEqual({ test_fraction: 0.1, wait_minutes: 60, metric: 'click_rate' });

  // A run tests on 3 of its 30 recipients, then waits an hour for the decision: its variants, a countdown, a button each.
  await page.click('[data-testid="send-now"]');
  const row = page.locator('[data-testid="runs-list"] tbody tr').first();
  await row.waitFor({ timeout: STEP_MS });
  const runId = (await row.getAttribute('data-run-id'))!;
  await page.waitForSelector(`[data-testid="run-detail"][data-run-id="${runId}"] [data-testid="run-ab-test"][data-phase="waiting"]`, {
    timeout: 30_000,
  });
  expect(await page.getAttribute(`tr[data-run-id="${runId}"] [data-testid="run-ab-phase"]`, 'data-phase')).toBe('waiting');
  const waiting = await runOf(runId);
  expect(waiting.ab_test).toMatchObject({ phase: 'waiting', test_recipients: 3, winner_variant_id: null });
  const shownVariants = await page.locator('[data-testid="ab-variants"] tbody tr').evaluateAll((rows) =>
    rows.map((tr) => ({
      id: tr.getAttribute('data-variant-id'),
      sent: tr.querySelector('[data-testid="ab-sent"]')?.textContent,
      rate: tr.querySelector('[data-testid="ab-rate"]')?.textContent,
      pick: tr.querySelectorAll('[data-testid="ab-pick"]').length,
    })),
  );
  expect(shownVariants).toEqual(
    waiting.ab_test!.variants.map((variant) => ({
      id: variant.variant_id,
      sent: formatCount(variant.sent),
      rate: formatRate(variant.rate),
      pick: 1,
    })),
  );
  expect(shownVariants.map((variant) => variant.id)).toEqual([variantA, variantB]);
  // The countdown rounds up: within its first second a fresh hour's wait still reads 1 h 0 min 0 s.
  expect(await page.textContent('[data-testid="ab-countdown"]')).toMatch(/^Decides in (1 h 0 min 0 s|59 min \d+ s) \(/);
  expect(await page.getAttribute('[data-testid="ab-leader"]', 'data-leader')).toBe('');

  // Picking B (after a confirmation) sends it to the other 27: the phase moves on and the run completes.
  await page.click(`[data-testid="ab-variants"] tr[data-variant-id="${variantB}"] [data-testid="ab-pick"]`);
  await page.click('[data-testid="confirm-yes"]');
  await page.waitForSelector(`tr[data-run-id="${runId}"][data-status="completed"]`, { timeout: 60_000 });
  await page.waitForSelector('[data-testid="run-ab-test"][data-phase="done"]', { timeout: STEP_MS });
  const done = await runOf(runId);
  expect(done.ab_test).toMatchObject({ phase: 'done', winner_variant_id: variantB, decided_by: 'manual' });
  expect(done.counts).toMatchObject({ recipients: RUN_ACCOUNTS, sent: RUN_ACCOUNTS, pending: 0 });
  expect(await page.locator('[data-testid="ab-pick"]').count()).toBe(0);
  expect(await page.isVisible('[data-testid="ab-countdown"]')).toBe(false);

  // Switched off, the campaign's test is null, so the follow-up below sends at once.
  await page.uncheck('[data-testid="ab-test-on"]');
  await page.click('[data-testid="ab-test-save"]');
  await page.waitForSelector('[data-testid="ab-test-form"][data-status="ready"][data-ab-test="off"]', { timeout: STEP_MS });
  expect((await campaignOf()).ab_test).toBeNull();

  // A follow-up with a campaign that cannot be sent shows the API's refusal; with the run's own, it makes the run.
  await page.waitForSelector('[data-testid="follow-up"]:not([hidden])');
  expect(await page.inputValue('[data-testid="follow-up-campaign"]')).toBe(campaign.id);
  await page.selectOption('[data-testid="follow-up-campaign"]', campaigns.spring.id);
  await page.click('[data-testid="follow-up-not_opened"]');
  await page.waitForSelector('[data-testid="run-detail"][data-status="error"]', { timeout: STEP_MS });
  expect(await page.textContent('[data-testid="run-detail-error"]')).toMatch(/^409 Conflict: The campaign cannot be sent: /);
  await page.selectOption('[data-testid="follow-up-campaign"]', campaign.id);
  await page.click('[data-testid="follow-up-not_opened"]');
  await page.waitForSelector(`[data-testid="run-detail"][data-status="ready"]:not([data-run-id="${runId}"])`, { timeout: STEP_MS });
  const followUpId = (await page.getAttribute('[data-testid="run-detail"]', 'data-run-id'))!;
  expect(await page.getAttribute('[data-testid="recipients-panel"]', 'data-run-id')).toBe(followUpId);
  await page.waitForSelector(`tr[data-run-id="${followUpId}"][data-status="completed"]`, { timeout: 60_000 });
  const followUp = await runOf(followUpId);
  expect(followUp).toMatchObject({ campaign_id: campaign.id, audience: { run_id: runId, engagement: 'not_opened' }, ab_test: null });
  expect(followUp.counts).toMatchObject({ recipients: RUN_ACCOUNTS, sent: RUN_ACCOUNTS });
  expect(problems).toEqual([]);
  await page.close();
});

test('tracking: the switches save to the campaign; a run shows its opens and clicks by people and machines, top links and bounces by class', async () => {
  const template = await api<{ id: string }>(
    'POST',
    '/templates/',
    {
      name: 'Tracked',
      subject: 'Hi {{first_name}}',
      html: '<html><body><a href="https://shop.example.com/sale">sale</a> <a href="https://shop.example.com/terms">terms</a></body></html>',
      text: 'Hi {{first_name}}',
    },
    workspaceId,
  );
  const category = `dash-tracked-${randomUUID()}`;
  const campaign = await api<{ id: string }>(
    'POST',
    '/email-campaigns/',
    {
      workspace_id: workspaceId,
      name: 'A tracked run',
      provider_category_id: category,
      recipient_source: 'csv_account_ids',
      csv_account_ids: ['acc-1', 'acc-2', 'acc-3'],
      from_email: 'news@sender.example.com',
      template_id: template.id,
    },
    workspaceId,
  );
  const campaignOf = () =>
    api<{ track_opens: boolean; track_clicks: boolean }>('GET', `/email-campaigns/${campaign.id}`, undefined, workspaceId);

  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  await page.goto(`${stack.urls.gateway}/dashboard#runs`);
  await page.waitForSelector('[data-testid="runs-view"][data-status="ready"]', { timeout: STEP_MS });
  await page.selectOption('[data-testid="workspace"]', workspaceId);
  await page.waitForSelector(`[data-testid="runs-campaign"] option[value="${campaign.id}"]`, { state: 'attached', timeout: STEP_MS });
  await page.selectOption('[data-testid="runs-campaign"]', campaign.id);
  const form = '[data-testid="tracking-form"][data-status="ready"]';
  await page.waitForSelector(`${form}[data-track-opens="true"][data-track-clicks="true"]`, { timeout: STEP_MS });

  // Each switch saves to the campaign; both on again for the run.
  await page.uncheck('[data-testid="track-clicks"]');
  await page.click('[data-testid="tracking-save"]');
  await page.waitForSelector(`${form}[data-track-opens="true"][data-track-clicks="false"]`, { timeout: STEP_MS });
  expect(await campaignOf()).toMatchObject({ track_opens: true, track_clicks: false });
  await page.check('[data-testid="track-clicks"]');
  await page.uncheck('[data-testid="track-opens"]');
  await page.click('[data-testid="tracking-save"]');
  await page.waitForSelector(`${form}[data-track-opens="false"][data-track-clicks="true"]`, { timeout: STEP_MS });
  expect(await campaignOf()).toMatchObject({ track_opens: false, track_clicks: true });
  await page.check('[data-testid="track-opens"]');
  await page.click('[data-testid="tracking-save"]');
  await page.waitForSelector(`${form}[data-track-opens="true"][data-track-clicks="true"]`, { timeout: STEP_MS });

  await page.click('[data-testid="send-now"]');
  const row = page.locator('[data-testid="runs-list"] tbody tr').first();
  await row.waitFor({ timeout: STEP_MS });
  const runId = (await row.getAttribute('data-run-id'))!;
  await page.waitForSelector(`tr[data-run-id="${runId}"][data-status="completed"]`, { timeout: 60_000 });
  const sent = (await mailpit.messages()).find((message) => message.MessageID.startsWith(`${runId}.`))!;
  const html = (await mailpit.message(sent.ID)).HTML;
  const [sale, terms] = [...html.matchAll(/href="[^"]*?(\/t\/c\/[\w-]+\.[\w-]+)"/g)].map((match) => match[1]);
  const pixel = /<img src="[^"]*?(\/t\/o\/[\w-]+\.[\w-]+)"/.exec(html)![1];
  const browserAgent = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36';
  const track = (route: string, userAgent = browserAgent) =>
    fetch(`${stack.urls.gateway}${route}`, { headers: { 'user-agent': userAgent }, redirect: 'manual' });
  // A person opens and clicks "sale" twice; Apple's proxy fetches the pixel (bare Mozilla/5.0), a scanner follows "terms".
  for (const answer of await Promise.all([
    track(pixel),
    track(pixel, 'Mozilla/5.0'),
    track(sale),
    track(sale),
    track(terms, 'Mozilla/5.0 (compatible; Barracuda Sentinel link scanner)'),
  ])) {
    expect([200, 302]).toContain(answer.status);
  }
  // SendGrid bounces of two of the run's messages (run_id is the custom argument the sender sets): one hard, one soft.
  const bounce = (email: string, type: string, bounceClassification: string) => ({
    email,
    event: 'bounce',
    type,
    bounce_classification: bounceClassification,
    reason: `${type} of ${email}`,
    timestamp: ago(0),
    sg_event_id: `dash-bounce-${randomUUID()}`,
    category: [category],
    run_id: runId,
  });
  await postEvents([
    bounce('reader2@runs.example.com', 'bounce', 'Invalid Address'),
    bounce('reader3@runs.example.com', 'blocked', 'Mailbox Unavailable'),
  ]);
  const runStats = await waitFor(
    'the run’s tracked events and bounces in its stats',
    () => api<Stats>('GET', `/campaign-events/stats?run_id=${runId}`, undefined, workspaceId),
    (answer) => answer.totals.opens === 2 && answer.totals.clicks === 3 && answer.totals.hard_bounces + answer.totals.soft_bounces === 2,
  );
  const totals = runStats.totals as Counts & { machine_clicks: number };
  expect(totals).toMatchObject({ sent: 3, machine_opens: 1, unique_opens: 1, machine_clicks: 1, unique_clicks: 1, hard_bounces: 1 });

  const panel = `[data-testid="run-engagement"][data-run-id="${runId}"]`;
  await Promise.all([
    page.waitForResponse((response) => response.url().includes(`/campaign-events/stats?run_id=${runId}`)),
    page.click(`${panel} [data-testid="run-engagement-refresh"]`),
  ]);
  await page.waitForSelector(`${panel}[data-status="ready"]`, { timeout: STEP_MS });
  const figures = await page
    .locator(`${panel} [data-testid="run-engagement-figures"] tbody tr`)
    .evaluateAll((rows) =>
      rows.map((tr) => [tr.getAttribute('data-testid'), ...[...tr.querySelectorAll('td')].map((td) => td.textContent)]),
    );
  const figureRow = (id: string, all: number, machines: number, unique: number, rate: number | null) => [
    id,
    formatCount(all - machines),
    formatCount(machines),
    formatCount(unique),
    formatRate(unique / totals.sent),
    formatRate(rate),
  ];
  expect(figures).toEqual([
    figureRow('run-opens', totals.opens, totals.machine_opens, totals.unique_opens, totals.open_rate),
    figureRow('run-clicks', totals.clicks, totals.machine_clicks, totals.unique_clicks, totals.click_rate),
  ]);
  expect(figures).toEqual([
    ['run-opens', '1', '1', '1', '33.3%', '–'],
    ['run-clicks', '2', '1', '1', '33.3%', '–'],
  ]);
  const links = await page
    .locator(`${panel} [data-testid="run-top-links"] tbody tr`)
    .evaluateAll((rows) => rows.map((tr) => [...tr.children].map((cell) => cell.textContent)));
  expect(links).toEqual(runStats.top_links.map((link) => [link.url, formatCount(link.clicks), formatCount(link.unique_clicks)]));
  expect(links).toEqual([
    ['https://shop.example.com/sale', '2', '1'],
    ['https://shop.example.com/terms', '1', '1'],
  ]);
  const bounces = await page
    .locator(`${panel} [data-testid="run-bounces"] tbody tr`)
    .evaluateAll((rows) =>
      rows.map((tr) => [tr.getAttribute('data-bounce-class'), ...[...tr.querySelectorAll('td')].map((td) => td.textContent)]),
    );
  expect(bounces).toEqual([
    ['invalid_address', '1', '0'],
    ['mailbox_unavailable', '0', '1'],
  ]);
  expect(await page.textContent(`${panel} [data-testid="run-engagement-summary"]`)).toBe(
    'Sent 3, delivered 0 (as providers report it), bounces 1 hard, 1 soft.',
  );
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-run-engagement.png'), fullPage: true });
  expect(problems).toEqual([]);
  await page.close();
});

test('workspace page: a platform admin sets, sees and removes the recipient database; the password is never on the page', async () => {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  await page.goto(`${stack.urls.gateway}/dashboard#workspace`);
  await page.waitForSelector('[data-testid="workspace"]:not([disabled])', { timeout: STEP_MS });
  await page.selectOption('[data-testid="workspace"]', workspaceId);
  await page.waitForSelector('[data-testid="workspace-view"][data-status="ready"][data-shared="true"]', { timeout: STEP_MS });
  expect(await page.isVisible('[data-testid="recipient-details"]')).toBe(false);
  expect(await page.getAttribute('[data-testid="recipient-url"]', 'type')).toBe('password');

  // A wrong password: the API's 422, without the password, and nothing stored.
  const wrong = new URL(recipients.url);
  wrong.password = 'Dashboard-Wrong-Secret';
  await page.fill('[data-testid="recipient-url"]', wrong.toString());
  await page.click('[data-testid="recipient-save"]');
  await page.waitForSelector('[data-testid="workspace-view"][data-status="error"]', { timeout: 15_000 });
  expect(await page.textContent('[data-testid="workspace-error"]')).toMatch(/^422 .*authentication failed for user/);
  expect(await page.content()).not.toContain('Dashboard-Wrong-Secret');

  await page.fill('[data-testid="recipient-url"]', recipients.url);
  await page.click('[data-testid="recipient-save"]');
  await page.waitForSelector('[data-testid="workspace-view"][data-status="ready"][data-shared="false"]', { timeout: 15_000 });
  const url = new URL(recipients.url);
  const shown = await page
    .locator('[data-testid="recipient-details"] td')
    .evaluateAll((cells) => cells.map((td) => [td.getAttribute('data-testid'), td.textContent?.trim()]));
  expect(Object.fromEntries(shown)).toEqual({
    'recipient-kind': 'postgres',
    'recipient-host': url.hostname,
    'recipient-port': url.port,
    'recipient-database': url.pathname.slice(1),
    'recipient-user': url.username,
    'recipient-verified-at': expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/),
  });
  // The field is emptied once saved, and a reload does not fill it.
  expect(await page.inputValue('[data-testid="recipient-url"]')).toBe('');
  await page.reload();
  await page.waitForSelector('[data-testid="workspace-view"][data-status="ready"][data-shared="false"]', { timeout: STEP_MS });
  expect(await page.inputValue('[data-testid="recipient-url"]')).toBe('');
  expect(await page.content()).not.toContain(`:${url.password}@`);

  await page.click('[data-testid="recipient-use-shared"]');
  await page.click('[data-testid="confirm-yes"]');
  await page.waitForSelector('[data-testid="workspace-view"][data-status="ready"][data-shared="true"]', { timeout: STEP_MS });
  expect(await api<{ shared: boolean }>('GET', `/workspaces/${workspaceId}/recipient-database`, undefined, workspaceId)).toMatchObject({
    shared: true,
  });
  expect(problems).toEqual([]);
  await page.close();
});

test('a read the server was too busy for is asked again after its Retry-After', async () => {
  const page = await browser.newPage();
  await page.goto(`${stack.urls.gateway}/dashboard`);
  await page.waitForSelector('main[data-status="ready"]', { timeout: STEP_MS });
  const asked: number[] = [];
  await page.route('**/campaign-events/stats?*', (route) => {
    asked.push(Date.now());
    if (asked.length > 1) return route.continue();
    return route.fulfill({
      status: 429,
      headers: { 'Retry-After': '1', 'Content-Type': 'application/json' },
      body: JSON.stringify({ detail: 'Too many analytics reads running for this workspace, retry later' }),
    });
  });
  const answered = page.waitForResponse((response) => response.url().includes('/campaign-events/stats?') && response.ok(), {
    timeout: STEP_MS,
  });
  await page.click('[data-testid="apply"]');
  await answered;
  await page.waitForSelector('main[data-status="ready"]', { timeout: STEP_MS });
  expect(asked).toHaveLength(2);
  expect(asked[1] - asked[0]).toBeGreaterThanOrEqual(1_000);
  expect(await page.isVisible('[data-testid="error"]')).toBe(false);
  await page.close();
});

test('an API failure is shown with its status and detail', async () => {
  const page = await browser.newPage();
  await page.goto(`${stack.urls.gateway}/dashboard`);
  await page.waitForSelector('main[data-status="ready"]', { timeout: STEP_MS });
  await stack.stop('analytics');
  await page.click('[data-testid="apply"]');
  await page.waitForSelector('main[data-status="error"]', { timeout: STEP_MS });
  const error = page.locator('[data-testid="error"]');
  expect(await error.isVisible()).toBe(true);
  expect(await error.textContent()).toMatch(/^503 Service Unavailable: \S/);
  // The figures of the earlier answer no longer match the filters: they are hidden, not left stale.
  expect(await page.isVisible('[data-testid="results"]')).toBe(false);
  await page.close();
});

test('the page and its hashed assets are served publicly with the right caching', async () => {
  const page = await fetch(`${stack.urls.gateway}/dashboard`, { headers: { 'Accept-Encoding': 'gzip' } });
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  expect(page.headers.get('cache-control')).toBe('no-cache');
  expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
  const html = await page.text();
  const assets = [...html.matchAll(/(?:src|href)="(\/dashboard\/assets\/[^"]+)"/g)].map((match) => match[1]);
  expect(assets.length).toBeGreaterThanOrEqual(2);
  for (const asset of assets) {
    const answer = await fetch(`${stack.urls.gateway}${asset}`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    await answer.arrayBuffer();
  }
  const missing = await fetch(`${stack.urls.gateway}/dashboard/assets/missing-0000.js`);
  expect(missing.status).toBe(404);
  expect(await missing.json()).toEqual({ detail: expect.any(String) });
});
