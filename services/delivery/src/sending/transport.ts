import type { SmtpConfig } from '../config';
import { classifySmtpError, type SmtpOutcome } from '../domain/run';
import { composeMime } from '../domain/mime';
import type { RenderedMessage } from '../domain/render';
import { SmtpSession, type SmtpSessionOptions } from './smtp-client';

/** RFC 5321 4.5.3.2 asks a client to wait at least five minutes for most replies. */
const REPLY_TIMEOUT_MS = 5 * 60_000;

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

/** One of the pool's places: its session, opened when a message needs it and dropped after a failure. */
interface Lane {
  session: SmtpSession | null;
}

/**
 * SMTP_URL through SMTP_MAX_CONNECTIONS sessions of our SMTP client
 * (smtp-client.ts), which tells a connection lost after the message's data
 * went out from one lost before: only the latter may be sent again
 * (docs/api.md, "Campaign runs"). TLS is required (STARTTLS on smtp://,
 * implicit on smtps://) unless the URL says `?tls=off` (development).
 */
export class SmtpTransport {
  /** The rate limit's key: the same server and provider share one bucket across replicas. */
  readonly key: string;
  private readonly options: SmtpSessionOptions;
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
      security: url.protocol === 'smtps:' ? 'tls' : plain ? 'none' : 'starttls',
      auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
      timeoutMs: REPLY_TIMEOUT_MS,
    };
    this.free = Array.from({ length: config.maxConnections }, () => ({ session: null }));
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
      const outcome = await this.handOver(lane, message.from.address, message.to, raw);
      ledger?.settle(outcome);
      return outcome;
    } finally {
      this.give(lane);
    }
  }

  private async handOver(lane: Lane, from: string, to: string, raw: Buffer): Promise<SmtpOutcome> {
    if (!lane.session?.open) {
      lane.session = null;
      try {
        lane.session = await SmtpSession.open(this.options);
      } catch (error) {
        // A refusal of the greeting, EHLO, STARTTLS or the login says nothing of the recipient: no bounce, tried again.
        return { kind: 'retry', error: `opening the SMTP session: ${error instanceof Error ? error.message : String(error)}` };
      }
    }
    try {
      await lane.session.send(from, to, raw);
      return { kind: 'sent' };
    } catch (error) {
      // Refused or broken, the session is in no known state: the next message opens a new one.
      const dataSent = lane.session?.dataSent ?? false;
      lane.session?.close();
      lane.session = null;
      return classifySmtpError(error, dataSent);
    }
  }

  /** Says QUIT on the idle sessions; one still sending says it when its message is done. */
  close(): void {
    this.closed = true;
    for (const lane of this.free) lane.session?.quit();
  }

  private take(): Promise<Lane> {
    const lane = this.free.pop();
    return lane ? Promise.resolve(lane) : new Promise((resolve) => this.waiting.push(resolve));
  }

  private give(lane: Lane): void {
    if (this.closed) lane.session?.quit();
    const next = this.waiting.shift();
    if (next) next(lane);
    else this.free.push(lane);
  }
}
