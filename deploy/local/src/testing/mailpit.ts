import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from '../stack';

/**
 * A private Mailpit (the binary `infra.sh up mailpit` built, MAILPIT_BIN) on
 * free ports with its own database: a test reads exactly the messages it
 * caused, and may switch its "chaos" (SMTP errors) without touching anyone
 * else's. Reads go through Mailpit's HTTP API.
 */
export interface MailpitMessage {
  ID: string;
  MessageID: string;
  From: { Name: string; Address: string };
  To: { Name: string; Address: string }[];
  Subject: string;
}

export interface MailpitMessageDetail extends MailpitMessage {
  HTML: string;
  Text: string;
}

export interface MailpitOptions {
  /**
   * SMTP with TLS (PEM files): STARTTLS required, or with `implicit` TLS from the start; `auth`: only this login
   * is taken (else any or none).
   */
  smtp?: { tls?: { certFile: string; keyFile: string; implicit?: boolean }; auth?: { user: string; password: string } };
  /** Serve its messages over POP3 too, to this login (a bounce mailbox); with `tls` (PEM files), TLS from the start. */
  pop3?: { user: string; password: string; tls?: { certFile: string; keyFile: string } };
}

export interface Mailpit {
  /** For SMTP_URL: plain SMTP (`?tls=off`), or as `smtp` says (`smtps://`, the login in the URL). */
  smtpUrl: string;
  /** `pop3://user:password@127.0.0.1:port` (`pop3s://` with TLS) when started with `pop3` (for BOUNCE_MAILBOX_URL). */
  pop3Url: string | undefined;
  apiUrl: string;
  /** The Mailpit process (benchmarks read its CPU time). */
  pid: number | undefined;
  /** How many messages it holds. */
  count(): Promise<number>;
  /** How many messages its SMTP server took since it started, those it deleted since (past its 200,000) included. */
  accepted(): Promise<number>;
  /** Deletes every message. */
  clear(): Promise<void>;
  /** Every stored message, newest first. */
  messages(): Promise<MailpitMessage[]>;
  message(id: string): Promise<MailpitMessageDetail>;
  /** The message as it was received. */
  raw(id: string): Promise<Buffer>;
  /** The message's headers, names lower-cased (header names are case-insensitive). */
  headers(id: string): Promise<Record<string, string[]>>;
  /** Makes RCPT TO answer `errorCode` with `probability` percent (0 turns it off). */
  recipientChaos(errorCode: number, probability: number): Promise<void>;
  close(): Promise<void>;
}

