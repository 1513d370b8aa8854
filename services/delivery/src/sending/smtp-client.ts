import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import { InputSignal } from './input-signal';

export interface SmtpSessionOptions {
  host: string;
  port: number;
  /** `tls`: TLS from the start (smtps, RFC 8314); `starttls`: plain, then STARTTLS, which the server must offer; `none`: plain. */
  security: 'tls' | 'starttls' | 'none';
  auth?: { user: string; pass: string };
  /** The longest silence while an answer is due: the connection, the greeting and each reply. */
  timeoutMs: number;
}

/** A reply of the server that refuses what was asked. */
export class SmtpReplyError extends Error {
  constructor(
    readonly command: string,
    readonly responseCode: number,
    /** The whole reply, its lines joined by newlines. */
    readonly response: string,
  ) {
    super(`${command}: ${response}`);
  }
}

interface Reply {
  code: number;
  text: string;
}

/**
 * One SMTP session (RFC 5321) that hands over one message at a time: the
 * envelope and DATA written at once where the server offers PIPELINING (RFC
 * 2920), else a command per reply; the message in one write once the server
 * said 354. After a failure `dataSent` tells whether any of the message had
 * gone out, which decides between sending it again and calling it unknown. A
 * refused command or a broken connection leaves the session in no known
 * state: the caller closes it.
 */
export class SmtpSession {
  private socket: net.Socket;
  private received: Buffer = Buffer.alloc(0);
  private replyLines: string[] = [];
  private readonly replies: Reply[] = [];
  private readonly input = new InputSignal();
  /** The EHLO keywords offered, each with its parameters. */
  private extensions = new Map<string, string[]>();
  private dataWritten = false;
  private detach: () => void = () => undefined;

  private constructor(
    socket: net.Socket,
    private readonly timeoutMs: number,
  ) {
    this.socket = this.attach(socket);
  }

  /** Connects, reads the greeting, upgrades to TLS and logs in as the options say. */
  static async open(options: SmtpSessionOptions): Promise<SmtpSession> {
    // SNI takes host names only (RFC 6066); the certificate is checked against the host either way.
    const servername = net.isIP(options.host) ? undefined : options.host;
    const socket =
      options.security === 'tls'
        ? tls.connect({ host: options.host, port: options.port, servername })
        : net.connect({ host: options.host, port: options.port });
    const session = new SmtpSession(socket, options.timeoutMs);
    try {
      await session.expect('greeting', 2);
      await session.hello();
      if (options.security === 'starttls') {
        if (!session.extensions.has('STARTTLS')) throw new Error('the SMTP server does not offer STARTTLS, and TLS is required');
        await session.command('STARTTLS', 2);
        session.detach();
        session.socket = session.attach(tls.connect({ socket: session.socket, host: options.host, servername }));
        await session.hello();
      }
      if (options.auth && session.extensions.has('AUTH')) await session.logIn(options.auth);
      session.socket.setTimeout(0);
      return session;
    } catch (error) {
      session.close();
      throw error;
    }
  }

  /** False once the connection failed or closed: the next message wants a new session. */
  get open(): boolean {
    return !this.input.failed;
  }

  /** Whether any of the last message went out, that is, the server had answered DATA with 354. */
  get dataSent(): boolean {
    return this.dataWritten;
  }

  /** Resolves once the server took the message; rejects with its refusal (SmtpReplyError) or the connection's failure. */
  async send(from: string, to: string, raw: Buffer): Promise<void> {
    this.dataWritten = false;
    this.input.throwIfFailed();
    // An address is one parameter of one command line: a line break or bracket in it would write another command.
    const unsafe = [from, to].find((address) => /[\r\n<>]/.test(address));
    if (unsafe !== undefined) throw new Error(`not an envelope address: ${JSON.stringify(unsafe)}`);
    const unasked = this.replies.shift();
    if (unasked) throw new Error(`the SMTP server said what nobody asked: ${unasked.text}`);
    this.socket.setTimeout(this.timeoutMs);
    const utf8 = this.extensions.has('SMTPUTF8') && /[^\p{ASCII}]/u.test(from + to) ? ' SMTPUTF8' : '';
    const [mail, rcpt, data] = [`MAIL FROM:<${from}>${utf8}`, `RCPT TO:<${to}>`, 'DATA'];
    if (this.extensions.has('PIPELINING')) {
      this.socket.write(`${mail}\r\n${rcpt}\r\n${data}\r\n`);
      await this.expect('MAIL FROM', 2);
      await this.expect('RCPT TO', 2);
      await this.expect('DATA', 3);
    } else {
      await this.command(mail, 2, 'MAIL FROM');
      await this.command(rcpt, 2, 'RCPT TO');
      await this.command(data, 3);
    }
    this.dataWritten = true;
    this.socket.write(dotStuffed(raw));
    await this.expect('end of data', 2);
    this.socket.setTimeout(0);
  }

  /** Says QUIT; the server closes the connection (or the timeout does). */
  quit(): void {
    if (!this.open) return;
    this.input.fail(new Error('the SMTP session was ended'));
    this.socket.setTimeout(this.timeoutMs);
    this.socket.end('QUIT\r\n');
  }

  close(): void {
    this.input.fail(new Error('the SMTP session was closed'));
    this.socket.destroy();
  }

