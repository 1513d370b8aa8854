import net from 'node:net';
import { startMailpit, uniqueSuffix, type Mailpit } from '@mail/local';
import { dotStuffed, SmtpReplyError, SmtpSession, type SmtpSessionOptions } from '../src/sending/smtp-client';
import { SmtpTransport } from '../src/sending/transport';
import { startSmtpFaultProxy, type SmtpFaultProxy } from './smtp-fault-proxy';

/**
 * The SMTP client against a real Mailpit, directly and through the fault
 * proxy, which also makes Mailpit offer PIPELINING (it takes pipelined
 * commands but does not list the extension) or only AUTH LOGIN. TLS is
 * tested end to end in smtp-tls.test.ts, where the delivery process can be
 * told to trust a test certificate.
 */

let mailpit: Mailpit;
let guarded: Mailpit;
const proxies: SmtpFaultProxy[] = [];

beforeAll(async () => {
  mailpit = await startMailpit('smtp_client');
  guarded = await startMailpit('smtp_client_auth', { smtp: { auth: { user: 'sender', password: 's3cret%pass' } } });
}, 60_000);

afterAll(async () => {
  for (const proxy of proxies) await proxy.close();
  await mailpit?.close();
  await guarded?.close();
});

function optionsOf(url: string, auth?: SmtpSessionOptions['auth']): SmtpSessionOptions {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port), security: 'none', auth, timeoutMs: 10_000 };
}

async function proxyTo(target: Mailpit, ehlo?: (answer: string) => string): Promise<SmtpFaultProxy> {
  const proxy = await startSmtpFaultProxy({ ehlo });
  proxy.forwardTo(target.smtpUrl);
  proxies.push(proxy);
  return proxy;
}

const offerPipelining = (answer: string) => answer.replace('\r\n', '\r\n250-PIPELINING\r\n');

function messageTo(to: string, body: string): Buffer {
  return Buffer.from(
    `From: a@example.com\r\nTo: ${to}\r\nSubject: test ${to}\r\nMessage-ID: <${uniqueSuffix()}@example.com>\r\n\r\n${body}`,
  );
}

async function rawOf(target: Mailpit, to: string): Promise<string> {
  const message = (await target.messages()).find((each) => each.To[0]?.Address === to);
  if (!message) throw new Error(`no message to ${to}`);
  return (await target.raw(message.ID)).toString('latin1');
}

test('dot-stuffing: a line starting with "." gets another, and the message ends with a lone "."', () => {
  const stuffed = (text: string) => dotStuffed(Buffer.from(text)).toString('latin1');
  expect(stuffed('a\r\nb\r\n')).toBe('a\r\nb\r\n.\r\n');
  expect(stuffed('a\r\nb')).toBe('a\r\nb\r\n.\r\n');
  expect(stuffed('.a\r\n..b\r\n.\r\nc.d\r\n')).toBe('..a\r\n...b\r\n..\r\nc.d\r\n.\r\n');
});

test('messages go out one after another on one session and arrive byte for byte, dotted lines and a last line without CRLF included', async () => {
  const session = await SmtpSession.open(optionsOf(mailpit.smtpUrl));
  const body = '.starts with a dot\r\n..two dots\r\n.\r\nmiddle . dot\r\nlast line';
  const messages = [1, 2, 3].map((n) => {
    const to = `dots-${n}-${uniqueSuffix()}@example.com`;
    return { to, raw: messageTo(to, body) };
  });
  for (const { to, raw } of messages) await session.send('a@example.com', to, raw);
  expect(session.open).toBe(true);
  session.quit();
  // Mailpit puts its Return-Path and Received on top; the last line gets the CRLF that belongs before the final ".".
  for (const { to, raw } of messages) expect((await rawOf(mailpit, to)).endsWith(`\r\n${raw.toString('latin1')}\r\n`)).toBe(true);
});

