import nodemailer, { type Transporter } from 'nodemailer';
import { Client } from 'pg';
import { call, createKafka, createLogger } from '@mail/common';
import { eventually, infraEnv, startMailpit, uniqueSuffix, type Mailpit } from '@mail/local';
import { eventsV1, type analyticsV1 } from '@mail/proto';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * The bounce mailbox (docs/api.md, "Bounces without a provider"): a second
 * real Mailpit, served over POP3, receives delivery status notifications
 * (RFC 3464) and abuse reports (RFC 5965) over SMTP; the delivery process
 * reads it, and the real ingestion process stores what it publishes.
 */

let world: DeliveryWorld;
let mailbox: Mailpit;
let reports: Transporter;

beforeAll(async () => {
  mailbox = await startMailpit('bounce_mailbox_box', { pop3: { user: 'bounces', password: 'bounces' } });
  world = await startDeliveryWorld(
    'bounce_mailbox',
    { BOUNCE_MAILBOX_URL: mailbox.pop3Url!, BOUNCE_MAILBOX_INTERVAL_MS: '300' },
    { ingestion: true },
  );
  const smtp = new URL(mailbox.smtpUrl);
  reports = nodemailer.createTransport({ host: smtp.hostname, port: Number(smtp.port), secure: false, ignoreTLS: true });
}, 180_000);

afterAll(async () => {
  reports?.close();
  await world?.close();
  await mailbox?.close();
});

/** A run to `count` new addresses, completed; its recipients with their Message-IDs. */
async function sentRun(count: number, firstAccount: number): Promise<{ campaignId: string; runId: string; sent: Map<string, string> }> {
  const domain = `box-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, count, domain, firstAccount);
  const campaign = await createSendableCampaign(
    world,
    `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}' ORDER BY account_id`,
  );
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  await waitForRun(world, run!.id, (current) => current.status === 'completed', 180_000);
  const recipients = await allRecipients(world, run!.id);
  expect(recipients.every((recipient) => recipient.status === 'sent' && recipient.messageId)).toBe(true);
  return { campaignId: campaign.id, runId: run!.id, sent: new Map(recipients.map((recipient) => [recipient.email, recipient.messageId!])) };
}

/** A delivery status notification as a receiving MTA writes it, the original message's headers returned. */
function dsn(email: string, messageId: string, action: string, status: string, diagnostic: string): string {
  return multipartReport('delivery-status', `Delivery Status Notification (${action})`, [
    ['text/plain', `Your message to ${email} could not be delivered.\r\n`],
    [
      'message/delivery-status',
      `Reporting-MTA: dns; mx.receiver.example.net\r\nArrival-Date: Fri, 27 Nov 2026 10:00:00 +0000\r\n\r\n` +
        `Final-Recipient: rfc822; ${email}\r\nAction: ${action}\r\nStatus: ${status}\r\n` +
        `Remote-MTA: dns; mx.receiver.example.net\r\nDiagnostic-Code: smtp; ${diagnostic}\r\n`,
    ],
    ['text/rfc822-headers', `From: news@sender.example.com\r\nTo: ${email}\r\nSubject: Hello\r\nMessage-ID: <${messageId}>\r\n`],
  ]);
}

/** A feedback report (ARF) of a complaint, with the whole original message. */
function abuseReport(email: string, messageId: string): string {
  return multipartReport('feedback-report', 'Abuse report', [
    ['text/plain', 'This is an email abuse report.\r\n'],
    [
      'message/feedback-report',
      `Feedback-Type: abuse\r\nUser-Agent: ExampleFBL/1.0\r\nVersion: 1\r\nOriginal-Mail-From: <news@sender.example.com>\r\nOriginal-Rcpt-To: <${email}>\r\n`,
    ],
    [
      'message/rfc822',
      `From: news@sender.example.com\r\nTo: ${email}\r\nSubject: Hello\r\nMessage-ID: <${messageId}>\r\nContent-Type: text/plain\r\n\r\nHi\r\n`,
    ],
  ]);
}

