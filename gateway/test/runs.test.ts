import { Client } from 'pg';
import { call, createClient, createKafka, createLogger } from '@mail/common';
import {
  ACCOUNTS_TABLE,
  createTestPostgres,
  createTestTopic,
  ensureRecipientDatabase,
  infraEnv,
  startMailpit,
  uniqueSuffix,
  type Mailpit,
  type TestPostgres,
} from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import { requestJson, startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * Campaign runs end to end (docs/api.md, "Campaign runs"): the gateway's
 * request pipeline in-process against the real identity, campaign, analytics
 * and delivery processes, a private recipient database, a private Mailpit
 * (read through its API, with its chaos switch for SMTP errors) and a private
 * events topic. Provider dialect: sendgrid.
 */

const SIGNING_KEY = `runs-test-${uniqueSuffix()}`;
/** Small, so the quota test reaches it; workspace A's test sends stay below it. */
const TEST_SEND_PER_HOUR = 5;
const DOMAIN = `runs-${uniqueSuffix()}.example.com`;

let gateway: GatewayStack;
let mailpit: Mailpit;
let recipients: TestPostgres;
let topic: string;
let workspaceA: string;
let workspaceB: string;
let workspaceC: string;
let workspaceD: string;
let templates: campaignV1.TemplateServiceClient;

const address = (n: number) => `user${n}@${DOMAIN}`;

beforeAll(async () => {
  [mailpit, recipients] = await Promise.all([startMailpit('runs'), createTestPostgres('runs_recipients')]);
  const db = new Client({ connectionString: recipients.url });
  await db.connect();
  try {
    await db.query(ACCOUNTS_TABLE);
    await db.query(
      `INSERT INTO accounts SELECT 'acc-' || n, 'User' || n || '@' || $1, 'First' || n, 'Last' || n FROM generate_series(1, 400) AS n`,
      [DOMAIN.toUpperCase()],
    );
    await db.query(
      `INSERT INTO accounts VALUES ('bad', 'not-an-address', 'Bad', 'Row'), ('html', $1, '<b>Tom & Jerry</b>', 'H'), ('supp', $2, 'S', 'S')`,
      [`html@${DOMAIN}`, `suppressed@${DOMAIN}`],
    );
  } finally {
    await db.end();
  }
  topic = `runs-events-${uniqueSuffix()}`;
  await createTestTopic(topic, 2);
  gateway = await startGatewayStack({
    label: 'runs',
    processes: ['identity', 'campaign', 'brand-guide', 'analytics', 'delivery'],
    clickhouse: true,
    workspaces: ['Runs A', 'Runs B', 'Runs C', 'Runs D'],
    env: {
      RECIPIENTS_DATABASE_URL: await ensureRecipientDatabase(recipients.url),
      SMTP_URL: mailpit.smtpUrl,
      SMTP_PROVIDER: 'sendgrid',
      KAFKA_EVENTS_TOPIC: topic,
      UNSUBSCRIBE_SIGNING_KEY: SIGNING_KEY,
      PUBLIC_BASE_URL: 'http://mail.example.com',
      SEND_RETRY_BASE_MS: '100',
      SEND_MAX_ATTEMPTS: '50',
      TEST_SEND_PER_HOUR: String(TEST_SEND_PER_HOUR),
    },
  });
  [workspaceA, workspaceB, workspaceC, workspaceD] = gateway.workspaces;
  templates = createClient(campaignV1.TemplateServiceClient, gateway.stack.urls.grpc.campaign);
}, 180_000);

afterAll(async () => {
  templates?.close();
  await gateway?.close();
  await mailpit?.close();
  await recipients?.drop();
});

const api = (method: string, route: string, body?: unknown, workspace: string | null = workspaceA) =>
  requestJson(gateway.url, method, route, body, workspace);

async function template(fields: Partial<campaignV1.TemplateInput> = {}, workspaceId = workspaceA): Promise<string> {
  const created = await call(templates.createTemplate.bind(templates), {
    workspaceId,
    template: {
      name: 'Welcome',
      subject: 'Hello {{first_name}}',
      html: '<p>Hi {{first_name}}</p><a href="{{unsubscribe_url}}">unsubscribe</a>',
      text: 'Hi {{first_name}}, leave: {{unsubscribe_url}}',
      ...fields,
    },
  });
  return created.id;
}

async function campaign(fields: JsonObject): Promise<string> {
  const answer = await api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: `Run ${uniqueSuffix()}`, ...fields });
  expect(answer.status).toBe(201);
  return answer.body.id as string;
}

