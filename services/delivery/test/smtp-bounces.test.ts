import { call } from '@mail/common';
import { eventually, uniqueSuffix } from '@mail/local';
import { analyticsV1, eventsV1 } from '@mail/proto';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * Bounces without a provider (docs/api.md, "Bounces without a provider"): a
 * real Mailpit's chaos switch refuses at RCPT; the delivery process stores a
 * `bounce` event of provider `smtp` for each refused recipient, which the real
 * ingestion process stores in ClickHouse, where analytics reads it and the
 * suppressions it makes.
 */

const RECIPIENTS = 3;
let world: DeliveryWorld;

beforeAll(async () => {
  world = await startDeliveryWorld('smtp_bounces', { SEND_MAX_ATTEMPTS: '2', SEND_RETRY_BASE_MS: '100' }, { ingestion: true });
}, 180_000);

afterAll(async () => {
  await world?.close();
});

/** A campaign of the RECIPIENTS addresses at `domain`, and a run of it until it completes. */
async function runTo(domain: string, firstAccount: number): Promise<{ campaignId: string; runId: string }> {
  await fillAccounts(world.recipients.url, RECIPIENTS, domain, firstAccount);
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const runId = await runOf(campaign.id);
  return { campaignId: campaign.id, runId };
}

async function runOf(campaignId: string): Promise<string> {
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId });
  await waitForRun(world, run!.id, (current) => current.status === 'completed', 180_000);
  return run!.id;
}

/** The run's bounces as analytics lists them, once there are `count` of them (ingestion stores them a moment later). */
async function bouncesOf(runId: string, count: number): Promise<analyticsV1.EventRecord[]> {
  return eventually(async () => {
    const { events } = await call(world.analytics.listEvents.bind(world.analytics), {
      filter: { workspaceId: world.workspaceId, runId, eventType: eventsV1.EventType.EVENT_TYPE_BOUNCE },
      page: { page: 1, pageSize: 100 },
    });
    if (events.length < count) throw new Error(`${events.length} bounces of ${count} so far`);
    return events;
  }, 120_000);
}

test('a 5xx at RCPT: the recipient fails, a hard bounce of provider smtp with the answer and its class is stored, and the address is suppressed', async () => {
  const domain = `hard-${uniqueSuffix()}.example.com`;
  await world.mailpit.recipientChaos(550, 100);
  let first: { campaignId: string; runId: string };
  try {
    first = await runTo(domain, 1);
  } finally {
    await world.mailpit.recipientChaos(550, 0);
  }
  const recipients = await allRecipients(world, first.runId);
  expect(recipients.map((recipient) => recipient.status)).toEqual(Array(RECIPIENTS).fill('failed'));
  const answer = recipients[0].error!;
  expect(answer).toMatch(/^550\b/);

  const bounces = await bouncesOf(first.runId, RECIPIENTS);
  expect(bounces).toHaveLength(RECIPIENTS);
  const byAddress = new Map(recipients.map((recipient) => [recipient.email, recipient]));
  for (const bounce of bounces) {
    const recipient = byAddress.get(bounce.email)!;
    expect(bounce).toEqual(
      expect.objectContaining({
        campaignId: first.campaignId,
        runId: first.runId,
        provider: 'smtp',
        bounceType: eventsV1.BounceType.BOUNCE_TYPE_HARD,
        bounceClass: 'invalid_address',
        reason: recipient.error,
        providerMessageId: recipient.messageId,
      }),
    );
  }

  // The hard bounces suppressed the addresses: a later run of the campaign mails none of them.
  const addresses = recipients.map((recipient) => recipient.email);
  await eventually(async () => {
    const { emails } = await call(world.analytics.filterSuppressed.bind(world.analytics), {
      workspaceId: world.workspaceId,
      emails: addresses,
    });
    if (emails.length < RECIPIENTS) throw new Error(`${emails.length} suppressed so far`);
  }, 120_000);
  const later = await runOf(first.campaignId);
  expect((await allRecipients(world, later)).map((recipient) => recipient.status)).toEqual(Array(RECIPIENTS).fill('suppressed'));
}, 600_000);

test('4xx answers until the attempts run out: the recipient fails with a soft bounce', async () => {
  const domain = `soft-${uniqueSuffix()}.example.com`;
  await world.mailpit.recipientChaos(451, 100);
  let run: { campaignId: string; runId: string };
  try {
    run = await runTo(domain, 100);
  } finally {
    await world.mailpit.recipientChaos(451, 0);
  }
  const recipients = await allRecipients(world, run.runId);
  expect(recipients.map((recipient) => recipient.status)).toEqual(Array(RECIPIENTS).fill('failed'));
  expect(recipients[0].error).toMatch(/^451\b/);

  const bounces = await bouncesOf(run.runId, RECIPIENTS);
  expect(bounces).toHaveLength(RECIPIENTS);
  for (const bounce of bounces) {
    expect(bounce).toEqual(
      expect.objectContaining({
        campaignId: run.campaignId,
        runId: run.runId,
        provider: 'smtp',
        bounceType: eventsV1.BounceType.BOUNCE_TYPE_SOFT,
        bounceClass: 'technical',
      }),
    );
    expect(bounce.reason).toMatch(/^451\b/);
  }
}, 600_000);