  /**
   * Listens to the socket until `detach` (STARTTLS hands it to TLS), and to its errors for good: a socket under TLS
   * may still report one, which unheard would end the process.
   */
  private attach(socket: net.Socket): net.Socket {
    const onTimeout = () => socket.destroy(new Error(`the SMTP server was silent for ${this.timeoutMs} ms`));
    const onData = (chunk: Buffer) => this.read(chunk);
    const onError = (error: Error) => this.input.fail(error);
    const onClose = () => this.input.fail(new Error('the SMTP server closed the connection'));
    socket.setNoDelay(true);
    socket.setTimeout(this.timeoutMs);
    socket.on('timeout', onTimeout).on('data', onData).on('error', onError).on('close', onClose);
    this.detach = () => {
      socket.setTimeout(0);
      socket.off('timeout', onTimeout).off('data', onData).off('close', onClose);
    };
    return socket;
  }

  /** EHLO, and HELO (no extensions) where the server refuses it. */
  private async hello(): Promise<void> {
    const name = helloName(this.socket);
    this.socket.write(`EHLO ${name}\r\n`);
    const reply = await this.reply();
    if (reply.code >= 200 && reply.code < 300) {
      this.extensions = new Map();
      for (const line of reply.text.split('\n').slice(1)) {
        const [keyword, ...parameters] = line.slice(4).toUpperCase().split(/[ =]+/);
        this.extensions.set(keyword, [...(this.extensions.get(keyword) ?? []), ...parameters]);
      }
      return;
    }
    if (reply.code < 500) throw new SmtpReplyError('EHLO', reply.code, reply.text);
    this.extensions = new Map();
    await this.command(`HELO ${name}`, 2);
  }

  /** AUTH PLAIN where offered, else AUTH LOGIN (RFC 4954). */
  private async logIn(auth: { user: string; pass: string }): Promise<void> {
    const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
    const mechanisms = this.extensions.get('AUTH') ?? [];
    if (mechanisms.includes('PLAIN')) {
      await this.command(`AUTH PLAIN ${base64(`\0${auth.user}\0${auth.pass}`)}`, 2, 'AUTH PLAIN');
    } else if (mechanisms.includes('LOGIN')) {
      await this.command('AUTH LOGIN', 3);
      await this.command(base64(auth.user), 3, 'AUTH LOGIN (user)');
      await this.command(base64(auth.pass), 2, 'AUTH LOGIN (password)');
    } else {
      throw new Error(`the SMTP server offers no login this client speaks (PLAIN, LOGIN): AUTH ${mechanisms.join(' ')}`);
    }
  }

  /** Writes the line and expects a reply of the class (2: done, 3: go on); `shown` names it in an error. */
  private async command(line: string, replyClass: 2 | 3, shown = line): Promise<void> {
    this.input.throwIfFailed();
    this.socket.write(`${line}\r\n`);
    await this.expect(shown, replyClass);
  }

  private async expect(what: string, replyClass: 2 | 3): Promise<void> {
    const reply = await this.reply();
    if (Math.floor(reply.code / 100) !== replyClass) throw new SmtpReplyError(what, reply.code, reply.text);
  }

  /** The next whole reply. */
  private async reply(): Promise<Reply> {
    for (;;) {
      const reply = this.replies.shift();
      if (reply) return reply;
      await this.input.next();
    }
  }

  /** Splits what came into replies: lines up to the one whose code is followed by a space, not "-" (RFC 5321 4.2.1). */
  private read(chunk: Buffer): void {
    this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
    for (let end = this.received.indexOf('\r\n'); end >= 0; end = this.received.indexOf('\r\n')) {
      const line = this.received.subarray(0, end).toString('utf8');
      this.received = this.received.subarray(end + 2);
      this.replyLines.push(line);
      if (line.charAt(3) === '-') continue;
      const code = Number(line.slice(0, 3));
      const text = this.replyLines.join('\n');
      this.replyLines = [];
      if (!/^[2-5]\d\d$/.test(line.slice(0, 3))) {
        this.socket.destroy(new Error(`the SMTP server's reply is not SMTP: ${JSON.stringify(text.slice(0, 200))}`));
        return;
      }
      this.replies.push({ code, text });
    }
    this.input.signal();
  }
}

/** The message as DATA carries it: a line starting with "." gets another, and a lone "." ends it (RFC 5321 4.5.2). */
export function dotStuffed(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  if (raw[0] === 0x2e) parts.push(DOT);
  for (let at = raw.indexOf('\n.'); at >= 0; at = raw.indexOf('\n.', at + 2)) {
    parts.push(raw.subarray(from, at + 1), DOT);
    from = at + 1;
  }
  parts.push(raw.subarray(from));
  parts.push(raw.subarray(-2).equals(CRLF) ? END : CRLF_END);
  return Buffer.concat(parts);
}

const DOT = Buffer.from('.');
const CRLF = Buffer.from('\r\n');
const END = Buffer.from('.\r\n');
const CRLF_END = Buffer.from('\r\n.\r\n');

/** What EHLO names this host by: its name where that is a domain, else its address on this connection (RFC 5321 4.1.4). */
function helloName(socket: net.Socket): string {
  const host = os.hostname();
  if (host.includes('.') && net.isIP(host) === 0) return host;
  const address = socket.localAddress ?? '127.0.0.1';
  return net.isIPv6(address) ? `[IPv6:${address}]` : `[${address}]`;
}
