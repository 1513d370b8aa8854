import { call } from '@mail/common';
import { createTestPostgres, ensureRecipientDatabase, type TestPostgres } from '@mail/local';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * A workspace with a recipient database of its own reads its accounts from
 * there, not from the shared one (RECIPIENTS_DATABASE_URL), and reads the
 * shared one again once its own is removed. Real processes (the delivery
 * world); both recipient databases are private databases on the real server.
 */
jest.setTimeout(300_000);

let world: DeliveryWorld;
let own: TestPostgres;

beforeAll(async () => {
  [world, own] = await Promise.all([startDeliveryWorld('rdb_isolation'), createTestPostgres('recipients_rdb_own')]);
  await Promise.all([fillAccounts(world.recipients.url, 3, 'shared.example.com'), fillAccounts(own.url, 4, 'own.example.com')]);
});

afterAll(async () => {
  await world?.close();
  await own?.drop();
});

async function sentTo(campaignId: string): Promise<string[]> {
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId });
  const done = await waitForRun(world, run!.id, (current) => current.status === 'completed' || current.status === 'failed');
  expect({ status: done.status, failure: done.failure }).toEqual({ status: 'completed', failure: undefined });
  return (await allRecipients(world, run!.id)).map((recipient) => recipient.email).sort();
}

test('a run of a workspace with its own recipient database reads its accounts, not the shared ones', async () => {
  const campaign = await createSendableCampaign(world, 'SELECT * FROM accounts ORDER BY account_id');
  // As in production, the workspace's database is read through a login that may read only its accounts.
  const reader = await ensureRecipientDatabase(own.url);
  await call(world.delivery.putRecipientDatabase.bind(world.delivery), { workspaceId: world.workspaceId, url: reader });
  expect(await sentTo(campaign.id)).toEqual([
    'user0@own.example.com',
    'user1@own.example.com',
    'user2@own.example.com',
    'user3@own.example.com',
  ]);

  await call(world.delivery.deleteRecipientDatabase.bind(world.delivery), { workspaceId: world.workspaceId });
  expect(await sentTo(campaign.id)).toEqual(['user0@shared.example.com', 'user1@shared.example.com', 'user2@shared.example.com']);
});