async function sendable(fields: JsonObject = {}): Promise<string> {
  return campaign({
    recipient_source: 'csv_account_ids',
    csv_account_ids: ['acc-1', 'acc-2'],
    from_email: 'news@sender.example.com',
    from_name: 'Newsroom',
    template_id: await template(),
    ...fields,
  });
}

async function waitFor(runId: string, done: (run: JsonObject) => boolean): Promise<JsonObject> {
  for (let attempt = 0; ; attempt += 1) {
    const answer = await api('GET', `/campaign-runs/${runId}`);
    expect(answer.status).toBe(200);
    if (done(answer.body)) return answer.body;
    if (attempt > 1200) throw new Error(`run did not get there: ${JSON.stringify(answer.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const counts = (run: JsonObject) => run.counts as Record<string, number>;

async function recipientsOf(runId: string, query = ''): Promise<JsonObject[]> {
  const answer = await api('GET', `/campaign-runs/${runId}/recipients?page_size=500${query}`);
  expect(answer.status).toBe(200);
  return answer.body.items as JsonObject[];
}

/** The messages of a run to an address (a run's Message-IDs start with its id). */
async function messagesTo(email: string, runId: string) {
  return (await mailpit.messages()).filter(
    (message) => message.MessageID.startsWith(`${runId}.`) && message.To.some((to) => to.Address.toLowerCase() === email),
  );
}

const ID = expect.stringMatching(/^[0-9a-f-]{36}$/);
const TIMESTAMP = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

test('a campaign that cannot be sent answers 409 naming every missing piece', async () => {
  const bare = await campaign({ recipient_source: 'mssql_query' });
  const answer = await api('POST', `/email-campaigns/${bare}/runs`, {});
  expect(answer.status).toBe(409);
  expect(answer.body.detail).toEqual(expect.stringContaining('from_email'));
  expect(answer.body.detail).toEqual(expect.stringContaining('template_id'));
  expect(answer.body.detail).toEqual(expect.stringContaining('mssql_query'));

  const noVariant = await campaign({
    recipient_source: 'csv_account_ids',
    from_email: 'a@sender.example.com',
    delivery_mode: 'variants',
    variants: [{ template_id: await template(), weight: 1, is_active: false }],
  });
  const variants = await api('POST', `/email-campaigns/${noVariant}/runs`, {});
  expect(variants.status).toBe(409);
  expect(variants.body.detail).toEqual(expect.stringContaining('csv_account_ids'));
  expect(variants.body.detail).toEqual(expect.stringContaining('no active variant'));

  // A template deleted after the campaign named it.
  const doomed = await template();
  const orphan = await sendable({ template_id: doomed });
  await call(templates.deleteTemplate.bind(templates), { workspaceId: workspaceA, id: doomed });
  const missing = await api('POST', `/email-campaigns/${orphan}/runs`, {});
  expect(missing.status).toBe(409);
  expect(missing.body.detail).toEqual(expect.stringContaining(doomed));

  expect((await api('GET', `/email-campaigns/${bare}/runs`)).body).toEqual({ items: [], total: 0, page: 1, page_size: 50 });
});

test('runs of an unknown campaign or of another workspace are 404s', async () => {
  const mine = await sendable();
  expect((await api('POST', `/email-campaigns/${crypto.randomUUID()}/runs`, {})).status).toBe(404);
  expect((await api('POST', `/email-campaigns/${mine}/runs`, {}, workspaceB)).status).toBe(404);
  expect((await api('GET', `/email-campaigns/${mine}/runs`, undefined, workspaceB)).status).toBe(404);
  const created = await api('POST', `/email-campaigns/${mine}/runs`, {});
  expect(created.status).toBe(201);
  const runId = created.body.id as string;
  for (const route of [`/campaign-runs/${runId}`, `/campaign-runs/${runId}/recipients`]) {
    expect((await api('GET', route, undefined, workspaceB)).status).toBe(404);
  }
  expect((await api('POST', `/campaign-runs/${runId}/pause`, {}, workspaceB)).status).toBe(404);
  expect((await api('GET', `/campaign-runs/${crypto.randomUUID()}`)).status).toBe(404);
  expect((await api('GET', `/campaign-runs/not-a-uuid`)).status).toBe(422);
  const done = await waitFor(runId, (run) => run.status === 'completed');
  // A follow-up of another workspace's run, or of none, is a 404; of this one, a run with its audience.
  const followUp = (runOf: string, workspace = workspaceA) =>
    api('POST', `/email-campaigns/${mine}/runs`, { audience: { run_id: runOf, engagement: 'not_opened' } }, workspace);
  expect((await followUp(crypto.randomUUID())).status).toBe(404);
  const theirs = await api('POST', `/email-campaigns/${mine}/runs`, { audience: { run_id: runId, engagement: 'opened' } }, workspaceB);
  expect(theirs.status).toBe(404);
  const bad = await api('POST', `/email-campaigns/${mine}/runs`, { audience: { run_id: runId, engagement: 'read' } });
  expect(bad.status).toBe(422);
  expect((bad.body.detail as JsonObject[])[0].loc).toEqual(['body', 'audience', 'engagement']);
  const follow = await followUp(runId);
  expect(follow.status).toBe(201);
  expect(follow.body.audience).toEqual({ run_id: runId, engagement: 'not_opened' });
  const followed = await waitFor(follow.body.id as string, (run) => run.status === 'completed');
  expect((followed.counts as JsonObject).recipients).toBe((done.counts as JsonObject).sent);
  // A run without an A/B test has no winner to pick: 409.
  const winner = await api('POST', `/campaign-runs/${runId}/winner`, { variant_id: crypto.randomUUID() });
  expect(winner.status).toBe(409);
  expect((await api('POST', `/campaign-runs/${runId}/winner`, { variant_id: crypto.randomUUID() }, workspaceB)).status).toBe(404);
});

test('a run sends each address once with the headers of the contract, and records who got what and why not', async () => {
  const suppressed = `suppressed@${DOMAIN}`;
  expect((await api('POST', '/suppressions/', { email: suppressed })).status).toBe(201);
  const category = `runs-${uniqueSuffix()}`;
  const campaignId = await sendable({
    csv_account_ids: ['acc-1', 'acc-2', 'supp', 'acc-2', 'bad', 'html', 'missing'],
    provider_category_id: category,
    reply_to: 'replies@sender.example.com',
  });
  const created = await api('POST', `/email-campaigns/${campaignId}/runs`, {});
  expect(created.status).toBe(201);
  expect(created.body).toEqual({
    id: ID,
    workspace_id: workspaceA,
    campaign_id: campaignId,
    trigger: 'manual',
    scheduled_for: null,
    status: 'queued',
    failure: null,
    created_at: TIMESTAMP,
    started_at: null,
    finished_at: null,
    counts: { recipients: 0, sent: 0, failed: 0, suppressed: 0, invalid: 0, duplicates: 0, pending: 0, unknown: 0 },
    variants: null,
    ab_test: null,
    audience: null,
  });
  const runId = created.body.id as string;
  const run = await waitFor(runId, (current) => current.status === 'completed');
  expect(run).toEqual(expect.objectContaining({ started_at: TIMESTAMP, finished_at: TIMESTAMP }));
  expect(counts(run)).toEqual({ recipients: 5, sent: 3, failed: 0, suppressed: 1, invalid: 1, duplicates: 1, pending: 0, unknown: 0 });

  const items = await recipientsOf(runId);
  expect(items.map((item) => [item.email, item.status])).toEqual([
    [address(1), 'sent'],
    [address(2), 'sent'],
    [suppressed, 'suppressed'],
    ['not-an-address', 'invalid'],
    [`html@${DOMAIN}`, 'sent'],
  ]);
  expect(items[0]).toEqual({
    email: address(1),
    status: 'sent',
    variant_id: null,
    message_id: expect.any(String),
    sent_at: TIMESTAMP,
    error: null,
  });
  expect(items[3].error).toEqual(expect.stringContaining('@-sign'));
  expect((await recipientsOf(runId, '&status=sent')).map((item) => item.email)).toEqual([address(1), address(2), `html@${DOMAIN}`]);
  const badFilter = await api('GET', `/campaign-runs/${runId}/recipients?status=bogus`);
  expect(badFilter.status).toBe(422);
  expect(badFilter.body.detail).toEqual([expect.objectContaining({ type: 'enum', loc: ['query', 'status'] })]);

  expect(await messagesTo(suppressed, runId)).toEqual([]);
  for (const item of items.filter((entry) => entry.status === 'sent')) {
    const messages = await messagesTo(item.email as string, runId);
    expect(messages).toHaveLength(1);
    const [message] = messages;
    expect(message.MessageID).toBe(item.message_id);
    const headers = await mailpit.headers(message.ID);
    expect(headers['list-unsubscribe']).toEqual([expect.stringMatching(/^<http:\/\/mail\.example\.com\/unsubscribe\/[A-Za-z0-9_\-.]+>$/)]);
    expect(headers['list-unsubscribe-post']).toEqual(['List-Unsubscribe=One-Click']);
    expect(headers['reply-to']).toEqual(['replies@sender.example.com']);
    const smtpApi = JSON.parse(headers['x-smtpapi'][0]) as { category: string[]; unique_args: Record<string, string> };
    expect(smtpApi).toEqual({ category: [category], unique_args: { run_id: runId, message_id: item.message_id } });
  }

  // Fields from the row, HTML-escaped in html only; the unsubscribe link is a field too.
  const [htmlMessage] = await messagesTo(`html@${DOMAIN}`, runId);
  const detail = await mailpit.message(htmlMessage.ID);
  expect(detail.Subject).toBe('Hello <b>Tom & Jerry</b>');
  expect(detail.HTML).toContain('<p>Hi &lt;b&gt;Tom &amp; Jerry&lt;/b&gt;</p>');
  expect(detail.HTML).toMatch(/<a href="http:\/\/mail\.example\.com\/unsubscribe\/[^"]+">/);
  expect(detail.Text).toContain('Hi <b>Tom & Jerry</b>, leave: http://mail.example.com/unsubscribe/');

  // One `sent` event per sent message, for the campaign, on the events topic.
  const events = await sentEvents(3, (event) => event.campaignId === campaignId);
  expect(events.map((event) => event.email).sort()).toEqual([address(1), address(2), `html@${DOMAIN}`].sort());
  expect(events[0]).toEqual(
    expect.objectContaining({
      provider: 'smtp',
      workspaceId: workspaceA,
      categories: [category],
      eventType: eventsV1.EventType.EVENT_TYPE_SENT,
    }),
  );

  const listed = await api('GET', `/email-campaigns/${campaignId}/runs`);
  expect(listed.body).toEqual({ items: [expect.objectContaining({ id: runId, status: 'completed' })], total: 1, page: 1, page_size: 50 });
});

/** Reads the events topic from the start until `count` sent events pass `keep`. */
async function sentEvents(count: number, keep: (event: eventsV1.EngagementEvent) => boolean): Promise<eventsV1.EngagementEvent[]> {
  const kafka = createKafka('runs-test', infraEnv().kafkaBrokers, createLogger('test', 'silent'));
  const consumer = kafka.consumer({ groupId: `runs-test-${uniqueSuffix()}` });
  const found: eventsV1.EngagementEvent[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      consumer
        .run({
          eachMessage: async ({ message }) => {
            for (const bytes of eventsV1.EngagementEventBatch.decode(message.value!).events) {
              const event = eventsV1.EngagementEvent.decode(bytes);
              if (event.eventType === eventsV1.EventType.EVENT_TYPE_SENT && keep(event)) found.push(event);
            }
            if (found.length >= count) resolve();
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return found;
}

test('pause, resume and cancel follow the run status rules (409 otherwise), and a paused run sends nothing', async () => {
  const ids = Array.from({ length: 300 }, (_, n) => `acc-${n + 1}`);
  const campaignId = await sendable({ csv_account_ids: ids, template_id: await template({ subject: 'Paused {{first_name}}' }) });
  const runId = (await api('POST', `/email-campaigns/${campaignId}/runs`, {})).body.id as string;
  const paused = await api('POST', `/campaign-runs/${runId}/pause`, {});
  expect(paused.status).toBe(200);
  expect(paused.body.status).toBe('paused');
  expect((await api('POST', `/campaign-runs/${runId}/pause`, {})).status).toBe(409);

  // While paused its recipients are loaded and nothing more is sent (a message already on its way when the
  // pause came finishes; so little time passes between the create and the pause that there is rarely one).
  const loaded = await waitFor(runId, (run) => counts(run).recipients === 300);
  expect(loaded.status).toBe('paused');
  const pausedMessages = (await mailpit.messages()).filter((message) => message.Subject.startsWith('Paused'));
  expect(pausedMessages).toHaveLength(counts(loaded).sent);
  expect(counts(loaded).pending).toBe(300 - counts(loaded).sent);

  const resumed = await api('POST', `/campaign-runs/${runId}/resume`, {});
  expect(resumed.status).toBe(200);
  expect(resumed.body.status).toBe('sending');
  expect((await api('POST', `/campaign-runs/${runId}/resume`, {})).status).toBe(409);
  const done = await waitFor(runId, (run) => run.status === 'completed');
  expect(counts(done)).toEqual(expect.objectContaining({ recipients: 300, sent: 300, pending: 0 }));
  for (const action of ['pause', 'resume', 'cancel']) {
    const refused = await api('POST', `/campaign-runs/${runId}/${action}`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toEqual(expect.stringContaining('completed'));
  }

  const second = (await api('POST', `/email-campaigns/${campaignId}/runs`, {})).body.id as string;
  expect((await api('POST', `/campaign-runs/${second}/pause`, {})).status).toBe(200);
  const cancelled = await api('POST', `/campaign-runs/${second}/cancel`, {});
  expect(cancelled.status).toBe(200);
  expect(cancelled.body).toEqual(expect.objectContaining({ status: 'cancelled', finished_at: TIMESTAMP }));
  expect((await api('POST', `/campaign-runs/${second}/cancel`, {})).status).toBe(409);
  expect((await api('POST', `/campaign-runs/${second}/resume`, {})).status).toBe(409);
});

test('variants: each recipient gets an active variant by weight, recorded, and the figures add up', async () => {
  const [light, heavy, off] = await Promise.all([template({ subject: 'Light' }), template({ subject: 'Heavy' }), template()]);
  const campaignId = await campaign({
    recipient_source: 'csv_account_ids',
    csv_account_ids: Array.from({ length: 400 }, (_, n) => `acc-${n + 1}`),
    from_email: 'news@sender.example.com',
    delivery_mode: 'variants',
    variants: [
      { template_id: light, weight: 1, label: 'light', is_active: true },
      { template_id: heavy, weight: 3, label: 'heavy', is_active: true },
      { template_id: off, weight: 5, label: 'off', is_active: false },
    ],
  });
  const stored = (await api('GET', `/email-campaigns/${campaignId}`)).body.variants as JsonObject[];
  const runId = (await api('POST', `/email-campaigns/${campaignId}/runs`, {})).body.id as string;
  const run = await waitFor(runId, (current) => current.status === 'completed');
  const figures = run.variants as JsonObject[];
  expect(figures.map((variant) => [variant.id, variant.label, variant.weight])).toEqual([
    [stored[0].id, 'light', 1],
    [stored[1].id, 'heavy', 3],
  ]);
  expect(figures.reduce((sum, variant) => sum + (variant.recipients as number), 0)).toBe(400);
  expect(figures.map((variant) => variant.sent)).toEqual(figures.map((variant) => variant.recipients));
  // 1:3 of 400 is 100:300; the assignment is a hash, so roughly that.
  expect(figures[0].recipients).toBeGreaterThan(60);
  expect(figures[0].recipients).toBeLessThan(140);
  const items = await recipientsOf(runId);
  expect(items.filter((item) => item.variant_id === stored[0].id)).toHaveLength(figures[0].recipients as number);
  const lightMessages = (await mailpit.messages()).filter((message) => message.Subject === 'Light');
  expect(lightMessages.length).toBeGreaterThanOrEqual(figures[0].recipients as number);
});

test('SMTP failures: 5xx marks the recipient failed with the server answer, 4xx is retried until it goes', async () => {
  await mailpit.recipientChaos(550, 100);
  try {
    const permanent = await sendable({ csv_account_ids: ['acc-7'], template_id: await template({ subject: 'Refused' }) });
    const runId = (await api('POST', `/email-campaigns/${permanent}/runs`, {})).body.id as string;
    const run = await waitFor(runId, (current) => current.status === 'completed');
    expect(counts(run)).toEqual(expect.objectContaining({ recipients: 1, failed: 1, sent: 0 }));
    const [item] = await recipientsOf(runId);
    expect(item).toEqual(expect.objectContaining({ status: 'failed', error: expect.stringContaining('550') }));

    await mailpit.recipientChaos(451, 100);
    const temporary = await sendable({ csv_account_ids: ['acc-8'], template_id: await template({ subject: 'Deferred' }) });
    const retried = (await api('POST', `/email-campaigns/${temporary}/runs`, {})).body.id as string;
    // Refused at least once (pending again with the answer), then the server takes it.
    for (let attempt = 0; ; attempt += 1) {
      const [pending] = await recipientsOf(retried);
      if (pending?.status === 'pending' && typeof pending.error === 'string' && pending.error.includes('451')) break;
      if (attempt > 600) throw new Error(`no temporary failure recorded: ${JSON.stringify(pending)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await mailpit.recipientChaos(451, 0);
    const done = await waitFor(retried, (current) => current.status === 'completed');
    expect(counts(done)).toEqual(expect.objectContaining({ sent: 1, failed: 0 }));
    expect(await messagesTo(address(8), retried)).toHaveLength(1);
  } finally {
    await mailpit.recipientChaos(451, 0);
  }
});

test('test-send: up to 10 addresses at once, outside any run, each with its outcome', async () => {
  const campaignId = await sendable({ template_id: await template({ subject: 'Test {{email}}' }) });
  const answer = await api('POST', `/email-campaigns/${campaignId}/test-send`, { emails: [`a@${DOMAIN}`, `B@${DOMAIN}`] });
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual({
    results: [
      { email: `a@${DOMAIN}`, status: 'sent', message_id: expect.any(String), error: null },
      { email: `b@${DOMAIN}`, status: 'sent', message_id: expect.any(String), error: null },
    ],
  });
  const testMessages = (await mailpit.messages()).filter((message) => message.To.some((to) => to.Address === `a@${DOMAIN}`));
  expect(testMessages.map((message) => message.Subject)).toEqual([`Test a@${DOMAIN}`]);
  expect((await api('GET', `/email-campaigns/${campaignId}/runs`)).body.total).toBe(0);

  const tooMany = await api('POST', `/email-campaigns/${campaignId}/test-send`, {
    emails: Array.from({ length: 11 }, (_, n) => `t${n}@${DOMAIN}`),
  });
  expect(tooMany.status).toBe(422);
  expect((await api('POST', `/email-campaigns/${campaignId}/test-send`, { emails: [] })).status).toBe(422);
  const bad = await api('POST', `/email-campaigns/${campaignId}/test-send`, { emails: ['nope'] });
  expect(bad.status).toBe(422);
  expect(bad.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'emails', 0], type: 'value_error' })]);
  const unknownVariant = await api('POST', `/email-campaigns/${campaignId}/test-send`, {
    emails: [`c@${DOMAIN}`],
    variant_id: crypto.randomUUID(),
  });
  expect(unknownVariant.status).toBe(422);

  const noSender = await campaign({ recipient_source: 'csv_account_ids', template_id: await template() });
  const refused = await api('POST', `/email-campaigns/${noSender}/test-send`, { emails: [`d@${DOMAIN}`] });
  expect(refused.status).toBe(409);
  expect(refused.body.detail).toEqual(expect.stringContaining('from_email'));
});

