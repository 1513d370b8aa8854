import * as grpc from '@grpc/grpc-js';
import { ConflictError, RETRY_AFTER_TRAILER, call, createClient, isServiceError } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { analyticsV1, campaignV1, type deliveryV1 } from '@mail/proto';
import type { RunPlan } from '../src/domain/plan';
import { insertRun } from '../src/store/runs';
import { createSendableCampaign, fillAccounts, openSendingDatabase, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * Test sends and manual runs (docs/api.md, "Campaign runs"), against the real
 * campaign, analytics and delivery processes and a private Mailpit: a test send
 * never mails a suppressed address, a workspace's test sends are counted
 * against TEST_SEND_PER_HOUR (3 here) however many arrive at once, and a
 * campaign has one manual run at a time however many requests arrive at once.
 */

const PER_HOUR = 3;
let world: DeliveryWorld;
let analytics: analyticsV1.AnalyticsServiceClient;

beforeAll(async () => {
  world = await startDeliveryWorld('test_sends', { TEST_SEND_PER_HOUR: String(PER_HOUR) });
  analytics = createClient(analyticsV1.AnalyticsServiceClient, world.stack.urls.grpc.analytics);
}, 180_000);

afterAll(async () => {
  analytics?.close();
  await world?.close();
});

/** A sendable campaign in a workspace of its own (each test its own quota). */
async function campaignInWorkspace(workspaceId: string): Promise<string> {
  const template = await call(world.templates.createTemplate.bind(world.templates), {
    workspaceId,
    template: { name: 'Test', subject: 'Test {{email}}', html: '<p>Hi</p>', text: 'Hi' },
  });
  const { campaign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId,
    campaign: {
      workspaceId,
      name: 'Test sends',
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
      csvAccountIds: { ids: ['acc-0000000'] },
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      templateId: template.id,
    },
  });
  return campaign!.id;
}

const testSend = (workspaceId: string, campaignId: string, emails: string[]) =>
  call(world.delivery.testSend.bind(world.delivery), { workspaceId, campaignId, emails }, 30_000);

/** The failed call's error (the test fails if the call succeeds). */
async function refusal(attempt: Promise<unknown>): Promise<grpc.ServiceError> {
  const error = await attempt.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  if (!isServiceError(error)) throw new Error(`expected a refused call, got ${String(error)}`);
  return error;
}

async function messagesTo(domain: string): Promise<string[]> {
  return (await world.mailpit.messages()).flatMap((message) =>
    message.To.map((to) => to.Address.toLowerCase()).filter((address) => address.endsWith(`@${domain}`)),
  );
}

