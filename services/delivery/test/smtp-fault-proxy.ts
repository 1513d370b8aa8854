import net from 'node:net';
import { freePorts } from '@mail/local';

/**
 * A TCP proxy in front of a real SMTP server that breaks the connection of a
 * chosen recipient's message, once per call:
 * - dropBeforeData: closes both sides when the client names the recipient
 *   (RCPT TO), before the server sees it: none of the message went out;
 * - loseAnswer: lets the message and the end of its data through, waits for
 *   the server's answer and closes both sides instead of passing it on: the
 *   server holds the message, the client never hears so.
 * Everything else passes as it is, but for the server's answer to EHLO,
 * which `ehlo` may rewrite (to offer an extension the server does not list).
 */
export interface SmtpFaultProxy {
  /** For SMTP_URL (plain SMTP). */
  url: string;
  /** Where the connections go: an smtp:// URL. */
  forwardTo(smtpUrl: string): void;
  dropBeforeData(email: string): void;
  loseAnswer(email: string): void;
  /** The faults made, in order: `dropped-before-data <email>`, `lost-answer <email>`. */
  faults: string[];
  /** What the clients wrote outside a message's data, a string a read. */
  commandReads: string[];
  close(): Promise<void>;
}

export async function startSmtpFaultProxy(options: { ehlo?: (answer: string) => string } = {}): Promise<SmtpFaultProxy> {
  const dropAt = new Set<string>();
  const loseAt = new Set<string>();
  const faults: string[] = [];
  const commandReads: string[] = [];
  const sockets = new Set<net.Socket>();
  let upstream: URL | undefined;

  const server = net.createServer((client) => {
    if (!upstream) return client.destroy();
    const smtp = net.connect(Number(upstream.port), upstream.hostname);
    for (const socket of [client, smtp]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        cut();
      });
    }
    function cut(): void {
      client.destroy();
      smtp.destroy();
    }
    // The client's lines: commands, or the message's data once the server said 354, up to the line ".".
    let partial = '';
    let recipient = '';
    let inData = false;
    let answerToLose = false;
    let ehloAsked = false;
    client.on('data', (chunk: Buffer) => {
      if (!inData) commandReads.push(chunk.toString('latin1'));
      const lines = (partial + chunk.toString('latin1')).split('\r\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (inData) {
          if (line !== '.') continue;
          inData = false;
          answerToLose = loseAt.delete(recipient);
          continue;
        }
        if (/^EHLO /i.test(line)) ehloAsked = true;
        const rcpt = /^RCPT TO:<([^>]*)>/i.exec(line);
        if (!rcpt) continue;
        recipient = rcpt[1].toLowerCase();
        if (dropAt.delete(recipient)) {
          faults.push(`dropped-before-data ${recipient}`);
          return cut();
        }
      }
      smtp.write(chunk);
    });
    smtp.on('data', (chunk: Buffer) => {
      if (answerToLose) {
        faults.push(`lost-answer ${recipient}`);
        return cut();
      }
      if (/^354/m.test(chunk.toString('latin1'))) inData = true;
      if (ehloAsked && options.ehlo) {
        ehloAsked = false;
        client.write(options.ehlo(chunk.toString('latin1')), 'latin1');
        return;
      }
      client.write(chunk);
    });
  });
  const [port] = await freePorts(1);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `smtp://127.0.0.1:${port}?tls=off`,
    forwardTo(smtpUrl) {
      upstream = new URL(smtpUrl);
    },
    dropBeforeData: (email) => void dropAt.add(email.toLowerCase()),
    loseAnswer: (email) => void loseAt.add(email.toLowerCase()),
    faults,
    commandReads,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