test('test-send: a suppressed address is not mailed, its outcome is `suppressed`', async () => {
  const suppressed = `test-suppressed@${DOMAIN}`;
  expect((await api('POST', '/suppressions/', { email: suppressed })).status).toBe(201);
  const campaignId = await sendable({ template_id: await template({ subject: 'Suppressed test {{email}}' }) });
  const answer = await api('POST', `/email-campaigns/${campaignId}/test-send`, { emails: [suppressed, `test-kept@${DOMAIN}`] });
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual({
    results: [
      { email: suppressed, status: 'suppressed', message_id: null, error: null },
      { email: `test-kept@${DOMAIN}`, status: 'sent', message_id: expect.any(String), error: null },
    ],
  });
  const received = (await mailpit.messages()).filter((message) => message.Subject.startsWith('Suppressed test'));
  expect(received.map((message) => message.To.map((to) => to.Address))).toEqual([[`test-kept@${DOMAIN}`]]);
});

test('test-send: past TEST_SEND_PER_HOUR messages in a workspace, 429 with Retry-After; other workspaces still send', async () => {
  const sendableIn = async (workspace: string): Promise<string> => {
    const created = await api(
      'POST',
      '/email-campaigns/',
      {
        workspace_id: workspace,
        name: `Quota ${uniqueSuffix()}`,
        recipient_source: 'csv_account_ids',
        csv_account_ids: ['acc-1'],
        from_email: 'news@sender.example.com',
        template_id: await template({ subject: 'Quota {{email}}' }, workspace),
      },
      workspace,
    );
    expect(created.status).toBe(201);
    return created.body.id as string;
  };
  const testSend = (workspace: string, campaignId: string, emails: string[]) =>
    api('POST', `/email-campaigns/${campaignId}/test-send`, { emails }, workspace);

  const campaignB = await sendableIn(workspaceB);
  // Simultaneous requests take exactly the quota between them, however they interleave.
  const answers = await Promise.all(
    Array.from({ length: TEST_SEND_PER_HOUR + 2 }, (_, n) => testSend(workspaceB, campaignB, [`quota${n}@${DOMAIN}`])),
  );
  expect(answers.filter((answer) => answer.status === 200)).toHaveLength(TEST_SEND_PER_HOUR);
  const refused = answers.filter((answer) => answer.status !== 200);
  expect(refused.map((answer) => answer.status)).toEqual([429, 429]);
  for (const answer of refused) {
    expect(answer.body).toEqual({ detail: expect.stringContaining('Test send quota') });
    const retryAfter = answer.headers.get('retry-after');
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    expect(Number(retryAfter)).toBeLessThanOrEqual(3600);
  }
  const received = (await mailpit.messages()).filter((message) => message.Subject.startsWith('Quota quota'));
  expect(received).toHaveLength(TEST_SEND_PER_HOUR);
  expect((await testSend(workspaceB, campaignB, [`late@${DOMAIN}`])).status).toBe(429);

  const campaignD = await sendableIn(workspaceD);
  const other = await testSend(workspaceD, campaignD, [`other@${DOMAIN}`]);
  expect(other.status).toBe(200);
  expect(other.body.results).toEqual([expect.objectContaining({ status: 'sent' })]);
});