function multipartReport(reportType: string, subject: string, parts: [string, string][]): string {
  const boundary = `report-${uniqueSuffix()}`;
  return [
    'From: Mail Delivery System <mailer-daemon@receiver.example.net>',
    'To: bounces@sender.example.com',
    `Subject: ${subject}`,
    `Message-ID: <${uniqueSuffix()}@receiver.example.net>`,
    'Date: Fri, 27 Nov 2026 10:00:05 +0000',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=${reportType}; boundary="${boundary}"`,
    '',
    ...parts.flatMap(([type, body]) => [`--${boundary}`, `Content-Type: ${type}`, '', body]),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

async function deliver(raw: string): Promise<void> {
  await reports.sendMail({ envelope: { from: 'mailer-daemon@receiver.example.net', to: 'bounces@sender.example.com' }, raw });
}

async function eventsOf(runId: string, eventType: eventsV1.EventType, count: number): Promise<analyticsV1.EventRecord[]> {
  return eventually(async () => {
    const { events } = await call(world.analytics.listEvents.bind(world.analytics), {
      filter: { workspaceId: world.workspaceId, runId, eventType },
      page: { page: 1, pageSize: 100 },
    });
    if (events.length < count) throw new Error(`${events.length} events of ${count} so far`);
    return events;
  }, 120_000);
}

test('a DSN and an abuse report of sent messages become a bounce and a spamreport of their run and address, and leave the mailbox; an unmatched report stays', async () => {
  const { campaignId, runId, sent } = await sentRun(2, 1);
  const [bounced, complained] = [...sent.keys()];
  await deliver(dsn(bounced, sent.get(bounced)!, 'failed', '5.1.1', '550 5.1.1 <user> no such user'));
  await deliver(abuseReport(complained, sent.get(complained)!));
  await deliver(dsn('stranger@example.org', `${crypto.randomUUID()}@sender.example.com`, 'failed', '5.1.1', '550 5.1.1 no such user'));

  const [bounce] = await eventsOf(runId, eventsV1.EventType.EVENT_TYPE_BOUNCE, 1);
  expect(bounce).toEqual(
    expect.objectContaining({
      email: bounced,
      campaignId,
      runId,
      provider: 'smtp',
      bounceType: eventsV1.BounceType.BOUNCE_TYPE_HARD,
      bounceClass: 'invalid_address',
      reason: '550 5.1.1 <user> no such user',
      providerMessageId: sent.get(bounced),
    }),
  );
  const [spam] = await eventsOf(runId, eventsV1.EventType.EVENT_TYPE_SPAM_REPORT, 1);
  expect(spam).toEqual(
    expect.objectContaining({ email: complained, campaignId, runId, provider: 'smtp', providerMessageId: sent.get(complained) }),
  );

  // Both were removed once published; the one that names no message of ours is kept.
  const left = await eventually(async () => {
    const messages = await mailbox.messages();
    if (messages.length !== 1) throw new Error(`${messages.length} messages left`);
    return messages;
  }, 60_000);
  expect(left[0].To.map((to) => to.Address)).toEqual(['bounces@sender.example.com']);
  expect((await mailbox.headers(left[0].ID))['content-type'][0]).toContain('delivery-status');
  const unmatched = await mailbox.message(left[0].ID);
  expect(unmatched.Text + JSON.stringify(unmatched)).toContain('stranger@example.org');
}, 600_000);

test('a delayed DSN (4.x.x) is a soft bounce; two replicas read one at a time (the lock), each report gives one event on the topic', async () => {
  await world.startReplica();
  const { runId, sent } = await sentRun(6, 100);
  const kept = await mailbox.count();
  // While someone else holds the readers' lock, neither replica reads: the reports wait in the mailbox.
  const holder = new Client({ connectionString: world.env.DATABASE_URL });
  await holder.connect();
  try {
    await holder.query(`SELECT pg_advisory_lock(hashtext('delivery.bounce-mailbox'))`);
    for (const [email, messageId] of sent) await deliver(dsn(email, messageId, 'delayed', '4.2.2', '452 4.2.2 mailbox full'));
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await mailbox.count()).toBe(kept + sent.size);
  } finally {
    await holder.end();
  }

  const bounces = await eventsOf(runId, eventsV1.EventType.EVENT_TYPE_BOUNCE, sent.size);
  expect(new Set(bounces.map((bounce) => bounce.email))).toEqual(new Set(sent.keys()));
  for (const bounce of bounces) {
    expect(bounce).toEqual(
      expect.objectContaining({ bounceType: eventsV1.BounceType.BOUNCE_TYPE_SOFT, bounceClass: 'mailbox_unavailable' }),
    );
  }
  await eventually(async () => {
    if ((await mailbox.count()) !== kept) throw new Error('reports left in the mailbox');
  }, 60_000);

  // Ingestion stores an event id once, so the topic is where a second reading would show.
  const onTopic = await bouncesOnTopic(runId, sent.size);
  expect(onTopic.sort()).toEqual([...sent.keys()].sort());
}, 600_000);

/** The addresses of the run's bounce events on the world's topic, once `expected` have come (and a little longer). */
async function bouncesOnTopic(runId: string, expected: number): Promise<string[]> {
  const kafka = createKafka('bounce-mailbox-test', infraEnv().kafkaBrokers, createLogger('test', 'silent'));
  const consumer = kafka.consumer({ groupId: `bounce-mailbox-test-${uniqueSuffix()}` });
  const found: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: world.env.KAFKA_EVENTS_TOPIC, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        for (const bytes of eventsV1.EngagementEventBatch.decode(message.value!).events) {
          const event = eventsV1.EngagementEvent.decode(bytes);
          if (event.runId === runId && event.eventType === eventsV1.EventType.EVENT_TYPE_BOUNCE) found.push(event.email);
        }
        return Promise.resolve();
      },
    });
    await eventually(() => (found.length >= expected ? Promise.resolve() : Promise.reject(new Error(`${found.length} so far`))), 60_000);
    // A duplicate would have been published with the others, before their deletion: give the consumer time to reach it.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    return found;
  } finally {
    await consumer.disconnect();
  }
}
