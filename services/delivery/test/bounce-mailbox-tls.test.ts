import nodemailer from 'nodemailer';
import { call } from '@mail/common';
import { eventually, startMailpit, uniqueSuffix, type Mailpit } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import {
  allRecipients,
  createSendableCampaign,
  createTestCertificate,
  fillAccounts,
  startDeliveryWorld,
  waitForRun,
  type DeliveryWorld,
  type TestCertificate,
} from './harness';

/**
 * A `pop3s://` bounce mailbox: a real Mailpit serving POP3 over TLS with a
 * certificate made for this test, which the delivery process trusts through
 * NODE_EXTRA_CA_CERTS (and no other way: the certificate is verified).
 */

let world: DeliveryWorld;
let mailbox: Mailpit;
let certificate: TestCertificate;

beforeAll(async () => {
  certificate = createTestCertificate('bounce-tls');
  const { certFile, keyFile } = certificate;
  mailbox = await startMailpit('bounce_tls_box', { pop3: { user: 'bounces', password: 'bounces', tls: { certFile, keyFile } } });
  world = await startDeliveryWorld(
    'bounce_tls',
    { BOUNCE_MAILBOX_URL: mailbox.pop3Url!, BOUNCE_MAILBOX_INTERVAL_MS: '300', NODE_EXTRA_CA_CERTS: certFile },
    { ingestion: true },
  );
}, 180_000);

afterAll(async () => {
  await world?.close();
  await mailbox?.close();
  certificate?.remove();
});

test('a DSN read over pop3s:// becomes a hard bounce and leaves the mailbox', async () => {
  expect(mailbox.pop3Url).toMatch(/^pop3s:\/\//);
  const domain = `tls-${uniqueSuffix()}.example.com`;
  await fillAccounts(world.recipients.url, 1, domain);
  const campaign = await createSendableCampaign(world, `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}'`);
  const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
  await waitForRun(world, run!.id, (current) => current.status === 'completed', 180_000);
  const [recipient] = await allRecipients(world, run!.id);

  const smtp = new URL(mailbox.smtpUrl);
  const transport = nodemailer.createTransport({ host: smtp.hostname, port: Number(smtp.port), secure: false, ignoreTLS: true });
  const raw = [
    'From: mailer-daemon@receiver.example.net',
    'To: bounces@sender.example.com',
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="B"',
    '',
    '--B',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.receiver.example.net',
    '',
    `Final-Recipient: rfc822; ${recipient.email}`,
    'Action: failed',
    'Status: 5.2.1',
    'Diagnostic-Code: smtp; 550 5.2.1 mailbox disabled',
    '',
    '--B',
    'Content-Type: text/rfc822-headers',
    '',
    `Message-ID: <${recipient.messageId}>`,
    '',
    '--B--',
    '',
  ].join('\r\n');
  try {
    await transport.sendMail({ envelope: { from: 'mailer-daemon@receiver.example.net', to: 'bounces@sender.example.com' }, raw });
  } finally {
    transport.close();
  }

  const [bounce] = await eventually(async () => {
    const { events } = await call(world.analytics.listEvents.bind(world.analytics), {
      filter: { workspaceId: world.workspaceId, runId: run!.id, eventType: eventsV1.EventType.EVENT_TYPE_BOUNCE },
      page: { page: 1, pageSize: 10 },
    });
    if (events.length === 0) throw new Error('no bounce yet');
    return events;
  }, 120_000);
  expect(bounce).toEqual(
    expect.objectContaining({
      email: recipient.email,
      provider: 'smtp',
      bounceType: eventsV1.BounceType.BOUNCE_TYPE_HARD,
      bounceClass: 'mailbox_unavailable',
      reason: '550 5.2.1 mailbox disabled',
    }),
  );
  await eventually(async () => {
    if ((await mailbox.count()) !== 0) throw new Error('the report is still in the mailbox');
  }, 60_000);
}, 600_000);