test('ten simultaneous POST /runs on one campaign make one run, nine 409s name it, and each recipient gets one copy', async () => {
  const ids = ['acc-11', 'acc-12', 'acc-13', 'acc-14', 'acc-15'];
  const campaignId = await sendable({ csv_account_ids: ids, template_id: await template({ subject: 'Once {{first_name}}' }) });
  const answers = await Promise.all(Array.from({ length: 10 }, () => api('POST', `/email-campaigns/${campaignId}/runs`, {})));
  const created = answers.filter((answer) => answer.status === 201);
  expect(created).toHaveLength(1);
  const runId = created[0].body.id as string;
  const conflicts = answers.filter((answer) => answer.status !== 201);
  expect(conflicts.map((answer) => [answer.status, answer.body.detail])).toEqual(
    Array.from({ length: 9 }, () => [409, expect.stringContaining(runId)]),
  );

  await waitFor(runId, (run) => run.status === 'completed');
  const received = (await mailpit.messages()).filter((message) => message.Subject.startsWith('Once '));
  expect(received.flatMap((message) => message.To.map((to) => to.Address.toLowerCase())).sort()).toEqual(
    [11, 12, 13, 14, 15].map(address).sort(),
  );
  expect((await api('GET', `/email-campaigns/${campaignId}/runs`)).body.total).toBe(1);
});

test('deleting a workspace deletes its runs and their recipients', async () => {
  const templateId = await template({}, workspaceC);
  const created = await api(
    'POST',
    '/email-campaigns/',
    {
      workspace_id: workspaceC,
      name: 'Doomed',
      recipient_source: 'csv_account_ids',
      csv_account_ids: ['acc-9'],
      from_email: 'news@sender.example.com',
      template_id: templateId,
    },
    workspaceC,
  );
  const runId = (await api('POST', `/email-campaigns/${created.body.id as string}/runs`, {}, workspaceC)).body.id as string;
  expect((await api('DELETE', `/workspaces/${workspaceC}`, undefined, workspaceC)).status).toBe(204);
  const db = new Client({ connectionString: gateway.postgres.url });
  await db.connect();
  try {
    const runs = await db.query('SELECT 1 FROM delivery.runs WHERE workspace_id = $1', [workspaceC]);
    const recipientRows = await db.query('SELECT 1 FROM delivery.run_recipients WHERE run_id = $1', [runId]);
    expect([runs.rowCount, recipientRows.rowCount]).toEqual([0, 0]);
  } finally {
    await db.end();
  }
});
