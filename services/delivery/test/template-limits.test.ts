import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import { allRecipients, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * "Templates: limits" in delivery: a message renders in a worker thread, for 1 s and 2 MB at most. A
 * template that renders for ever fails its recipients (and the run, whose first batch rendered for
 * nobody) while another workspace's run goes on and delivery answers its calls.
 */
jest.setTimeout(240_000);

let world: DeliveryWorld;

beforeAll(async () => {
  world = await startDeliveryWorld('template_limits');
}, 180_000);

afterAll(async () => {
  await world?.close();
});

/** A run of an active campaign of `workspaceId` sending `html` to the accounts at `domain`. */
async function startRun(workspaceId: string, domain: string, html: string): Promise<string> {
  const template = await call(world.templates.createTemplate.bind(world.templates), {
    workspaceId,
    template: { name: domain, subject: 'Hello {{first_name}}', html },
  });
  const { campaign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId,
    campaign: {
      workspaceId,
      name: domain,
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
      mssqlQuery: `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      templateId: template.id,
    },
  });
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId, campaignId: campaign!.id });
  return run!.id;
}

async function deliveredTo(domain: string): Promise<string[]> {
  const messages = await world.mailpit.messages();
  return messages.flatMap((message) => message.To.map(({ Address }) => Address.toLowerCase())).filter((to) => to.endsWith(`@${domain}`));
}

test('a template that renders for ever fails its recipients and its run; another workspace sends meanwhile', async () => {
  const slowDomain = `slow-${uniqueSuffix()}.example.com`;
  const fastDomain = `fast-${uniqueSuffix()}.example.com`;
  // 60 recipients of 1 s each: the other run's minute to complete, however busy the host.
  await fillAccounts(world.recipients.url, 60, slowDomain, 0);
  await fillAccounts(world.recipients.url, 3, fastDomain, 100);
  // 531 bytes: each field of the row, for each field, 22 deep (the attack on record).
  const endless = '{{#each @root}}'.repeat(22) + 'x' + '{{/each}}'.repeat(22);
  const slowRun = await startRun(world.workspaceId, slowDomain, endless);
  const other = crypto.randomUUID();
  const fastRun = await startRun(other, fastDomain, '<p>Hi {{first_name}}</p>');

  // The other workspace's run completes while the slow one still renders (1 s per recipient, 60 s in all).
  const fast = await waitForRun({ ...world, workspaceId: other }, fastRun, (run) => run.status === 'completed', 60_000);
  expect(fast.counts).toMatchObject({ sent: 3 });
  const slowMeanwhile = await call(world.delivery.getRun.bind(world.delivery), { workspaceId: world.workspaceId, id: slowRun });
  expect(slowMeanwhile.run?.status).toBe('sending');
  expect((await deliveredTo(fastDomain)).sort()).toEqual(['user100', 'user101', 'user102'].map((user) => `${user}@${fastDomain}`));

  const failed = await waitForRun(world, slowRun, (run) => run.status === 'failed', 180_000);
  expect(failed.failure).toBe("No message of the run's first batch could be rendered: The message took longer than 1 s to render");
  // The run fails with the first batch that renders for nobody; loops that took other batches of it render on.
  let recipients = await allRecipients(world, slowRun);
  for (let polls = 0; recipients.some((recipient) => recipient.status === 'pending') && polls < 240; polls++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    recipients = await allRecipients(world, slowRun);
  }
  expect(recipients).toHaveLength(60);
  for (const recipient of recipients) {
    expect(recipient).toMatchObject({ status: 'failed', error: 'The message took longer than 1 s to render' });
  }
  expect(await deliveredTo(slowDomain)).toEqual([]);
});

test('a message that renders over 2 MB fails its recipient with that reason', async () => {
  const domain = `big-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 2, domain, 200);
  // 200 kB for each pair of the row's fields (and unsubscribe_url): over 2 MB.
  const big = `{{#each @root}}{{#each @root}}${'b'.repeat(200_000)}{{/each}}{{/each}}`;
  const runId = await startRun(world.workspaceId, domain, big);
  const failed = await waitForRun(world, runId, (run) => run.status === 'failed', 120_000);
  expect(failed.failure).toBe("No message of the run's first batch could be rendered: The message rendered to more than 2 MB");
  for (const recipient of await allRecipients(world, runId)) {
    expect(recipient).toMatchObject({ status: 'failed', error: 'The message rendered to more than 2 MB' });
  }
  expect(await deliveredTo(domain)).toEqual([]);
});