test('with PIPELINING offered, the envelope and DATA go out in one write', async () => {
  const proxy = await proxyTo(mailpit, offerPipelining);
  const session = await SmtpSession.open(optionsOf(proxy.url));
  const to = `pipelined-${uniqueSuffix()}@example.com`;
  await session.send('a@example.com', to, messageTo(to, 'hello'));
  session.quit();
  expect(proxy.commandReads).toContain(`MAIL FROM:<a@example.com>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
  expect(await rawOf(mailpit, to)).toContain('hello');
});

test.each([
  ['without', undefined],
  ['with', offerPipelining],
])('a refused recipient %s PIPELINING: the reply code and text, none of the data sent', async (_label, ehlo) => {
  const proxy = await proxyTo(mailpit, ehlo);
  const session = await SmtpSession.open(optionsOf(proxy.url));
  await mailpit.recipientChaos(550, 100);
  try {
    const to = `refused-${uniqueSuffix()}@example.com`;
    const failure = await session.send('a@example.com', to, messageTo(to, 'never')).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(SmtpReplyError);
    expect(failure).toMatchObject({ command: 'RCPT TO', responseCode: 550 });
    expect((failure as SmtpReplyError).response).toMatch(/^550 /);
    expect(session.dataSent).toBe(false);
  } finally {
    await mailpit.recipientChaos(0, 0);
    session.close();
  }
});

test('a connection lost before the data: not sent; lost after the end of the data: sent, the answer never came', async () => {
  const proxy = await proxyTo(mailpit);
  const [early, late] = ['early', 'late'].map((label) => `${label}-${uniqueSuffix()}@example.com`);
  proxy.dropBeforeData(early);
  proxy.loseAnswer(late);
  for (const [to, dataSent] of [
    [early, false],
    [late, true],
  ] as const) {
    const session = await SmtpSession.open(optionsOf(proxy.url));
    await expect(session.send('a@example.com', to, messageTo(to, 'x'))).rejects.toThrow('closed the connection');
    expect(session.dataSent).toBe(dataSent);
    expect(session.open).toBe(false);
  }
  expect(proxy.faults).toEqual([`dropped-before-data ${early}`, `lost-answer ${late}`]);
});

test('a server that wants a login: AUTH PLAIN or, where that alone is offered, AUTH LOGIN; a wrong password is its 535', async () => {
  const auth = { user: 'sender', pass: 's3cret%pass' };
  const onlyLogin = await proxyTo(guarded, (answer) => answer.replace(/^250([- ])AUTH .*$/m, '250$1AUTH LOGIN'));
  for (const url of [guarded.smtpUrl, onlyLogin.url]) {
    const session = await SmtpSession.open(optionsOf(url, auth));
    const to = `login-${uniqueSuffix()}@example.com`;
    await session.send('a@example.com', to, messageTo(to, 'logged in'));
    session.quit();
    expect(await rawOf(guarded, to)).toContain('logged in');
  }
  expect(onlyLogin.commandReads).toContain('AUTH LOGIN\r\n');
  await expect(SmtpSession.open(optionsOf(guarded.smtpUrl, { user: 'sender', pass: 'wrong' }))).rejects.toMatchObject({
    responseCode: 535,
  });
  const anonymous = await SmtpSession.open(optionsOf(guarded.smtpUrl));
  await expect(anonymous.send('a@example.com', 'b@example.com', messageTo('b@example.com', 'x'))).rejects.toBeInstanceOf(SmtpReplyError);
  anonymous.close();
});

test("a refusal before MAIL (here the login's) is no answer about the recipient: tried again, with no reply code to bounce on", async () => {
  const url = new URL(guarded.smtpUrl);
  url.username = 'sender';
  url.password = 'wrong';
  const transport = new SmtpTransport({ url: url.toString(), provider: 'none', maxConnections: 1 });
  const to = `refused-login-${uniqueSuffix()}@example.com`;
  const message = {
    from: { name: null, address: 'a@example.com' },
    replyTo: null,
    to,
    messageId: `${uniqueSuffix()}@example.com`,
    headers: {},
    subject: 's',
    text: 'x',
  };
  const outcome = await transport.send(message);
  transport.close();
  expect(outcome).toEqual({ kind: 'retry', error: expect.stringMatching(/^opening the SMTP session: AUTH PLAIN: 535/) });
});

test('an address that would break the command line is refused before anything is written', async () => {
  const proxy = await proxyTo(mailpit);
  const session = await SmtpSession.open(optionsOf(proxy.url));
  const to = 'x@example.com>\r\nRCPT TO:<y@example.com';
  await expect(session.send('a@example.com', to, messageTo('x@example.com', 'x'))).rejects.toThrow('not an envelope address');
  expect(proxy.commandReads.some((read) => read.includes('MAIL FROM'))).toBe(false);
  session.close();
});

test('STARTTLS required but not offered: the session does not open', async () => {
  await expect(SmtpSession.open({ ...optionsOf(mailpit.smtpUrl), security: 'starttls' })).rejects.toThrow('does not offer STARTTLS');
});

test('a server that stays silent: the session fails after the timeout', async () => {
  const silent = net.createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as { port: number }).port;
  try {
    await expect(SmtpSession.open({ host: '127.0.0.1', port, security: 'none', timeoutMs: 300 })).rejects.toThrow('silent for 300 ms');
  } finally {
    silent.close();
  }
});