export async function startMailpit(label: string, options: MailpitOptions = {}): Promise<Mailpit> {
  const binary = process.env.MAILPIT_BIN?.trim();
  if (!binary) throw new Error('MAILPIT_BIN not set: `npm test` exports it (infra.sh up mailpit builds Mailpit once)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mailpit-${label}-`));
  const [smtp, http, pop3] = await freePorts(3);
  const log = fs.openSync(path.join(dir, 'mailpit.log'), 'a');
  // The auth file is what turns Mailpit's POP3 server on.
  const authFile = path.join(dir, 'pop3-auth');
  if (options.pop3) fs.writeFileSync(authFile, `${options.pop3.user}:${options.pop3.password}\n`, { mode: 0o600 });
  const pop3Tls = options.pop3?.tls;
  const pop3Flags = options.pop3 ? ['--pop3', `127.0.0.1:${pop3}`, '--pop3-auth-file', authFile] : [];
  if (pop3Tls) pop3Flags.push('--pop3-tls-cert', pop3Tls.certFile, '--pop3-tls-key', pop3Tls.keyFile);
  const smtpTls = options.smtp?.tls;
  const smtpAuth = options.smtp?.auth;
  const smtpAuthFile = path.join(dir, 'smtp-auth');
  if (smtpAuth) fs.writeFileSync(smtpAuthFile, `${smtpAuth.user}:${smtpAuth.password}\n`, { mode: 0o600 });
  const smtpFlags = smtpAuth ? ['--smtp-auth-file', smtpAuthFile] : ['--smtp-auth-accept-any'];
  // A login over plain SMTP is allowed only where TLS is not required (Mailpit refuses the two together).
  if (smtpTls) smtpFlags.push('--smtp-tls-cert', smtpTls.certFile, '--smtp-tls-key', smtpTls.keyFile);
  smtpFlags.push(smtpTls ? (smtpTls.implicit ? '--smtp-require-tls' : '--smtp-require-starttls') : '--smtp-auth-allow-insecure');
  const child: ChildProcess = spawn(
    binary,
    [
      '--database',
      path.join(dir, 'mailpit.db'),
      '--max',
      '200000',
      '--listen',
      `127.0.0.1:${http}`,
      '--smtp',
      `127.0.0.1:${smtp}`,
      ...smtpFlags,
      '--enable-chaos',
      '--disable-version-check',
      '--quiet',
      ...pop3Flags,
    ],
    { stdio: ['ignore', log, log] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const apiUrl = `http://127.0.0.1:${http}`;
  const api = async <T>(route: string, init?: RequestInit): Promise<T> => {
    const response = await fetch(`${apiUrl}${route}`, init);
    if (!response.ok) throw new Error(`mailpit ${init?.method ?? 'GET'} ${route}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const close = async (): Promise<void> => {
    child.kill('SIGTERM');
    await exited;
    fs.closeSync(log);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let attempt = 0; ; attempt += 1) {
    try {
      if ((await fetch(`${apiUrl}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (attempt > 200 || child.exitCode !== null) {
      await close();
      throw new Error(`mailpit did not start (${path.join(dir, 'mailpit.log')})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    smtpUrl: `${smtpTls?.implicit ? 'smtps' : 'smtp'}://${
      smtpAuth ? `${encodeURIComponent(smtpAuth.user)}:${encodeURIComponent(smtpAuth.password)}@` : ''
    }127.0.0.1:${smtp}${smtpTls ? '' : '?tls=off'}`,
    pop3Url: options.pop3
      ? `${pop3Tls ? 'pop3s' : 'pop3'}://${encodeURIComponent(options.pop3.user)}:${encodeURIComponent(options.pop3.password)}@127.0.0.1:${pop3}`
      : undefined,
    apiUrl,
    pid: child.pid,
    count: async () => (await api<{ total: number }>('/api/v1/messages?limit=1')).total,
    accepted: async () => (await api<{ RuntimeStats: { SMTPAccepted: number } }>('/api/v1/info')).RuntimeStats.SMTPAccepted,
    async clear() {
      const answer = await fetch(`${apiUrl}/api/v1/messages`, { method: 'DELETE' });
      if (!answer.ok) throw new Error(`mailpit DELETE /api/v1/messages: ${answer.status}`);
    },
    async messages() {
      const all: MailpitMessage[] = [];
      for (;;) {
        const page = await api<{ messages: MailpitMessage[]; total: number }>(`/api/v1/messages?start=${all.length}&limit=5000`);
        all.push(...page.messages);
        if (page.messages.length === 0 || all.length >= page.total) return all;
      }
    },
    message: (id) => api<MailpitMessageDetail>(`/api/v1/message/${id}`),
    async raw(id) {
      const answer = await fetch(`${apiUrl}/api/v1/message/${id}/raw`);
      if (!answer.ok) throw new Error(`mailpit GET /api/v1/message/${id}/raw: ${answer.status}`);
      return Buffer.from(await answer.arrayBuffer());
    },
    async headers(id) {
      const headers = await api<Record<string, string[]>>(`/api/v1/message/${id}/headers`);
      return Object.fromEntries(Object.entries(headers).map(([name, values]) => [name.toLowerCase(), values]));
    },
    async recipientChaos(errorCode, probability) {
      await api('/api/v1/chaos', {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ Recipient: { ErrorCode: errorCode, Probability: probability } }),
      });
    },
    close,
  };
}
