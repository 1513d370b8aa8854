import nodemailer, { type Transporter } from 'nodemailer';
import type { SmtpConfig } from '../config';
import { classifySmtpError, type SmtpOutcome } from '../domain/run';
import type { RenderedMessage } from '../domain/render';

export interface OutgoingMessage extends RenderedMessage {
  from: { name: string | null; address: string };
  replyTo: string | null;
  to: string;
  /** Without angle brackets. */
  messageId: string;
  headers: Record<string, string>;
}

/**
 * SMTP_URL through nodemailer's connection pool. TLS is required (STARTTLS on
 * smtp://, implicit on smtps://) unless the URL says `?tls=off` (development).
 */
export class SmtpTransport {
  private readonly transporter: Transporter;
  /** The rate limit's key: the same server and provider share one bucket across replicas. */
  readonly key: string;

  constructor(config: SmtpConfig) {
    const url = new URL(config.url);
    const plain = url.searchParams.get('tls') === 'off';
    this.key = `${config.provider}:${url.hostname}:${url.port}`;
    this.transporter = nodemailer.createTransport({
      pool: true,
      host: url.hostname,
      port: url.port ? Number(url.port) : url.protocol === 'smtps:' ? 465 : 587,
      secure: url.protocol === 'smtps:',
      requireTLS: !plain && url.protocol === 'smtp:',
      ignoreTLS: plain,
      auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
      maxConnections: config.maxConnections,
      maxMessages: Infinity,
      // The pool would hand a message whose connection closed mid-send to another connection by itself: that
      // message may have been taken already, so the sender decides (retry before the data, unknown after).
      maxRequeues: 0,
    });
  }

  async send(message: OutgoingMessage): Promise<SmtpOutcome> {
    try {
      await this.transporter.sendMail({
        from: message.from.name ? { name: message.from.name, address: message.from.address } : message.from.address,
        to: message.to,
        replyTo: message.replyTo ?? undefined,
        subject: message.subject,
        html: message.html,
        text: message.text,
        messageId: `<${message.messageId}>`,
        // As written: nodemailer would MIME-encode a long value, and providers read these (X-SMTPAPI's JSON) raw.
        headers: Object.fromEntries(Object.entries(message.headers).map(([name, value]) => [name, { prepared: true, value }])),
      });
      return { kind: 'sent' };
    } catch (error) {
      return classifySmtpError(error);
    }
  }

  close(): void {
    this.transporter.close();
  }
}