test('a test send answers `suppressed` for a suppressed address and mails it nothing; suppressed addresses use no quota', async () => {
  const workspaceId = crypto.randomUUID();
  const campaignId = await campaignInWorkspace(workspaceId);
  const domain = `suppressed-${uniqueSuffix()}.example.com`;
  const suppressed = `gone@${domain}`;
  await call(analytics.addSuppression.bind(analytics), { workspaceId, email: suppressed, note: 'test send' });

  const { outcomes } = await testSend(workspaceId, campaignId, [suppressed.toUpperCase(), `here@${domain}`]);
  expect(outcomes).toEqual([
    { email: suppressed, status: 'suppressed' },
    { email: `here@${domain}`, status: 'sent', messageId: expect.any(String) },
  ]);
  // Mailpit has the sent one once it shows; the suppressed one would have come by the same way.
  for (let attempt = 0; (await messagesTo(domain)).length === 0 && attempt < 100; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(await messagesTo(domain)).toEqual([`here@${domain}`]);

  // 1 of 3 used: suppressed addresses alone go through any number of times, and count nothing.
  for (let n = 0; n < PER_HOUR + 1; n += 1) {
    expect((await testSend(workspaceId, campaignId, [suppressed])).outcomes).toEqual([{ email: suppressed, status: 'suppressed' }]);
  }
  expect((await testSend(workspaceId, campaignId, [`a@${domain}`, `b@${domain}`])).outcomes.map((o) => o.status)).toEqual(['sent', 'sent']);
  expect((await refusal(testSend(workspaceId, campaignId, [`c@${domain}`]))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
});

test('TEST_SEND_PER_HOUR: simultaneous test sends take exactly the quota, the rest are refused with a wait, per workspace', async () => {
  const workspaceId = crypto.randomUUID();
  const campaignId = await campaignInWorkspace(workspaceId);
  const domain = `quota-${uniqueSuffix()}.example.com`;

  const answers = await Promise.allSettled(Array.from({ length: 8 }, (_, n) => testSend(workspaceId, campaignId, [`r${n}@${domain}`])));
  const sent = answers.filter((answer) => answer.status === 'fulfilled');
  const refused = answers.flatMap((answer) => (answer.status === 'rejected' ? [answer.reason as grpc.ServiceError] : []));
  expect(sent).toHaveLength(PER_HOUR);
  expect(refused).toHaveLength(8 - PER_HOUR);
  for (const error of refused) {
    expect(error.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(error.details).toEqual(expect.stringContaining('Test send quota'));
    const retryAfter = Number(error.metadata.get(RETRY_AFTER_TRAILER)[0]);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
  }
  for (let attempt = 0; (await messagesTo(domain)).length < PER_HOUR && attempt < 100; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(await messagesTo(domain)).toHaveLength(PER_HOUR);

  // All or none: two addresses do not fit where none is left, nor does a request larger than the quota.
  expect((await refusal(testSend(workspaceId, campaignId, [`x@${domain}`, `y@${domain}`]))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);

  // Another workspace has a quota of its own.
  const other = crypto.randomUUID();
  const otherCampaign = await campaignInWorkspace(other);
  expect((await testSend(other, otherCampaign, [`other@${domain}`])).outcomes).toEqual([
    expect.objectContaining({ email: `other@${domain}`, status: 'sent' }),
  ]);
});

test('ten simultaneous CreateRun calls make one run, nine answers name it, and each recipient gets one copy', async () => {
  const domain = `manual-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 20, domain, 1_000);
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const create = () =>
    call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id }, 30_000);
  const answers = await Promise.allSettled(Array.from({ length: 10 }, create));
  const made = answers.flatMap((answer) => (answer.status === 'fulfilled' ? [answer.value.run!] : []));
  expect(made).toHaveLength(1);
  const [run] = made;
  const refused = answers.flatMap((answer) => (answer.status === 'rejected' ? [answer.reason as grpc.ServiceError] : []));
  expect(refused.map((error) => [error.code, error.details])).toEqual(
    Array.from({ length: 9 }, () => [grpc.status.ALREADY_EXISTS, expect.stringContaining(run.id)]),
  );

  const done = await waitForRun(world, run.id, (current: deliveryV1.Run) => current.status === 'completed');
  expect(done.counts).toEqual(expect.objectContaining({ recipients: 20, sent: 20 }));
  const delivered = await messagesTo(domain);
  expect(delivered).toHaveLength(20);
  expect(new Set(delivered).size).toBe(20);
  const runs = await call(world.delivery.listRuns.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  expect(runs.runs.map((listed) => listed.id)).toEqual([run.id]);

  // Once it has finished, the campaign may be sent again.
  const again = await create();
  expect(again.run!.id).not.toBe(run.id);
  await call(world.delivery.cancelRun.bind(world.delivery), { workspaceId: world.workspaceId, id: again.run!.id });
});

test('the one-manual-run rule leaves scheduled runs alone', async () => {
  const database = await openSendingDatabase(`manual_rule_${uniqueSuffix()}`);
  try {
    // insertRun stores the plan as it is given; its content does not matter here.
    const queued = { workspaceId: crypto.randomUUID(), campaignId: crypto.randomUUID(), sendPriority: 100, plan: {} as RunPlan };
    const manual = await insertRun(database.db, { ...queued, trigger: 'manual', scheduledFor: null });
    const scheduled = await insertRun(database.db, { ...queued, trigger: 'schedule', scheduledFor: new Date() });
    expect([manual?.status, scheduled?.status]).toEqual(['queued', 'queued']);
    const second = await insertRun(database.db, { ...queued, trigger: 'manual', scheduledFor: null }).catch((error: unknown) => error);
    expect(second).toBeInstanceOf(ConflictError);
    expect((second as Error).message).toContain(manual!.id);
  } finally {
    await database.close();
  }
});

test('without an answer from analytics a test send is refused (503) and mails nothing', async () => {
  const workspaceId = crypto.randomUUID();
  const campaignId = await campaignInWorkspace(workspaceId);
  const domain = `blind-${uniqueSuffix()}.example.com`;
  await world.stack.stop('analytics');
  const error = await refusal(testSend(workspaceId, campaignId, [`nobody@${domain}`]));
  expect(error.code).toBe(grpc.status.UNAVAILABLE);
  expect(await messagesTo(domain)).toEqual([]);
});
