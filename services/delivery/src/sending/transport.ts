import { PassThrough } from 'node:stream';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SmtpConfig } from '../config';
import { classifySmtpError, type SmtpOutcome } from '../domain/run';
import { composeMime } from '../domain/mime';
import type { RenderedMessage } from '../domain/render';

export interface OutgoingMessage extends RenderedMessage {
  from: { name: string | null; address: string };
  replyTo: string | null;
  to: string;
  /** Without angle brackets. */
  messageId: string;
  headers: Record<string, string>;
}

/** What the sender records of a message around its hand-over (sending/hand-over-ledger.ts). */
export interface HandOverHooks {
  /** Resolves to whether the message may go, once it is committed `sending`. */
  start(): Promise<boolean>;
  /** Takes the server's answer for the ledger's next commit. */
  settle(outcome: SmtpOutcome): void;
}

/** One of the pool's places: its connection, opened when a message needs it and dropped after a failure. */
interface Lane {
  connection: SMTPConnection | null;
}

/**
 * SMTP_URL through SMTP_MAX_CONNECTIONS connections of nodemailer's SMTP
 * client. Not its pooled transport: that reports a connection lost after the
 * message's data went out like one lost before MAIL FROM, and only the latter
 * may be sent again. Here the message is a stream the connection reads only
 * once the server has answered DATA, so whether any of it went out is known
 * (docs/api.md, "Campaign runs"). TLS is required (STARTTLS on smtp://,
 * implicit on smtps://) unless the URL says `?tls=off` (development).
 */
export class SmtpTransport {
  /** The rate limit's key: the same server and provider share one bucket across replicas. */
  readonly key: string;
  private readonly options: SMTPConnection.Options;
  private readonly auth: { user: string; pass: string } | undefined;
  private readonly free: Lane[];
  private readonly waiting: ((lane: Lane) => void)[] = [];
  private closed = false;

  constructor(config: SmtpConfig) {
    const url = new URL(config.url);
    const plain = url.searchParams.get('tls') === 'off';
    this.key = `${config.provider}:${url.hostname}:${url.port}`;
    this.options = {
      host: url.hostname,
      port: url.port ? Number(url.port) : url.protocol === 'smtps:' ? 465 : 587,
      secure: url.protocol === 'smtps:',
      requireTLS: !plain && url.protocol === 'smtp:',
      ignoreTLS: plain,
    };
    this.auth = url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined;
    this.free = Array.from({ length: config.maxConnections }, () => ({ connection: null }));
  }

  /**
   * Sends the message once it holds a connection and `ledger.start` agreed (the commit before the hand-over: only
   * messages holding a connection are ever `sending`), and gives the answer to `ledger.settle` before the
   * connection can take the next message, so that the answer is recorded no later than that message's start.
   * Undefined: the ledger did not agree, nothing went.
   */
  send(message: OutgoingMessage): Promise<SmtpOutcome>;
  send(message: OutgoingMessage, ledger: HandOverHooks): Promise<SmtpOutcome | undefined>;
  async send(message: OutgoingMessage, ledger?: HandOverHooks): Promise<SmtpOutcome | undefined> {
    const raw = composeMime(message);
    const lane = await this.take();
    try {
      if (ledger && !(await ledger.start())) return undefined;
      const outcome = await this.handOver(lane, { from: message.from.address, to: [message.to] }, raw);
      ledger?.settle(outcome);
      return outcome;
    } finally {
      this.give(lane);
    }
  }

  private async handOver(lane: Lane, envelope: SMTPConnection.Envelope, raw: Buffer): Promise<SmtpOutcome> {
    const data = new PassThrough();
    data.end(raw);
    try {
      const connection = lane.connection?.destroyed === false ? lane.connection : await this.connect();
      lane.connection = connection;
      await new Promise<void>((resolve, reject) => connection.send(envelope, data, (error) => (error ? reject(error) : resolve())));
      return { kind: 'sent' };
    } catch (error) {
      // Refused or broken, the session is in no known state: the next message opens a new one.
      lane.connection?.close();
      lane.connection = null;
      // 'data' is emitted once the connection pipes the message to the server, which it does after the answer to DATA.
      return classifySmtpError(error, data.readableDidRead);
    }
  }

  /** Says QUIT on the idle connections; one still sending says it when its message is done. */
  close(): void {
    this.closed = true;
    for (const lane of this.free) lane.connection?.quit();
  }

  private take(): Promise<Lane> {
    const lane = this.free.pop();
    return lane ? Promise.resolve(lane) : new Promise((resolve) => this.waiting.push(resolve));
  }

  private give(lane: Lane): void {
    if (this.closed) lane.connection?.quit();
    const next = this.waiting.shift();
    if (next) next(lane);
    else this.free.push(lane);
  }

  private connect(): Promise<SMTPConnection> {
    const connection = new SMTPConnection(this.options);
    return new Promise((resolve, reject) => {
      // While it is set up a failure comes as this event. It stays listened to: later the message in flight gets the
      // failure through its callback as well, and one while idle has closed the connection, which the next message sees.
      connection.on('error', reject);
      connection.once('end', () => reject(new Error('The SMTP connection closed while it was being set up')));
      connection.connect((error) => {
        if (error) return reject(error);
        if (!this.auth || !connection.allowsAuth) return resolve(connection);
        connection.login(this.auth, (loginError) => {
          if (!loginError) return resolve(connection);
          connection.close();
          reject(loginError);
        });
      });
    });
  }
}
