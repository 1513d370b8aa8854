import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
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
 * Sending over TLS with a login, to a real Mailpit that requires both and
 * holds a certificate made for this test, which the delivery process trusts
 * through NODE_EXTRA_CA_CERTS (and no other way: the certificate is
 * verified): STARTTLS on smtp://, TLS from the start on smtps://.
 */

let certificate: TestCertificate;

beforeAll(() => {
  certificate = createTestCertificate('smtp-tls');
});

afterAll(() => {
  certificate?.remove();
});

describe.each([
  ['STARTTLS', false, /^smtp:\/\/sender:/],
  ['TLS from the start', true, /^smtps:\/\/sender:/],
])('%s', (_label, implicit, urlShape) => {
  let world: DeliveryWorld;

  beforeAll(async () => {
    world = await startDeliveryWorld(
      `smtp_tls_${implicit ? 'implicit' : 'starttls'}`,
      { NODE_EXTRA_CA_CERTS: certificate.certFile },
      {
        mailpit: {
          smtp: {
            tls: { certFile: certificate.certFile, keyFile: certificate.keyFile, implicit },
            auth: { user: 'sender', password: 'tls-secret' },
          },
        },
      },
    );
  }, 180_000);

  afterAll(async () => {
    await world?.close();
  });

  test('a run is sent over TLS with the login from SMTP_URL', async () => {
    expect(world.mailpit.smtpUrl).toMatch(urlShape);
    const domain = `tls-${uniqueSuffix()}.example.com`;
    await fillAccounts(world.recipients.url, 5, domain);
    const campaign = await createSendableCampaign(
      world,
      `SELECT account_id, email, first_name FROM accounts WHERE email LIKE '%@${domain}'`,
    );
    const { run } = await call(world.delivery.createRun.bind(world.delivery), { workspaceId: world.workspaceId, campaignId: campaign.id });
    const finished = await waitForRun(world, run!.id, (current) => current.status === 'completed', 120_000);
    expect(finished.counts).toMatchObject({ sent: 5, failed: 0, unknown: 0 });
    expect((await allRecipients(world, run!.id)).map((recipient) => recipient.status)).toEqual(Array(5).fill('sent'));
    const received = (await world.mailpit.messages()).filter((message) => message.To[0]?.Address.endsWith(`@${domain}`));
    expect(received).toHaveLength(5);
  });
});
