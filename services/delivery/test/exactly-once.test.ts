import { Client } from 'pg';
import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * Exactly once (docs/api.md, "Campaign runs"): a sender SIGKILLed in the
 * middle of a 20,000-recipient run and started again, and two sender replicas
 * sharing one run. Afterwards every address is in Mailpit at most once, and
 * every recipient is accounted for: sent (in Mailpit exactly once) or unknown
 * (the messages on their way when the process died, never sent again).
 */

let world: DeliveryWorld;
let domain: string;

beforeAll(async () => {
  // A short lease: the killed process's messages in flight are settled (unknown) a few seconds later.
  world = await startDeliveryWorld('exactly_once', { SEND_WORKER_LEASE_MS: '3000', SEND_CONCURRENCY: '4', SMTP_MAX_CONNECTIONS: '8' });
  domain = `eo-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 20_000, domain);
  await fillAccounts(world.recipients.url, 4_000, `replicas-${domain}`, 100_000);
}, 180_000);

afterAll(async () => {
  await world?.close();
});

/** How many messages Mailpit holds for each address. */
async function deliveredCounts(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const message of await world.mailpit.messages()) {
    for (const to of message.To) counts.set(to.Address.toLowerCase(), (counts.get(to.Address.toLowerCase()) ?? 0) + 1);
  }
  return counts;
}

async function mailpitTotal(): Promise<number> {
  const answer = await fetch(`${world.mailpit.apiUrl}/api/v1/messages?limit=1`);
  return ((await answer.json()) as { total: number }).total;
}

function expectAccountedFor(
  recipients: { email: string; status: string; messageId?: string }[],
  delivered: Map<string, number>,
  expected: number,
): void {
  expect(recipients).toHaveLength(expected);
  expect(new Set(recipients.map((recipient) => recipient.email)).size).toBe(expected);
  for (const recipient of recipients) {
    expect(['sent', 'unknown']).toContain(recipient.status);
    const times = delivered.get(recipient.email) ?? 0;
    if (recipient.status === 'sent') expect({ email: recipient.email, times }).toEqual({ email: recipient.email, times: 1 });
    else expect(times).toBeLessThanOrEqual(1);
  }
}

test('a sender SIGKILLed mid-run and restarted sends no address twice and accounts for every recipient', async () => {
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  expect(run?.status).toBe('queued');

  // Well into the run, but far from its end.
  for (;;) {
    const total = await mailpitTotal();
    if (total >= 3_000) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await world.stack.kill('delivery', 'SIGKILL');
  const atKill = await mailpitTotal();
  expect(atKill).toBeLessThan(20_000);
  await world.stack.restart('delivery');

  const finished = await waitForRun(world, run!.id, (current) => current.status === 'completed');
  expect(finished.counts).toEqual(
    expect.objectContaining({ recipients: 20_000, failed: 0, suppressed: 0, invalid: 0, duplicates: 0, pending: 0 }),
  );
  expect(finished.counts!.sent + finished.counts!.unknown).toBe(20_000);

  const delivered = await deliveredCounts();
  expect([...delivered.values()].filter((times) => times > 1)).toEqual([]);
  const recipients = await allRecipients(world, run!.id);
  expectAccountedFor(recipients, delivered, 20_000);
  // Only what was on its way when the process died is unknown: a message is `sending` only while it holds one of
  // the 8 SMTP connections.
  expect(finished.counts!.unknown).toBeLessThanOrEqual(8);
  console.log(`exactly once: killed after ${atKill} messages; ${finished.counts!.sent} sent, ${finished.counts!.unknown} unknown`);
}, 420_000);

test('two sender replicas share one run: each sends part of it, no address twice', async () => {
  await world.startReplica();
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@replicas-${domain}' ORDER BY account_id`,
  );
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  const finished = await waitForRun(world, run!.id, (current) => current.status === 'completed');
  expect(finished.counts).toEqual(expect.objectContaining({ recipients: 4_000, sent: 4_000, unknown: 0, pending: 0 }));

  const delivered = await deliveredCounts();
  const recipients = await allRecipients(world, run!.id);
  expectAccountedFor(recipients, delivered, 4_000);

  // Which process sent each message is kept in the delivery database (worker_id): both took part.
  const db = new Client({ connectionString: world.env.DATABASE_URL });
  await db.connect();
  try {
    const { rows } = await db.query<{ workers: string }>(
      `SELECT count(DISTINCT worker_id) AS workers FROM delivery.run_recipients WHERE run_id = $1 AND status = 'sent'`,
      [run!.id],
    );
    expect(Number(rows[0].workers)).toBe(2);
  } finally {
    await db.end();
  }
}, 300_000);
