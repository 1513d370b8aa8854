import { call, createClient } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { analyticsV1 } from '@mail/proto';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * "Sending, exactly once" (docs/api.md): a batch's addresses are checked against the workspace's suppressions
 * before it goes out, and again for its rest whenever that check is over 5 seconds old. At 2 messages a second
 * one batch of 30 takes 15 s: an address suppressed after the first message went out is not mailed.
 */
jest.setTimeout(180_000);

let world: DeliveryWorld;
let analytics: analyticsV1.AnalyticsServiceClient;

beforeAll(async () => {
  world = await startDeliveryWorld('suppression_at_hand_over', { SEND_RATE_PER_SECOND: '2' });
  analytics = createClient(analyticsV1.AnalyticsServiceClient, world.stack.urls.grpc.analytics);
}, 180_000);

afterAll(async () => {
  analytics?.close();
  await world?.close();
});

test('an address suppressed while its batch goes out is suppressed, not mailed; the others are sent', async () => {
  const domain = `late-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 30, domain);
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  await waitForRun(world, run!.id, (current) => (current.counts?.sent ?? 0) >= 1);
  // The last of the source's order: its message goes out about 15 s after the first.
  const late = `user29@${domain}`;
  await call(analytics.addSuppression.bind(analytics), { workspaceId: world.workspaceId, email: late, note: 'while sending' });

  const finished = await waitForRun(world, run!.id, (current) => current.status === 'completed');
  expect(finished.counts).toMatchObject({ recipients: 30, sent: 29, suppressed: 1, unknown: 0 });
  const recipients = await allRecipients(world, run!.id);
  expect(recipients.find((recipient) => recipient.email === late)?.status).toBe('suppressed');
  const mailed = (await world.mailpit.messages()).flatMap((message) => message.To.map((to) => to.Address.toLowerCase()));
  expect(mailed).not.toContain(late);
  expect(mailed.filter((address) => address.endsWith(`@${domain}`))).toHaveLength(29);
});
