import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call } from '@mail/common';
import { uniqueSuffix } from '@mail/local';
import { allRecipients, createSendableCampaign, fillAccounts, startDeliveryWorld, waitForRun, type DeliveryWorld } from './harness';

/**
 * Sending over TLS with a login, to a real Mailpit that requires both and
 * holds a certificate made for this test, which the delivery process trusts
 * through NODE_EXTRA_CA_CERTS (and no other way: the certificate is
 * verified): STARTTLS on smtp://, TLS from the start on smtps://.
 */

let certDir: string;
let certFile: string;
let keyFile: string;

beforeAll(() => {
  certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'smtp-tls-'));
  [certFile, keyFile] = [path.join(certDir, 'cert.pem'), path.join(certDir, 'key.pem')];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2'].concat([
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]),
    { stdio: 'ignore' },
  );
});

afterAll(() => {
  if (certDir) fs.rmSync(certDir, { recursive: true, force: true });
});

describe.each([
  ['STARTTLS', false, /^smtp:\/\/sender:/],
  ['TLS from the start', true, /^smtps:\/\/sender:/],
])('%s', (_label, implicit, urlShape) => {
  let world: DeliveryWorld;

  beforeAll(async () => {
    world = await startDeliveryWorld(
      `smtp_tls_${implicit ? 'implicit' : 'starttls'}`,
      { NODE_EXTRA_CA_CERTS: certFile },
      { mailpit: { smtp: { tls: { certFile, keyFile, implicit }, auth: { user: 'sender', password: 'tls-secret' } } } },
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
