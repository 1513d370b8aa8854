import { Client } from 'pg';
import * as grpc from '@grpc/grpc-js';
import { call, isServiceError } from '@mail/common';
import { NO_VARIANT, createClickHouse } from '@mail/event-store';
import { uniqueSuffix } from '@mail/local';
import { campaignV1, type deliveryV1 } from '@mail/proto';
import { allRecipients, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * A/B test, then the winner, and follow-up runs (docs/api.md): the test
 * fraction and its split, the decision from the run's own human events (with
 * and without significance) or by hand, exactly once across a SIGKILL in
 * either phase and two sender replicas, and follow-ups by engagement.
 * decide_at is moved into the past in the database rather than waited for.
 */

let world: DeliveryWorld;
let sql: Client;

beforeAll(async () => {
  world = await startDeliveryWorld('ab_test', { SEND_WORKER_LEASE_MS: '3000' });
  sql = new Client({ connectionString: world.env.DATABASE_URL });
  await sql.connect();
  await sql.query('SET search_path TO delivery');
}, 180_000);

afterAll(async () => {
  await sql?.end();
  await world?.close();
});

interface Variants {
  campaign: campaignV1.Campaign;
  a: string;
  b: string;
}

/** A variants campaign with an A/B test over `domain`'s accounts; variant A's subject starts with "A ", B's with "B ". */
async function abCampaign(
  domain: string,
  abTest: campaignV1.AbTest = { testFraction: 0.2, waitMinutes: 5 },
  [weightA, weightB] = [1, 1],
): Promise<Variants> {
  const template = (label: string) =>
    call(world.templates.createTemplate.bind(world.templates), {
      workspaceId: world.workspaceId,
      template: { name: label, subject: `${label} {{first_name}}`, text: `Variant ${label}` },
    });
  const [a, b] = await Promise.all([template('A'), template('B')]);
  const { campaign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId: world.workspaceId,
    campaign: {
      workspaceId: world.workspaceId,
      name: `AB ${domain}`,
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
      mssqlQuery: `SELECT email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_VARIANTS,
      variants: {
        variants: [
          { templateId: a.id, weight: weightA, label: 'A' },
          { templateId: b.id, weight: weightB, label: 'B' },
        ],
      },
      abTest,
    },
  });
  if (!campaign?.variants) throw new Error('no campaign');
  const [first, second] = campaign.variants.variants;
  return { campaign, a: first.id, b: second.id };
}

const createRun = async (campaignId: string, audience?: deliveryV1.RunAudience): Promise<deliveryV1.Run> => {
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId, audience });
  if (!run) throw new Error('no run');
  return run;
};

const phase = (wanted: string) => (run: deliveryV1.Run) => run.abTest?.phase === wanted;

/** The test is over: the decision is due now. */
async function decideNow(runId: string): Promise<void> {
  await sql.query(`UPDATE runs SET decide_at = now() - interval '1 second' WHERE id = $1 AND ab_phase = 'waiting'`, [runId]);
}

/** Mailpit's messages to `domain`, by address (how many each), and the subject each got. */
async function delivered(domain: string): Promise<{ counts: Map<string, number>; texts: Map<string, string> }> {
  const counts = new Map<string, number>();
  const texts = new Map<string, string>();
  for (const message of await world.mailpit.messages()) {
    for (const to of message.To) {
      const address = to.Address.toLowerCase();
      if (!address.endsWith(`@${domain}`)) continue;
      counts.set(address, (counts.get(address) ?? 0) + 1);
      texts.set(address, message.Subject);
    }
  }
  return { counts, texts };
}

/** Human (or machine) opens and clicks of a run, stored as ingestion stores them. */
async function storeEngagement(
  run: deliveryV1.Run,
  events: { email: string; variantId?: string; type: 'open' | 'click'; machine?: boolean }[],
): Promise<void> {
  const clickhouse = createClickHouse(world.env.CLICKHOUSE_URL, world.env.CLICKHOUSE_DATABASE);
  const now = new Date().toISOString();
  try {
    await clickhouse.insert({
      table: 'events',
      format: 'JSONEachRow',
      values: events.map((event) => ({
        id: crypto.randomUUID(),
        workspace_id: world.workspaceId,
        campaign_id: run.campaignId,
        variant_id: event.variantId ?? NO_VARIANT,
        run_id: run.id,
        event_type: event.type,
        bounce_type: 'none',
        bounce_class: 'none',
        machine_open: event.machine ? 1 : 0,
        email: event.email,
        occurred_at: now,
        received_at: now,
        url: event.type === 'click' ? 'https://shop.example.com/' : null,
        reason: null,
        user_agent: 'Mozilla/5.0',
        ip: '203.0.113.7',
        provider: 'tracking',
        provider_event_id: `ab-${uniqueSuffix()}-${crypto.randomUUID()}`,
        provider_message_id: null,
        raw: '{}',
        ingested_at: now,
      })),
    });
  } finally {
    await clickhouse.close();
  }
}

async function expectStatus(promise: Promise<unknown>, code: grpc.status): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(isServiceError(error) ? error.code : error).toBe(code);
}

test('a run tests a fraction split by weight, waits, decides by significance and sends the winner to the rest once', async () => {
  const domain = `ab-sig-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 200, domain);
  const { campaign, a, b } = await abCampaign(domain);
  const created = await createRun(campaign.id);
  expect(created.abTest).toMatchObject({ phase: 'testing', testFraction: 0.2, waitMinutes: 5, metric: 'open_rate' });

  const waiting = await waitForRun(world, created.id, phase('waiting'));
  expect(waiting.status).toBe('sending');
  expect(waiting.abTest?.testRecipients).toBe(40);
  expect(waiting.abTest?.decideAt?.getTime()).toBeGreaterThan(Date.now() + 3 * 60_000);
  const sentBy = new Map(waiting.abTest?.variants.map((v) => [v.variantId, v.sent]));
  expect(sentBy).toEqual(
    new Map([
      [a, 20],
      [b, 20],
    ]),
  );
  expect(waiting.counts).toMatchObject({ recipients: 200, sent: 40, pending: 160 });
  expect((await delivered(domain)).counts.size).toBe(40);

  const test = (await allRecipients(world, created.id)).filter((r) => r.status === 'sent');
  const ofA = test.filter((r) => r.variantId === a).map((r) => r.email);
  const ofB = test.filter((r) => r.variantId === b).map((r) => r.email);
  // 15 of A's 20 opened, 2 of B's 20 (and B's machine opens do not count).
  await storeEngagement(created, [
    ...ofA.slice(0, 15).map((email) => ({ email, variantId: a, type: 'open' as const })),
    ...ofB.slice(0, 2).map((email) => ({ email, variantId: b, type: 'open' as const })),
    ...ofB.slice(2).map((email) => ({ email, variantId: b, type: 'open' as const, machine: true })),
  ]);
  await decideNow(created.id);

  const done = await waitForRun(world, created.id, (run) => run.status === 'completed');
  expect(done.abTest).toMatchObject({ phase: 'done', winnerVariantId: a, decidedBy: 'significance' });
  expect(done.abTest?.variants.find((v) => v.variantId === a)).toMatchObject({ sent: 20, opens: 15, rate: 0.75 });
  expect(done.abTest?.variants.find((v) => v.variantId === b)).toMatchObject({ sent: 20, opens: 2, rate: 0.1 });
  expect(done.counts).toMatchObject({ recipients: 200, sent: 200, pending: 0 });

  const recipients = await allRecipients(world, created.id);
  const testEmails = new Set(test.map((r) => r.email));
  for (const recipient of recipients.filter((r) => !testEmails.has(r.email))) expect(recipient.variantId).toBe(a);
  const { counts, texts } = await delivered(domain);
  expect(counts.size).toBe(200);
  expect([...counts.values()].every((times) => times === 1)).toBe(true);
  for (const recipient of recipients.filter((r) => !testEmails.has(r.email))) expect(texts.get(recipient.email)).toMatch(/^A /);
}, 240_000);

