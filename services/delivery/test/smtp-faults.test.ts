import { Client } from 'pg';
import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import type { deliveryV1 } from '@mail/proto';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';
import { startSmtpFaultProxy, type SmtpFaultProxy } from './smtp-fault-proxy';

/**
 * Connections lost in the middle of a message (docs/api.md, "Campaign runs"),
 * made by a proxy between the delivery process and a real Mailpit: lost
 * before the message's data went out, the message is sent again; lost after
 * the end of its data but before the server's answer (the server has it), the
 * recipient is `unknown` and the message is not sent again.
 */

const RECIPIENTS = 30;
let world: DeliveryWorld;
let proxy: SmtpFaultProxy;

beforeAll(async () => {
  proxy = await startSmtpFaultProxy();
  world = await startDeliveryWorld('smtp_faults', { SMTP_URL: proxy.url, SEND_RETRY_BASE_MS: '100', SMTP_MAX_CONNECTIONS: '3' });
  proxy.forwardTo(world.mailpit.smtpUrl);
}, 180_000);

afterAll(async () => {
  await world?.close();
  await proxy?.close();
});

/** A run of RECIPIENTS addresses at a domain of its own, until it completes. */
async function runTo(domain: string, firstAccount: number): Promise<{ runId: string; counts: deliveryV1.RunCounts }> {
  await fillAccounts(world.recipients.url, RECIPIENTS, domain, firstAccount);
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  const finished = await waitForRun(world, run!.id, (current) => current.status === 'completed', 120_000);
  return { runId: run!.id, counts: finished.counts! };
}

/** How many messages Mailpit holds for each address at `domain`. */
async function deliveredTo(domain: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const message of await world.mailpit.messages()) {
    for (const { Address } of message.To) {
      const address = Address.toLowerCase();
      if (address.endsWith(`@${domain}`)) counts.set(address, (counts.get(address) ?? 0) + 1);
    }
  }
  return counts;
}

async function attemptsOf(runId: string, email: string): Promise<number> {
  const db = new Client({ connectionString: world.env.DATABASE_URL });
  await db.connect();
  try {
    const { rows } = await db.query<{ attempts: number }>(`SELECT attempts FROM delivery.run_recipients WHERE run_id = $1 AND email = $2`, [
      runId,
      email,
    ]);
    return rows[0].attempts;
  } finally {
    await db.end();
  }
}

test('a connection lost after the end of the data, before the answer: the recipient is unknown, the server has the message once', async () => {
  const domain = `lost-${uniqueSuffix()}.example.com`;
  const lost = `user7@${domain}`;
  proxy.loseAnswer(lost);
  const { runId, counts } = await runTo(domain, 1);
  expect(proxy.faults).toContain(`lost-answer ${lost}`);
  expect(counts).toEqual(expect.objectContaining({ recipients: RECIPIENTS, sent: RECIPIENTS - 1, unknown: 1, failed: 0, pending: 0 }));

  const recipients = await allRecipients(world, runId);
  expect(recipients.filter((recipient) => recipient.status !== 'sent').map(({ email, status }) => ({ email, status }))).toEqual([
    { email: lost, status: 'unknown' },
  ]);
  const delivered = await deliveredTo(domain);
  expect(delivered.size).toBe(RECIPIENTS);
  expect([...delivered].filter(([, times]) => times !== 1)).toEqual([]);
}, 240_000);

test('a connection lost before the data went out: the message is sent again, and the server has it once', async () => {
  const domain = `dropped-${uniqueSuffix()}.example.com`;
  const dropped = `user1013@${domain}`;
  proxy.dropBeforeData(dropped);
  const { runId, counts } = await runTo(domain, 1001);
  expect(proxy.faults).toContain(`dropped-before-data ${dropped}`);
  expect(counts).toEqual(expect.objectContaining({ recipients: RECIPIENTS, sent: RECIPIENTS, unknown: 0, failed: 0, pending: 0 }));
  expect(await attemptsOf(runId, dropped)).toBe(2);

  const recipients = await allRecipients(world, runId);
  expect(recipients.filter((recipient) => recipient.status !== 'sent')).toEqual([]);
  const delivered = await deliveredTo(domain);
  expect(delivered.size).toBe(RECIPIENTS);
  expect([...delivered].filter(([, times]) => times !== 1)).toEqual([]);
}, 240_000);
