import nodemailer from 'nodemailer';
import { startMailpit, type Mailpit } from '@mail/local';
import { Pop3Client } from '../src/sending/pop3';

/** The bounce mailbox's POP3 client against a real Mailpit serving POP3. */

let mailpit: Mailpit;

beforeAll(async () => {
  mailpit = await startMailpit('pop3_client', { pop3: { user: 'box', password: 'p@ss' } });
}, 60_000);

afterAll(() => mailpit?.close());

async function deliver(raw: string): Promise<void> {
  const smtp = new URL(mailpit.smtpUrl);
  const transport = nodemailer.createTransport({ host: smtp.hostname, port: Number(smtp.port), secure: false, ignoreTLS: true });
  try {
    await transport.sendMail({ envelope: { from: 'a@example.com', to: 'box@example.com' }, raw });
  } finally {
    transport.close();
  }
}

test('messages come back as stored: lines of dots unstuffed, a large one whole across reads; DELE takes effect at QUIT', async () => {
  const dotted = ['Subject: dots', '', '.', '..two', '.leading', 'last', ''].join('\r\n');
  const large = [
    'Subject: large',
    '',
    ...Array.from({ length: 40_000 }, (_, n) => `${n % 7 === 0 ? '.' : ''}line ${n} ${'x'.repeat(40)}`),
    '',
  ].join('\r\n');
  await deliver(dotted);
  await deliver(large);

  const url = new URL(mailpit.pop3Url!);
  const first = await Pop3Client.open(url, 10_000);
  const listed = await first.list();
  expect(listed).toHaveLength(2);
  const bodies: string[] = [];
  for (const { number } of listed) bodies.push((await first.retrieve(number)).toString('latin1'));
  // The body after the headers; the server may add a line break at its end.
  const bodyOf = (text: string): string => text.slice(text.indexOf('\r\n\r\n') + 4).replace(/(\r\n)+$/, '\r\n');
  const dottedBack = bodies.find((body) => body.includes('Subject: dots'))!;
  const largeBack = bodies.find((body) => body.includes('Subject: large'))!;
  expect(bodyOf(dottedBack)).toBe('.\r\n..two\r\n.leading\r\nlast\r\n');
  expect(bodyOf(largeBack)).toBe(bodyOf(large));
  await first.delete(listed.find((_, index) => bodies[index] === dottedBack)!.number);
  // Deleted only once the session ends with QUIT: a session cut off before it deletes nothing.
  first.close();

  const second = await Pop3Client.open(url, 10_000);
  const again = await second.list();
  expect(again.map((message) => message.uid).sort()).toEqual(listed.map((message) => message.uid).sort());
  await second.delete(again[0].number);
  await second.quit();
  expect(await mailpit.count()).toBe(1);

  await expect(Pop3Client.open(new URL(url.toString().replace('p%40ss', 'wrong')), 10_000)).rejects.toThrow(/POP3 PASS/);
}, 120_000);