test('without a significant difference the best rate wins, by clicks for click_rate', async () => {
  const domain = `ab-best-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 60, domain, 1000);
  const { campaign, b } = await abCampaign(domain, { testFraction: 0.5, waitMinutes: 1, metric: 'click_rate' });
  const created = await createRun(campaign.id);
  const waiting = await waitForRun(world, created.id, phase('waiting'));
  expect(waiting.abTest?.testRecipients).toBe(30);
  const ofB = (await allRecipients(world, created.id)).filter((r) => r.status === 'sent' && r.variantId === b);
  await storeEngagement(created, [
    { email: ofB[0].email, variantId: b, type: 'click' },
    { email: ofB[1].email, variantId: b, type: 'open' },
  ]);
  await decideNow(created.id);
  const done = await waitForRun(world, created.id, (run) => run.status === 'completed');
  expect(done.abTest).toMatchObject({ phase: 'done', winnerVariantId: b, decidedBy: 'best_rate' });
  expect(done.abTest?.variants.find((v) => v.variantId === b)).toMatchObject({ clicks: 1, opens: 1 });
  expect(done.counts).toMatchObject({ recipients: 60, sent: 60 });
}, 240_000);

test('the test splits by weight; the winner is picked by hand only while the test waits, paused or not (409 before and after, 422 for another variant)', async () => {
  const domain = `ab-manual-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 50, domain, 2000);
  const { campaign, a, b } = await abCampaign(domain, undefined, [4, 1]);
  const created = await createRun(campaign.id);
  const pick = (variantId: string) =>
    call(world.delivery.pickWinner.bind(world.delivery), { workspaceId: world.workspaceId, id: created.id, variantId });
  await expectStatus(pick(b), grpc.status.ALREADY_EXISTS);
  const waiting = await waitForRun(world, created.id, phase('waiting'));
  // 10 test recipients, weights 4 : 1.
  expect(new Map(waiting.abTest?.variants.map((v) => [v.variantId, v.sent]))).toEqual(
    new Map([
      [a, 8],
      [b, 2],
    ]),
  );
  await expectStatus(pick(crypto.randomUUID()), grpc.status.INVALID_ARGUMENT);
  const ids = { workspaceId: world.workspaceId, id: created.id };
  const { run: paused } = await call(world.delivery.pauseRun.bind(world.delivery), ids);
  expect(paused).toMatchObject({ status: 'paused', abTest: { phase: 'waiting' } });
  const { run } = await pick(b);
  expect(run).toMatchObject({ status: 'paused', abTest: { phase: 'sending_winner', winnerVariantId: b, decidedBy: 'manual' } });
  await expectStatus(pick(b), grpc.status.ALREADY_EXISTS);
  await call(world.delivery.resumeRun.bind(world.delivery), ids);
  const done = await waitForRun(world, created.id, (current) => current.status === 'completed');
  expect(done.abTest).toMatchObject({ phase: 'done', decidedBy: 'manual' });
  expect(done.counts).toMatchObject({ recipients: 50, sent: 50 });
  await expectStatus(pick(b), grpc.status.ALREADY_EXISTS);
}, 240_000);

test('a run cancelled while its test waits keeps its phase and takes no pick', async () => {
  const domain = `ab-cancel-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 50, domain, 2500);
  const { campaign, b } = await abCampaign(domain);
  const created = await createRun(campaign.id);
  await waitForRun(world, created.id, phase('waiting'));
  const { run } = await call(world.delivery.cancelRun.bind(world.delivery), { workspaceId: world.workspaceId, id: created.id });
  expect(run).toMatchObject({ status: 'cancelled', abTest: { phase: 'waiting' }, counts: { sent: 10 } });
  await expectStatus(
    call(world.delivery.pickWinner.bind(world.delivery), { workspaceId: world.workspaceId, id: created.id, variantId: b }),
    grpc.status.ALREADY_EXISTS,
  );
  expect((await allRecipients(world, created.id)).filter((r) => r.status === 'sent')).toHaveLength(10);
}, 240_000);

test('a sender SIGKILLed in the test phase and in the winner phase, beside a second replica, sends every address once', async () => {
  const domain = `ab-kill-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 3000, domain, 10_000);
  await world.startReplica();
  const { campaign } = await abCampaign(domain, { testFraction: 0.3, waitMinutes: 1 });
  const created = await createRun(campaign.id);
  await waitForRun(world, created.id, (run) => run.counts!.sent > 50);
  await world.stack.kill('delivery', 'SIGKILL');
  await world.stack.restart('delivery');
  const waiting = await waitForRun(world, created.id, phase('waiting'));
  expect(waiting.abTest?.testRecipients).toBe(900);
  const testSet = (await allRecipients(world, created.id)).filter((r) => r.status !== 'pending').map((r) => r.email);
  expect(testSet).toHaveLength(900);
  await decideNow(created.id);
  await waitForRun(world, created.id, (run) => run.abTest?.phase === 'sending_winner' && run.counts!.sent > 1200);
  await world.stack.kill('delivery', 'SIGKILL');
  await world.stack.restart('delivery');
  const done = await waitForRun(world, created.id, (run) => run.status === 'completed');
  expect(done.counts!.recipients).toBe(3000);
  expect(done.counts!.sent + done.counts!.unknown).toBe(3000);
  const { counts } = await delivered(domain);
  for (const recipient of await allRecipients(world, created.id)) {
    const times = counts.get(recipient.email) ?? 0;
    if (recipient.status === 'sent') expect({ email: recipient.email, times }).toEqual({ email: recipient.email, times: 1 });
    else expect(times).toBeLessThanOrEqual(1);
  }
  // The same test recipients after the restarts: chosen by the keyed hash, once.
  expect(done.abTest?.testRecipients).toBe(900);
}, 300_000);

test('follow-up runs go to the earlier run sent recipients who did or did not open or click (human events only)', async () => {
  const domain = `follow-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 10, domain, 3000);
  const template = await call(world.templates.createTemplate.bind(world.templates), {
    workspaceId: world.workspaceId,
    template: { name: 'Follow', subject: 'Again {{first_name}}', text: 'Hello again {{first_name}}' },
  });
  const single = (name: string) =>
    call(world.campaigns.createCampaign.bind(world.campaigns), {
      workspaceId: world.workspaceId,
      campaign: {
        workspaceId: world.workspaceId,
        name,
        recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
        mssqlQuery: `SELECT email, first_name FROM accounts WHERE email LIKE '%@${domain}'`,
        fromEmail: 'news@sender.example.com',
        deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
        templateId: template.id,
      },
    });
  const { campaign: first } = await single('First');
  const earlier = await createRun(first!.id);
  await waitForRun(world, earlier.id, (run) => run.status === 'completed');
  const user = (n: number) => `user${3000 + n}@${domain}`;
  // A follow-up sends with the fields its recipients had in the earlier run, not what the source holds now.
  const source = new Client({ connectionString: world.recipients.url });
  await source.connect();
  try {
    await source.query(`UPDATE accounts SET first_name = 'Renamed' WHERE email LIKE $1`, [`%@${domain}`]);
  } finally {
    await source.end();
  }
  await storeEngagement(earlier, [
    { email: user(0), type: 'open' },
    { email: user(1), type: 'open' },
    { email: user(1), type: 'click' },
    { email: user(2), type: 'open', machine: true },
    { email: user(3), type: 'click', machine: true },
  ]);
  const expected: Record<string, string[]> = {
    opened: [user(0), user(1)],
    clicked: [user(1)],
    not_opened: [2, 3, 4, 5, 6, 7, 8, 9].map(user),
    not_clicked: [0, 2, 3, 4, 5, 6, 7, 8, 9].map(user),
  };
  for (const [engagement, emails] of Object.entries(expected)) {
    const { campaign } = await single(`Follow-up ${engagement}`);
    const run = await createRun(campaign!.id, { runId: earlier.id, engagement });
    expect(run.audience).toEqual({ runId: earlier.id, engagement });
    const done = await waitForRun(world, run.id, (current) => current.status === 'completed');
    const recipients = await allRecipients(world, done.id);
    expect(recipients.map((r) => r.email).sort()).toEqual([...emails].sort());
    expect(recipients.every((r) => r.status === 'sent')).toBe(true);
  }
  // user(0): the earlier run, and the follow-ups to those who opened and to those who did not click.
  const subjects = (await world.mailpit.messages())
    .filter((message) => message.To.some(({ Address }) => Address.toLowerCase() === user(0)))
    .map((message) => message.Subject);
  expect(subjects).toEqual(['Again First3000', 'Again First3000', 'Again First3000']);
}, 240_000);

test("a follow-up of another workspace's run, or of none, is a 404", async () => {
  const { campaign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId: world.workspaceId,
    campaign: {
      workspaceId: world.workspaceId,
      name: 'Lonely',
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_UNSPECIFIED,
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_UNSPECIFIED,
    },
  });
  const otherWorkspace = crypto.randomUUID();
  const { campaign: foreign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId: otherWorkspace,
    campaign: {
      workspaceId: otherWorkspace,
      name: 'Foreign',
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
      csvAccountIds: { ids: ['acc-0000000'] },
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      templateId: (
        await call(world.templates.createTemplate.bind(world.templates), {
          workspaceId: otherWorkspace,
          template: { name: 'Foreign', subject: 'Hi', text: 'Hi' },
        })
      ).id,
    },
  });
  const { run: foreignRun } = await call(world.delivery.createRun.bind(world.delivery), {
    workspaceId: otherWorkspace,
    campaignId: foreign!.id,
  });
  for (const runId of [foreignRun!.id, crypto.randomUUID()]) {
    await expectStatus(
      call(world.delivery.createRun.bind(world.delivery), {
        workspaceId: world.workspaceId,
        campaignId: campaign!.id,
        audience: { runId, engagement: 'opened' },
      }),
      grpc.status.NOT_FOUND,
    );
  }
}, 60_000);
